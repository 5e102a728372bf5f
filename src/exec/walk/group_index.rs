//! Dense group indexing for the fold ([`GroupIndex`]) and values of axis expressions per
//! position ([`AxisValues`], e.g. weights).
//!
//! Every group key depends on one axis ([`GroupKey`](crate::plan::GroupKey)). The keys of
//! one axis are evaluated once over its selected positions; positions whose key tuples are
//! equal share a dense id. A group is the combination of one id per grouped axis
//! (`Σ id_d · stride_d`), so the group count is the product of the distinct tuples per
//! axis, and no cell is hashed.

use crate::exec::tile::compile;
use crate::plan::{Aggregation, AxisSelection, TableModel};
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::datatypes::{DataType, Float64Type, Schema};
use arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, internal_datafusion_err};
use datafusion::logical_expr::Expr;
use std::collections::HashMap;
use std::sync::Arc;

/// Dense group indexing over the grouped axes.
#[derive(Debug)]
pub struct GroupIndex {
    /// Per axis: the tuple id of each position from the first selected one (u32::MAX
    /// where not selected); `None` when the axis is not grouped.
    pub(super) ids: Vec<Option<Vec<u32>>>,
    /// Per axis: the first selected position (where `ids` starts).
    pub(super) first: Vec<u64>,
    /// Per axis: stride of its id in the group index (0 when not grouped).
    pub(super) stride: Vec<usize>,
    /// Per axis: number of distinct tuples (1 when not grouped).
    pub(super) tuples: Vec<usize>,
    /// Per axis: its selected positions have consecutive ids (the axis is its own only
    /// key: a position's id is its rank among the selected ones), so a run of them folds
    /// into consecutive groups.
    pub(super) consecutive: Vec<bool>,
    /// Per group key (output order): its value for each tuple id of its axis.
    pub(super) keys: Vec<ArrayRef>,
    /// Per group key: its axis.
    pub(super) key_axes: Vec<usize>,
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
    pub(super) fn offset(&self, d: usize, pos: u64) -> usize {
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
    table.limits.check_axis(table.location(), name, why, span)?;
    let span = usize::try_from(span).map_err(|_| internal_datafusion_err!("axis {name} is too long"))?;
    Ok((lo, span))
}
