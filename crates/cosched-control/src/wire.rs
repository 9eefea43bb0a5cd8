//! What crosses a link: requests and replies, the controller–agent messages, job records.

pub mod jobs;
pub mod output_files;
pub mod protocol;
