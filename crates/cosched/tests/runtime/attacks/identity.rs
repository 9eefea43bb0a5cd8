//! See `mod.rs` for the list of attacks.

#[allow(unused_imports)]
use crate::harness::*;
