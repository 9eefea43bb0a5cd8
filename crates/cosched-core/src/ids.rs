//! Small typed identifiers. Indices into dense vectors, never hashed.

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u32);

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
    /// A job, numbered in arrival order from 0.
    JobId
);
id_type!(
    /// A node (a host with one NIC and `c` CPUs).
    NodeId
);
id_type!(
    /// A CPU, numbered node-major: CPU `k` of node `n` is `n * c + k`.
    CpuId
);
