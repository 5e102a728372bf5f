//! Dense group indexing for the fold, and the walk of a chunk task's cells as segments
//! that each fold into one group or one group per position.
//!
//! Every group key depends on one axis ([`GroupKey`]). The keys of one axis are evaluated
//! once over its selected positions; positions whose key tuples are equal share a dense
//! id. A group is the combination of one id per grouped axis (`Σ id_d · stride_d`), so
//! the group count is the product of the distinct tuples per axis, and no cell is hashed.

use super::expr::compile;
use super::kernel::Rows;
use crate::format::hyperslab::Runs;
use crate::plan::{Aggregation, AxisSelection, ChunkTask, TableModel};
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::datatypes::{DataType, Float64Type, Schema};
use arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, internal_datafusion_err};
use datafusion::logical_expr::Expr;
use std::collections::HashMap;
use std::sync::Arc;

/// Segments of equal ids at least this long fold as one run (vectorized).
const MIN_RUN: usize = 16;

/// Dense group indexing over the grouped axes.
#[derive(Debug)]
pub struct GroupIndex {
    /// Per axis: the tuple id of each position from the first selected one (u32::MAX
    /// where not selected); `None` when the axis is not grouped.
    ids: Vec<Option<Vec<u32>>>,
    /// Per axis: the first selected position (where `ids` starts).
    first: Vec<u64>,
    /// Per axis: stride of its id in the group index (0 when not grouped).
    stride: Vec<usize>,
    /// Per axis: number of distinct tuples (1 when not grouped).
    tuples: Vec<usize>,
    /// Per axis: its selected positions have consecutive ids (the axis is its own only
    /// key: a position's id is its rank among the selected ones), so a run of them folds
    /// into consecutive groups.
    consecutive: Vec<bool>,
    /// Per group key (output order): its value for each tuple id of its axis.
    keys: Vec<ArrayRef>,
    /// Per group key: its axis.
    key_axes: Vec<usize>,
    /// Number of groups.
    pub count: usize,
}

impl GroupIndex {
    /// Evaluate the keys of `aggregation` over the positions `selection` keeps. The
    /// positions from the first to the last selected one of a grouped axis count against
    /// `tet.max_axis_positions`.
    pub fn new(table: &TableModel, aggregation: &Aggregation, selection: &[AxisSelection]) -> Result<GroupIndex> {
        let n = selection.len();
        let mut ids = vec![None; n];
        let mut firsts = vec![0u64; n];
        let mut stride = vec![0usize; n];
        let mut tuples = vec![1usize; n];
        let mut consecutive = vec![false; n];
        let mut keys: Vec<Option<ArrayRef>> = vec![None; aggregation.groups.len()];
        let mut s = 1usize;
        for d in aggregation.grouped_axes().into_iter().rev() {
            let (lo, span) = span_of(table, d, &selection[d], "a group key")?;
            let pos: Vec<u64> = selection[d].positions().collect();
            let batch = axis_batch(table, d, &pos)?;
            let mine: Vec<usize> = (0..aggregation.groups.len())
                .filter(|&k| aggregation.groups[k].axis == d)
                .collect();
            let mut columns = Vec::with_capacity(mine.len());
            for &k in &mine {
                columns.push(match &aggregation.groups[k].expr {
                    None => batch.column(0).clone(),
                    Some(e) => evaluate_on(e, &batch)?,
                });
            }
            // One id per distinct key tuple, in order of first appearance; a lone key of an
            // axis of distinct values is one id per position.
            let lone = matches!(
                mine.iter()
                    .map(|&k| aggregation.groups[k].expr.as_ref())
                    .collect::<Vec<_>>()[..],
                [None]
            );
            let (rank, first): (Vec<u32>, Vec<u32>) = if lone && table.axes[d].distinct {
                let r: Vec<u32> = (0..pos.len() as u32).collect();
                consecutive[d] = true;
                (r.clone(), r)
            } else {
                let fields = columns.iter().map(|c| SortField::new(c.data_type().clone())).collect();
                let rows = RowConverter::new(fields)?.convert_columns(&columns)?;
                let mut seen: HashMap<&[u8], u32> = HashMap::new();
                let mut first = Vec::new();
                let rank = (0..rows.num_rows())
                    .map(|i| {
                        *seen.entry(rows.row(i).data()).or_insert_with(|| {
                            first.push(i as u32);
                            (first.len() - 1) as u32
                        })
                    })
                    .collect();
                (rank, first)
            };
            let take = UInt32Array::from(first.clone());
            for (c, &k) in columns.iter().zip(&mine) {
                keys[k] = Some(arrow::compute::take(c, &take, None)?);
            }
            let mut map = vec![u32::MAX; span];
            for (&p, &r) in pos.iter().zip(&rank) {
                map[(p - lo) as usize] = r;
            }
            ids[d] = Some(map);
            firsts[d] = lo;
            stride[d] = s;
            tuples[d] = first.len().max(1);
            s = s.saturating_mul(tuples[d]);
        }
        let count = aggregation
            .grouped_axes()
            .iter()
            .map(|&d| if selection[d].count() == 0 { 0 } else { tuples[d] })
            .product::<usize>();
        Ok(GroupIndex {
            ids,
            first: firsts,
            stride,
            tuples,
            consecutive,
            keys: keys
                .into_iter()
                .map(|k| k.expect("every key is on a grouped axis"))
                .collect(),
            key_axes: aggregation.groups.iter().map(|k| k.axis).collect(),
            count,
        })
    }

