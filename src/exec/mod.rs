//! DataFusion ExecutionPlans over `.tet` chunks and their kernels.
//!
//! Owns: turning chunk tasks into Arrow batches ([`TetScanExec`]) and the metrics they
//! report. Must not decide which chunks to read (that is `plan` and `sql`).

mod aggregate;
mod cells;
pub mod fold;
mod scan;

pub use aggregate::{AggFunc, AggSpec, AggregatePlan, MAX_DENSE_GROUPS, TetAggregateExec, sum_type};
pub use cells::{axis_positions, for_each_selected_run, value_array};
pub use scan::{ScanSummary, TetScanExec};
