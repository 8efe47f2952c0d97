//! The `scale` and `binding` subresources.
//!
//! Responsibility: GET/PUT/PATCH of `<resource>/<name>/scale` (an `autoscaling/v1` Scale mapped
//! through [`crate::scale`]) and POST of `pods/<name>/binding` (the scheduler's bind: sets
//! `spec.nodeName` and the `PodScheduled` condition, 409 if already bound).
//! Inputs: an [`Endpoint`], a name, a body. Outputs: a Scale, a success Status, or an
//! [`ApiError`]. The `status` subresource is a write mode of [`State::update`] and
//! [`State::patch`].

use serde_json::{Value, json};

use crate::convert::{to_served, to_stored};
use crate::error::{ApiError, ApiResult};
use crate::object;
use crate::options::WriteOptions;
use crate::patch::{PatchType, apply_patch};
use crate::registry::{ResourceDef, ScalePaths, Special};
use crate::scale::{from_scale, to_scale};
use crate::semantics::{WriteMode, check_resource_version, prepare_update};
use crate::state::{Endpoint, State};
use crate::store::Stored;

impl State {
    fn scaled(
        &self,
        ep: &Endpoint,
        name: &str,
    ) -> ApiResult<(std::sync::Arc<ResourceDef>, ScalePaths, Value)> {
        let def = self.resolve(ep)?;
        let paths = def.scale.clone().ok_or(ApiError::NoRoute)?;
        let old = self.stored(&def, ep.namespace.as_deref().unwrap_or_default(), name)?;
        Ok((def, paths, old))
    }

    /// GET `…/scale`.
    pub fn get_scale(&self, ep: &Endpoint, name: &str) -> ApiResult<Value> {
        let (def, paths, old) = self.scaled(ep, name)?;
        to_scale(&paths, &to_served(&def, &ep.version, old))
    }

    /// PUT `…/scale`.
    pub fn update_scale(
        &mut self,
        ep: &Endpoint,
        name: &str,
        scale: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let (def, paths, old) = self.scaled(ep, name)?;
        let served = to_served(&def, &ep.version, old.clone());
        let new = to_stored(&def, from_scale(&paths, &served, scale)?);
        check_resource_version(&def, &old, &new)?;
        let new = prepare_update(&def, &old, new, WriteMode::Main)?;
        let out = self.commit(
            &def,
            &ep.version,
            Stored::new(old),
            new,
            WriteMode::Main,
            opts,
        )?;
        to_scale(&paths, &out.into_value())
    }

    /// PATCH `…/scale`: the patch applies to the Scale, then as PUT.
    pub fn patch_scale(
        &mut self,
        ep: &Endpoint,
        name: &str,
        kind: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let current = self.get_scale(ep, name)?;
        let patched = if kind == PatchType::Apply {
            let applied: Value = serde_norway::from_slice(body)
                .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?;
            let mut merged = current.clone();
            json_patch::merge(&mut merged, &applied);
            merged
        } else {
            apply_patch(kind, &current, body, false).map_err(|e| match e {
                crate::patch::PatchError::Malformed(m) => ApiError::BadRequest(m),
                crate::patch::PatchError::Failed(_) => ApiError::Rejected,
                crate::patch::PatchError::Unsupported(m) => ApiError::UnsupportedMediaType(m),
            })?
        };
        self.update_scale(ep, name, &patched, opts)
    }

    /// POST `pods/<name>/binding`.
    pub fn bind(
        &mut self,
        ep: &Endpoint,
        name: &str,
        binding: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let def = self.resolve(ep)?;
        if def.special != Special::Pod {
            return Err(ApiError::NoRoute);
        }
        let node = binding
            .get("target")
            .and_then(|t| t.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::invalid("Binding", "", name, "target.name: Required value"))?;
        let old = self.stored_shared(&def, ep.namespace.as_deref().unwrap_or_default(), name)?;
        let conflict = |why: String| ApiError::Conflict {
            resource: def.group_resource(),
            name: name.to_owned(),
            why,
        };
        if object::is_deleting(&old) {
            return Err(conflict(format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        if let Some(bound) = object::get_path(&old, ".spec.nodeName").and_then(Value::as_str)
            && !bound.is_empty()
        {
            return Err(conflict(format!(
                "pod {name} is already assigned to node {bound:?}"
            )));
        }
        let mut new = old.value.clone();
        object::set_path(&mut new, ".spec.nodeName", json!(node));
        let condition = json!({"type": "PodScheduled", "status": "True",
            "lastProbeTime": null, "lastTransitionTime": object::now_rfc3339()});
        let status = object::as_map(
            object::as_map(&mut new)
                .entry("status")
                .or_insert(json!({})),
        );
        let conditions = status.entry("conditions").or_insert(json!([]));
        if let Value::Array(list) = conditions {
            list.retain(|c| c.get("type") != Some(&json!("PodScheduled")));
            list.push(condition);
        }
        let opts = WriteOptions {
            binding: true,
            ..opts.clone()
        };
        self.commit(&def, &ep.version, old, new, WriteMode::Main, &opts)?;
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    }
}
