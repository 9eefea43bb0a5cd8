//! The schemes are named once, in `cosched_policy::scheme`, for the simulator
//! and the runtime alike.

pub use cosched_policy::scheme::*;
