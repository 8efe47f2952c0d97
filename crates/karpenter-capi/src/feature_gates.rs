//! `--feature-gates` / `FEATURE_GATES`: upstream Karpenter's gate list
//! (`StaticCapacity=true,NodeRepair=false`), read strictly.
//!
//! Responsibility: parse the list into [`FeatureGates`]. Upstream's names are known; a name
//! that is not one is an error (a typo must not silently leave a gate off). `StaticCapacity`
//! turns on static NodePools; `SpotToSpotConsolidation` lets consolidation replace spot nodes
//! (MachineDeployments labelled `karpenter.sh/capacity-type: spot`) by cheaper spot nodes, with
//! upstream's rules. `NodeOverlay` turns on NodeOverlays (`karpenter.sh/v1alpha1`): their
//! controller, and their prices and extended resources in every instance-type query and launch.
//! `NodeRepair` turns on node repair (`controllers::health`): nodes whose conditions match
//! the repair policies past their toleration are replaced, unless a MachineHealthCheck
//! remediates their Machine. `CapacityBuffer` turns on CapacityBuffers
//! (`autoscaling.x-k8s.io/v1beta1`, `controllers::capacitybuffer`): their virtual pods are
//! provisioned for like pending pods and keep warm nodes. `ReservedCapacity` is accepted either
//! way and changes nothing (Cluster API offerings have no reserved capacity).
//! Inputs: the flag's text. Outputs: [`FeatureGates`] or an error naming the entry.

/// The gates this binary acts on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// Static NodePools (`spec.replicas`) are kept at their replica count.
    pub static_capacity: bool,
    /// Consolidation may replace spot nodes by spot nodes.
    pub spot_to_spot_consolidation: bool,
    /// NodeOverlays are evaluated and applied.
    pub node_overlay: bool,
    /// Nodes that stay unhealthy are replaced.
    pub node_repair: bool,
    /// CapacityBuffers keep spare capacity.
    pub capacity_buffer: bool,
}

impl std::str::FromStr for FeatureGates {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut gates = Self::default();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) = entry
                .split_once('=')
                .ok_or_else(|| format!("feature gate {entry:?}: expected Name=true|false"))?;
            let (name, value) = (name.trim(), value.trim());
            let on = match value.to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(format!(
                        "feature gate {name}: {value:?} is not true or false"
                    ));
                }
            };
            match name {
                "StaticCapacity" => gates.static_capacity = on,
                "SpotToSpotConsolidation" => gates.spot_to_spot_consolidation = on,
                "NodeOverlay" => gates.node_overlay = on,
                "NodeRepair" => gates.node_repair = on,
                "CapacityBuffer" => gates.capacity_buffer = on,
                "ReservedCapacity" => {}
                other => {
                    return Err(format!(
                        "unknown feature gate {other:?} (known: StaticCapacity, SpotToSpotConsolidation, NodeOverlay, NodeRepair, CapacityBuffer, ReservedCapacity)"
                    ));
                }
            }
        }
        Ok(gates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_upstreams_list() {
        let g: FeatureGates = "StaticCapacity=true,NodeRepair=false, ReservedCapacity=true"
            .parse()
            .unwrap();
        assert!(g.static_capacity);
        assert!(!g.spot_to_spot_consolidation);
        let spot: FeatureGates = "SpotToSpotConsolidation=true".parse().unwrap();
        assert!(spot.spot_to_spot_consolidation && !spot.static_capacity);
        let overlay: FeatureGates = "NodeOverlay=true".parse().unwrap();
        assert!(overlay.node_overlay && !overlay.static_capacity);
        assert!(!g.node_overlay, "off unless named");
        let repair: FeatureGates = "NodeRepair=true".parse().unwrap();
        assert!(repair.node_repair && !repair.node_overlay);
        assert!(!g.node_repair);
        assert_eq!("".parse::<FeatureGates>().unwrap(), FeatureGates::default());
        assert!(
            !"StaticCapacity=false"
                .parse::<FeatureGates>()
                .unwrap()
                .static_capacity
        );
    }

    #[test]
    fn refuses_typos_and_reads_every_upstream_gate() {
        let typo = "StaticCapcity=true".parse::<FeatureGates>().unwrap_err();
        assert!(
            typo.contains("unknown feature gate \"StaticCapcity\""),
            "{typo}"
        );
        assert!(typo.contains("CapacityBuffer"), "{typo}");
        let buffer: FeatureGates = "CapacityBuffer=true".parse().unwrap();
        assert!(buffer.capacity_buffer && !buffer.node_repair);
        assert_eq!(
            "CapacityBuffer=false".parse::<FeatureGates>().unwrap(),
            FeatureGates::default()
        );
        let value = "StaticCapacity=yes".parse::<FeatureGates>().unwrap_err();
        assert!(value.contains("not true or false"), "{value}");
        let shape = "StaticCapacity".parse::<FeatureGates>().unwrap_err();
        assert!(shape.contains("Name=true|false"), "{shape}");
    }
}
