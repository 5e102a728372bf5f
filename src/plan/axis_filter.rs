//! Axis filters: which pushed filters depend on one column, and the positions of an axis
//! where a filter over that axis column alone is true.

use super::selection::AxisSelection;
use super::table::TableModel;
use super::value_range::Number;
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;
use arrow::datatypes::Schema;
use datafusion::catalog::Session;
use datafusion::common::ScalarValue;
use datafusion::common::{DFSchema, Result};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::expr::{Between, BinaryExpr, Cast, InList, TryCast};
use datafusion::logical_expr::{Expr, Operator};
use std::sync::Arc;

/// Axis predicates are evaluated over the axis values in blocks of this many positions.
const EVAL_BLOCK: u64 = 1 << 16;

/// How a pushed filter is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKind {
    /// Depends on axis column `d` alone: resolved exactly to positions.
    Axis(usize),
    /// Depends on value columns alone: prunes chunks by zone maps; DataFusion still
    /// filters rows.
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
    if !cols.is_empty() && cols.iter().all(|c| table.value_named(&c.name).is_some()) {
        return FilterKind::Value;
    }
    let [col] = cols.into_iter().collect::<Vec<_>>()[..] else {
        return FilterKind::Other;
    };
    match table.axis_index(&col.name) {
        Some(d) => FilterKind::Axis(d),
        None => FilterKind::Other,
    }
}

