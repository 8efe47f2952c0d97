//! Running the real `kubectl` against a served sim: a kubeconfig, a private cache directory,
//! a hang guard, and whether `kubectl` is installed at all.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// Guard against a hung kubectl: fail instead of waiting forever.
pub const HANG: Duration = Duration::from_secs(60);

/// `kubectl` with one kubeconfig and its own discovery cache.
pub struct Kubectl {
    /// The kubeconfig.
    pub kubeconfig: PathBuf,
    /// The `--cache-dir`.
    pub cache: tempfile::TempDir,
}

/// What a run printed.
pub struct Output {
    /// Exit status 0.
    pub ok: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Kubectl {
    /// For a kubeconfig.
    pub fn new(kubeconfig: &Path) -> Self {
        Self {
            kubeconfig: kubeconfig.to_owned(),
            cache: tempfile::tempdir().unwrap(),
        }
    }

    /// The command, not started.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path())
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Run to the end.
    pub async fn run(&self, args: &[&str]) -> Output {
        let out = tokio::time::timeout(HANG, self.command(args).output())
            .await
            .expect("kubectl hung")
            .expect("kubectl runs");
        Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Run, expecting success; standard output.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.ok,
            "kubectl {args:?} failed:\n{}\n{}",
            out.stdout, out.stderr
        );
        out.stdout
    }

    /// Run, expecting failure; standard error.
    pub async fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(!out.ok, "kubectl {args:?} succeeded:\n{}", out.stdout);
        out.stderr
    }
}

/// Whether `kubectl` is on PATH.
pub async fn kubectl_available() -> bool {
    match Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .await
    {
        Ok(out) => out.status.success(),
        Err(_) => false,
    }
}

/// Write a file; its path.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}
