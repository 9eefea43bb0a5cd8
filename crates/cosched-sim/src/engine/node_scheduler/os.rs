//! The OS schedulers a run may name (`--node-scheduler`): plain data, which
//! the configuration holds; this file imports nothing of the crate. Each
//! line of `os_schedulers!` registers the scheduler of the file of that
//! name in this folder, its type and its name; the first is the default.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Calls `$then!` with the list of OS schedulers: this file makes the names
/// of it, `mod.rs` the modules and the engine of each.
macro_rules! os_schedulers {
    ($then:ident) => {
        $then! {
            mlfq::Mlfq = "mlfq",
            eevdf::Eevdf = "eevdf",
        }
    };
}
pub(crate) use os_schedulers;

macro_rules! os_scheduler_names {
    ($($file:ident :: $ty:ident = $name:literal,)*) => {
        /// The OS scheduler of every node of a scheme that has one.
        #[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
        pub enum OsScheduler {
            #[default]
            $($ty,)*
        }

        impl OsScheduler {
            pub const NAMES: &[&str] = &[$($name,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $(OsScheduler::$ty => $name,)*
                }
            }
        }

        impl FromStr for OsScheduler {
            type Err = String;
            fn from_str(text: &str) -> Result<OsScheduler, String> {
                match text.trim().to_ascii_lowercase().as_str() {
                    $($name => Ok(OsScheduler::$ty),)*
                    _ => Err(format!("unknown node scheduler '{text}'; known: {}", OsScheduler::NAMES.join(", "))),
                }
            }
        }
    };
}

os_schedulers!(os_scheduler_names);

impl OsScheduler {
    /// The study's scheduler, the default (a run's record names another only).
    pub fn is_default(&self) -> bool {
        *self == OsScheduler::default()
    }
}

impl fmt::Display for OsScheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for OsScheduler {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// Read back by name, as the command line reads it.
impl<'de> Deserialize<'de> for OsScheduler {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<OsScheduler, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_schedulers_are_read_by_their_names() {
        for &name in OsScheduler::NAMES {
            let scheduler: OsScheduler = name.to_uppercase().parse().unwrap();
            assert_eq!(scheduler.name(), name);
        }
        assert_eq!(OsScheduler::default().name(), "mlfq");
        let unknown = "cfs".parse::<OsScheduler>().unwrap_err();
        assert!(unknown.contains("unknown node scheduler 'cfs'") && unknown.contains("mlfq"), "{unknown}");
    }
}
