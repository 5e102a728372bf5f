//! What of an aggregate query over a `.tet` table the fold takes: each SQL aggregate as an
//! [`AggSpec`] (its function, input form and `FILTER`), and the query as an
//! [`Aggregation`] (group keys of one axis each, aggregates, a row filter) when the fold
//! holds its groups.

use crate::exec::{order_program, weighted_program};
use crate::plan::{
    AggFunc, AggInput, AggSpec, Aggregation, GroupKey, KeyRounding, MAX_DENSE_GROUPS, TableModel, ValueKey, affine_of,
    expr_columns, is_numeric, value_input, value_ranges, weighted_input,
};
use arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::expr::{AggregateFunction, AggregateFunctionParams};
use datafusion::logical_expr::{Expr, ExprSchemable};

/// Strip column qualifiers: the pushdown's expressions are over the table's own columns.
fn unqualified(e: &Expr) -> Expr {
    datafusion::logical_expr::expr_rewriter::unnormalize_col(e.clone())
}

fn agg_spec(e: &Expr, table: &TableModel, schema: &DFSchema) -> Option<AggSpec> {
    let Expr::AggregateFunction(AggregateFunction { func, params }) = e.clone().unalias_nested().data else {
        return None;
    };
    if let Some(spec) = order_statistic(func.name(), &params, table, schema) {
        return spec;
    }
    if params.distinct || !params.order_by.is_empty() || params.null_treatment.is_some() {
        return None;
    }
    let filter = match &params.filter {
        Some(f) => {
            let f = unqualified(f);
            expr_columns(table, &f)?;
            Some(f)
        }
        None => None,
    };
    let v_type = table.value_type();
    if let [x, y] = params.args.as_slice() {
        let func = match func.name() {
            "covar" => AggFunc::CovarSamp,
            name => AggFunc::from_name(name).filter(|f| f.is_comoment())?,
        };
        // Two deterministic numeric expressions of value and axis columns, evaluated
        // over each tile and folded as co-moments.
        for e in [x, y] {
            expr_columns(table, &unqualified(e))?;
            if !is_numeric(&e.get_type(schema).ok()?) {
                return None;
            }
        }
        let (x, y) = (unqualified(x), unqualified(y));
        return Some(AggSpec {
            func,
            input_type: DataType::Float64,
            input: AggInput::Pair(x, y),
            filter,
            percentile: None,
        });
    }
    let [arg] = params.args.as_slice() else { return None };
    let func = match func.name() {
        "count" => {
            if let Expr::Literal(v, _) = arg
                && !v.is_null()
            {
                return Some(AggSpec {
                    filter,
                    ..AggSpec::of_value(AggFunc::CountStar, v_type)
                });
            }
            AggFunc::Count
        }
        "sum" => AggFunc::Sum,
        "avg" => AggFunc::Avg,
        "min" => AggFunc::Min,
        "max" => AggFunc::Max,
        "var_pop" => AggFunc::VarPop,
        "var" | "var_samp" => AggFunc::VarSamp,
        "stddev_pop" => AggFunc::StddevPop,
        "stddev" | "stddev_samp" => AggFunc::StddevSamp,
        _ => return None,
    };
    let (input_type, input) = if table.is_multi() {
        // Several value columns: any deterministic numeric expression of them and the
        // axes, evaluated over each step's aligned tiles.
        let t = arg.get_type(schema).ok()?;
        let e = unqualified(arg);
        expr_columns(table, &e)?;
        if !is_numeric(&t) {
            return None;
        }
        (t, AggInput::Expr(e))
    } else if let Some(t) = value_input(arg, &v_type) {
        (t, AggInput::Value { affine: None })
    } else {
        let t = arg.get_type(schema).ok()?;
        if let Some(m) = affine_of(arg, &v_type).filter(|_| t == DataType::Float64) {
            (t, AggInput::Value { affine: Some(m) })
        } else {
            let e = unqualified(arg);
            // Expressions of `v` alone fold from each tile's values; of an axis only as a
            // weight of sums, means and counts (evaluated per position) of `v` or of a
            // compiled expression of it. Any other expression reading an axis would be
            // gathered cell by cell, slower than DataFusion's own plan: left to it.
            let of_value = expr_columns(table, &e)? == [table.value_index()];
            let weight = || {
                t == DataType::Float64
                    && matches!(func, AggFunc::Sum | AggFunc::Avg | AggFunc::Count)
                    && (weighted_input(table, &e).is_some() || weighted_program(table, &e).is_some())
            };
            if !is_numeric(&t) || !(of_value || weight()) {
                return None;
            }
            (t, AggInput::Expr(e))
        }
    };
    Some(AggSpec {
        func,
        input_type,
        input,
        filter,
        percentile: None,
    })
}

