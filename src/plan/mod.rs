//! The table model and access planning: what a dataset looks like as a table, what an
//! aggregation over it is, and which cells and chunks a query reads.
//!
//! Owns: the axis and value columns ([`TableModel`], [`Axis`], [`VALUE_COLUMN`],
//! [`arrow_type`]), the aggregate model ([`Aggregation`], [`AggSpec`], [`GroupKey`], typed
//! [`StateColumn`]s, [`MAX_DENSE_GROUPS`]) and the [`AccessPlan`] (per-axis selections,
//! chunk tasks, pruning counts) with its one partitioner, and the [`Limits`] on what a query may
//! make of a file's claims. May import `format` and `io`;
//! must not read payload bytes (that is `exec`).

mod access_plan;
mod agg_func;
mod aggregate;
mod archive;
mod attrs;
mod axes;
mod axis_filter;
pub mod cf_time;
mod common_grid;
mod input_forms;
mod limits;
mod ordering;
mod selection;
mod statistics;
mod storage_class;
mod table;
mod tasks;
mod value_column;
mod value_key;
mod value_range;
mod values;
mod zone_filter;

pub use access_plan::{AccessPlan, PruningCounts, split_balanced};
pub use agg_func::AggFunc;
pub use aggregate::{
    AggInput, AggSpec, AggregateOutput, Aggregation, GroupKey, MAX_DENSE_GROUPS, SPLIT_GROUPS_ABOVE, State,
    StateColumn, sum_type,
};
pub use archive::combine;
pub use attrs::AXIS_KEY;
pub use axes::{Axis, AxisSource, axes_of, timestamp_type, typed_labels};
pub use axis_filter::{FilterKind, classify};
pub use common_grid::{aligned_tasks, chunk_tasks, grid_count, id_space, tasks_by_id};
pub use input_forms::{
    Affine, Weighted, WeightedExpr, affine_of, expr_columns, is_numeric, value_input, weighted_expr, weighted_input,
    widens,
};
pub use limits::{
    DEFAULT_MAX_AXIS_POSITIONS, DEFAULT_MAX_DATASET_CELLS, DEFAULT_MAX_TILE_BYTES, Limits, MAX_TABLE_CELLS,
};
pub use ordering::{ordered_axes, value_order};
pub use selection::AxisSelection;
pub use table::{FileSet, Member, TableModel};
pub use tasks::{ChunkTask, SharedTasks, Slabs, Spread, TaskCache, TilePart};
pub use value_column::ValueColumn;
pub use value_key::{KeyRounding, ValueKey};
#[cfg(test)]
pub(crate) use value_range::ORDER_EDGES;
pub use value_range::{
    ColumnComparison, FloatBounds, KeyRange, NanRule, ValueRanges, order_key, order_key32, value_ranges,
};
pub use values::{ArrowElement, VALUE_COLUMN, array_from_le, arrow_type, common_type};
