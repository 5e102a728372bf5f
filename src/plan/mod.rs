//! Query planning over the chunk grid: per-axis selections (from pushed axis predicates),
//! the chunk tasks they touch, zone-map pruning, and the split into balanced partitions.
//!
//! Owns: index arithmetic on selections and chunks. Must not read payload bytes.

mod selection;
mod tasks;

pub use selection::AxisSelection;
pub use tasks::{ChunkTask, chunk_tasks, split_balanced, tasks_by_id};
