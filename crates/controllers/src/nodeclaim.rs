//! The NodeClaim lifecycle controller (spec §4.1–4.5, §4.8 NodeClaim finalizer).
