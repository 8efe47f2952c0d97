//! `docs/getting-started.md`'s simulated path, run as written: every fenced block whose info
//! string is `sh sim` is taken from the markdown, in order, and run by `bash` with the real
//! `kubectl` against `sim serve` — so the guide cannot drift from the binary. Only the paths
//! change: the built binary for `target/release/karpenter-capi`, a temporary directory for
//! `/tmp`, and the controller's ports are left to the system (`METRICS_PORT=0`,
//! `HEALTH_PROBE_PORT=0`) so parallel tests cannot collide. A missing `kubectl` fails the test,
//! saying how to get it (the README's test command installs it).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::PathBuf;
use std::process::Command;

fn guide() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/getting-started.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The bodies of the fenced blocks whose info string is `sh sim`, in order.
fn sim_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match &mut current {
            None if line.trim_end() == "```sh sim" => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some(body) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    assert!(current.is_none(), "an unterminated `sh sim` block");
    blocks
}

#[test]
fn the_guide_has_a_simulated_path_without_a_build_step() {
    let blocks = sim_blocks(&guide());
    assert!(blocks.len() >= 5, "{blocks:?}");
    assert!(blocks.iter().all(|b| !b.contains("cargo ")), "{blocks:?}");
    let all = blocks.concat();
    for needed in [
        "sim serve",
        "kind: MachineDeployment",
        "kind: NodePool",
        " run ",
        "doctor",
    ] {
        assert!(all.contains(needed), "{needed}: {all}");
    }
}

#[test]
fn the_guides_simulated_path_runs_as_written() {
    let kubectl = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        kubectl,
        "this test runs kubectl, which is not on PATH: the README's test command \
         (`scripts/test`) installs it (Debian: apt-get install kubernetes-client)"
    );
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().to_str().unwrap();
    // `/tmp/` first: the binary's own path may lie under /tmp (a checkout there).
    let body = sim_blocks(&guide())
        .concat()
        .replace("/tmp/", &format!("{tmp}/"))
        .replace(
            "target/release/karpenter-capi",
            env!("CARGO_BIN_EXE_karpenter-capi"),
        );
    // The background jobs (`sim serve`, `run`) end with the script, however it ends: the newest
    // first, each gone before the next is killed, so the controller never outlives its cluster
    // and logs the lost connection. A guide step that never finishes (the `until` loop) fails
    // the test with its output instead of running into nextest's limit.
    let script = format!(
        "set -euo pipefail\n\
         trap 'for p in $(jobs -p | tac); do kill -9 \"$p\" 2>/dev/null || true; \
         wait \"$p\" 2>/dev/null || true; done' EXIT\n\
         trap 'exit 124' TERM\n{body}"
    );
    let out = Command::new("timeout")
        .args(["-k", "10", "240", "bash", "-c"])
        .arg(&script)
        .env("METRICS_PORT", "0")
        .env("HEALTH_PROBE_PORT", "0")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let log = std::fs::read_to_string(dir.path().join("karpenter.log")).unwrap_or_default();
    let tail: String = log
        .lines()
        .rev()
        .take(40)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    let context = format!("stdout:\n{stdout}\nstderr:\n{stderr}\ncontroller log (tail):\n{tail}");
    assert!(out.status.success(), "the guide failed: {context}");
    for expected in [
        // doctor, once the NodePool is Ready.
        "OK, nothing blocks provisioning",
        "deployment.apps/inflate condition met",
        // `get nodeclaims`: the label columns.
        "small",
        "zone-a",
        // The scale-in removed every NodeClaim.
        "nodeclaim.karpenter.sh/",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing: {context}");
    }
    // Nothing in the controller's log that a newcomer would read as breakage.
    assert!(log.contains("INFO"), "the controller logged: {log}");
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
}
