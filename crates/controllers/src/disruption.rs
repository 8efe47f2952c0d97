//! Voluntary disruption (spec §5): removing and replacing nodes within budgets.
//!
//! Responsibility, by module:
//! - [`budgets`]: a NodePool's disruption budgets (spec §1.7); [`budget_map`]: the per-pool
//!   budget one method works with (spec §5.4);
//! - [`consolidatable`]: the `Consolidatable` condition (spec §5.1); [`drift`]: static and
//!   requirements drift and expiry;
//! - [`pdb`]: PodDisruptionBudgets as disruption reads them; [`floors`]: the minimum sizes of
//!   the scaling groups behind the nodes;
//! - [`candidates`]: which nodes may be disrupted, and why the others may not (spec §5.3);
//! - [`simulation`]: "what if these nodes were gone" through the scheduling engine (spec §5.8);
//! - [`methods`]: emptiness, multi- and single-node consolidation, deciding [`methods::Command`]s;
//!   [`static_drift`]: the one-for-one replacement of a static NodePool's drifted nodes;
//!   [`balanced`]: the score a move needs under `consolidationPolicy: Balanced` (spec §5.12);
//! - [`validation`]: a command checked again after the validation delay (spec §5.13);
//! - [`writes`]: the taint and status patches; [`orchestration`]: carrying a command out;
//! - [`explain`]: what the next pass would do and a verdict per node (for `plan`);
//! - [`controller`]: the loop on the leader ([`Disruption`]).
//!
//! Inputs: the cluster state, the cloud provider, the time. Outputs: commands carried out,
//! conditions, Events, metrics.

pub mod balanced;
pub mod budget_map;
pub mod budgets;
pub mod candidates;
pub mod consolidatable;
pub mod controller;
pub mod drift;
pub mod explain;
pub mod floors;
pub mod methods;
pub mod orchestration;
pub mod pdb;
pub mod simulation;
pub mod static_drift;
pub mod validation;
pub mod writes;

pub use controller::{Disruption, DisruptionConfig, Record};

#[cfg(test)]
mod testing;
