//! DataFusion ExecutionPlans over `.tet` chunks and their kernels: turning an
//! [`AccessPlan`](crate::plan::AccessPlan) into Arrow batches ([`TetScanExec`]) or folded
//! aggregates ([`TetAggregateExec`]). May import `format`, `io` and `plan`; must not decide
//! which chunks to read (that is `plan`) nor know SQL.
//!
//! The rooms, each importing only those before it (`tests/it/layers.rs` checks):
//! 1. [`kernel`]: the fold's kernels over runs of elements (a leaf).
//! 2. [`metrics`]: the metrics each node reports.
//! 3. [`feed`]: the chunks of each partition, their payloads, the memory they hold.
//! 4. `tile`: a task's cells as Arrow arrays, and DataFusion expressions over them.
//! 5. `program`: arithmetic of value columns compiled to loops over blocks of cells.
//! 6. `walk`: the group index and the walk of a task's cells into groups.
//! 7. `scan` and `aggregate`: the two nodes.

mod aggregate;
pub mod feed;
pub mod kernel;
pub mod metrics;
mod program;
mod scan;
mod tile;
mod walk;

pub use aggregate::TetAggregateExec;
pub(crate) use aggregate::order_program;
pub use feed::ChunkFeed;
pub(crate) use program::weighted_program;
pub use scan::TetScanExec;
pub use tile::{axis_positions, value_array};
