//! What the pod store leaves out.
//!
//! Responsibility: [`pod`] drops, before a Pod is cached, the parts no controller of this
//! process reads: `metadata.managedFields`, each container's image, command, arguments,
//! environment, probes, lifecycle hooks, mounts, security context and terminal settings, and
//! the container statuses. Real pods carry most of their bytes there (a service's environment
//! and probes are often kilobytes); scheduling, disruption and termination read the
//! containers' names, requests, limits, ports and restart policy, the pod's spec and its phase
//! and conditions, all kept. Nothing is written back from the cache: every write is a merge
//! patch, a subresource or an eviction, so a dropped field is never lost on the server.
//! Inputs: a Pod from the watch. Outputs: the same Pod, slimmer.

use k8s_openapi::api::core::v1::{Container, Pod};

/// Drops from `pod` what no controller of this process reads (see the module docs).
pub fn pod(pod: &mut Pod) {
    super::strip_managed_fields(pod);
    if let Some(spec) = pod.spec.as_mut() {
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            container(c);
        }
        for c in spec.ephemeral_containers.iter_mut().flatten() {
            // Ephemeral containers request nothing (the API forbids resources on them).
            c.image = None;
            c.command = None;
            c.args = None;
            c.env = None;
            c.env_from = None;
        }
    }
    if let Some(status) = pod.status.as_mut() {
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
    }
}

/// Keeps a container's name, requests and limits, ports, restart policy and resize policy.
fn container(c: &mut Container) {
    c.image = None;
    c.image_pull_policy = None;
    c.command = None;
    c.args = None;
    c.working_dir = None;
    c.env = None;
    c.env_from = None;
    c.liveness_probe = None;
    c.readiness_probe = None;
    c.startup_probe = None;
    c.lifecycle = None;
    c.volume_mounts = None;
    c.volume_devices = None;
    c.security_context = None;
    c.termination_message_path = None;
    c.termination_message_policy = None;
    c.stdin = None;
    c.stdin_once = None;
    c.tty = None;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn full() -> Pod {
        let probe = serde_json::json!({"httpGet": {"path": "/healthz", "port": 8080}});
        let container = |name: &str| {
            serde_json::json!({
                "name": name, "image": "registry.example/app:1", "imagePullPolicy": "Always",
                "command": ["/app"], "args": ["--serve"], "workingDir": "/srv",
                "env": [{"name": "A", "value": "x".repeat(4096)}],
                "envFrom": [{"configMapRef": {"name": "cfg"}}],
                "livenessProbe": probe, "readinessProbe": probe, "startupProbe": probe,
                "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "volumeDevices": [{"name": "raw", "devicePath": "/dev/xvda"}],
                "securityContext": {"runAsNonRoot": true},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "stdin": true, "stdinOnce": true, "tty": true,
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {"memory": "2Gi"}},
                "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
            })
        };
        let mut sidecar = container("sidecar");
        sidecar["restartPolicy"] = serde_json::json!("Always");
        let status = serde_json::json!({"name": "app", "image": "i", "imageID": "",
            "ready": true, "restartCount": 0, "state": {"running": {}}});
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u",
                "labels": {"app": "a"}, "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "rs", "uid": "r", "controller": true}],
                "managedFields": [{"manager": "m", "operation": "Update"}]},
            "spec": {"containers": [container("app")], "initContainers": [sidecar],
                "ephemeralContainers": [{"name": "debug", "image": "busybox",
                    "command": ["sh"], "env": [{"name": "B", "value": "y"}]}],
                "nodeSelector": {"zone": "a"}, "tolerations": [{"key": "k",
                    "operator": "Exists"}], "priority": 5, "schedulerName": "default-scheduler",
                "terminationGracePeriodSeconds": 30, "overhead": {"cpu": "100m"},
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}],
                "topologySpreadConstraints": [{"maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule"}]},
            "status": {"phase": "Pending", "nominatedNodeName": "n",
                "conditions": [{"type": "PodScheduled", "status": "False",
                    "reason": "Unschedulable"}],
                "containerStatuses": [status], "initContainerStatuses": [status],
                "ephemeralContainerStatuses": [status]},
        }))
        .unwrap()
    }

    #[test]
    fn a_slim_pod_keeps_what_is_read_and_nothing_else() {
        let before = full();
        let mut slim = before.clone();
        pod(&mut slim);

        // What is read survives, unchanged.
        let mut expected = before.clone();
        expected.metadata.managed_fields = None;
        let (spec, status) = (
            expected.spec.as_mut().unwrap(),
            expected.status.as_mut().unwrap(),
        );
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            *c = Container {
                name: c.name.clone(),
                resources: c.resources.clone(),
                ports: c.ports.clone(),
                restart_policy: c.restart_policy.clone(),
                resize_policy: c.resize_policy.clone(),
                ..Container::default()
            };
        }
        for c in spec.ephemeral_containers.iter_mut().flatten() {
            (c.image, c.command, c.env) = (None, None, None);
        }
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
        assert_eq!(slim, expected);

        // And it is what scheduling reads: requests, host ports, the sidecar's restart policy.
        let app = &slim.spec.as_ref().unwrap().containers[0];
        assert!(app.resources.as_ref().unwrap().requests.is_some());
        assert_eq!(app.ports.as_ref().unwrap()[0].host_port, Some(8080));
        assert_eq!(
            slim.spec
                .as_ref()
                .unwrap()
                .init_containers
                .as_ref()
                .unwrap()[0]
                .restart_policy
                .as_deref(),
            Some("Always")
        );
        // The dropped part was most of the pod.
        let size = |p: &Pod| serde_json::to_vec(p).unwrap().len();
        assert!(
            size(&slim) * 4 < size(&before),
            "{} vs {}",
            size(&slim),
            size(&before)
        );
    }
}
