//! Query parameters of list, watch, write and delete requests.
//!
//! Responsibility: parse the query string options kube-apiserver accepts (`labelSelector`,
//! `fieldSelector`, `limit`, `continue`, `resourceVersion`, `watch`, `allowWatchBookmarks`,
//! `sendInitialEvents`, `timeoutSeconds`, `fieldManager`, `force`, `dryRun`,
//! `gracePeriodSeconds`, `propagationPolicy`) and encode list continue tokens (unpadded
//! URL-safe base64 JSON, as kube-apiserver's). Malformed numbers get Go's `strconv` message.
//! Inputs: query pairs. Outputs: [`ListOptions`], [`WriteOptions`], or a 400 [`ApiError`].

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::ObjKey;

/// Parsed query parameters.
pub type Query = HashMap<String, String>;

/// Parse a raw query string.
pub fn parse_query(raw: Option<&str>) -> Query {
    form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn flag(q: &Query, key: &str) -> ApiResult<bool> {
    match q.get(key).map(String::as_str) {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!(
            "invalid value for {key}: {other:?}"
        ))),
    }
}

/// Options of list and watch requests.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0 = no limit).
    pub limit: usize,
    /// Decoded `continue`.
    pub continue_from: Option<ContinueToken>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `watch`.
    pub watch: bool,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: bool,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
}

impl ListOptions {
    /// From the query.
    pub fn parse(q: &Query) -> ApiResult<Self> {
        let bad = |e: crate::selectors::SelectorError| ApiError::BadRequest(e.to_string());
        // Go's `strconv.ParseInt` error, as kube-apiserver's query decoding reports it.
        let number = |key: &str| -> ApiResult<Option<u64>> {
            q.get(key)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse::<i64>()
                        .map(|n| u64::try_from(n).unwrap_or(0))
                        .map_err(|_| {
                            ApiError::BadRequest(format!(
                                "strconv.ParseInt: parsing {s:?}: invalid syntax"
                            ))
                        })
                })
                .transpose()
        };
        Ok(Self {
            labels: LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
                .map_err(bad)?,
            fields: FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))
                .map_err(bad)?,
            limit: number("limit")?
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                .unwrap_or(0),
            continue_from: q
                .get("continue")
                .filter(|s| !s.is_empty())
                .map(|s| ContinueToken::decode(s))
                .transpose()?,
            resource_version: q.get("resourceVersion").filter(|s| !s.is_empty()).cloned(),
            watch: flag(q, "watch")?,
            bookmarks: flag(q, "allowWatchBookmarks")?,
            send_initial_events: flag(q, "sendInitialEvents")?,
            timeout: number("timeoutSeconds")?.map(Duration::from_secs),
        })
    }
}

/// Where a paginated list continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// The resourceVersion of the first page.
    pub rv: u64,
    /// The last key returned.
    pub after: ObjKey,
}

impl ContinueToken {
    /// Encode as kube-apiserver does: unpadded URL-safe base64 of a small JSON document.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(
            json!({"v": "meta.k8s.io/v1", "rv": self.rv, "ns": self.after.0, "name": self.after.1})
                .to_string(),
        )
    }

    /// Decode; a malformed token is a 400 (kube-apiserver's message ends with Go's decoding
    /// error, which this one does not reproduce).
    pub fn decode(s: &str) -> ApiResult<Self> {
        let bad =
            || ApiError::BadRequest("invalid continue token: continue key is not valid".into());
        let bytes = URL_SAFE_NO_PAD
            .decode(s)
            .or_else(|_| STANDARD.decode(s))
            .map_err(|_| bad())?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Ok(Self {
            rv: v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?,
            after: (text("ns").ok_or_else(bad)?, text("name").ok_or_else(bad)?),
        })
    }
}

/// Options of create, update, patch and delete requests.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// The manager of a write without `fieldManager`: the User-Agent's product (before the
    /// first `/`), as kube-apiserver derives it ([`WriteOptions::manager`]).
    pub user_agent: Option<String>,
    /// `force` (server-side apply).
    pub force: bool,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Set by server-side apply, which records its own managed fields.
    pub applying: bool,
    /// Set by the `binding` subresource, which may set a pod's `spec.nodeName` (no pod
    /// update validation).
    pub binding: bool,
}

impl WriteOptions {
    /// Who the write's `managedFields` entry names: `fieldManager`, else the User-Agent's
    /// product, else `unknown`.
    pub fn manager(&self) -> String {
        self.field_manager
            .clone()
            .or_else(|| {
                self.user_agent
                    .as_deref()
                    .and_then(|ua| ua.split('/').next())
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "unknown".to_owned())
    }
}

impl WriteOptions {
    /// From the query.
    pub fn parse(q: &Query) -> ApiResult<Self> {
        let dry_run = match q.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "unsupported dryRun value {other:?}: supported values: \"All\""
                )));
            }
        };
        Ok(Self {
            field_manager: q.get("fieldManager").filter(|s| !s.is_empty()).cloned(),
            force: flag(q, "force")?,
            dry_run,
            ..Self::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Query {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let t = ContinueToken {
            rv: 7,
            after: ("ns".into(), "a".into()),
        };
        assert_eq!(ContinueToken::decode(&t.encode()).unwrap(), t);
        assert_eq!(ContinueToken::decode("!!!").unwrap_err().code(), 400);
        assert_eq!(ContinueToken::decode("e30=").unwrap_err().code(), 400);
    }

    #[test]
    fn list_options_parse_and_validate() {
        let o = ListOptions::parse(&q(&[
            ("labelSelector", "a=b"),
            ("limit", "2"),
            ("watch", "true"),
            ("timeoutSeconds", "5"),
        ]))
        .unwrap();
        assert_eq!(o.limit, 2);
        assert!(o.watch);
        assert_eq!(o.timeout, Some(Duration::from_secs(5)));
        assert!(ListOptions::parse(&q(&[("limit", "x")])).is_err());
        assert!(ListOptions::parse(&q(&[("labelSelector", "a in (")])).is_err());
        assert!(ListOptions::parse(&q(&[("watch", "maybe")])).is_err());
    }

    #[test]
    fn query_strings_decode() {
        let parsed = parse_query(Some("labelSelector=a%3Db%2Cc&watch=1"));
        assert_eq!(parsed.get("labelSelector").unwrap(), "a=b,c");
        assert!(
            WriteOptions::parse(&q(&[("dryRun", "All")]))
                .unwrap()
                .dry_run
        );
        assert!(WriteOptions::parse(&q(&[("dryRun", "Some")])).is_err());
    }
}
