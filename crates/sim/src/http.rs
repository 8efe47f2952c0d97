//! The HTTP front: an axum router over [`Sim`].
//!
//! Responsibility: decode HTTP requests (method, path, query, `Content-Type`, body), call the
//! matching [`Sim`] operation, and encode the answer: JSON objects with kube-apiserver's status
//! codes (201 on create), errors as `Status` objects, watches as a stream of newline-separated
//! watch events. Before dispatching, it asks the server's fault injector ([`crate::fault`])
//! whether to delay or fail the request, or break the watch.
//! Inputs: `http::Request`s. Outputs: `http::Response`s. No API semantics live here.

use std::convert::Infallible;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use http::{Method, StatusCode, header};
use serde_json::{Value, json};

use crate::deletion::DeleteOptions;
use crate::error::{ApiError, ApiResult};
use crate::fault::{Decision, Verb};
use crate::options::{ListOptions, Query, WriteOptions, parse_query};
use crate::patch::PatchType;
use crate::registry::Special;
use crate::route::{self, Route};
use crate::semantics::WriteMode;
use crate::sim::Sim;
use crate::state::{Answer, Endpoint};
use crate::watch::WatchEvent;
use crate::{discovery, openapi, table};

/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// What a router serves: the server, and whether its faults apply.
#[derive(Debug, Clone)]
struct Served {
    sim: Sim,
    faults: bool,
}

/// The router serving `sim`, injecting its faults if `faults`.
pub fn router(sim: Sim, faults: bool) -> Router {
    Router::new()
        .fallback(handle)
        .with_state(Served { sim, faults })
}

/// The verb of a request to a resource path.
fn verb(method: &Method, name: Option<&str>, watch: bool) -> Option<Verb> {
    Some(match (method.as_str(), name) {
        ("GET", _) if watch => Verb::Watch,
        ("GET", Some(_)) => Verb::Get,
        ("GET", None) => Verb::List,
        ("POST", _) => Verb::Create,
        ("PUT", _) => Verb::Update,
        ("PATCH", _) => Verb::Patch,
        ("DELETE", Some(_)) => Verb::Delete,
        ("DELETE", None) => Verb::DeleteCollection,
        _ => return None,
    })
}

/// The faults for a request, if it addresses a resource.
fn faults_for(sim: &Sim, parts: &http::request::Parts) -> Decision {
    let Some(Route::Resource {
        ep,
        name,
        sub,
        watch,
    }) = route::parse(parts.uri.path())
    else {
        return Decision::default();
    };
    let q = parse_query(parts.uri.query());
    let watching = watch || q.get("watch").is_some_and(|w| w == "true" || w == "1");
    match verb(&parts.method, name.as_deref(), watching) {
        Some(v) => sim.faults().decide(v, &ep, name.as_deref(), sub.as_deref()),
        None => Decision::default(),
    }
}

async fn handle(State(served): State<Served>, req: Request) -> Response {
    let sim = served.sim;
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            return error_response(&ApiError::BadRequest(format!(
                "cannot read the request body: {e}"
            )));
        }
    };
    let decision = if served.faults {
        faults_for(&sim, &parts)
    } else {
        Decision::default()
    };
    if !decision.latency.is_zero() {
        tokio::time::sleep(decision.latency).await;
    }
    if let Some(e) = &decision.error {
        return error_response(e);
    }
    match dispatch(&sim, &parts, &bytes, &decision) {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

/// A JSON response.
fn json_response(code: u16, v: &Value) -> Response {
    // Encoding a `Value` into memory cannot fail (its keys are strings).
    bytes_response(code, serde_json::to_vec(v).unwrap_or_default())
}

/// A write's answer ([`Answer`]): a stored object's JSON is shared with its watchers.
fn answer_response(code: u16, answer: &Answer) -> Response {
    bytes_response(code, Bytes::from_owner(answer.encode()))
}

/// A JSON body already encoded.
fn bytes_response(code: u16, json: impl Into<Bytes>) -> Response {
    let mut resp = Response::new(Body::from(json.into()));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// An error as a `Status` response (429s say when to retry).
pub fn error_response(e: &ApiError) -> Response {
    let mut resp = json_response(e.code(), &e.status());
    if e.code() == 429 {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
    }
    resp
}

fn header_str(parts: &http::request::Parts, name: header::HeaderName) -> &str {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// A create/update body: JSON, YAML when declared, or protobuf for the built-in kinds
/// [`crate::protobuf`] decodes (an unknown kind or field is 415, a malformed body 400).
fn body_object(parts: &http::request::Parts, bytes: &[u8]) -> ApiResult<Value> {
    let ct = header_str(parts, header::CONTENT_TYPE);
    if ct.contains("protobuf") {
        return crate::protobuf::decode(bytes).map_err(|e| match e {
            crate::protobuf::DecodeError::Unsupported(m) => ApiError::UnsupportedMediaType(
                format!("the protobuf request body cannot be decoded: {m}"),
            ),
            crate::protobuf::DecodeError::Malformed(m) => {
                ApiError::BadRequest(format!("the protobuf request body cannot be decoded: {m}"))
            }
        });
    }
    if ct.contains("cbor") {
        return Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {ct})"
        )));
    }
    let v: Value = if ct.contains("yaml") {
        serde_norway::from_slice(bytes)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| ApiError::BadRequest(format!("the request body is not valid JSON: {e}")))?
    };
    if v.is_object() {
        Ok(v)
    } else {
        Err(ApiError::BadRequest(
            "the request body must be a JSON object".into(),
        ))
    }
}

