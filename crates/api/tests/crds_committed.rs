//! The CRDs committed in `charts/karpenter-capi/crds/` are exactly the ones we generate.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::path::PathBuf;

const REGENERATE: &str = "regenerate them with \
    `cargo run -p karpenter-capi -- crds --output-dir charts/karpenter-capi/crds`";

#[test]
fn committed_crds_equal_the_generated_ones() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/karpenter-capi/crds");
    let mut expected = BTreeSet::new();
    for crd in api::crd::all() {
        let name = api::crd::file_name(&crd);
        let path = dir.join(&name);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} is missing ({e}); {REGENERATE}", path.display()));
        let generated = api::crd::render(&crd).unwrap();
        assert!(
            committed == generated,
            "{} differs from the generated CRD; {REGENERATE}",
            path.display()
        );
        expected.insert(name);
    }
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(present, expected, "unexpected files in {}", dir.display());
}

#[test]
fn rendered_stream_is_the_five_documents_in_order() {
    let all = api::crd::render_all().unwrap();
    let names: Vec<&str> = all
        .lines()
        .filter_map(|l| l.strip_prefix("  name: "))
        .filter(|n| n.contains('.'))
        .collect();
    assert_eq!(
        names,
        [
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "clusterapinodeclasses.karpenter.cluster.x-k8s.io",
            "nodeoverlays.karpenter.sh",
            "capacitybuffers.autoscaling.x-k8s.io",
        ]
    );
}
