//! The walk of a task's cells for the fold: the dense group index over the grouped axes
//! and the segments (or blocks of rows) of cells that each fold into its groups, or the
//! cells that the slices of a per-cell fold share.

mod cell_slices;
mod group_index;
mod segments;

pub use cell_slices::{CellSlices, per_cell_axis};
pub use group_index::{AxisValues, GroupIndex};
pub use segments::{Segment, Target, Walked, walk_rows, walk_segments};