fn dispatch(
    sim: &Sim,
    parts: &http::request::Parts,
    bytes: &Bytes,
    faults: &Decision,
) -> ApiResult<Response> {
    let route = route::parse(parts.uri.path()).ok_or(ApiError::NoRoute)?;
    let get_only = |v: Value| {
        if parts.method == Method::GET {
            Ok(json_response(200, &v))
        } else {
            Err(ApiError::MethodNotAllowed)
        }
    };
    match route {
        Route::Version => get_only(discovery::version(&sim.config().version)).map(|mut r| {
            r.headers_mut().insert(
                discovery::SIM_HEADER,
                http::HeaderValue::from_static("true"),
            );
            r
        }),
        Route::Health => {
            let mut r = Response::new(Body::from("ok"));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain"),
            );
            Ok(r)
        }
        Route::CoreVersions => get_only(discovery::core_versions()),
        Route::Groups => get_only(discovery::group_list(&sim.registry())),
        Route::Group(g) => {
            get_only(discovery::group(&sim.registry(), &g).ok_or(ApiError::NoRoute)?)
        }
        Route::GroupVersion { group, version } => get_only(
            discovery::resource_list(&sim.registry(), &group, &version).ok_or(ApiError::NoRoute)?,
        ),
        Route::OpenApiIndex => get_only(openapi::index(&sim.registry(), sim.resource_version())),
        Route::OpenApiGroupVersion { group, version } => get_only(
            openapi::group_version(&sim.registry(), &group, &version).ok_or(ApiError::NoRoute)?,
        ),
        Route::OpenApiOther => Err(ApiError::NoRoute),
        Route::Resource {
            ep,
            name,
            sub,
            watch,
        } => {
            let q = parse_query(parts.uri.query());
            let req = ResourceRequest {
                parts,
                q: &q,
                bytes,
                ep: &ep,
                faults,
            };
            resource(sim, &req, name.as_deref(), sub.as_deref(), watch)
        }
    }
}

/// A request to a resource path.
struct ResourceRequest<'a> {
    parts: &'a http::request::Parts,
    q: &'a Query,
    bytes: &'a Bytes,
    ep: &'a Endpoint,
    faults: &'a Decision,
}

/// The `DeleteOptions` of a DELETE: the body (if any) over the query parameters.
fn delete_options(
    parts: &http::request::Parts,
    q: &Query,
    bytes: &[u8],
) -> ApiResult<DeleteOptions> {
    let body = if bytes.is_empty() {
        json!({})
    } else {
        body_object(parts, bytes)?
    };
    DeleteOptions::parse(&body, q)
}

