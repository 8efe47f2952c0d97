//! Bodies `kubectl` v1.32 sent (captured from `kubectl create …` and `kubectl auth can-i`),
//! decoded.

use serde_json::json;

use super::*;

fn decoded(bytes: &[u8]) -> Value {
    decode(bytes).unwrap()
}

#[test]
fn deployment_keeps_zero_replicas_and_drops_go_zero_values() {
    // kubectl create deployment web --image=nginx --replicas=0 --port=80
    let d = decoded(include_bytes!("testdata/deployment.pb"));
    assert_eq!(
        d,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "nginx",
                        "image": "nginx",
                        "ports": [{"containerPort": 80}],
                        "resources": {}
                    }]}
                },
                "strategy": {}
            },
            "status": {}
        })
    );
}

#[test]
fn namespace_configmap_secret() {
    let ns = decoded(include_bytes!("testdata/namespace.pb"));
    assert_eq!(ns["kind"], "Namespace");
    assert_eq!(ns["metadata"], json!({"name": "x"}));
    let cm = decoded(include_bytes!("testdata/configmap.pb"));
    assert_eq!(cm["data"], json!({"a": "1", "b": "two"}));
    let secret = decoded(include_bytes!("testdata/secret.pb"));
    // Bytes are base64 in JSON.
    assert_eq!(secret["data"], json!({"pw": "aHVudGVyMg=="}));
}

#[test]
fn int_or_string_and_int_values() {
    let pdb = decoded(include_bytes!("testdata/pdb.pb"));
    assert_eq!(pdb["spec"]["minAvailable"], json!(0));
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        json!({"app": "web"})
    );
    let svc = decoded(include_bytes!("testdata/service.pb"));
    let port = &svc["spec"]["ports"][0];
    assert_eq!(port["port"], 80);
    assert_eq!(port["targetPort"], 8080);
    assert_eq!(port["protocol"], "TCP");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    let pc = decoded(include_bytes!("testdata/priorityclass.pb"));
    // `value` is not omitempty: its zero stays.
    assert_eq!(pc["value"], 0);
    assert_eq!(pc["description"], "d");
}

#[test]
fn jobs_and_cronjobs() {
    let job = decoded(include_bytes!("testdata/job.pb"));
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["command"], json!(["echo", "hi"]));
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    let cj = decoded(include_bytes!("testdata/cronjob.pb"));
    assert_eq!(cj["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(
        cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"],
        "OnFailure"
    );
}

#[test]
fn reviews_and_bindings() {
    let ssar = decoded(include_bytes!("testdata/selfsubjectaccessreview.pb"));
    assert_eq!(ssar["apiVersion"], "authorization.k8s.io/v1");
    let attrs = &ssar["spec"]["resourceAttributes"];
    assert_eq!(attrs["verb"], "create");
    assert_eq!(attrs["resource"], "pods");
    assert_eq!(attrs["namespace"], "default");
    let rules = decoded(include_bytes!("testdata/selfsubjectrulesreview.pb"));
    assert_eq!(rules["spec"]["namespace"], "default");
    let rb = decoded(include_bytes!("testdata/rolebinding.pb"));
    assert_eq!(rb["roleRef"]["name"], "r");
    assert_eq!(rb["subjects"][0]["name"], "u");
    let sa = decoded(include_bytes!("testdata/serviceaccount.pb"));
    assert_eq!(sa["metadata"]["name"], "sa");
}

#[test]
fn malformed_bodies_are_errors() {
    assert!(decode(b"{}").is_err());
    assert!(decode(b"k8s\0\x0a\x05").is_err());
    // An unknown kind.
    let unknown = b"k8s\0\x0a\x0e\x0a\x02v1\x12\x08Mystery1";
    assert!(matches!(
        decode(unknown),
        Err(DecodeError::UnknownMessage(_))
    ));
}

#[test]
fn content_types() {
    assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
    assert!(is_protobuf(
        "application/vnd.kubernetes.protobuf; charset=x"
    ));
    assert!(!is_protobuf("application/json"));
}
