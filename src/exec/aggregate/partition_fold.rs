//! [`PartitionFold`]: the accumulators of one partition's fold, and the body that folds
//! each of its tasks into them: the inputs over stored values, compiled programs, weights
//! and pairs, slab by slab, then the evaluated ones; the values order statistics gather.

use super::cell_kernels::{PairKernel, ProgramKernel, RowKernel, WeightedProgramKernel};
use super::cell_walk::{CellWalk, TaskCells};
use super::evaluated;
use super::fold_plan::{FoldPlan, Input, InputKind, PairInput, SLAB_CELLS};
use super::order_values::{GatherKernel, GatheredValues};
use super::per_cell::PerCellFold;
use super::stored::{fold_stored, fold_sum_and_count};
use super::task_fold::TaskFold;
use super::value_keys::{KeyedFold, KeyedInput};
use super::weighted::{Weights, fold_weighted};
use crate::exec::feed::exhausted;
use crate::exec::kernel::{Accumulators, CoMoment};
use crate::exec::program::{AlignedCells, BLOCK};
use crate::exec::walk::{AxisValues, GroupIndex};
use crate::plan::{ChunkTask, TableModel, ValueRanges};
use arrow::buffer::Buffer;
use datafusion::common::{Result, internal_err};
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::MemoryReservation;
use std::sync::Arc;

/// One partition's fold: an accumulator per input and co-moments per pair, over the
/// groups of `gi`, folded task after task ([`PartitionFold::task`]).
pub(super) struct PartitionFold<'a> {
    pub(super) table: &'a TableModel,
    pub(super) fold: &'a FoldPlan,
    pub(super) gi: &'a GroupIndex,
    /// The values of each weight of the plan per position ([`FoldPlan::weights`]).
    pub(super) weights: &'a [AxisValues],
    pub(super) accs: Vec<Accumulators>,
    pub(super) pairs: Vec<Vec<CoMoment>>,
    /// The batch of a per-cell fold, when the fold is one ([`PerCellFold::of`]).
    per_cell: Option<PerCellFold>,
    /// The values each group gathers for each order statistic's input
    /// ([`FoldPlan::order_inputs`]).
    pub(super) order: Vec<GatheredValues>,
    /// Bytes of `order` reserved in the pool.
    order_reserved: usize,
    /// The keys of the value met, when the fold groups by one ([`FoldPlan::value_key`]).
    pub(super) keyed: Option<KeyedFold>,
}

impl<'a> PartitionFold<'a> {
    /// Bytes a fold of `fold` over `gi` holds: the accumulators and co-moments of every
    /// group, the group index and weights per position, and one slab's working set of the
    /// evaluated inputs (saturating). The caller reserves them before [`Self::new`].
    pub(super) fn bytes(fold: &FoldPlan, gi: &GroupIndex, weights: &[AxisValues]) -> usize {
        let dense = fold
            .inputs
            .iter()
            .map(|i| Accumulators::bytes(gi.count, i.needs, i.float))
            .chain(
                fold.pairs
                    .iter()
                    .map(|_| gi.count.saturating_mul(size_of::<CoMoment>())),
            )
            .fold(0, usize::saturating_add);
        let by_position = gi.held_bytes() + weights.iter().map(AxisValues::held_bytes).sum::<usize>();
        dense
            .saturating_add(by_position)
            .saturating_add(evaluated::slab_bytes(fold))
    }

    /// Empty accumulators for every input and pair of `fold` over the groups of `gi`.
    pub(super) fn new(
        table: &'a TableModel,
        fold: &'a FoldPlan,
        gi: &'a GroupIndex,
        weights: &'a [AxisValues],
    ) -> Self {
        // A key of the value adds its groups as the fold meets its keys.
        let keyed = fold
            .value_key
            .map(|(p, _)| KeyedFold::new(&fold.programs[p], gi.count, fold.inputs[0].float));
        let groups = if keyed.is_some() { 0 } else { gi.count };
        PartitionFold {
            table,
            fold,
            gi,
            weights,
            accs: fold
                .inputs
                .iter()
                .map(|i| Accumulators::new(groups, i.needs, i.float))
                .collect(),
            pairs: vec![vec![CoMoment::default(); gi.count]; fold.pairs.len()],
            per_cell: PerCellFold::of(table, fold, gi),
            order: fold
                .order_inputs
                .iter()
                .map(|o| GatheredValues::new(&fold.programs[o.program], gi.count, o.approximate))
                .collect(),
            order_reserved: 0,
            keyed,
        }
    }

