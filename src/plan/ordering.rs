//! Which axis columns come out of a scan in order, so that a node can declare it to
//! DataFusion: an `ORDER BY time` over a table stored as one chunk per time step, or over
//! an archive of files along time, then needs no sort (a merge of the partitions does).
//!
//! A partition emits its tasks one after the other, each task's cells in row-major order
//! of its box ([`ChunkTask::slabs`]). Positions on axis `d` then never go back when,
//! within every task, each axis before `d` holds one position, and each task starts on
//! `d` at or after where the one before it ended.

use crate::plan::{Axis, ChunkTask, TableModel};
use arrow::array::Array;
use arrow::compute::kernels::cmp::{gt_eq, lt_eq};
use std::sync::Arc;

/// How an axis's values run along its positions: `Some(false)` never decreasing,
/// `Some(true)` never increasing, `None` neither (or a value is null). Positions
/// (an axis without values) ascend. Values compare as DataFusion sorts them (floats by
/// their total order).
pub fn value_order(axis: &Axis) -> Option<bool> {
    let Some(values) = &axis.values else {
        return Some(false);
    };
    let n = values.len();
    if values.null_count() > 0 {
        return None;
    }
    if n < 2 {
        return Some(false);
    }
    let (before, after) = (values.slice(0, n - 1), values.slice(1, n - 1));
    let holds = |cmp: fn(&dyn arrow::array::Datum, &dyn arrow::array::Datum) -> _| -> bool {
        let r: Result<arrow::array::BooleanArray, _> = cmp(&before, &after);
        r.is_ok_and(|r| r.null_count() == 0 && r.true_count() == n - 1)
    };
    if holds(lt_eq) {
        Some(false)
    } else if holds(gt_eq) {
        Some(true)
    } else {
        None
    }
}

/// Those of `axes` whose values every partition emits in order, as (axis, descending),
/// when partition `i` reads `partitions[i]` in that order.
pub fn ordered_axes(table: &TableModel, axes: &[usize], partitions: &[Vec<Arc<ChunkTask>>]) -> Vec<(usize, bool)> {
    let starts: Vec<Vec<Vec<u64>>> = partitions
        .iter()
        .map(|p| p.iter().map(|t| table.tile_start(t)).collect())
        .collect();
    axes.iter()
        .copied()
        .filter(|&d| {
            partitions
                .iter()
                .zip(&starts)
                .all(|(tasks, starts)| positions_ascend(d, tasks, starts))
        })
        .filter_map(|d| Some((d, value_order(&table.axes[d])?)))
        .collect()
}

/// Whether positions on axis `d` never go back over `tasks` (with their tiles' global
/// starts), each task's cells in row-major order.
fn positions_ascend(d: usize, tasks: &[Arc<ChunkTask>], starts: &[Vec<u64>]) -> bool {
    let mut end = 0u64;
    for (t, start) in tasks.iter().zip(starts) {
        let count = |r: &[(u64, u64)]| r.iter().map(|(a, b)| b - a).sum::<u64>();
        if t.cells == 0 || t.local.iter().any(|r| count(r) == 0) {
            continue;
        }
        if t.local[..d].iter().any(|r| count(r) != 1) {
            return false;
        }
        let (Some(first), Some(last)) = (t.local[d].first(), t.local[d].last()) else {
            continue;
        };
        if start[d] + first.0 < end {
            return false;
        }
        end = start[d] + last.1 - 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::AxisSource;
    use arrow::array::{ArrayRef, Float64Array};
    use std::collections::BTreeMap;

    fn axis(values: Option<ArrayRef>) -> Axis {
        Axis {
            name: "a".into(),
            extent: values.as_ref().map_or(3, |v| v.len() as u64),
            source: AxisSource::Position,
            values,
            distinct: true,
            attrs: BTreeMap::new(),
            cf_time: None,
        }
    }

    fn floats(v: &[Option<f64>]) -> Option<ArrayRef> {
        Some(Arc::new(Float64Array::from(v.to_vec())))
    }

    #[test]
    fn value_order_follows_the_values() {
        assert_eq!(value_order(&axis(None)), Some(false));
        assert_eq!(
            value_order(&axis(floats(&[Some(1.0), Some(1.0), Some(2.0)]))),
            Some(false)
        );
        assert_eq!(
            value_order(&axis(floats(&[Some(90.0), Some(0.0), Some(-90.0)]))),
            Some(true)
        );
        assert_eq!(value_order(&axis(floats(&[Some(1.0), Some(3.0), Some(2.0)]))), None);
        assert_eq!(value_order(&axis(floats(&[Some(1.0), None, Some(2.0)]))), None);
        // NaN sorts last, as DataFusion sorts floats.
        assert_eq!(value_order(&axis(floats(&[Some(1.0), Some(f64::NAN)]))), Some(false));
    }
}
