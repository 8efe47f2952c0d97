//! Helm for the tests, from a package registry: the chart tests (`tests/chart.rs`) and the
//! real-server chart tests of `karpenter-capi` run helm's commands through `helm.py` beside
//! this crate, which calls Helm v4's own Go SDK (PyPI package `helm-python-sdk`; no `helm`
//! binary).
//!
//! Inputs: the helm command line (the subset `helm.py` accepts); the Python to run it with:
//! `$HELM_SDK_PYTHON`, else `target/test-tools/venv/bin/python3` of this workspace, where the
//! README's test command (`scripts/test`) installs the package.
//! Outputs: [`Helm::run`]'s exit status and what helm printed; a missing Python or package is
//! an error saying how to install it, never a skip.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What a helm command did.
#[derive(Debug, Clone)]
pub struct Output {
    /// Whether it exited 0.
    pub ok: bool,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

/// A way to run helm commands.
#[derive(Debug, Clone)]
pub struct Helm {
    python: PathBuf,
    script: PathBuf,
}

/// The workspace's root directory.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Helm {
    /// Finds the Python with `helm-python-sdk`; an error says how to get it.
    pub fn find() -> Result<Helm, String> {
        let python = std::env::var_os("HELM_SDK_PYTHON").map_or_else(
            || workspace().join("target/test-tools/venv/bin/python3"),
            PathBuf::from,
        );
        if !python.is_file() {
            return Err(format!(
                "the chart tests run Helm's Go SDK from the PyPI package helm-python-sdk, with \
                 {}, which does not exist: run the README's test command `scripts/test` (it \
                 installs the package into target/test-tools/venv), or set HELM_SDK_PYTHON to \
                 a Python that has it",
                python.display()
            ));
        }
        Ok(Helm {
            python,
            script: Path::new(env!("CARGO_MANIFEST_DIR")).join("helm.py"),
        })
    }

    /// A `helm ARGS` command, ready to add environment and run.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.python);
        cmd.arg(&self.script).args(args);
        cmd
    }

    /// `helm template RELEASE charts/karpenter-capi --namespace NAMESPACE EXTRA...`: the
    /// rendered YAML stream, or helm's error.
    pub fn template(
        &self,
        release: &str,
        namespace: &str,
        extra: &[&str],
    ) -> Result<String, String> {
        let chart = workspace().join("charts/karpenter-capi");
        let chart = chart.to_string_lossy();
        let mut args = vec!["template", release, &chart, "--namespace", namespace];
        args.extend_from_slice(extra);
        let out = self.run(&args)?;
        if out.ok {
            Ok(out.stdout)
        } else {
            Err(out.stderr)
        }
    }

    /// Runs `helm ARGS`.
    pub fn run(&self, args: &[&str]) -> Result<Output, String> {
        let out = self
            .command(args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.python.display()))?;
        Ok(Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}
