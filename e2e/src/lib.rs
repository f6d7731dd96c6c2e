//! Test harness: a real control plane on loopback (see issue 3).
