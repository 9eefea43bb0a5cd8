//! The wire: what crosses a connection. The requests, replies and agent messages (`protocol`), their framing and
//! bounds (`conn`), who sent them (`auth`, `seal`), the client every command uses (`client`), the monitor's HTTP
//! parsing (`http`), and the job records and file name patterns the messages carry (`jobs`, `output_files`).

pub mod auth;
pub mod client;
pub mod conn;
pub mod http;
pub mod jobs;
pub use cosched_control::wire::output_files;
pub mod protocol;
pub mod seal;
