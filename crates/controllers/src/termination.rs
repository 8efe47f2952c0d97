//! Node termination (spec §4.8 Node finalizer, drain, eviction queue).
