//! The inputs the fold evaluates rather than compiles (`sum(CAST(v AS BIGINT) % 3)`,
//! `avg(floor(v))`, a row filter `WHERE v + 1 > 0.5`, a `FILTER` of an axis):
//! DataFusion's physical expressions ([`TileExprs`]) over a task's cells, slab by slab.
//!
//! Each slab of at most [`SLAB_CELLS`] cells becomes a batch (its value cells and axis
//! positions), is filtered by the row filter, evaluated and folded before the next is
//! made, so what is held is a few arrays of one slab whatever the tile's size (the arrays
//! of a whole task of a 1 GiB f32 tile are 2 GiB each, allocated infallibly). The fold
//! reserves that working set in the memory pool once ([`slab_bytes`]).

use super::fold_plan::{FoldPlan, Input, InputKind, PairInput, SLAB_CELLS};
use super::task_fold::TaskFold;
use crate::exec::kernel::{Accumulators, CoMoment, Keep, fold_run, fold_value};
use crate::exec::walk::{GroupIndex, Target, walk_segments};
use crate::plan::ChunkTask;
use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::buffer::Buffer;
use arrow::datatypes::{DataType, Float64Type, Int64Type, UInt64Type};
use datafusion::common::Result;
use datafusion::error::DataFusionError;

/// The most one slab's evaluation holds, for the memory pool: per cell, for each column
/// of the batch 8 bytes of positions or copied values, 8 of the column (wider for labels
/// of strings: an estimate) and as much again for the rows the row filter keeps, and for
/// each expression its result and the cast the fold reads, 8 bytes each; the masks' bits.
pub(super) fn slab_bytes(plan: &FoldPlan) -> usize {
    if plan.exprs.is_empty() {
        return 0;
    }
    let per_cell = 32 * plan.exprs.column_count() + 16 * plan.exprs.len() + 1;
    SLAB_CELLS as usize * per_cell
}

/// Fold the evaluated inputs and pairs of `plan` over `task` (tile starting at `start`;
/// `tiles`: the decoded tile of each value column read), slab by slab.
pub(super) fn fold_task(
    plan: &FoldPlan,
    at: TaskFold,
    tiles: &[Option<Buffer>],
    accs: &mut [Accumulators],
    pairs: &mut [Vec<CoMoment>],
) -> Result<()> {
    let TaskFold { table, gi, task, start } = at;
    let exprs = &plan.exprs;
    if exprs.is_empty() {
        return Ok(());
    }
    for slab in task.slabs(SLAB_CELLS) {
        // The row filter over every selected cell of the slab, the rest over the cells it
        // keeps (as DataFusion evaluates them above its filter).
        let batch = exprs.batch(table, &slab, start, tiles)?;
        let (rows, kept) = match plan.row_filter {
            Some(i) => {
                let mask = boolean(exprs.evaluate(i, &batch)?)?;
                let kept = arrow::compute::filter_record_batch(&batch, &mask)?;
                (Some(mask), kept)
            }
            None => (None, batch),
        };
        let mut evaluated: Vec<Option<ArrayRef>> = vec![None; exprs.len()];
        let mut eval = |i: usize| -> Result<ArrayRef> {
            if let Some(a) = &evaluated[i] {
                return Ok(a.clone());
            }
            let a = exprs.evaluate(i, &kept)?;
            evaluated[i] = Some(a.clone());
            Ok(a)
        };
        for (input, acc) in plan.inputs.iter().zip(accs.iter_mut()) {
            if let InputKind::Evaluated { value, filter } = &input.kind {
                let value = value.map(&mut eval).transpose()?;
                let filter = filter.map(|i| eval(i).and_then(boolean)).transpose()?;
                let masks = Masks {
                    rows: rows.as_ref(),
                    filter: filter.as_ref(),
                };
                fold_evaluated(input, acc, gi, &slab, start, value.as_ref(), masks)?
            }
        }
        for (p, acc) in plan.pairs.iter().zip(pairs.iter_mut()) {
            let PairInput::Evaluated { x, y, filter } = p else {
                continue;
            };
            let (x, y) = (eval(*x)?, eval(*y)?);
            let filter = filter.map(|i| eval(i).and_then(boolean)).transpose()?;
            let masks = Masks {
                rows: rows.as_ref(),
                filter: filter.as_ref(),
            };
            fold_pair(acc, gi, &slab, start, &x, &y, masks)?
        }
    }
    Ok(())
}

