//! [`PerCellFold`]: the fold of a map of many cells over an outer axis (`GROUP BY lat, lon`
//! over time: a mean, spread or extreme per grid cell). The tasks whose slices share their
//! cells ([`CellSlices`]) are held in a stack, then folded cell block by cell block,
//! each cell block over every slice of the stack, into slots of its own that merge into the
//! groups once ([`fold_cell_block`]).

use super::fold_plan::{FoldPlan, InputKind};
use crate::exec::feed::exhausted;
use crate::exec::kernel::{Accumulators, Keep, Missing, cell_block_needs, fold_cell_block};
use crate::exec::walk::{CellSlices, GroupIndex, per_cell_axis};
use crate::format::{elements, with_dtype};
use crate::plan::{ChunkTask, TableModel};
use arrow::buffer::Buffer;
use datafusion::common::Result;
use datafusion::execution::memory_pool::MemoryReservation;
use std::borrow::Cow;
use std::sync::Arc;

/// Slices folded into a cell block's slots before they merge into the groups: a stack
/// holds tasks until it has this many (a tile of many time steps may bring more at once)
/// or [`STACK_BYTES`] of tiles. Each merge of a slot costs about as much as folding tens of
/// elements into it, so fewer, larger stacks (benches/RESULTS.md, maps per grid cell).
const STACK_SLICES: usize = 128;

/// Bytes of tiles a stack holds at most: decoded and fetched tiles stay reserved in the
/// session's pool while held (mapped ones are page cache).
const STACK_BYTES: usize = 128 << 20;

/// A per-cell fold in progress: the cells its tasks' slices share (kept while the tasks
/// keep sharing them), and the stack of tasks not yet folded.
#[derive(Debug)]
pub(super) struct PerCellFold {
    axis: usize,
    cells: Option<Cells>,
    stack: Vec<(Arc<ChunkTask>, Option<Buffer>)>,
    /// Slices and tile bytes in the stack.
    slices: usize,
    bytes: usize,
}

/// The cells of the stacked tasks' slices, and the bytes reserved for them.
#[derive(Debug)]
struct Cells {
    slices: CellSlices,
    reserved: usize,
}

impl PerCellFold {
    /// A per-cell fold of `fold` over `gi`, when it applies: the outer axes are not grouped
    /// and the innermost is ([`per_cell_axis`]), the table is one dataset and every input
    /// folds its stored values (kept by ranges of them). Weighted, compiled and evaluated
    /// inputs and pairs take the walk of segments.
    pub(super) fn of(table: &TableModel, fold: &FoldPlan, gi: &GroupIndex) -> Option<Self> {
        let stored = fold.inputs.iter().all(|i| matches!(i.kind, InputKind::Stored { .. }));
        let plain = !table.is_multi()
            && fold.pairs.is_empty()
            && fold.aligned_columns.is_empty()
            && fold.order_inputs.is_empty()
            && fold.value_key.is_none();
        match (stored && plain, per_cell_axis(gi)) {
            (true, Some(axis)) => Some(PerCellFold {
                axis,
                cells: None,
                stack: Vec::new(),
                slices: 0,
                bytes: 0,
            }),
            _ => None,
        }
    }

    /// Add `task` (its tile `tile`; `None` when no value is read) to the stack, folding the
    /// stack first when the task's slices hold other cells, and after when it is full.
    pub(super) fn task(
        &mut self,
        (table, fold, gi): (&TableModel, &FoldPlan, &GroupIndex),
        accs: &mut [Accumulators],
        task: &Arc<ChunkTask>,
        tile: Option<Buffer>,
        reservation: &MemoryReservation,
    ) -> Result<()> {
        let start = table.tile_start(task);
        if !self.cells.as_ref().is_some_and(|c| c.slices.fits(task, &start)) {
            self.fold_stack(table, fold, accs);
            if let Some(old) = self.cells.take() {
                reservation.shrink(old.reserved);
            }
            let reserved = CellSlices::bytes(task, self.axis);
            reservation
                .try_grow(reserved)
                .map_err(|e| exhausted(e, || format!("the cells of a map over {}", table.value().describe())))?;
            self.cells = Some(Cells {
                slices: CellSlices::new(gi, task, &start, self.axis),
                reserved,
            });
        }
        if let Some(cells) = &self.cells {
            self.slices += cells.slices.slice_count(task);
        }
        self.bytes += tile.as_ref().map_or(0, Buffer::len);
        self.stack.push((task.clone(), tile));
        if self.slices >= STACK_SLICES || self.bytes >= STACK_BYTES {
            self.fold_stack(table, fold, accs);
        }
        Ok(())
    }

