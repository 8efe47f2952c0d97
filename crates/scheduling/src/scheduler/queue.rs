//! The scheduling queue: upstream's total order and no-progress detection.
//!
//! Responsibility: hand out pods in Karpenter's order — CPU request descending, then memory
//! descending, then creation time ascending, then UID ascending; placeholders (CapacityBuffer
//! virtual pods) after every real pod, so a burst takes the warm room before they do — and stop once a full cycle of
//! the queue made no progress (spec §3.6): a failed pod goes to the back remembering the queue
//! length at that moment; when the head was last pushed back at the current length, nothing
//! placed since, so nothing will.
//! Inputs: indices of pods and their sort keys. Outputs: the next index to try.

use std::cmp::Ordering;
use std::collections::VecDeque;

use crate::pod::Pod;
use crate::quantity::Quantity;
use crate::resources::ResourceName;

/// The order pods are tried in.
pub(crate) fn compare(a: &Pod, b: &Pod) -> Ordering {
    let cpu = |p: &Pod| p.requests.get(&ResourceName::CPU).unwrap_or(Quantity::ZERO);
    let memory = |p: &Pod| {
        p.requests
            .get(&ResourceName::MEMORY)
            .unwrap_or(Quantity::ZERO)
    };
    a.placeholder
        .cmp(&b.placeholder)
        .then_with(|| cpu(b).cmp(&cpu(a)))
        .then_with(|| memory(b).cmp(&memory(a)))
        .then_with(|| a.creation_timestamp.cmp(&b.creation_timestamp))
        .then_with(|| a.uid.cmp(&b.uid))
}

/// A queue of pod indices.
#[derive(Debug)]
pub(crate) struct Queue {
    entries: VecDeque<usize>,
    /// Per pod index: the queue length when it was last pushed back, if ever.
    last_len: Vec<Option<usize>>,
}

impl Queue {
    /// A queue over `pods`, sorted.
    pub(crate) fn new(pods: &[Pod]) -> Self {
        let mut order: Vec<usize> = (0..pods.len()).collect();
        order.sort_by(|&a, &b| match (pods.get(a), pods.get(b)) {
            (Some(a), Some(b)) => compare(a, b),
            _ => Ordering::Equal,
        });
        Self {
            entries: order.into(),
            last_len: vec![None; pods.len()],
        }
    }

    /// The next pod to try, or `None` when the queue is empty or a whole cycle made no progress.
    pub(crate) fn pop(&mut self) -> Option<usize> {
        let head = *self.entries.front()?;
        if self.last_len.get(head).copied().flatten() == Some(self.entries.len()) {
            return None;
        }
        self.entries.pop_front()
    }

    /// Puts a pod that failed to the back.
    pub(crate) fn push_back(&mut self, index: usize) {
        self.entries.push_back(index);
        if let Some(slot) = self.last_len.get_mut(index) {
            *slot = Some(self.entries.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Resources;

    fn pod(uid: &str, cpu: &str, memory: &str, created: i64) -> Pod {
        Pod {
            uid: uid.into(),
            requests: Resources::parse([("cpu", cpu), ("memory", memory)]).unwrap(),
            creation_timestamp: created,
            ..Pod::default()
        }
    }

    #[test]
    fn placeholders_come_after_every_real_pod() {
        let mut big = pod("placeholder", "8", "8Gi", 1);
        big.placeholder = true;
        let pods = vec![big, pod("small", "100m", "1Mi", 9)];
        let mut q = Queue::new(&pods);
        assert_eq!(q.pop(), Some(1), "the small real pod first");
        assert_eq!(q.pop(), Some(0));
    }

    #[test]
    fn pods_are_ordered_by_cpu_then_memory_descending_then_age_then_uid() {
        let pods = vec![
            pod("a", "1", "1Gi", 5),
            pod("b", "2", "1Gi", 5),
            pod("c", "1", "2Gi", 5),
            pod("d", "1", "1Gi", 1),
            pod("e", "1", "1Gi", 1),
        ];
        let mut queue = Queue::new(&pods);
        let order: Vec<&str> = std::iter::from_fn(|| queue.pop())
            .map(|i| &*pods[i].uid)
            .collect();
        assert_eq!(order, ["b", "c", "d", "e", "a"]);
    }

    #[test]
    fn a_full_cycle_without_progress_ends_the_queue() {
        let pods = vec![pod("a", "1", "1Gi", 0), pod("b", "1", "1Gi", 1)];
        let mut queue = Queue::new(&pods);
        let a = queue.pop().unwrap();
        queue.push_back(a); // [b, a], a pushed at len 2
        let b = queue.pop().unwrap();
        queue.push_back(b); // [a, b], b pushed at len 2
        assert_eq!(
            queue.pop(),
            None,
            "a was last pushed at length 2 and the length is 2"
        );
        assert_eq!(queue.entries.len(), 2, "both pods stay queued, unplaced");
    }

    #[test]
    fn progress_by_another_pod_gives_a_failed_pod_another_try() {
        let pods = vec![pod("a", "1", "1Gi", 0), pod("b", "1", "1Gi", 1)];
        let mut queue = Queue::new(&pods);
        let a = queue.pop().unwrap();
        queue.push_back(a); // [b, a] pushed at len 2
        let _b = queue.pop().unwrap(); // b placed: [a], len 1
        assert_eq!(
            queue.pop(),
            Some(a),
            "the queue shrank, so a is tried again"
        );
    }
}
