//! Recorded answers of the real kube-apiserver, the reference `sim` is held to on every run.
//!
//! Responsibility: read, compare and (re-)write the committed recordings under
//! `crates/sim/tests/recorded/`: one readable JSON file per scenario, holding the scenario's
//! name, the real server's version (`/version`'s `gitVersion`) and its normalized answers.
//! Inputs: a scenario's answers (from `sim` in the default run, from a real server in the
//! `real` profile) and the environment variable `RECORD`. Outputs: `Ok` when the answers equal
//! the recording, else a report of every path that differs; with `RECORD=1` the real server's
//! answers are written (the report then says what changed) instead of compared.
//!
//! The default run replays each scenario against `sim` and compares with its recording; a
//! scenario without one fails. The `real` profile compares the real server with `sim` live and
//! with the recording, so a recording that no longer matches the real server is found there.
#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::{Value, json};

/// The directory of the recordings.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/recorded")
}

/// Whether this run re-records (`RECORD=1`).
pub fn recording() -> bool {
    std::env::var("RECORD").is_ok_and(|v| v == "1" || v == "true")
}

/// A recording: which server version produced it, and the answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// `gitVersion` of the real server that answered.
    pub server: String,
    /// The normalized answers.
    pub answers: Value,
}

/// The file of recording `name` (`differential/crud_and_conflicts`).
pub fn path(name: &str) -> PathBuf {
    dir().join(format!("{name}.json"))
}

/// Reads recording `name`; a missing or unreadable one is an error saying how to make it.
pub fn load(name: &str) -> Result<Recording, String> {
    let file = path(name);
    let text = std::fs::read_to_string(&file).map_err(|e| {
        format!(
            "no recording {} ({e}): record it from a real kube-apiserver with \
             `RECORD=1 cargo nextest run --profile real` (README, \"Tests against a real API \
             server\")",
            file.display()
        )
    })?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("recording {} is not JSON: {e}", file.display()))?;
    let server = v
        .get("server")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("recording {} names no server", file.display()))?;
    Ok(Recording {
        server: server.to_owned(),
        answers: v.get("answers").cloned().unwrap_or(Value::Null),
    })
}

/// Writes recording `name`.
pub fn save(name: &str, recording: &Recording) -> Result<(), String> {
    let file = path(name);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let body = json!({"scenario": name, "server": recording.server, "answers": recording.answers});
    let text = serde_json::to_string_pretty(&body).map_err(|e| e.to_string())? + "\n";
    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))
}

/// The default run's check: `answers` (from sim) against recording `name`.
pub fn replay(name: &str, answers: &Value) -> Result<(), String> {
    let recording = load(name)?;
    let mut lines = Vec::new();
    diff(
        answers,
        &recording.answers,
        "",
        ("sim", "recorded"),
        &mut lines,
    );
    if lines.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{name}: sim answers differently from the real kube-apiserver {} (recorded in {}):\n  {}",
            recording.server,
            path(name).display(),
            lines.join("\n  ")
        ))
    }
}

/// The real profile's check: the real server's `answers` against recording `name`; with
/// `RECORD=1`, writes them instead and returns what changed (`Ok` with the changes listed).
pub fn against_real(name: &str, server: &str, answers: &Value) -> Result<String, String> {
    let old = load(name).ok();
    let mut lines = Vec::new();
    if let Some(old) = &old {
        diff(answers, &old.answers, "", ("real", "recorded"), &mut lines);
    }
    if recording() {
        save(
            name,
            &Recording {
                server: server.to_owned(),
                answers: answers.clone(),
            },
        )?;
        let Some(old) = old else {
            return Ok(format!("{name}: recorded from {server} (new)"));
        };
        let was = old.server;
        return Ok(if lines.is_empty() {
            format!("{name}: recorded from {server} (was {was}), unchanged")
        } else {
            format!(
                "{name}: recorded from {server} (was {was}), changed:\n  {}",
                lines.join("\n  ")
            )
        });
    }
    if lines.is_empty() {
        return Ok(String::new());
    }
    let recorded = old.map_or_else(|| "nothing".to_owned(), |o| o.server);
    Err(format!(
        "{name}: the real kube-apiserver {server} answers differently from the recording \
         (made with {recorded}; re-record with RECORD=1 if the change is the server's):\n  {}",
        lines.join("\n  ")
    ))
}

/// The real server's version (`gitVersion` of `/version`).
pub async fn server_version(client: &kube::Client) -> String {
    match client.apiserver_version().await {
        Ok(info) => info.git_version,
        Err(e) => format!("unknown ({e})"),
    }
}

/// The paths where two values differ, as `path: <a> <value> | <b> <value>`.
pub fn diff(a: &Value, b: &Value, path: &str, names: (&str, &str), out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (vx, vy) = (x.get(k), y.get(k));
                if vx != vy {
                    let p = format!("{path}/{k}");
                    entry(vx, vy, &p, names, out);
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let (vx, vy) = (x.get(i), y.get(i));
                if vx != vy {
                    let p = format!("{path}/{i}");
                    entry(vx, vy, &p, names, out);
                }
            }
        }
        _ => out.push(format!(
            "{path}: {} {} | {} {}",
            names.0,
            show(Some(a)),
            names.1,
            show(Some(b))
        )),
    }
}

/// One member or element of both sides: compared deeper when both have it.
fn entry(
    a: Option<&Value>,
    b: Option<&Value>,
    path: &str,
    names: (&str, &str),
    out: &mut Vec<String>,
) {
    match (a, b) {
        (Some(a), Some(b)) => diff(a, b, path, names, out),
        _ => out.push(format!(
            "{path}: {} {} | {} {}",
            names.0,
            show(a),
            names.1,
            show(b)
        )),
    }
}

fn show(v: Option<&Value>) -> String {
    v.map_or("(absent)".to_owned(), Value::to_string)
}