    /// Fold the stack into `accs`, and return what the cells hold to `reservation`.
    pub(super) fn finish(
        &mut self,
        table: &TableModel,
        fold: &FoldPlan,
        accs: &mut [Accumulators],
        reservation: &MemoryReservation,
    ) {
        self.fold_stack(table, fold, accs);
        if let Some(old) = self.cells.take() {
            reservation.shrink(old.reserved);
        }
    }

    /// Fold the stack, if any, into `accs` (one per input of `fold`).
    fn fold_stack(&mut self, table: &TableModel, fold: &FoldPlan, accs: &mut [Accumulators]) {
        let stack = std::mem::take(&mut self.stack);
        let slices = std::mem::take(&mut self.slices);
        self.bytes = 0;
        if let (Some(cells), false) = (&self.cells, stack.is_empty()) {
            fold_stack(table, fold, accs, &cells.slices, &stack, slices);
        }
    }
}

/// Fold every slice of the tasks of `stack` (`count` slices holding `cells`) into `accs`
/// (one per input of `fold`).
fn fold_stack(
    table: &TableModel,
    fold: &FoldPlan,
    accs: &mut [Accumulators],
    cells: &CellSlices,
    stack: &[(Arc<ChunkTask>, Option<Buffer>)],
    count: usize,
) {
    let Some(tiles) = stack.iter().map(|(_, t)| t.as_ref()).collect::<Option<Vec<_>>>() else {
        // Nothing read: every selected cell of every slice is a row of its group.
        let n = count as u64;
        for acc in accs.iter_mut() {
            for &g in cells.groups() {
                acc.cells[g] += n;
                acc.n[g] += n;
            }
        }
        return;
    };
    let len = cells.slice_len();
    with_dtype!(table.dataset().dtype(), T => {
        let values: Vec<Cow<[T]>> = tiles.iter().map(|t| elements::<T>(t)).collect();
        let slices: Vec<&[T]> = stack
            .iter()
            .zip(&values)
            .flat_map(|((task, _), t)| cells.slices(task).map(move |o| &t[o..o + len]))
            .collect();
        let missing = Missing::<T>::of(&table.value().missing);
        let keeps: Vec<Keep<T>> = fold
            .inputs
            .iter()
            .map(|i| Keep {
                missing: missing.clone(),
                range: i.kind.ranges().and_then(|r| r.of(0)),
            })
            .collect();
        let mut slots: Vec<Accumulators> = fold
            .inputs
            .iter()
            .map(|i| Accumulators::new(0, cell_block_needs(i.needs), i.float))
            .collect();
        for (pieces, groups) in cells.cell_blocks() {
            // A map's cells are usually groups in a row (`GROUP BY lat, lon` of a grid).
            let consecutive = groups.windows(2).all(|w| w[1] == w[0] + 1);
            for some in slices.chunks(STACK_SLICES) {
                for (((input, acc), keep), slots) in fold.inputs.iter().zip(accs.iter_mut()).zip(&keeps).zip(&mut slots) {
                    fold_cell_block(slots, (input.needs, input.float, groups.len()), some, pieces, keep);
                    match groups.first() {
                        Some(&g) if consecutive => acc.merge_consecutive(slots, g),
                        _ => acc.merge_mapped(slots, |i| groups[i]),
                    }
                }
            }
        }
    })
}
