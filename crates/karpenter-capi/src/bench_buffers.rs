//! `bench scheduling --buffers N`: CapacityBuffer virtual pods solved with the workload.
//!
//! Responsibility: `N` buffers of one chunk each, shaped like the workload's pods in turn (the
//! scheduler sees a virtual pod as the pod its template describes), appended as the provisioner
//! appends them — placeholders, after every real pod — and, after the solve, where they went.
//! Building the virtual pods from a buffer is the CapacityBuffer controller's work, once per
//! change, not per solve; it is not timed here.
//! Inputs: the workload's pods, `N`. Outputs: the pods to solve and [`BufferFigures`].

use std::collections::HashSet;
use std::sync::Arc;

use scheduling::pod::Pod;
use scheduling::scheduler::Results;

/// Where the buffers' virtual pods went in the first solve.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BufferFigures {
    /// Buffers (one chunk each).
    pub buffers: usize,
    /// Virtual pods placed on new NodeClaims.
    pub on_new_node_claims: usize,
    /// Virtual pods that fit nowhere.
    pub unschedulable: usize,
}

/// `pods` followed by `n` virtual pods shaped like `pods` in turn.
#[must_use]
pub fn with_buffers(mut pods: Vec<Pod>, n: usize) -> Vec<Pod> {
    let shapes = pods.len();
    if shapes == 0 {
        return pods;
    }
    for i in 0..n {
        let Some(shape) = pods.get(i % shapes) else {
            break;
        };
        let mut p = shape.clone();
        p.uid = Arc::from(format!("buffer-{i}-1").as_str());
        p.name = Arc::from(format!("capacity-buffer-buffer-{i}-1").as_str());
        p.node_name = None;
        p.placeholder = true;
        pods.push(p);
    }
    pods
}

/// The UIDs of the virtual pods among `pods`.
#[must_use]
pub fn virtual_uids(pods: &[Pod]) -> HashSet<Arc<str>> {
    pods.iter()
        .filter(|p| p.placeholder)
        .map(|p| p.uid.clone())
        .collect()
}

/// How many pods `results` put on new NodeClaims and how many fit nowhere, counting only
/// those for which `counted` holds.
#[must_use]
pub fn placed(results: &Results, counted: impl Fn(&Arc<str>) -> bool) -> (usize, usize) {
    let on_new = results
        .new_node_claims
        .iter()
        .flat_map(|nc| &nc.pods)
        .filter(|u| counted(u))
        .count();
    let failed = results.errors.iter().filter(|e| counted(&e.uid)).count();
    (on_new, failed)
}

/// Where the `n` buffers' virtual pods (`uids`) went in `results`.
#[must_use]
pub fn figures(uids: &HashSet<Arc<str>>, n: usize, results: &Results) -> BufferFigures {
    let (on_new_node_claims, unschedulable) = placed(results, |u| uids.contains(u));
    BufferFigures {
        buffers: n,
        on_new_node_claims,
        unschedulable,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn buffers_cycle_through_the_shapes_after_the_real_pods() {
        let real = |uid: &str| Pod {
            uid: uid.into(),
            ..Pod::default()
        };
        let pods = with_buffers(vec![real("a"), real("b")], 3);
        assert_eq!(pods.len(), 5);
        assert!(!pods[1].placeholder && pods[2].placeholder && pods[4].placeholder);
        assert_eq!(&*pods[4].uid, "buffer-2-1");
        assert!(with_buffers(Vec::new(), 3).is_empty());
    }
}
