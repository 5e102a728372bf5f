//! The walk of a task's cells for the fold: the dense group index over the grouped axes
//! and the segments (or blocks of rows) of cells that each fold into its groups.

mod group_index;
mod segments;

pub use group_index::{AxisValues, GroupIndex};
pub use segments::{Segment, Target, Walked, walk_rows, walk_segments};