    /// Keep the pool's reservation of the gathered values at what they hold plus `more`
    /// (what a task may add: its cells' values, reserved before they are gathered).
    fn reserve_order(&mut self, reservation: &MemoryReservation, more: usize) -> Result<()> {
        let want = self
            .order
            .iter()
            .map(GatheredValues::bytes)
            .fold(more, usize::saturating_add);
        if want > self.order_reserved {
            reservation.try_grow(want - self.order_reserved).map_err(|e| {
                exhausted(e, || {
                    format!(
                        "the values of {} groups gathered for a median or percentile",
                        self.gi.count
                    )
                })
            })?;
        } else {
            reservation.shrink(self.order_reserved - want);
        }
        self.order_reserved = want;
        Ok(())
    }

    /// Fold one task, whose value columns' tiles are `tiles` (in the table's order); a
    /// per-cell fold may hold it in its batch (with what it reserves in `reservation`)
    /// until [`Self::finish`].
    pub(super) fn task(
        &mut self,
        task: &Arc<ChunkTask>,
        tiles: &[Option<Buffer>],
        reservation: &MemoryReservation,
    ) -> Result<()> {
        let (table, fold) = (self.table, self.fold);
        if !self.order.is_empty() {
            let widths: usize = fold
                .order_inputs
                .iter()
                .map(|o| GatheredValues::width(&fold.programs[o.program], o.approximate))
                .sum();
            self.reserve_order(reservation, (task.cells as usize).saturating_mul(widths))?;
        }
        if let Some(per_cell) = &mut self.per_cell {
            let tile = tiles.first().cloned().flatten();
            return per_cell.task((table, fold, self.gi), &mut self.accs, task, tile, reservation);
        }
        if let (Some(keyed), Some((program, rounding))) = (&mut self.keyed, fold.value_key) {
            let Some(ranges) = fold.inputs[0].kind.ranges() else {
                return internal_err!("TetAggregateExec: a key of the value over evaluated rows");
            };
            let input = KeyedInput {
                program: &fold.programs[program],
                rounding,
                ranges,
            };
            let tile = tiles.first().and_then(Option::as_ref);
            return keyed.task((table, self.gi, task), input, &mut self.accs[0], tile, reservation);
        }
        let start = table.tile_start(task);
        // The kernels over stored values read the one value column of a table of one
        // dataset; compiled expressions over a table of several read the aligned cells of
        // the columns they name.
        let tile = tiles.first().cloned().flatten().filter(|_| !table.is_multi());
        let aligned = match fold.aligned_columns.is_empty() {
            true => None,
            false => Some(AlignedCells::new(
                table,
                task,
                tiles,
                &fold.aligned_columns,
                &fold.aligned_filters,
            )?),
        };
        let cells = match &aligned {
            Some(a) => TaskCells::Aligned(a),
            None => TaskCells::Tile(tile.as_ref()),
        };
        let mut cell_base = 0usize;
        for slab in task.slabs(self.slab_cells(tile.is_some(), aligned.is_some())) {
            let at = TaskFold {
                table,
                gi: self.gi,
                task: &slab,
                start: &start,
            };
            let walk = CellWalk { at, cells, cell_base };
            self.slab(walk, tile.as_ref(), aligned.is_some())?;
            cell_base += slab.cells as usize;
        }
        // Evaluated inputs and pairs: DataFusion's expressions, slab by slab.
        let at = TaskFold {
            table,
            gi: self.gi,
            task,
            start: &start,
        };
        evaluated::fold_task(fold, at, tiles, &mut self.accs, &mut self.pairs)?;
        if !self.order.is_empty() {
            self.reserve_order(reservation, 0)?;
        }
        Ok(())
    }

    /// Fold what a per-cell fold holds.
    pub(super) fn finish(&mut self, reservation: &MemoryReservation) {
        if let Some(per_cell) = &mut self.per_cell {
            per_cell.finish(self.table, self.fold, &mut self.accs, reservation);
        }
    }

    /// The cells of a slab of a task: inputs over stored values walk the tile slab by
    /// slab, all of them per slab, so that each slab is read from memory once and from
    /// cache by the others; one input alone walks the task whole. Only inputs that read
    /// values count: not a stored input without its tile or ranges, nor one counting every
    /// cell where nothing is missing, nor a weight alone (docs/performance.md: a weight
    /// alone walked in slabs beside a weighted sum cost much more than it saved). Over
    /// several datasets, a stored input with ranges counts the aligned cells that pass
    /// them.
    fn slab_cells(&self, tile: bool, aligned: bool) -> u64 {
        let fold = self.fold;
        let missing = !self.table.value().missing.is_empty();
        let direct = fold
            .inputs
            .iter()
            .filter(|i| match &i.kind {
                InputKind::Evaluated { .. } => false,
                InputKind::Stored { ranges } if !i.needs.reads_values(missing, !ranges.is_empty()) => false,
                InputKind::Weighted {
                    value: None, ranges, ..
                } if ranges.is_empty() => false,
                InputKind::Stored { ranges } => tile || aligned_rows(aligned, ranges),
                _ => true,
            })
            .count()
            + fold.compiled_pairs().count()
            + fold.order_inputs.len()
            - usize::from(fold.sum_and_count.is_some() && tile);
        if direct > 1 && (tile || aligned) {
            SLAB_CELLS
        } else {
            u64::MAX
        }
    }

