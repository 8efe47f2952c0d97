//! Tests of the Helm chart `charts/karpenter-capi`; everything is in `tests/chart.rs`.
//!
//! They run the `helm` binary of `../shared/tools/helm/` (beside this checkout) and fail,
//! naming the path, when it is missing.
