//! A pod's effective resource requests, as Kubernetes' `resourcehelper.PodRequests` computes them.
//!
//! Responsibility: aggregate container, init-container (regular and sidecar), pod-level and
//! overhead requests into the one list the scheduler fits, then count the pod itself as Karpenter
//! does. Input: [`PodResources`], plain data taken from a pod spec. Output: a [`Resources`].
//!
//! The algorithm (KEP-753 sidecars, KEP-2837 pod-level resources):
//! 1. Sum the app containers' requests.
//! 2. Walk the init containers in order. A sidecar (restartable, `restartPolicy: Always`) adds to
//!    the running sum and to the sidecar total, and needs the sidecar total while it starts. A
//!    regular init container needs its own requests plus the sidecars started before it.
//! 3. Take the element-wise maximum of the sum and every init container's need.
//! 4. Pod-level requests of supported resources (`cpu`, `memory`, `hugepages-*`) replace the
//!    aggregate for those resources.
//! 5. Add the pod overhead.
//!
//! Out of scope: in-place resize status (`UseStatusResources`); pass the requests Kubernetes
//! should account, e.g. the maximum of spec and allocated, as the container requests.

use super::{ResourceName, Resources};
use crate::quantity::{Format, Quantity};

/// An init container's requests and whether it is a sidecar.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitContainer {
    /// The container's resource requests.
    pub requests: Resources,
    /// Whether it is a restartable init container (`restartPolicy: Always`), i.e. a sidecar that
    /// keeps running next to the app containers.
    pub restartable: bool,
}

impl InitContainer {
    /// A regular init container that runs to completion before the next one starts.
    #[must_use]
    pub fn regular(requests: Resources) -> InitContainer {
        InitContainer {
            requests,
            restartable: false,
        }
    }

    /// A sidecar: a restartable init container that keeps running.
    #[must_use]
    pub fn sidecar(requests: Resources) -> InitContainer {
        InitContainer {
            requests,
            restartable: true,
        }
    }
}

/// The resource-relevant parts of a pod spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodResources {
    /// Each app container's requests (`spec.containers[*].resources.requests`).
    pub containers: Vec<Resources>,
    /// The init containers in spec order (`spec.initContainers`).
    pub init_containers: Vec<InitContainer>,
    /// The runtime-class overhead (`spec.overhead`); empty when unset.
    pub overhead: Resources,
    /// Pod-level requests (`spec.resources.requests`); empty when unset.
    pub pod_level_requests: Resources,
}

impl PodResources {
    /// The pod's requests exactly as Kubernetes' `PodRequests` with default options computes
    /// them (overhead included); see the module documentation.
    #[must_use]
    pub fn requests(&self) -> Resources {
        let mut total = Resources::new();
        for container in &self.containers {
            total.merge(container);
        }
        let mut sidecars = Resources::new();
        let mut init_need = Resources::new();
        for init in &self.init_containers {
            if init.restartable {
                total.merge(&init.requests);
                sidecars.merge(&init.requests);
                init_need = init_need.max_with(&sidecars);
            } else {
                init_need = init_need.max_with(&init.requests.merged(&sidecars));
            }
        }
        let mut total = total.max_with(&init_need);
        for (name, quantity) in &self.pod_level_requests {
            if is_supported_pod_level_resource(name) {
                total.insert(name.clone(), quantity);
            }
        }
        total.merge(&self.overhead);
        total
    }

    /// The requests Karpenter schedules with (`resources.RequestsForPods` of this one pod):
    /// [`PodResources::requests`] with `pods` set to 1.
    #[must_use]
    pub fn scheduling_requests(&self) -> Resources {
        let mut requests = self.requests();
        requests.insert(
            ResourceName::PODS,
            Quantity::new(1, Format::DecimalExponent),
        );
        requests
    }
}

/// Whether pod-level requests of `name` override the container aggregate: `cpu`, `memory` and
/// huge pages (Kubernetes `IsSupportedPodLevelResource`).
#[must_use]
pub fn is_supported_pod_level_resource(name: &ResourceName) -> bool {
    *name == ResourceName::CPU || *name == ResourceName::MEMORY || name.is_hugepages()
}

#[cfg(test)]
mod tests {
    //! Cases from Kubernetes' `component-helpers/resource/helpers_test.go`
    //! (`TestPodResourceRequests`, `TestPodLevelResourceRequests`, `TestPodRequestsAndLimits`).
    use super::*;

    fn list(pairs: &[(&str, &str)]) -> Resources {
        Resources::parse(pairs.iter().copied()).unwrap()
    }

    fn cpu(value: &str) -> Resources {
        list(&[("cpu", value)])
    }

    fn pod(containers: &[Resources], init: &[InitContainer]) -> PodResources {
        PodResources {
            containers: containers.to_vec(),
            init_containers: init.to_vec(),
            ..PodResources::default()
        }
    }

    #[test]
    fn larger_init_container_dominates() {
        let pod = pod(&[cpu("1")], &[InitContainer::regular(cpu("4"))]);
        assert_eq!(pod.requests(), cpu("4"));
    }

    #[test]
    fn larger_app_containers_dominate() {
        let pod = pod(&[cpu("2"), cpu("3")], &[InitContainer::regular(cpu("2"))]);
        assert_eq!(pod.requests(), cpu("5"));
    }

    #[test]
    fn overhead_is_added_after_the_maximum() {
        let mut pod = pod(&[cpu("2"), cpu("3")], &[InitContainer::regular(cpu("2"))]);
        pod.overhead = list(&[("cpu", "1"), ("memory", "1Gi")]);
        assert_eq!(pod.requests(), list(&[("cpu", "6"), ("memory", "1Gi")]));
    }

