//! Small typed identifiers. Indices into dense vectors, never hashed.

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($int:ty)) => {
        $(#[$doc])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $int);

        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// A job: the simulator numbers jobs in arrival order from 0, the runtime
    /// by submission, never reused (so 64 bits: a daemon's ids outlive any run).
    JobId(u64)
);
id_type!(
    /// A node (a host with one NIC and `c` CPUs).
    NodeId(u32)
);
id_type!(
    /// A CPU, numbered node-major: CPU `k` of node `n` is `n * c + k`.
    CpuId(u32)
);