fn resource(
    sim: &Sim,
    req: &ResourceRequest<'_>,
    name: Option<&str>,
    sub: Option<&str>,
    watch_path: bool,
) -> ApiResult<Response> {
    let ResourceRequest {
        parts,
        q,
        bytes,
        ep,
        faults,
    } = *req;
    let def = sim.resource_def(ep)?;
    let mut opts = WriteOptions::parse(q)?;
    let agent = header_str(parts, header::USER_AGENT);
    opts.user_agent = (!agent.is_empty()).then(|| agent.to_owned());
    if def.special == Special::AccessReview {
        let collection =
            name.is_none() && !watch_path && (ep.namespace.is_some() || !def.namespaced);
        return access_review(sim, req, collection, &opts);
    }
    let patch_type = || {
        let ct = header_str(parts, header::CONTENT_TYPE);
        PatchType::from_content_type(ct).ok_or_else(|| {
            ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{}",
                if def.custom { "" } else { ", application/strategic-merge-patch+json" }
            ))
        })
    };
    let wants_table = table::wanted(header_str(parts, header::ACCEPT));
    let include = table::Include::parse(q.get("includeObject").map(String::as_str));
    let printed = |v: Value| {
        if wants_table {
            table::to_table(&def, &v, include)
        } else {
            v
        }
    };
    let as_table = wants_table.then(|| (def.clone(), include));
    let created =
        |(a, created): (Answer, bool)| answer_response(if created { 201 } else { 200 }, &a);
    let method = &parts.method;
    match (sub, name) {
        (None, None) if *method == Method::GET => {
            let list = ListOptions::parse(q)?;
            if list.watch || watch_path {
                return watch_response(sim, ep, list, as_table, faults);
            }
            let page = sim.list_page(ep, &list)?;
            if wants_table {
                return Ok(json_response(200, &printed(page.into_value())));
            }
            Ok(bytes_response(200, page.to_json()))
        }
        (None, None) if *method == Method::POST => Ok(answer_response(
            201,
            &sim.create(ep, body_object(parts, bytes)?, &opts)?,
        )),
        (None, None) if *method == Method::DELETE => {
            let list = ListOptions::parse(q)?;
            let options = delete_options(parts, q, bytes)?;
            Ok(json_response(
                200,
                &sim.delete_collection(ep, &list, &options, &opts)?,
            ))
        }
        (None, Some(n)) if *method == Method::GET => {
            if watch_path {
                let mut list = ListOptions::parse(q)?;
                list.fields = crate::selectors::FieldSelector::parse(&format!("metadata.name={n}"))
                    .map_err(|e| ApiError::BadRequest(e.to_string()))?;
                return watch_response(sim, ep, list, as_table, faults);
            }
            Ok(json_response(200, &printed(sim.get(ep, n)?)))
        }
        (None | Some("status"), Some(n)) => {
            let mode = if sub.is_some() {
                if !def.status {
                    return Err(ApiError::NoRoute);
                }
                WriteMode::Status
            } else {
                WriteMode::Main
            };
            match method.as_str() {
                "GET" => Ok(json_response(200, &sim.get(ep, n)?)),
                "PUT" => Ok(created(sim.update(
                    ep,
                    n,
                    body_object(parts, bytes)?,
                    mode,
                    &opts,
                )?)),
                "PATCH" => Ok(created(sim.patch(
                    ep,
                    n,
                    patch_type()?,
                    bytes,
                    mode,
                    &opts,
                )?)),
                "DELETE" if mode == WriteMode::Main => {
                    let options = delete_options(parts, q, bytes)?;
                    Ok(json_response(200, &sim.delete(ep, n, &options, &opts)?))
                }
                _ => Err(ApiError::MethodNotAllowed),
            }
        }
        (Some("scale"), Some(n)) => match method.as_str() {
            "GET" => Ok(json_response(200, &sim.get_scale(ep, n)?)),
            "PUT" => Ok(json_response(
                200,
                &sim.update_scale(ep, n, &body_object(parts, bytes)?, &opts)?,
            )),
            "PATCH" => Ok(json_response(
                200,
                &sim.patch_scale(ep, n, patch_type()?, bytes, &opts)?,
            )),
            _ => Err(ApiError::MethodNotAllowed),
        },
        (Some("binding"), Some(n)) if *method == Method::POST => Ok(json_response(
            201,
            &sim.bind(ep, n, &body_object(parts, bytes)?, &opts)?,
        )),
        (Some("eviction"), Some(n)) if *method == Method::POST => Ok(json_response(
            201,
            &sim.evict(ep, n, &body_object(parts, bytes)?, &opts)?,
        )),
        (None, _) => Err(ApiError::MethodNotAllowed),
        (Some(_), _) => Err(ApiError::NoRoute),
    }
}

/// An access review path: POST of the collection (a protobuf body too, as `kubectl auth
/// can-i` sends); other methods there are 405 and other paths 404, as on kube-apiserver.
fn access_review(
    sim: &Sim,
    req: &ResourceRequest<'_>,
    collection: bool,
    opts: &WriteOptions,
) -> ApiResult<Response> {
    if !collection {
        return Err(ApiError::NoRoute);
    }
    if req.parts.method != Method::POST {
        return Err(ApiError::MethodNotAllowed);
    }
    let body = body_object(req.parts, req.bytes)?;
    Ok(answer_response(201, &sim.create(req.ep, body, opts)?))
}

fn watch_response(
    sim: &Sim,
    ep: &Endpoint,
    list: ListOptions,
    as_table: Option<(std::sync::Arc<crate::registry::ResourceDef>, table::Include)>,
    faults: &Decision,
) -> ApiResult<Response> {
    let stream = if faults.gone {
        None
    } else {
        Some(sim.watch(ep, list)?)
    };
    let broken = faults
        .gone
        .then(|| crate::watch::expired_event("too old resource version (injected fault)"));
    let rate = faults.disconnect_rate;
    let state = (stream, broken, as_table, sim.clone(), false);
    let body = futures::stream::unfold(
        state,
        move |(mut s, mut broken, as_table, sim, ended)| async move {
            if ended {
                return None;
            }
            let ev = match broken.take() {
                Some(ev) => WatchEvent::Json(ev),
                None => s.as_mut()?.next_event().await?,
            };
            // Shared events go out as the bytes every watcher of the version shares.
            let line = match &as_table {
                Some((def, include)) => {
                    WatchEvent::Json(table::event_to_table(def, ev.into_value(), *include))
                        .into_line()
                }
                None => ev.into_line(),
            };
            let end = s.is_none() || sim.faults().disconnect_now(rate);
            Some((
                Ok::<_, Infallible>(Bytes::from(line)),
                (s, broken, as_table, sim, end),
            ))
        },
    );
    let mut resp = Response::new(Body::from_stream(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}
