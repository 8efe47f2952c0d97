//! The pod annotation `karpenter.sh/do-not-disrupt` (spec §1.5).
//!
//! Responsibility: parse its value — `"true"`, or a positive Go duration measured from the
//! pod's `status.startTime` (active while less time has passed, or when the start time is
//! unknown); anything else is invalid and treated as absent — and Go duration syntax itself.
//! Inputs: a pod, "now". Outputs: [`DoNotDisrupt`] and whether it is active. Pure.

use std::time::Duration;

use api::well_known::annotations::DO_NOT_DISRUPT;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::pods::elapsed;

/// The value of a pod's `karpenter.sh/do-not-disrupt` annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DoNotDisrupt {
    /// No annotation.
    Absent,
    /// `"true"`: blocks voluntary disruption while the pod exists.
    Always,
    /// A positive duration, measured from the pod's `status.startTime`.
    For(Duration),
    /// Anything else: treated as absent.
    Invalid(String),
}

impl DoNotDisrupt {
    /// Parses an annotation value.
    #[must_use]
    pub fn parse(value: &str) -> Self {
        if value == "true" {
            return Self::Always;
        }
        match parse_go_duration(value) {
            Some(d) if !d.is_zero() => Self::For(d),
            _ => Self::Invalid(value.to_owned()),
        }
    }

    /// Whether it blocks eviction of `pod` at `now` (a duration with an unknown start time is
    /// active).
    #[must_use]
    pub fn is_active(&self, pod: &Pod, now: Timestamp) -> bool {
        match self {
            Self::Absent | Self::Invalid(_) => false,
            Self::Always => true,
            Self::For(d) => pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .is_none_or(|start| elapsed(start.0, now) < *d),
        }
    }
}

/// The pod's do-not-disrupt annotation.
#[must_use]
pub fn do_not_disrupt(pod: &Pod) -> DoNotDisrupt {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DO_NOT_DISRUPT))
        .map_or(DoNotDisrupt::Absent, |v| DoNotDisrupt::parse(v))
}

/// Parses a Go duration (`300ms`, `1.5h`, `2h45m`, `0`); negative values and unknown units are
/// rejected.
#[must_use]
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    if text.starts_with('-') {
        return None;
    }
    Duration::try_from_secs_f64(api::common::go_duration_seconds(text)?).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::termination::pods::{is_drainable, is_evictable};
    use serde_json::{Value, json};

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pod(name: &str, extra: Value) -> Pod {
        let mut body =
            json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": []}});
        if let (Some(t), Value::Object(e)) = (body.as_object_mut(), extra) {
            for (k, v) in e {
                t.insert(k, v);
            }
        }
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        for bad in ["", "5", "-5m", "5d", "m", "true", "1..5s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn do_not_disrupt_is_true_or_a_positive_duration_from_start_time() {
        assert_eq!(DoNotDisrupt::parse("true"), DoNotDisrupt::Always);
        assert_eq!(
            DoNotDisrupt::parse("10m"),
            DoNotDisrupt::For(Duration::from_secs(600))
        );
        assert!(matches!(
            DoNotDisrupt::parse("0s"),
            DoNotDisrupt::Invalid(_)
        ));
        assert!(matches!(
            DoNotDisrupt::parse("False"),
            DoNotDisrupt::Invalid(_)
        ));

        let started = pod(
            "p",
            json!({"metadata": {"annotations": {DO_NOT_DISRUPT: "10m"}},
                "status": {"startTime": at(0).to_string()}}),
        );
        let d = do_not_disrupt(&started);
        assert!(d.is_active(&started, at(599)));
        assert!(!d.is_active(&started, at(600)));
        let unstarted = pod(
            "p",
            json!({"metadata": {"annotations": {DO_NOT_DISRUPT: "10m"}}}),
        );
        assert!(do_not_disrupt(&unstarted).is_active(&unstarted, at(10_000)));
        let invalid = pod(
            "p",
            json!({"metadata": {"annotations": {DO_NOT_DISRUPT: "soon"}}}),
        );
        assert!(is_evictable(&invalid, at(0)));
        let always = pod(
            "p",
            json!({"metadata": {"annotations": {DO_NOT_DISRUPT: "true"}}}),
        );
        assert!(!is_evictable(&always, at(0)));
        assert!(is_drainable(&always, at(0), Duration::from_secs(60)));
    }
}