/// An evaluated input's values as one of the types the kernels fold.
enum Values<'a> {
    None,
    F64(&'a [f64]),
    I64(&'a [i64]),
    U64(&'a [u64]),
}

/// The type an evaluated input folds as.
fn folded_type(input: &Input) -> DataType {
    if input.float {
        DataType::Float64
    } else if input.unsigned {
        DataType::UInt64
    } else {
        DataType::Int64
    }
}

/// A filter's result as a boolean array.
fn boolean(a: ArrayRef) -> Result<BooleanArray> {
    a.as_boolean_opt()
        .cloned()
        .ok_or_else(|| DataFusionError::Internal(format!("TetAggregateExec: a filter of type {}", a.data_type())))
}

/// Which cells an evaluated input counts: those where `rows` (over every selected cell)
/// is true, and among them (numbered by the rows `rows` keeps) those where `filter` is.
#[derive(Clone, Copy)]
struct Masks<'a> {
    rows: Option<&'a BooleanArray>,
    filter: Option<&'a BooleanArray>,
}

fn is_true(m: &BooleanArray, i: usize) -> bool {
    m.is_valid(i) && m.value(i)
}

/// Fold an evaluated input of one slab: `value` (one element per row the row filter
/// keeps; `None`: cells only) over the cells `masks` keep.
fn fold_evaluated(
    input: &Input,
    acc: &mut Accumulators,
    gi: &GroupIndex,
    slab: &ChunkTask,
    start: &[u64],
    value: Option<&ArrayRef>,
    masks: Masks,
) -> Result<()> {
    let folded = match value {
        None => None,
        Some(v) => Some(arrow::compute::cast(v, &folded_type(input))?),
    };
    let vals = match &folded {
        None => Values::None,
        Some(a) if input.float => Values::F64(a.as_primitive::<Float64Type>().values()),
        Some(a) if input.unsigned => Values::U64(a.as_primitive::<UInt64Type>().values()),
        Some(a) => Values::I64(a.as_primitive::<Int64Type>().values()),
    };
    let nulls = folded.as_ref().and_then(|a| a.logical_nulls());
    let simple = masks.rows.is_none() && masks.filter.is_none() && nulls.is_none();
    // Row `j` of the kept rows.
    let mut j = 0usize;
    walk_segments(gi, slab, start, None, |s| {
        let (c, len) = (s.cell_offset, s.len);
        if simple && let Target::One(g) = s.target {
            match &vals {
                Values::F64(v) => fold_run(acc, g, &v[c..c + len], &Keep::default()),
                Values::I64(v) => fold_run(acc, g, &v[c..c + len], &Keep::default()),
                Values::U64(v) => fold_run(acc, g, &v[c..c + len], &Keep::default()),
                Values::None => {
                    acc.cells[g] += len as u64;
                    acc.n[g] += len as u64;
                }
            }
            j += len;
            return;
        }
        for i in 0..len {
            if masks.rows.is_some_and(|m| !is_true(m, c + i)) {
                continue;
            }
            let k = j;
            j += 1;
            if masks.filter.is_some_and(|m| !is_true(m, k)) {
                continue;
            }
            let g = s.target.group(i);
            acc.cells[g] += 1;
            if nulls.as_ref().is_some_and(|n| n.is_null(k)) {
                continue;
            }
            match &vals {
                Values::None => acc.n[g] += 1,
                Values::F64(v) => fold_value(acc, g, v[k]),
                Values::I64(v) => fold_value(acc, g, v[k]),
                Values::U64(v) => fold_value(acc, g, v[k]),
            }
        }
    });
    Ok(())
}

/// Fold the pairs of two evaluated inputs `x`, `y` of one slab into co-moments: the cells
/// the row filter and `FILTER` keep where neither is NULL.
fn fold_pair(
    acc: &mut [CoMoment],
    gi: &GroupIndex,
    slab: &ChunkTask,
    start: &[u64],
    x: &ArrayRef,
    y: &ArrayRef,
    masks: Masks,
) -> Result<()> {
    let x = arrow::compute::cast(x, &DataType::Float64)?;
    let y = arrow::compute::cast(y, &DataType::Float64)?;
    let (xs, ys) = (x.as_primitive::<Float64Type>(), y.as_primitive::<Float64Type>());
    let (xn, yn) = (xs.logical_nulls(), ys.logical_nulls());
    let (xv, yv) = (xs.values(), ys.values());
    let mut j = 0usize;
    walk_segments(gi, slab, start, None, |s| {
        let c = s.cell_offset;
        for i in 0..s.len {
            if masks.rows.is_some_and(|m| !is_true(m, c + i)) {
                continue;
            }
            let k = j;
            j += 1;
            if masks.filter.is_some_and(|m| !is_true(m, k))
                || xn.as_ref().is_some_and(|n| n.is_null(k))
                || yn.as_ref().is_some_and(|n| n.is_null(k))
            {
                continue;
            }
            let g = s.target.group(i);
            acc[g].add(xv[k], yv[k]);
        }
    });
    Ok(())
}