/// `median(x)`, or `percentile_cont(x, p)` (`percentile_cont(p) WITHIN GROUP (ORDER BY x
/// [DESC])`) of a constant `p` in `[0, 1]`, or their approximations `approx_median(x)` and
/// `approx_percentile_cont(x, p [, centroids])` (the sketch has its own accuracy: a valid
/// count of centroids is taken and not used): `None` when `name` is none of them;
/// `Some(None)` when the fold does not gather `x` (it does when `x` compiles to a float of
/// its type, `FILTER` is ranges of stored values, and under one `x` cannot fail).
fn order_statistic(
    name: &str,
    params: &AggregateFunctionParams,
    table: &TableModel,
    schema: &DFSchema,
) -> Option<Option<AggSpec>> {
    let (func, arg, percentile, centroids) = match (name, params.args.as_slice()) {
        ("median", [x]) => (AggFunc::Median, x, None, None),
        ("percentile_cont", [x, p]) => (AggFunc::PercentileCont, x, Some(p), None),
        ("approx_median", [x]) => (AggFunc::ApproxMedian, x, None, None),
        ("approx_percentile_cont", [x, p]) => (AggFunc::ApproxPercentileCont, x, Some(p), None),
        ("approx_percentile_cont", [x, p, c]) => (AggFunc::ApproxPercentileCont, x, Some(p), Some(c)),
        _ => return None,
    };
    let spec = || {
        // WITHIN GROUP's one ordering gives a percentile its direction.
        let orderings = usize::from(func.has_percentile());
        if params.distinct || params.null_treatment.is_some() || params.order_by.len() > orderings {
            return None;
        }
        // DataFusion refuses any other count of centroids: leave that error to it.
        if let Some(c) = centroids
            && !matches!(c, Expr::Literal(ScalarValue::Int64(Some(c)), _) if *c > 0)
        {
            return None;
        }
        let percentile = match percentile {
            None => None,
            Some(Expr::Literal(ScalarValue::Float64(Some(p)), _)) if (0.0..=1.0).contains(p) => {
                let descending = params.order_by.first().is_some_and(|s| !s.asc);
                Some(if descending { 1.0 - p } else { *p })
            }
            Some(_) => return None,
        };
        let input_type = arg.get_type(schema).ok()?;
        let e = unqualified(arg);
        let filter = match &params.filter {
            Some(f) => {
                let f = unqualified(f);
                value_ranges(table, &f)?;
                Some(f)
            }
            None => None,
        };
        order_program(table, &e, &input_type, filter.is_some())?;
        Some(AggSpec {
            func,
            input_type,
            input: AggInput::Expr(e),
            filter,
            percentile,
        })
    };
    Some(spec())
}

/// The key of the value that group expression `e` (the query's `position`th) is, when
/// the fold groups by it: `floor`, `ceil` or `trunc` of an expression of one dataset's
/// value, or the expression itself, that compiles to a float of the key's type and
/// cannot fail.
fn value_key_of(table: &TableModel, schema: &DFSchema, position: usize, e: &Expr) -> Option<ValueKey> {
    let data_type = e.get_type(schema).ok()?;
    // The simplifier names a key it rewrote by its former text (an alias).
    let e = e.clone().unalias_nested().data;
    let (rounding, inner) = match &e {
        Expr::ScalarFunction(f) if f.args.len() == 1 => (KeyRounding::of_function(f.name())?, f.args[0].clone()),
        _ => (KeyRounding::None, e),
    };
    if table.is_multi() || inner.get_type(schema).ok()? != data_type {
        return None;
    }
    order_program(table, &inner, &data_type, true)?;
    Some(ValueKey {
        position,
        rounding,
        expr: inner,
        name: format!("__tet_k{position}"),
        data_type,
    })
}

/// The aggregation of `aggr_expr` grouped by `group_expr` over the rows of `table` where
/// `predicate` holds (expressions over `schema`, the scan's), when the fold takes it: keys
/// of one axis each, aggregates it folds, a filter of value and axis columns, a number of
/// dense groups it holds.
pub(super) fn aggregation_of(
    table: &TableModel,
    schema: &DFSchema,
    group_expr: &[Expr],
    aggr_expr: &[Expr],
    predicate: Option<Expr>,
) -> Result<Option<Aggregation>> {
    let mut groups: Vec<GroupKey> = Vec::new();
    let mut value_key: Option<ValueKey> = None;
    for (i, g) in group_expr.iter().enumerate() {
        if let Expr::Column(c) = g
            && let Some(d) = table.axis_index(&c.name)
        {
            groups.push(GroupKey::axis(table, d));
            continue;
        }
        let e = unqualified(g);
        let Some(&[d]) = expr_columns(table, &e).as_deref() else {
            return Ok(None);
        };
        if table.value_at(d).is_some() {
            match value_key_of(table, schema, i, &e) {
                Some(k) if value_key.is_none() => value_key = Some(k),
                _ => return Ok(None),
            }
            continue;
        }
        let Ok(data_type) = g.get_type(schema) else {
            return Ok(None);
        };
        groups.push(GroupKey {
            axis: d,
            expr: Some(e),
            name: format!("__tet_k{i}"),
            data_type,
        });
    }
    let Some(aggs) = aggr_expr
        .iter()
        .map(|e| agg_spec(e, table, schema))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let filter = match predicate {
        Some(p) => {
            let p = unqualified(&p);
            if expr_columns(table, &p).is_none() {
                return Ok(None);
            }
            Some(p)
        }
        None => None,
    };
    // A bare count(*) is answered by DataFusion from the scan's exact statistics.
    if groups.is_empty()
        && value_key.is_none()
        && filter.is_none()
        && aggs.iter().all(|a| a.func == AggFunc::CountStar && a.filter.is_none())
    {
        return Ok(None);
    }
    // The values an order statistic gathers, and the rows a key of the value groups,
    // are kept by ranges of stored values.
    if (value_key.is_some() || aggs.iter().any(|a| a.func.is_order_statistic()))
        && filter.as_ref().is_some_and(|f| value_ranges(table, f).is_none())
    {
        return Ok(None);
    }
    let aggregation = Aggregation {
        groups,
        value_key,
        aggs,
        filter,
    };
    if aggregation.dense_groups(table) > MAX_DENSE_GROUPS || aggregation.check(table).is_err() {
        return Ok(None);
    }
    Ok(Some(aggregation))
}
