//! Watches: replay from a resourceVersion, selectors with transitions, bookmarks, initial
//! events, and a too-old resourceVersion (410 Gone).

use serde_json::{Value, json};

use crate::harness::{Ctx, PatchKind};

const CMS: &str = "/api/v1/namespaces/{ns}/configmaps";

/// Events as (type, name, data or bookmark annotations). Consecutive bookmarks count as one:
/// kube-apiserver's bookmark timer has one-second buckets, so near the deadline it may send
/// one or two.
fn summary(events: &[Value]) -> Value {
    let mut deduped: Vec<&Value> = Vec::new();
    for e in events {
        let bookmark = |v: &Value| v["type"] == "BOOKMARK";
        if bookmark(e) && deduped.last().is_some_and(|l| bookmark(l)) {
            continue;
        }
        deduped.push(e);
    }
    Value::Array(
        deduped
            .into_iter()
            .map(|e| {
                let o = &e["object"];
                match e["type"].as_str() {
                    Some("BOOKMARK") => json!({"type": "BOOKMARK", "kind": o["kind"],
                        "apiVersion": o["apiVersion"],
                        "annotations": o.pointer("/metadata/annotations"),
                        "hasResourceVersion": o.pointer("/metadata/resourceVersion").is_some()}),
                    Some("ERROR") => json!({"type": "ERROR", "code": o["code"], "reason": o["reason"],
                        "status": o["status"], "kind": o["kind"], "message": o["message"]}),
                    Some(t) => json!({"type": t, "name": o.pointer("/metadata/name"),
                        "data": o.get("data"), "deleting": o.pointer("/metadata/deletionTimestamp").is_some()}),
                    None => e.clone(),
                }
            })
            .collect(),
    )
}

/// Writes after a resourceVersion are replayed in order; selectors turn updates into ADDED
/// or DELETED as objects start or stop matching; a bookmark comes before the timeout.
pub async fn watch_replay_and_bookmarks(t: Ctx) {
    let start = t.get(CMS).await.rv();
    let r = t
        .post(
            CMS,
            json!({"metadata": {"name": "w", "labels": {"on": "yes"}}, "data": {"v": "1"}}),
        )
        .await;
    assert_eq!(r.code, 201);
    let path = format!("{CMS}/w");
    t.patch(&path, PatchKind::Merge, json!({"data": {"v": "2"}}))
        .await;
    t.patch(
        &path,
        PatchKind::Merge,
        json!({"metadata": {"labels": {"on": "no"}}}),
    )
    .await;
    t.patch(
        &path,
        PatchKind::Merge,
        json!({"metadata": {"labels": {"on": "yes"}}}),
    )
    .await;
    t.delete(&path, None).await;
    let all = t
        .watch(&format!(
            "{CMS}?watch=true&resourceVersion={start}&allowWatchBookmarks=true&timeoutSeconds=4"
        ))
        .await;
    t.note("everything, then a bookmark", summary(&all));
    let selected = t
        .watch(&format!(
            "{CMS}?watch=true&resourceVersion={start}&labelSelector=on%3Dyes&timeoutSeconds=3"
        ))
        .await;
    t.note("with a label selector", summary(&selected));
    let by_name = t
        .watch(&format!(
            "{CMS}?watch=true&resourceVersion={start}&fieldSelector=metadata.name%3Dw&timeoutSeconds=3"
        ))
        .await;
    t.note("with a field selector", summary(&by_name));
}

/// A watch without a resourceVersion (or "0") starts with the current objects as ADDED.
/// (`sendInitialEvents` is not compared: the real harness's etcd lacks the
/// `RequestWatchProgress` feature kube-apiserver needs for it.)
pub async fn watch_initial_events(t: Ctx) {
    for name in ["x", "y"] {
        let r = t.post(CMS, json!({"metadata": {"name": name}})).await;
        assert_eq!(r.code, 201);
    }
    t.note(
        "no resourceVersion",
        summary(&t.watch(&format!("{CMS}?watch=true&timeoutSeconds=3")).await),
    );
    t.note(
        "resourceVersion 0",
        summary(
            &t.watch(&format!(
                "{CMS}?watch=true&resourceVersion=0&timeoutSeconds=3"
            ))
            .await,
        ),
    );
}

/// A watch from a resourceVersion older than the server keeps is refused with 410 Gone (an
/// ERROR event); a malformed one with 400.
pub async fn watch_too_old(t: Ctx) {
    let r = t.post(CMS, json!({"metadata": {"name": "old"}})).await;
    assert_eq!(r.code, 201);
    let events = t
        .watch(&format!(
            "{CMS}?watch=true&resourceVersion=1&timeoutSeconds=3"
        ))
        .await;
    t.note("resourceVersion 1", summary(&events));
    let message = events
        .first()
        .and_then(|e| e.pointer("/object/message"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let digits = regex::Regex::new(r"\d+").unwrap();
    t.note(
        "its message, numbers elided",
        json!(digits.replace_all(message, "N")),
    );
    let bad = t
        .watch(&format!(
            "{CMS}?watch=true&resourceVersion=abc&timeoutSeconds=3"
        ))
        .await;
    t.note("malformed resourceVersion", json!(bad));
}

/// Once the history is compacted past a version, a watch from it gets 410 Gone (an ERROR event)
/// and a continue token from a list at it gets 410 Expired.
pub async fn compacted_versions_are_gone(t: Ctx) {
    for name in ["a", "b", "c"] {
        let r = t.post(CMS, json!({"metadata": {"name": name}})).await;
        assert_eq!(r.code, 201);
    }
    let first = t.get(&format!("{CMS}?limit=1")).await;
    let start = first.rv();
    let token = first
        .at("/metadata/continue")
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for name in ["d", "e"] {
        let r = t.post(CMS, json!({"metadata": {"name": name}})).await;
        assert_eq!(r.code, 201);
    }
    // Poll with short watches until the compactor has passed `start`.
    let deadline = tokio::time::Instant::now() + crate::harness::POLL_TIMEOUT;
    let events = loop {
        let events = t
            .watch(&format!(
                "{CMS}?watch=true&resourceVersion={start}&timeoutSeconds=1"
            ))
            .await;
        if events.first().is_some_and(|e| e["type"] == "ERROR") {
            break events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never compacted: {events:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    let mut gone = summary(&events);
    let message = gone
        .pointer_mut("/0/message")
        .map(Value::take)
        .unwrap_or_default();
    t.note("watch from a compacted version", gone);
    // kube-apiserver words it by where the watch was served from: its watch cache (the
    // default, and sim's wording) or etcd (`--watch-cache=false`, as here). DIFFERENCES.md #6.
    let digits = regex::Regex::new(r"\d+").unwrap();
    let elided = digits.replace_all(message.as_str().unwrap_or_default(), "N");
    t.note(
        "its message is one of kube-apiserver's",
        json!(
            [
                "too old resource version: N (N)",
                "The resourceVersion for the provided watch is too old."
            ]
            .contains(&elided.as_ref())
        ),
    );
    let page = t.get(&format!("{CMS}?limit=1&continue={token}")).await;
    t.note(
        "continue from a compacted version",
        json!({"code": page.code, "reason": page.at("/reason"), "message": page.at("/message")}),
    );
}
