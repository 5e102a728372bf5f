//! The statistics a table reports to DataFusion for a selection: exact row counts and each
//! axis column's bounds (so `count(*)` and `min(time)` need no scan).

use super::selection::AxisSelection;
use super::table::TableModel;
use arrow::array::Array;
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, Result, ScalarValue, Statistics};
use datafusion::error::DataFusionError;
use std::sync::Arc;

impl TableModel {
    /// Statistics of the cells `sel` selects: the row count (exact unless `exact` is false,
    /// e.g. when value predicates may drop rows) and each axis column's bounds.
    pub fn statistics(&self, sel: &[AxisSelection], exact: bool) -> Result<Statistics> {
        let rows = sel.iter().try_fold(1u64, |n, s| n.checked_mul(s.count()));
        let p = |v| {
            if exact {
                Precision::Exact(v)
            } else {
                Precision::Inexact(v)
            }
        };
        let mut cols = Vec::with_capacity(self.schema.fields().len());
        for (d, axis) in self.axes.iter().enumerate() {
            let mut c = ColumnStatistics::new_unknown();
            c.null_count = Precision::Exact(0);
            if rows != Some(0)
                && let Some((lo, hi)) = sel[d].bounds()
            {
                match &axis.values {
                    None => {
                        c.min_value = Precision::Exact(ScalarValue::Int64(Some(lo as i64)));
                        c.max_value = Precision::Exact(ScalarValue::Int64(Some(hi as i64)));
                    }
                    Some(_) if sel[d].count() <= 1 << 20 => {
                        let positions: Vec<u64> = sel[d].positions().collect();
                        let vals = axis.take(&positions)?;
                        if let (Ok(mn), Ok(mx)) = (extreme(&vals, true), extreme(&vals, false)) {
                            c.min_value = Precision::Exact(mn);
                            c.max_value = Precision::Exact(mx);
                        }
                    }
                    Some(_) => {}
                }
            }
            cols.push(c);
        }
        cols.extend(self.values.iter().map(|_| ColumnStatistics::new_unknown()));
        Ok(Statistics {
            num_rows: match rows.and_then(|r| usize::try_from(r).ok()) {
                Some(r) => p(r),
                None => Precision::Absent,
            },
            total_byte_size: Precision::Absent,
            column_statistics: cols,
        })
    }
}

/// The smallest (`min`) or largest value of `a`.
fn extreme(a: &Arc<dyn Array>, min: bool) -> Result<ScalarValue> {
    let mut best: Option<ScalarValue> = None;
    for i in 0..a.len() {
        let v = ScalarValue::try_from_array(a, i)?;
        best = match best {
            None => Some(v),
            Some(b) => {
                let keep_new = match v.partial_cmp(&b) {
                    Some(std::cmp::Ordering::Less) => min,
                    Some(std::cmp::Ordering::Greater) => !min,
                    _ => false,
                };
                Some(if keep_new { v } else { b })
            }
        };
    }
    best.ok_or_else(|| DataFusionError::Internal("empty axis".into()))
}
