//! [`TaskFold`]: one task (or one slab of a task) being folded, as every kernel family of
//! the node reads it.

use crate::exec::walk::GroupIndex;
use crate::plan::{ChunkTask, TableModel};
use std::sync::Arc;

/// One task, or one slab of a task, being folded: the table, the group index its cells
/// fold into, the task, and the position of its tile's first cell
/// ([`ChunkTask::tile_start`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct TaskFold<'a> {
    pub(super) table: &'a TableModel,
    pub(super) gi: &'a GroupIndex,
    pub(super) task: &'a Arc<ChunkTask>,
    pub(super) start: &'a [u64],
}