    #[test]
    fn overhead_alone_is_the_request() {
        let pod = PodResources {
            overhead: list(&[("cpu", "5"), ("memory", "5")]),
            ..Default::default()
        };
        assert_eq!(pod.requests(), list(&[("cpu", "5"), ("memory", "5")]));
    }

    #[test]
    fn sidecar_adds_to_app_containers() {
        let pod = pod(&[cpu("1")], &[InitContainer::sidecar(cpu("1"))]);
        assert_eq!(pod.requests(), cpu("2"));
    }

    #[test]
    fn multiple_sidecars_accumulate_past_an_earlier_init_container() {
        let init = [
            InitContainer::regular(cpu("5")),
            InitContainer::sidecar(cpu("1")),
            InitContainer::sidecar(cpu("2")),
            InitContainer::sidecar(cpu("3")),
        ];
        assert_eq!(pod(&[cpu("1")], &init).requests(), cpu("7"));
    }

    #[test]
    fn init_container_needs_only_sidecars_started_before_it() {
        let init = [
            InitContainer::regular(cpu("5")),
            InitContainer::sidecar(cpu("1")),
            InitContainer::sidecar(cpu("2")),
            InitContainer::regular(cpu("5")),
            InitContainer::sidecar(cpu("3")),
        ];
        assert_eq!(pod(&[cpu("1")], &init).requests(), cpu("8"));
    }

    #[test]
    fn sidecar_then_large_init_container() {
        let init = [
            InitContainer::sidecar(cpu("10")),
            InitContainer::regular(cpu("200")),
        ];
        assert_eq!(pod(&[cpu("100")], &init).requests(), cpu("210"));
    }

    #[test]
    fn sidecar_need_counts_per_resource() {
        let app = list(&[("memory", "3Mi"), ("cpu", "2m")]);
        let init = [
            InitContainer::sidecar(list(&[("memory", "5Mi"), ("cpu", "4m")])),
            InitContainer::regular(list(&[("memory", "6Mi"), ("cpu", "8m")])),
        ];
        let pod = pod(&[app], &init);
        assert_eq!(pod.requests(), list(&[("memory", "11Mi"), ("cpu", "12m")]));
    }

    #[test]
    fn pod_level_requests_override_supported_resources() {
        let app = list(&[("memory", "3Mi"), ("cpu", "2m")]);
        let init = [
            InitContainer::sidecar(list(&[("memory", "5Mi"), ("cpu", "4m")])),
            InitContainer::regular(list(&[("memory", "6Mi"), ("cpu", "8m")])),
        ];
        let mut pod = pod(&[app], &init);
        pod.pod_level_requests = list(&[("memory", "15Mi"), ("cpu", "18m")]);
        assert_eq!(pod.requests(), list(&[("memory", "15Mi"), ("cpu", "18m")]));
    }

    #[test]
    fn pod_level_requests_keep_container_resources_they_do_not_name() {
        let mut pod = pod(&[cpu("2m")], &[]);
        pod.pod_level_requests = list(&[("memory", "2Mi")]);
        assert_eq!(pod.requests(), list(&[("memory", "2Mi"), ("cpu", "2m")]));
    }

    #[test]
    fn pod_level_unsupported_resources_are_ignored() {
        let mut pod = pod(&[list(&[("storage", "3Mi")])], &[]);
        pod.pod_level_requests = list(&[("storage", "2Mi")]);
        assert_eq!(pod.requests(), list(&[("storage", "3Mi")]));
        let mut pod = self::pod(&[list(&[("memory", "3Mi")])], &[]);
        pod.pod_level_requests = list(&[("storage", "2Mi")]);
        assert_eq!(pod.requests(), list(&[("memory", "3Mi")]));
    }

    #[test]
    fn pod_level_hugepages_override_per_page_size() {
        let container = list(&[("memory", "4Mi"), ("hugepages-1Gi", "1Gi")]);
        let mut pod = pod(&[container], &[]);
        pod.pod_level_requests = list(&[("cpu", "1"), ("hugepages-2Mi", "10Mi")]);
        let expected = list(&[
            ("cpu", "1"),
            ("memory", "4Mi"),
            ("hugepages-2Mi", "10Mi"),
            ("hugepages-1Gi", "1Gi"),
        ]);
        assert_eq!(pod.requests(), expected);
    }

    #[test]
    fn pod_level_requests_with_overhead_add_the_overhead() {
        let mut pod = pod(&[cpu("1")], &[]);
        pod.pod_level_requests = cpu("2");
        pod.overhead = cpu("500m");
        assert_eq!(pod.requests(), cpu("2500m"));
    }

    #[test]
    fn empty_pod_requests_nothing_but_schedules_as_one_pod() {
        assert_eq!(PodResources::default().requests(), Resources::new());
        assert_eq!(
            PodResources::default().scheduling_requests(),
            list(&[("pods", "1")])
        );
    }

    #[test]
    fn scheduling_requests_add_one_pod() {
        let pod = pod(
            &[cpu("1")],
            &[InitContainer::regular(list(&[("memory", "1Gi")]))],
        );
        let expected = list(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "1")]);
        assert_eq!(pod.scheduling_requests(), expected);
        assert_eq!(
            pod.scheduling_requests().to_string(),
            "{cpu: 1, memory: 1Gi, pods: 1}"
        );
    }

    #[test]
    fn supported_pod_level_resources_are_cpu_memory_and_hugepages() {
        for (name, supported) in [
            ("cpu", true),
            ("memory", true),
            ("hugepages-2Mi", true),
            ("hugepages-1Gi", true),
            ("ephemeral-storage", false),
            ("pods", false),
            ("nvidia.com/gpu", false),
        ] {
            assert_eq!(
                is_supported_pod_level_resource(&ResourceName::new(name)),
                supported,
                "{name}"
            );
        }
    }
}
