//! Lists: label and field selectors, pagination with `limit`/`continue`, and bad or expired
//! continue tokens.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::harness::{Ctx, Resp};

const CMS: &str = "/api/v1/namespaces/{ns}/configmaps";

async fn five(t: &Ctx) {
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "front"})),
        ("b", json!({"app": "web", "tier": "back"})),
        ("c", json!({"app": "db"})),
        ("d", json!({})),
        ("e", json!({"app": "cache", "tier": "back"})),
    ] {
        let r = t
            .post(CMS, json!({"metadata": {"name": name, "labels": labels}}))
            .await;
        assert_eq!(r.code, 201, "{r:?}");
    }
}

fn page(r: &Resp) -> Value {
    if r.code >= 400 {
        let mut e = crate::harness::error_summary(r);
        // A malformed continue token's message ends with Go's decoding error
        // (DIFFERENCES.md): keep what precedes it.
        if let Some(m) = e["message"].as_str()
            && let Some(head) = m.strip_prefix("invalid continue token: continue key is not valid")
        {
            let _ = head;
            e["message"] = json!("invalid continue token: continue key is not valid");
        }
        return e;
    }
    json!({"code": r.code, "kind": r.at("/kind"), "names": r.names(),
        "continue": r.at("/metadata/continue"),
        "remainingItemCount": r.at("/metadata/remainingItemCount")})
}

/// Label and field selectors, valid and not.
pub async fn selectors(t: Ctx) {
    five(&t).await;
    for selector in [
        "app=web",
        "app==web",
        "app!=web",
        "app in (web,db)",
        "app notin (web)",
        "tier",
        "!tier",
        "app=web,tier=back",
        "app in (web),tier notin (front)",
        "",
    ] {
        let q: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("labelSelector", selector)
            .finish();
        t.note(
            &format!("labelSelector {selector:?}"),
            page(&t.get(&format!("{CMS}?{q}")).await),
        );
    }
    for bad in ["app in (", "a b", "=x", "app=web,,"] {
        let q: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("labelSelector", bad)
            .finish();
        t.note(
            &format!("bad labelSelector {bad:?}"),
            page(&t.get(&format!("{CMS}?{q}")).await),
        );
    }
    for selector in [
        "metadata.name=c",
        "metadata.name!=c",
        "metadata.namespace={ns}",
        "metadata.name=c,metadata.name=d",
    ] {
        let q: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("fieldSelector", &t.p(selector))
            .finish();
        t.note(
            &format!("fieldSelector {selector:?}"),
            page(&t.get(&format!("{CMS}?{q}")).await),
        );
    }
    for bad in ["data.x=1", "spec.nodeName=n1", "metadata.name"] {
        let q: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("fieldSelector", bad)
            .finish();
        t.note(
            &format!("bad fieldSelector {bad:?}"),
            page(&t.get(&format!("{CMS}?{q}")).await),
        );
    }
    let pods = "/api/v1/namespaces/{ns}/pods";
    for (name, node) in [("p1", "n1"), ("p2", "n2")] {
        let r = t
            .post(
                pods,
                json!({"metadata": {"name": name}, "spec": {"nodeName": node,
                    "containers": [{"name": "c", "image": "i"}]}}),
            )
            .await;
        assert_eq!(r.code, 201, "{r:?}");
    }
    for selector in [
        "spec.nodeName=n1",
        "status.phase=Pending",
        "spec.restartPolicy=Always,spec.nodeName!=n1",
    ] {
        let q: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("fieldSelector", selector)
            .finish();
        t.note(
            &format!("pods fieldSelector {selector:?}"),
            page(&t.get(&format!("{pods}?{q}")).await),
        );
    }
}

/// Re-encode a continue token with another resourceVersion (both servers' tokens are base64
/// JSON with an `rv` field).
fn with_rv(token: &str, rv: u64) -> String {
    let (engine, bytes) = match URL_SAFE_NO_PAD.decode(token) {
        Ok(b) => (URL_SAFE_NO_PAD, b),
        Err(_) => (STANDARD, STANDARD.decode(token).unwrap()),
    };
    let mut v: Value = serde_json::from_slice(&bytes).unwrap();
    v["rv"] = json!(rv);
    engine.encode(v.to_string())
}

/// `limit` and `continue` through a namespace, with a selector, and bad tokens.
pub async fn pagination(t: Ctx) {
    five(&t).await;
    let first = t.get(&format!("{CMS}?limit=2")).await;
    t.note("first page", page(&first));
    let token = first.at("/metadata/continue").as_str().unwrap().to_owned();
    let second = t.get(&format!("{CMS}?limit=2&continue={token}")).await;
    t.note("second page", page(&second));
    // A write between pages does not show in later pages of the same list (same snapshot).
    let r = t
        .post(
            CMS,
            json!({"metadata": {"name": "f", "labels": {"app": "web"}}}),
        )
        .await;
    assert_eq!(r.code, 201);
    let token2 = second.at("/metadata/continue").as_str().unwrap().to_owned();
    let third = t.get(&format!("{CMS}?limit=2&continue={token2}")).await;
    t.note("last page", page(&third));
    t.note(
        "list rv of later pages is the first page's",
        json!([first.rv() == second.rv(), first.rv() == third.rv()]),
    );
    t.note(
        "limit larger than the list",
        page(&t.get(&format!("{CMS}?limit=100")).await),
    );
    t.note(
        "limit with a label selector",
        page(
            &t.get(&format!("{CMS}?limit=1&labelSelector=app%3Dweb"))
                .await,
        ),
    );
    t.note("limit 0", page(&t.get(&format!("{CMS}?limit=0")).await));
    t.note(
        "garbage continue token",
        page(&t.get(&format!("{CMS}?limit=2&continue=garbage")).await),
    );
    t.note(
        "continue token that is not JSON",
        page(
            &t.get(&format!(
                "{CMS}?limit=2&continue={}",
                STANDARD.encode("not json")
            ))
            .await,
        ),
    );
    let ancient = with_rv(&token, 1);
    t.note(
        "continue token from a compacted revision",
        page(&t.get(&format!("{CMS}?limit=2&continue={ancient}")).await),
    );
    t.note(
        "continue with a resourceVersion",
        page(
            &t.get(&format!("{CMS}?limit=2&continue={token}&resourceVersion=5"))
                .await,
        ),
    );
    t.note("bad limit", page(&t.get(&format!("{CMS}?limit=x")).await));
}