    /// Bytes held by the per-position ids.
    pub fn held_bytes(&self) -> usize {
        self.ids
            .iter()
            .flatten()
            .map(|m| std::mem::size_of_val(m.as_slice()))
            .sum()
    }

    /// The group offset of position `pos` of axis `d` (0 when `d` is not grouped).
    #[inline]
    fn offset(&self, d: usize, pos: u64) -> usize {
        match &self.ids[d] {
            Some(m) => m[(pos - self.first[d]) as usize] as usize * self.stride[d],
            None => 0,
        }
    }

    /// The key columns of `groups`, in output order.
    pub fn key_columns(&self, groups: &[usize]) -> Result<Vec<ArrayRef>> {
        self.keys
            .iter()
            .zip(&self.key_axes)
            .map(|(values, &d)| {
                let ids = UInt32Array::from_iter_values(
                    groups.iter().map(|&g| ((g / self.stride[d]) % self.tuples[d]) as u32),
                );
                Ok(arrow::compute::take(values, &ids, None)?)
            })
            .collect()
    }
}

/// The values of axis `d` at positions `pos`, as a batch of its column.
fn axis_batch(table: &TableModel, d: usize, pos: &[u64]) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![table.schema.field(d).clone()]));
    Ok(RecordBatch::try_new(schema, vec![table.axes[d].take(pos)?])?)
}

/// Expression `e` of one axis column over a batch of it.
fn evaluate_on(e: &Expr, batch: &RecordBatch) -> Result<ArrayRef> {
    compile(e, &batch.schema())?
        .evaluate(batch)?
        .into_array(batch.num_rows())
}

/// An expression of one axis (a weight) evaluated once per selected position.
#[derive(Debug)]
pub struct AxisValues {
    /// The first selected position: `values` and `valid` start there.
    pub first: u64,
    /// Per position of the axis from `first`: the value (0 where NULL or not selected).
    pub values: Vec<f64>,
    /// Whether the value at the position is not NULL (false where not selected).
    pub valid: Vec<bool>,
}

impl AxisValues {
    /// Expression `e` (Float64, of axis `d` alone) at the positions `selection` keeps.
    /// The positions from the first to the last selected one count against
    /// `tet.max_axis_positions`.
    pub fn new(table: &TableModel, d: usize, e: &Expr, selection: &AxisSelection) -> Result<Self> {
        let (first, span) = span_of(table, d, selection, "a weight")?;
        let pos: Vec<u64> = selection.positions().collect();
        let batch = axis_batch(table, d, &pos)?;
        let out = arrow::compute::cast(&evaluate_on(e, &batch)?, &DataType::Float64)?;
        let out = out.as_primitive::<Float64Type>();
        let (mut values, mut valid) = (vec![0.0; span], vec![false; span]);
        for (i, &p) in pos.iter().enumerate() {
            if out.is_valid(i) {
                values[(p - first) as usize] = out.value(i);
                valid[(p - first) as usize] = true;
            }
        }
        Ok(AxisValues { first, values, valid })
    }

    /// Bytes held per position.
    pub fn held_bytes(&self) -> usize {
        self.values.len() * 9
    }
}

/// The first selected position of axis `d` and the number of positions from it to the
/// last selected one, checked against the session's `tet.max_axis_positions` before
/// anything is evaluated or allocated per position (for `why`, e.g. "a group key").
fn span_of(table: &TableModel, d: usize, selection: &AxisSelection, why: &str) -> Result<(u64, usize)> {
    let Some((lo, hi)) = selection.bounds() else {
        return Ok((0, 0));
    };
    let span = hi - lo + 1;
    let name = &table.axes[d].name;
    table.limits.check_axis(&table.source.location, name, why, span)?;
    let span = usize::try_from(span).map_err(|_| internal_datafusion_err!("axis {name} is too long"))?;
    Ok((lo, span))
}

