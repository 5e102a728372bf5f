//! Axis filters: which pushed filters depend on one column, and the positions of an axis
//! where a filter over that axis column alone is true.

use super::selection::AxisSelection;
use super::table::TableModel;
use super::values::VALUE_COLUMN;
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Schema;
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, Result};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::Expr;
use std::sync::Arc;

/// Axis predicates are evaluated over the axis values in blocks of this many positions.
const EVAL_BLOCK: u64 = 1 << 16;

/// How a pushed filter is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKind {
    /// Depends on axis column `d` alone: resolved exactly to positions.
    Axis(usize),
    /// Depends on `v` alone: prunes chunks by zone maps; DataFusion still filters rows.
    Value,
    /// Anything else (several columns, volatile): left to DataFusion.
    Other,
}

/// How `table` can use the filter `e`.
pub fn classify(table: &TableModel, e: &Expr) -> FilterKind {
    if e.is_volatile() {
        return FilterKind::Other;
    }
    let cols = e.column_refs();
    let [col] = cols.into_iter().collect::<Vec<_>>()[..] else {
        return FilterKind::Other;
    };
    if col.name == VALUE_COLUMN {
        return FilterKind::Value;
    }
    match table.axis_index(&col.name) {
        Some(d) => FilterKind::Axis(d),
        None => FilterKind::Other,
    }
}

/// Positions of axis `d` of `table` where `expr` (over that axis column alone) is true.
pub fn resolve(table: &TableModel, session: &dyn Session, d: usize, expr: &Expr) -> Result<AxisSelection> {
    let axis = &table.axes[d];
    let schema = Arc::new(Schema::new(vec![table.schema.field(d).clone()]));
    let df_schema = DFSchema::try_from(schema.clone())?;
    let phys = session.create_physical_expr(expr.clone(), &df_schema)?;
    let mut ranges = Vec::new();
    let mut lo = 0;
    while lo < axis.extent {
        let hi = (lo + EVAL_BLOCK).min(axis.extent);
        let batch = RecordBatch::try_new(schema.clone(), vec![axis.values_range(lo, hi)])?;
        let mask = phys.evaluate(&batch)?.into_array(batch.num_rows())?;
        let mask = mask
            .as_boolean_opt()
            .ok_or_else(|| DataFusionError::Plan(format!("filter {expr} on axis {} is not boolean", axis.name)))?;
        let mut run: Option<u64> = None;
        for i in 0..mask.len() {
            let on = mask.is_valid(i) && mask.value(i);
            match (on, run) {
                (true, None) => run = Some(lo + i as u64),
                (false, Some(s)) => {
                    ranges.push((s, lo + i as u64));
                    run = None;
                }
                _ => {}
            }
        }
        if let Some(s) = run {
            ranges.push((s, hi));
        }
        lo = hi;
    }
    Ok(AxisSelection::from_sorted_ranges(axis.extent, ranges))
}