    /// Fold one slab (`walk`) of a task into every input and pair it reads directly.
    fn slab(&mut self, walk: CellWalk, tile: Option<&Buffer>, aligned: bool) -> Result<()> {
        let fold = self.fold;
        let sum_and_count = fold.sum_and_count.zip(tile);
        if let Some(((a, b), tile)) = sum_and_count {
            let range = fold.inputs[b].kind.ranges().and_then(|r| r.of(0));
            let [sums, counts] = self
                .accs
                .get_disjoint_mut([a, b])
                .map_err(|e| DataFusionError::Internal(format!("sum and count ({a}, {b}): {e}")))?;
            fold_sum_and_count(walk.at, (sums, counts), tile, range);
        }
        for (i, (input, acc)) in fold.inputs.iter().zip(self.accs.iter_mut()).enumerate() {
            if sum_and_count.is_some_and(|((a, b), _)| i == a || i == b) {
                continue;
            }
            fold_input(fold, self.weights, input, acc, walk, tile, aligned)?;
        }
        for (p, acc) in fold.pairs.iter().zip(self.pairs.iter_mut()) {
            if let PairInput::Compiled { x, y, ranges } = p {
                let (x, y) = (&fold.programs[*x], &fold.programs[*y]);
                let columns: Vec<usize> = x.columns().iter().chain(y.columns()).copied().collect();
                let mut kernel = PairKernel {
                    acc,
                    x,
                    y,
                    sx: x.scratch(),
                    sy: y.scratch(),
                    at: vec![0; BLOCK],
                };
                walk.run(&columns, ranges, None, &mut kernel)?
            }
        }
        for (o, values) in fold.order_inputs.iter().zip(self.order.iter_mut()) {
            let program = &fold.programs[o.program];
            let mut kernel = GatherKernel {
                values,
                program,
                scratch: program.scratch(),
                at: vec![0; BLOCK],
            };
            walk.run(program.columns(), &o.ranges, None, &mut kernel)?
        }
        Ok(())
    }
}

/// Whether a stored input with `ranges` counts the aligned cells that pass them (a table
/// of several datasets, `aligned`): those cells hold values in the columns compared.
fn aligned_rows(aligned: bool, ranges: &ValueRanges) -> bool {
    aligned && !ranges.is_empty()
}

/// Fold one slab (`walk`) of a task into the accumulator of one input of `fold` read
/// directly (an evaluated input waits for [`evaluated::fold_task`]).
fn fold_input(
    fold: &FoldPlan,
    weights: &[AxisValues],
    input: &Input,
    acc: &mut Accumulators,
    walk: CellWalk,
    tile: Option<&Buffer>,
    aligned: bool,
) -> Result<()> {
    match &input.kind {
        InputKind::Stored { ranges } if aligned_rows(aligned, ranges) => {
            let mut kernel = RowKernel {
                acc,
                at: vec![0; BLOCK],
            };
            walk.run(&[], ranges, None, &mut kernel)?
        }
        InputKind::Stored { ranges } => fold_stored(walk.at, acc, tile, ranges.of(0)),
        InputKind::Program { program, ranges } => {
            let program = &fold.programs[*program];
            let mut kernel = ProgramKernel {
                acc,
                program,
                scratch: program.scratch(),
                at: vec![0; BLOCK],
            };
            walk.run(program.columns(), ranges, None, &mut kernel)?
        }
        InputKind::Weighted {
            weight,
            value,
            f32_product,
            ranges,
        } => {
            let w = Weights {
                axis: fold.weights[*weight].0,
                values: &weights[*weight],
                value: *value,
                f32_product: *f32_product,
            };
            fold_weighted(walk.at, acc, tile, w, ranges.of(0))?
        }
        InputKind::WeightedProgram {
            program,
            weight,
            f32_product,
            ranges,
        } => {
            let program = &fold.programs[*program];
            let axis = fold.weights[*weight].0;
            let mut kernel = WeightedProgramKernel {
                acc,
                program,
                weights: &weights[*weight],
                inner: axis == walk.at.task.tile_extent.len() - 1,
                f32_product: *f32_product,
                scratch: program.scratch(),
                at: vec![0; BLOCK],
                products: vec![0.0; BLOCK],
            };
            walk.run(program.columns(), ranges, Some(axis), &mut kernel)?
        }
        InputKind::Evaluated { .. } => {}
    }
    Ok(())
}
