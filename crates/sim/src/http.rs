//! The HTTP front: an axum router over [`Sim`].
//!
//! Responsibility: decode HTTP requests (method, path, query, `Content-Type`, body), call the
//! matching [`Sim`] operation, and encode the answer: JSON objects with kube-apiserver's status
//! codes (201 on create), errors as `Status` objects, watches as a stream of newline-separated
//! watch events.
//! Inputs: `http::Request`s. Outputs: `http::Response`s. No API semantics live here.

use std::convert::Infallible;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use http::{Method, StatusCode, header};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::options::{ListOptions, Query, WriteOptions, parse_query};
use crate::patch::PatchType;
use crate::route::{self, Route};
use crate::semantics::WriteMode;
use crate::sim::Sim;
use crate::state::Endpoint;
use crate::{discovery, openapi, table};

/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// The router serving `sim`.
pub fn router(sim: Sim) -> Router {
    Router::new().fallback(handle).with_state(sim)
}

async fn handle(State(sim): State<Sim>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            return error_response(&ApiError::BadRequest(format!(
                "cannot read the request body: {e}"
            )));
        }
    };
    match dispatch(&sim, &parts, &bytes) {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

/// A JSON response.
fn json_response(code: u16, v: &Value) -> Response {
    let mut resp = Response::new(Body::from(v.to_string()));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// An error as a `Status` response.
pub fn error_response(e: &ApiError) -> Response {
    json_response(e.code(), &e.status())
}

fn header_str(parts: &http::request::Parts, name: header::HeaderName) -> &str {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// A create/update body: JSON, or YAML when declared.
fn body_object(parts: &http::request::Parts, bytes: &[u8]) -> ApiResult<Value> {
    let ct = header_str(parts, header::CONTENT_TYPE);
    if ct.contains("protobuf") || ct.contains("cbor") {
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

fn dispatch(sim: &Sim, parts: &http::request::Parts, bytes: &Bytes) -> ApiResult<Response> {
    let route = route::parse(parts.uri.path()).ok_or(ApiError::NoRoute)?;
    let get_only = |v: Value| {
        if parts.method == Method::GET {
            Ok(json_response(200, &v))
        } else {
            Err(ApiError::MethodNotAllowed)
        }
    };
    match route {
        Route::Version => get_only(discovery::version(&sim.config().version)),
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
            resource(
                sim,
                parts,
                &q,
                bytes,
                &ep,
                name.as_deref(),
                sub.as_deref(),
                watch,
            )
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn resource(
    sim: &Sim,
    parts: &http::request::Parts,
    q: &Query,
    bytes: &Bytes,
    ep: &Endpoint,
    name: Option<&str>,
    sub: Option<&str>,
    watch_path: bool,
) -> ApiResult<Response> {
    let def = sim.resource_def(ep)?;
    let opts = WriteOptions::parse(q)?;
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
    let created = |(v, created): (Value, bool)| json_response(if created { 201 } else { 200 }, &v);
    let method = &parts.method;
    match (sub, name) {
        (None, None) if *method == Method::GET => {
            let list = ListOptions::parse(q)?;
            if list.watch || watch_path {
                return watch_response(sim, ep, list, as_table);
            }
            Ok(json_response(200, &printed(sim.list(ep, &list)?)))
        }
        (None, None) if *method == Method::POST => Ok(json_response(
            201,
            &sim.create(ep, body_object(parts, bytes)?, &opts)?,
        )),
        (None, None) if *method == Method::DELETE => {
            let list = ListOptions::parse(q)?;
            Ok(json_response(
                200,
                &sim.delete_collection(ep, &list, &opts)?,
            ))
        }
        (None, Some(n)) if *method == Method::GET => {
            if watch_path {
                let mut list = ListOptions::parse(q)?;
                list.fields = crate::selectors::FieldSelector::parse(&format!("metadata.name={n}"))
                    .map_err(|e| ApiError::BadRequest(e.to_string()))?;
                return watch_response(sim, ep, list, as_table);
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
                    let delete_options = if bytes.is_empty() {
                        json!({})
                    } else {
                        body_object(parts, bytes)?
                    };
                    Ok(json_response(
                        200,
                        &sim.delete(ep, n, &delete_options, &opts)?,
                    ))
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

fn watch_response(
    sim: &Sim,
    ep: &Endpoint,
    list: ListOptions,
    as_table: Option<(crate::registry::ResourceDef, table::Include)>,
) -> ApiResult<Response> {
    let stream = sim.watch(ep, list)?;
    let body = futures::stream::unfold((stream, as_table), |(mut s, as_table)| async move {
        let mut ev = s.next().await?;
        if let Some((def, include)) = &as_table {
            ev = table::event_to_table(def, ev, *include);
        }
        let mut line = ev.to_string().into_bytes();
        line.push(b'\n');
        Some((Ok::<_, Infallible>(Bytes::from(line)), (s, as_table)))
    });
    let mut resp = Response::new(Body::from_stream(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}