/// Where a segment's cells go.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// Every cell into group `g`.
    One(usize),
    /// Cell `i` into group `base + ids[i] · stride`; with `consecutive`, `ids[i]` is
    /// `ids[0] + i`.
    Each {
        base: usize,
        stride: usize,
        ids: &'a [u32],
        consecutive: bool,
    },
}

impl Target<'_> {
    /// The group of the segment's cell `i`.
    #[inline(always)]
    pub fn group(&self, i: usize) -> usize {
        match *self {
            Target::One(g) => g,
            Target::Each { base, stride, ids, .. } => base + ids[i] as usize * stride,
        }
    }
}

/// A stretch of selected cells: contiguous in the tile (from `tile_offset`) and in the
/// order the scan produces cells (from `cell_offset`).
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    pub tile_offset: usize,
    pub cell_offset: usize,
    pub len: usize,
    pub target: Target<'a>,
    /// With a split axis: the global position on it of the segment's first cell (the
    /// following cells are the next positions when it is the innermost axis, else the
    /// same one); 0 without.
    pub pos: u64,
}

/// What [`walk_rows`] visits: a segment, or a block of whole rows.
#[derive(Debug, Clone, Copy)]
pub enum Walked<'a> {
    Segment(Segment<'a>),
    Rows(Rows<'a>),
}

/// A tile extent and its selected ranges per axis.
type Folded = (Vec<u64>, Vec<Vec<(u64, u64)>>);

/// The tile extent and selected ranges of `task` with its innermost axes folded into one
/// from the outermost axis `c` such that every axis inside `c` is whole and no axis from
/// `c` on is grouped or the `split` axis: the same cells in the same order, as fewer,
/// longer runs. `None` when no axis folds.
fn folded_inner_axes(gi: &GroupIndex, task: &ChunkTask, split: Option<usize>) -> Option<Folded> {
    let (extent, local) = (&task.tile_extent, &task.local);
    let last = extent.len() - 1;
    let free = |d: usize| gi.ids[d].is_none() && split != Some(d);
    let whole = |d: usize| local[d].as_slice() == [(0, extent[d])];
    let mut c = last;
    while c > 0 && free(c) && whole(c) && free(c - 1) {
        c -= 1;
    }
    if c == last {
        return None;
    }
    // Cells of one position of axis `c`: the product of the whole axes inside it (at
    // most the tile's cell count, which the plan's limits bound).
    let inner: u64 = extent[c + 1..].iter().product();
    let mut folded_extent = extent[..c].to_vec();
    folded_extent.push(extent[c] * inner);
    let mut folded = local[..c].to_vec();
    folded.push(local[c].iter().map(|&(a, b)| (a * inner, b * inner)).collect());
    Some((folded_extent, folded))
}

/// [`walk_segments`] without a split axis, except where the innermost axis is whole in
/// the tile and not grouped while the axis outside it is grouped (`GROUP BY lat` over
/// `(time, lat, lon)`): there each stretch of selected positions of that axis comes as
/// one block of [`Rows`], one group per row, instead of a segment per row (a walk step
/// and a kernel call per 720 values cost `GROUP BY lat` 6% over the full mean).
pub fn walk_rows<'a>(gi: &'a GroupIndex, task: &ChunkTask, start: &[u64], mut f: impl FnMut(Walked<'a>)) {
    let (extent, local) = (&task.tile_extent, &task.local);
    let last = extent.len().saturating_sub(1);
    let rows_of = match (last, &gi.ids[..]) {
        (1.., ids) if ids[last].is_none() && extent[last] > 0 && local[last].as_slice() == [(0, extent[last])] => {
            ids[last - 1].as_ref()
        }
        _ => None,
    };
    let Some(ids) = rows_of else {
        return walk_segments(gi, task, start, None, |s| f(Walked::Segment(s)));
    };
    // Rows are the cells of the outer axes: walk those, a run of them is a block.
    let (row_len, d) = (extent[last] as usize, last - 1);
    let mut runs = Runs::new(&extent[..last], &local[..last]);
    while let Some(r) = runs.next() {
        let base: usize = (0..d).map(|e| gi.offset(e, start[e] + runs.outer()[e])).sum();
        let p0 = (start[d] + r.first - gi.first[d]) as usize;
        f(Walked::Rows(Rows {
            tile_offset: r.offset as usize * row_len,
            row_len,
            base,
            stride: gi.stride[d],
            ids: &ids[p0..p0 + r.len as usize],
        }));
    }
}

/// Walk the selected cells of `task` (tile starting at `start`) as segments: runs of one
/// group joined while contiguous; a grouped innermost axis split into stretches of equal
/// ids (long ones fold as runs) and element-wise stretches. With `split`, runs are joined
/// only at one position of that axis and segments carry it (weights per position).
pub fn walk_segments<'a>(
    gi: &'a GroupIndex,
    task: &ChunkTask,
    start: &[u64],
    split: Option<usize>,
    mut f: impl FnMut(Segment<'a>),
) {
    let last = task.tile_extent.len() - 1;
    let mut cell = 0usize;
    // The split axis's position of the run's element `i`.
    let position = |outer: &[u64], first: u64, i: usize| match split {
        Some(d) if d == last => start[d] + first + i as u64,
        Some(d) => start[d] + outer[d],
        None => 0,
    };
    if let Some(ids) = &gi.ids[last] {
        let mut runs = task.runs();
        let (stride, consecutive) = (gi.stride[last], gi.consecutive[last]);
        while let Some(r) = runs.next() {
            let base: usize = (0..last).map(|d| gi.offset(d, start[d] + runs.outer()[d])).sum();
            let at = |i: usize| position(runs.outer(), r.first, i);
            let p0 = (start[last] + r.first - gi.first[last]) as usize;
            let ids = &ids[p0..p0 + r.len as usize];
            let (off, len) = (r.offset as usize, r.len as usize);
            // Stretches of equal ids: long ones as runs, the rest element-wise (consecutive
            // ids have none: the whole run is one element-wise stretch).
            let mut i = if consecutive { len } else { 0 };
            let mut each_from = 0;
            while i < len {
                let mut j = i + 1;
                while j < len && ids[j] == ids[i] {
                    j += 1;
                }
                if j - i >= MIN_RUN {
                    if each_from < i {
                        f(Segment {
                            tile_offset: off + each_from,
                            cell_offset: cell + each_from,
                            len: i - each_from,
                            target: Target::Each {
                                base,
                                stride,
                                ids: &ids[each_from..i],
                                consecutive,
                            },
                            pos: at(each_from),
                        });
                    }
                    f(Segment {
                        tile_offset: off + i,
                        cell_offset: cell + i,
                        len: j - i,
                        target: Target::One(base + ids[i] as usize * stride),
                        pos: at(i),
                    });
                    each_from = j;
                }
                i = j;
            }
            if each_from < len {
                f(Segment {
                    tile_offset: off + each_from,
                    cell_offset: cell + each_from,
                    len: len - each_from,
                    target: Target::Each {
                        base,
                        stride,
                        ids: &ids[each_from..],
                        consecutive,
                    },
                    pos: at(each_from),
                });
            }
            cell += len;
        }
        return;
    }
    // The innermost axis is not grouped: where the axes inside one are whole and it is
    // neither grouped nor split, its runs lie end to end in one group, so the walk takes
    // them as one run of the axes folded together (one run per tile for a full
    // reduction, instead of one per row).
    let folded = folded_inner_axes(gi, task, split);
    let (mut runs, last) = match &folded {
        Some((extent, ranges)) => (Runs::new(extent, ranges), extent.len() - 1),
        None => (task.runs(), last),
    };
    let mut pending: Option<Segment> = None;
    while let Some(r) = runs.next() {
        let g: usize = (0..last).map(|d| gi.offset(d, start[d] + runs.outer()[d])).sum();
        let (off, len) = (r.offset as usize, r.len as usize);
        let pos = position(runs.outer(), r.first, 0);
        let joins = |p: &Segment| match split {
            None => true,
            Some(d) => d != last && p.pos == pos,
        };
        pending = match pending {
            Some(mut p)
                if matches!(p.target, Target::One(pg) if pg == g) && p.tile_offset + p.len == off && joins(&p) =>
            {
                p.len += len;
                Some(p)
            }
            other => {
                if let Some(p) = other {
                    f(p);
                }
                Some(Segment {
                    tile_offset: off,
                    cell_offset: cell,
                    len,
                    target: Target::One(g),
                    pos,
                })
            }
        };
        cell += len;
    }
    if let Some(p) = pending {
        f(p);
    }
}