/// Positions of axis `d` of `table` where `expr` (over that axis column alone) is true.
///
/// On an axis of positions, comparisons with constants under AND, OR and NOT are resolved
/// on intervals ([`intervals`]), whatever the axis' length. Any other filter is evaluated
/// over the axis' values in blocks; on an axis of positions, whose length only the file
/// claims, that is refused above `tet.max_axis_positions`.
pub fn resolve(table: &TableModel, session: &dyn Session, d: usize, expr: &Expr) -> Result<AxisSelection> {
    let axis = &table.axes[d];
    if axis.values.is_none() {
        if let Some(sel) = intervals(expr, axis.extent) {
            return Ok(sel);
        }
        let why = format!("the filter {expr}");
        table
            .limits
            .check_axis(table.location(), &axis.name, &why, axis.extent)?;
    }
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

/// The smallest integer ≥ and the largest integer ≤ `c` (saturating); `None` for NaN.
fn ceil_floor(c: Number) -> Option<(i128, i128)> {
    match c {
        Number::Int(k) => Some((k, k)),
        Number::Float(f) if f.is_nan() => None,
        Number::Float(f) => Some((f.ceil() as i128, f.floor() as i128)),
    }
}

/// Whether `e` is the position column itself, or its exact cast to Float64 (positions
/// below 2^53 are exact as f64, so comparing them as floats is comparing them as integers).
fn is_position(e: &Expr, extent: u64) -> bool {
    match e {
        Expr::Column(_) => true,
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => {
            matches!(**expr, Expr::Column(_)) && *field.data_type() == DataType::Float64 && extent <= 1 << 53
        }
        _ => false,
    }
}

/// Positions `p` of `0..extent` with `p op c`.
fn compare(op: Operator, c: Number, extent: u64) -> Option<AxisSelection> {
    let (ceil, floor) = ceil_floor(c)?;
    let at = |x: i128| x.clamp(0, extent as i128) as u64;
    let range = |lo: i128, hi: i128| AxisSelection::from_sorted_ranges(extent, [(at(lo), at(hi))]);
    Some(match op {
        Operator::Lt => range(0, ceil),
        Operator::LtEq => range(0, floor.saturating_add(1)),
        Operator::Gt => range(floor.saturating_add(1), i128::MAX),
        Operator::GtEq => range(ceil, i128::MAX),
        Operator::Eq if ceil == floor => range(ceil, ceil.saturating_add(1)),
        Operator::Eq => AxisSelection::none(extent),
        Operator::NotEq => compare(Operator::Eq, c, extent)?.complement(),
        _ => return None,
    })
}

/// The positions of an axis of positions `0..extent` where `e` is true, when `e` is built
/// from comparisons of the column with constants (`<`, `<=`, `>`, `>=`, `=`, `<>`,
/// `BETWEEN`, `IN`), `IS [NOT] NULL` of the column and boolean constants, under AND, OR
/// and NOT: resolved on intervals, never visiting positions. `None` for anything else,
/// including NULL constants (where NOT would not be the complement).
pub fn intervals(e: &Expr, extent: u64) -> Option<AxisSelection> {
    let all = || AxisSelection::all(extent);
    match e {
        Expr::Literal(ScalarValue::Boolean(Some(b)), _) => Some(if *b { all() } else { AxisSelection::none(extent) }),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => Some(intervals(left, extent)?.intersect(&intervals(right, extent)?)),
            Operator::Or => Some(intervals(left, extent)?.union(&intervals(right, extent)?)),
            _ if is_position(left, extent) => compare(*op, Number::of(right)?, extent),
            _ if is_position(right, extent) => compare(op.swap()?, Number::of(left)?, extent),
            _ => None,
        },
        Expr::Not(x) => Some(intervals(x, extent)?.complement()),
        Expr::Between(Between {
            expr,
            negated,
            low,
            high,
        }) if is_position(expr, extent) => {
            let inside = compare(Operator::GtEq, Number::of(low)?, extent)?.intersect(&compare(
                Operator::LtEq,
                Number::of(high)?,
                extent,
            )?);
            Some(if *negated { inside.complement() } else { inside })
        }
        Expr::InList(InList { expr, list, negated }) if is_position(expr, extent) => {
            let mut any = AxisSelection::none(extent);
            for c in list {
                any = any.union(&compare(Operator::Eq, Number::of(c)?, extent)?);
            }
            Some(if *negated { any.complement() } else { any })
        }
        Expr::IsNull(x) if is_position(x, extent) => Some(AxisSelection::none(extent)),
        Expr::IsNotNull(x) if is_position(x, extent) => Some(all()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use datafusion::logical_expr::{cast, col, lit};
    use datafusion::prelude::SessionContext;

    /// The positions where `e` holds, by DataFusion evaluating it at every position.
    fn brute_force(e: &Expr, extent: u64) -> Vec<u64> {
        let schema = Arc::new(Schema::new(vec![arrow::datatypes::Field::new(
            "p",
            DataType::Int64,
            false,
        )]));
        let df_schema = DFSchema::try_from(schema.clone()).unwrap();
        let state = SessionContext::new().state();
        let phys = state.create_physical_expr(e.clone(), &df_schema).unwrap();
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(0..extent as i64))]).unwrap();
        let mask = phys.evaluate(&batch).unwrap().into_array(extent as usize).unwrap();
        let mask = mask.as_boolean();
        (0..extent)
            .filter(|&i| mask.is_valid(i as usize) && mask.value(i as usize))
            .collect()
    }

    #[test]
    fn intervals_equal_evaluation_at_every_position() {
        let p = || col("p");
        let f = || cast(col("p"), DataType::Float64);
        let cases: Vec<Expr> = vec![
            p().lt(lit(5i64)),
            p().lt_eq(lit(5i64)),
            p().gt(lit(5i64)),
            p().gt_eq(lit(-3i64)),
            p().eq(lit(7i64)),
            p().not_eq(lit(7i64)),
            lit(4i64).lt(p()),
            lit(4i64).gt_eq(p()),
            p().lt(lit(100i64)),
            p().gt(lit(i64::MAX)),
            f().lt(lit(5.5)),
            f().lt_eq(lit(5.5)),
            f().gt(lit(-0.5)),
            f().gt_eq(lit(2.0)),
            f().eq(lit(3.0)),
            f().eq(lit(3.5)),
            f().not_eq(lit(3.5)),
            f().lt(lit(f64::INFINITY)),
            f().gt(lit(f64::NEG_INFINITY)),
            lit(2.5).lt(f()),
            p().between(lit(3i64), lit(9i64)),
            p().not_between(lit(3i64), lit(9i64)),
            p().in_list(vec![lit(1i64), lit(4i64), lit(5i64), lit(40i64)], false),
            p().in_list(vec![lit(1i64), lit(4i64)], true),
            p().gt(lit(2i64)).and(p().lt(lit(9i64))).or(p().eq(lit(15i64))),
            !(p().gt(lit(2i64)).and(p().lt(lit(9i64)))),
            !(p().lt(lit(3i64))).and(p().not_eq(lit(10i64))),
            p().is_not_null().and(p().lt(lit(4i64))),
            p().is_null().or(p().eq(lit(2i64))),
            lit(true).and(p().gt_eq(lit(17i64))),
        ];
        for extent in [0u64, 1, 5, 20] {
            for e in &cases {
                let got: Vec<u64> = intervals(e, extent)
                    .unwrap_or_else(|| panic!("{e}"))
                    .positions()
                    .collect();
                assert_eq!(got, brute_force(e, extent), "{e} over {extent} positions");
            }
        }
        // Not comparisons with constants: left to evaluation.
        for e in [
            (p() % lit(2i64)).eq(lit(0i64)),
            p().lt(lit(ScalarValue::Int64(None))),
            p().eq(p()),
        ] {
            assert!(intervals(&e, 10).is_none(), "{e}");
        }
        // A float cast is exact only below 2^53.
        assert!(intervals(&f().lt(lit(5.5)), (1 << 53) + 1).is_none());
        // Any length, no work per position.
        let long = intervals(&p().lt(lit(5i64)).or(p().gt(lit((1i64 << 62) - 2))), 1 << 62).unwrap();
        assert_eq!(long.ranges(), &[(0, 5), ((1 << 62) - 1, 1 << 62)]);
    }
}
