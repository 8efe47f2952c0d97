//! Every annotation of one MachineDeployment, parsed at once.
//!
//! Responsibility: read a MachineDeployment's annotation map with the parsers of
//! [`super`], collecting every problem (not just the first) so one report names them all.
//! Input: the annotation map. Output: [`MachineDeploymentAnnotations`] or the list of
//! [`AnnotationError`]s (never empty).
//!
//! Price: our key `karpenter.cluster.x-k8s.io/price` wins; the key upstream's e2e uses,
//! `cluster.x-k8s.io/machine-current-price`, is read only when ours is absent (so a bad legacy
//! value next to a good new one is ignored, not an error).

use std::collections::BTreeMap;

use api::well_known::capi::{self, capacity};
use scheduling::quantity::Quantity;
use scheduling::taints::Taint;

use super::{
    AnnotationError, AnnotationErrorKind, parse_gpu, parse_labels, parse_max_pods, parse_price,
    parse_quantity, parse_size, parse_taints,
};

/// A price read from an annotation, and which annotation it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnnotatedPrice {
    /// The hourly price.
    pub price: f64,
    /// [`capi::PRICE`] or [`capi::LEGACY_PRICE`].
    pub annotation: &'static str,
}

/// The typed annotations of one MachineDeployment; absent annotations are `None` / empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineDeploymentAnnotations {
    /// `capacity…/cpu`.
    pub cpu: Option<Quantity>,
    /// `capacity…/memory`.
    pub memory: Option<Quantity>,
    /// `capacity…/ephemeral-disk` (the `ephemeral-storage` resource).
    pub ephemeral_storage: Option<Quantity>,
    /// `capacity…/maxPods`; `None` also when `0` (the default applies).
    pub max_pods: Option<i64>,
    /// `capacity…/gpu-type` and `gpu-count`, when the count is positive.
    pub gpu: Option<(String, Quantity)>,
    /// `capacity…/labels`.
    pub labels: BTreeMap<String, String>,
    /// `capacity…/taints`.
    pub taints: Vec<Taint>,
    /// The node-group min size.
    pub min_size: Option<i32>,
    /// The node-group max size.
    pub max_size: Option<i32>,
    /// The price annotation, ours first.
    pub price: Option<AnnotatedPrice>,
}

impl MachineDeploymentAnnotations {
    /// Parses every annotation the provider reads from `annotations`; others are ignored.
    ///
    /// # Errors
    /// Every invalid annotation, in a fixed order (capacity, labels, taints, sizes, price);
    /// also a min size above the max size (reported on the min-size annotation).
    pub fn parse(annotations: &BTreeMap<String, String>) -> Result<Self, Vec<AnnotationError>> {
        let get = |key: &str| annotations.get(key).map(String::as_str);
        let mut errors = Errors::default();
        let cpu = errors
            .keep(parse_quantity(capacity::CPU, get(capacity::CPU)))
            .flatten();
        let memory = errors
            .keep(parse_quantity(capacity::MEMORY, get(capacity::MEMORY)))
            .flatten();
        let ephemeral_storage = errors
            .keep(parse_quantity(
                capacity::EPHEMERAL_DISK,
                get(capacity::EPHEMERAL_DISK),
            ))
            .flatten();
        let max_pods = errors
            .keep(parse_max_pods(get(capacity::MAX_PODS)))
            .flatten();
        let gpu = errors
            .keep(parse_gpu(get(capacity::GPU_COUNT), get(capacity::GPU_TYPE)))
            .flatten();
        let labels = errors
            .keep(get(capacity::LABELS).map_or(Ok(BTreeMap::new()), parse_labels))
            .unwrap_or_default();
        let taints = errors
            .keep(get(capacity::TAINTS).map_or(Ok(Vec::new()), parse_taints))
            .unwrap_or_default();
        let min_size = errors
            .keep(parse_size(capi::MIN_SIZE, get(capi::MIN_SIZE)))
            .flatten();
        let max_size = errors
            .keep(parse_size(capi::MAX_SIZE, get(capi::MAX_SIZE)))
            .flatten();
        let price = match get(capi::PRICE).map(str::trim).filter(|v| !v.is_empty()) {
            Some(_) => errors
                .keep(parse_price(capi::PRICE, get(capi::PRICE)))
                .flatten()
                .map(|price| AnnotatedPrice {
                    price,
                    annotation: capi::PRICE,
                }),
            None => errors
                .keep(parse_price(capi::LEGACY_PRICE, get(capi::LEGACY_PRICE)))
                .flatten()
                .map(|price| AnnotatedPrice {
                    price,
                    annotation: capi::LEGACY_PRICE,
                }),
        };
        if let (Some(min), Some(max)) = (min_size, max_size)
            && min > max
        {
            errors.0.push(AnnotationError::new(
                capi::MIN_SIZE,
                get(capi::MIN_SIZE).unwrap_or_default(),
                AnnotationErrorKind::MinAboveMax { min, max },
            ));
        }
        if !errors.0.is_empty() {
            return Err(errors.0);
        }
        Ok(Self {
            cpu,
            memory,
            ephemeral_storage,
            max_pods,
            gpu,
            labels,
            taints,
            min_size,
            max_size,
            price,
        })
    }
}

/// The errors met so far.
#[derive(Default)]
struct Errors(Vec<AnnotationError>);

impl Errors {
    /// The value, or `None` after recording the error.
    fn keep<T>(&mut self, result: Result<T, AnnotationError>) -> Option<T> {
        result.map_err(|error| self.0.push(error)).ok()
    }
}
