//! Pipelines of stages over a fixed pool of recycled buffers, after FG
//! (Cormen and Davidson), with the per-thread priority controls that
//! Roysden's study of FG on Linux wished for.
//!
//! ```
//! use cosched_pipeline::Pipeline;
//! let mut total = 0u64;
//! let report = Pipeline::new(4, |_| 0u64)
//!     .rounds(10)
//!     .stage_fn("produce", |buf, _| { buf.data = buf.seq(); Ok(()) })
//!     .stage_fn("square", |buf, _| { buf.data *= buf.data; Ok(()) })
//!     .stage_fn("sum", |buf, _| { total += buf.data; Ok(()) })
//!     .run()
//!     .unwrap();
//! assert_eq!(report.rounds, 10);
//! assert_eq!(total, (0..10).map(|i| i * i).sum());
//! ```

pub mod columnsort;
pub mod overhead;
mod pipeline;
pub mod priority;
mod queue;
mod stage;
mod sys;

pub use pipeline::{Phase, Pipeline, PipelineError, Report, Thread, ThreadReport};
pub use priority::{Adjust, AdjustEvent, Control, ControlOutcome, Lever, Priority, SchedPolicy};
pub use queue::WaitPolicy;
pub use stage::{Buffer, Context, FnStage, Stage, StageError};
