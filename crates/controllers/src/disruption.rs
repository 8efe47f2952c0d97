//! Voluntary disruption (spec §5): removing and replacing nodes within budgets.
//!
//! Responsibility, so far: [`budgets`], the pure evaluation of a NodePool's disruption budgets
//! (spec §1.7) and of the per-pool budget map one disruption method works with (spec §5.4).
//! The disruption loop, its methods and the orchestration are not built yet (issue 12).
//!
//! Inputs: NodePools, node counts, the time. Outputs: allowed disruptions per pool and reason.

pub mod budgets;
