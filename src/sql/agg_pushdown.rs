//! Aggregate pushdown as a logical rewrite, so it fires in a local `SessionContext` and
//! survives Ballista (whose adaptive planner drops custom physical rules).
//!
//! ```text
//! Aggregate(group: keys, aggr: count/sum/avg/min/max/var*/stddev*(input), corr/covar*(x, y) [FILTER (WHERE p)])
//!   [Projection(expressions of the columns) | SubqueryAlias | Filter(conditions involving v)]*
//!     TableScan(TetTableProvider, exact axis filters)
//! ```
//! becomes, when the groups fit one output ([`Aggregation::fits_one_output`]) and
//! `tet.merge_in_scan` is on (the default),
//! ```text
//! Projection(original names and types)
//!   TableScan(TetAggregateTable: values)   -- scans as TetAggregateExec, one partition
//! ```
//! and otherwise
//! ```text
//! Projection(final values, original names and types)
//!   Aggregate(group: keys, aggr: merges of partial states)
//!     TableScan(TetAggregateTable: states)   -- scans as TetAggregateExec
//! ```
//! A key is an axis column or a deterministic expression of one axis column
//! ([`GroupKey`](crate::plan::GroupKey)); an input is `v`, a widening cast of it, an affine Float64 expression of
//! it, or any deterministic numeric expression of `v` and the axes
//! ([`AggInput`](crate::plan::AggInput), recognised by `foldable`); filters
//! are expressions of `v` and the axes. Emitting states, `TetAggregateExec` emits, per
//! partition, one row of partial states per group it touched; the merge aggregate combines
//! partitions. Partial variance states are (count, mean, M2), merged by
//! the `tet_*` UDAFs; `corr`/`covar_*` states are co-moments, merged by `tet_corr` and
//! `tet_covar_*`. Over a table of several datasets, every input is an expression of its
//! value columns and axes, evaluated over the aligned tiles. Over an archive whose files
//! store a value column differently, the states come from one fold per storage class,
//! unioned ([`fold_by_storage_class`]).

use super::aggregate_table::TetAggregateTable;
use super::foldable::aggregation_of;
use super::merge::{FloatExtreme, MergeCoMoments, MergeMoments, MomentKind};
use super::session_options::TetConfig;
use super::table::TetTableProvider;
use crate::plan::{AggFunc, AggregateOutput, Aggregation, State, TableModel};
use arrow::datatypes::DataType;
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, Result, TableReference, internal_err};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{
    AggregateUDF, Expr, LogicalPlan, LogicalPlanBuilder, Projection, SubqueryAlias, Union, cast, lit, when,
};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use std::sync::Arc;

/// The logical rule (registered by [`crate::register`]).
#[derive(Debug, Default)]
pub struct TetAggregatePushdown;

impl OptimizerRule for TetAggregatePushdown {
    fn name(&self) -> &str {
        "tet_aggregate_pushdown"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(&self, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let all = config.options();
        let options = all.extensions.get::<TetConfig>();
        if !options.is_none_or(|c| c.aggregate_pushdown) {
            return Ok(Transformed::no(plan));
        }
        let merge_in_scan = options.is_none_or(|c| c.merge_in_scan);
        // Bottom-up, a projection above the aggregate is visited right after the aggregate
        // was rewritten: merging the two then spares the optimizer the pass that would.
        match try_rewrite(&plan, merge_in_scan)? {
            Some(p) => Ok(Transformed::yes(p)),
            None => match merge_projections(&plan)? {
                Some(p) => Ok(Transformed::yes(p)),
                None => Ok(Transformed::no(plan)),
            },
        }
    }
}

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64)
}

/// A plan between an aggregate and its scan that the rewrite looks through.
enum Layer<'a> {
    Projection(&'a Projection),
    Alias(&'a SubqueryAlias),
    Filter(&'a Expr),
}

impl Layer<'_> {
    /// `e`, an expression over this layer's output, over the layer's input: a projection's
    /// columns become its expressions, an alias's columns its input's (qualifiers change,
    /// positions do not).
    fn resolve(&self, e: Expr) -> Result<Expr> {
        let (schema, input): (&DFSchema, &dyn Fn(usize) -> Expr) = match self {
            Layer::Filter(_) => return Ok(e),
            Layer::Projection(p) => (&p.schema, &|i| p.expr[i].clone().unalias_nested().data),
            Layer::Alias(a) => (&a.schema, &|i| {
                Expr::Column(Column::from(a.input.schema().qualified_field(i)))
            }),
        };
        Ok(e.transform(|x| {
            if let Expr::Column(c) = &x
                && let Some(i) = schema.maybe_index_of_column(c)
            {
                return Ok(Transformed::yes(input(i)));
            }
            Ok(Transformed::no(x))
        })?
        .data)
    }
}

/// The scan of `folded` under `qualifier`. It projects every column, as DataFusion's
/// `optimize_projections` would, so the rewritten plan needs no further optimizer pass (a
/// third pass over it cost a third of the logical optimizer's time).
fn fold_scan(qualifier: &TableReference, folded: TetAggregateTable) -> Result<LogicalPlan> {
    let every_column = Some((0..folded.schema().fields().len()).collect());
    LogicalPlanBuilder::scan(qualifier.clone(), provider_as_source(Arc::new(folded)), every_column)?.build()
}

/// An aggregate query over a scan, its expressions over the scan's columns.
#[derive(Clone, Copy)]
struct Query<'a> {
    group_expr: &'a [Expr],
    aggr_expr: &'a [Expr],
    predicate: Option<&'a Expr>,
    /// The filters pushed into the scan (unqualified).
    filters: &'a [Expr],
}

/// The fold of an archive whose files store a value column differently (their own
/// element type, packing or fill values), which no one set of accumulators can hold: one
/// [`TetAggregateTable`] of partial states per storage class of its files
/// ([`TableModel::storage_classes`]), their union under `qualifier`, for the merge above.
/// Each class reads a value column whose type is not the archive's cast to it, as the scan
/// casts each file's values, so its inputs and filters are the archive's and its states
/// have the same types. `None` when a class does not fold the query.
fn fold_by_storage_class(
    table: &TableModel,
    qualifier: &TableReference,
    query: Query,
) -> Result<Option<(Aggregation, LogicalPlan)>> {
    let mut folded: Option<Aggregation> = None;
    let mut scans: Vec<Arc<LogicalPlan>> = Vec::new();
    for class in table.storage_classes()? {
        let as_archive = |e: &Expr| as_archive_types(e, table, &class);
        let each = |es: &[Expr]| es.iter().map(as_archive).collect::<Result<Vec<_>>>();
        let schema = DFSchema::try_from_qualified_schema(qualifier.clone(), &class.schema)?;
        let predicate = query.predicate.map(as_archive).transpose()?;
        let Some(aggregation) = aggregation_of(
            &class,
            &schema,
            &each(query.group_expr)?,
            &each(query.aggr_expr)?,
            predicate,
        )?
        else {
            return Ok(None);
        };
        if aggregation.has_order_statistics() {
            // Order statistics have no partial states to merge across classes.
            return Ok(None);
        }
        let states = aggregation.schema(AggregateOutput::States);
        if folded
            .as_ref()
            .is_some_and(|a| a.schema(AggregateOutput::States) != states)
        {
            return Ok(None);
        }
        let filters = each(query.filters)?;
        let class = TetAggregateTable::new(Arc::new(class), filters, aggregation.clone(), AggregateOutput::States);
        scans.push(Arc::new(fold_scan(qualifier, class)?));
        folded.get_or_insert(aggregation);
    }
    let Some(aggregation) = folded else {
        return Ok(None);
    };
    let union = match <[Arc<LogicalPlan>; 1]>::try_from(scans) {
        Ok([one]) => Arc::unwrap_or_clone(one),
        Err(scans) => LogicalPlan::Union(Union::try_new(scans)?),
    };
    // A union's columns have no qualifier; the merge above names them by the scan's.
    let input = LogicalPlanBuilder::from(union).alias(qualifier.clone())?.build()?;
    Ok(Some((aggregation, input)))
}

/// `e` (over `archive`'s columns) over the columns of `class`, one of its storage classes:
/// each value column whose type differs from the archive's is cast to the archive's.
fn as_archive_types(e: &Expr, archive: &TableModel, class: &TableModel) -> Result<Expr> {
    let widened: Vec<(&str, &DataType)> = (archive.value_index()..archive.schema.fields().len())
        .map(|c| (archive.schema.field(c), class.schema.field(c)))
        .filter(|(a, c)| a.data_type() != c.data_type())
        .map(|(a, _)| (a.name().as_str(), a.data_type()))
        .collect();
    if widened.is_empty() {
        return Ok(e.clone());
    }
    Ok(e.clone()
        .transform(|x| {
            if let Expr::Column(c) = &x
                && let Some((_, ty)) = widened.iter().find(|(n, _)| *n == c.name)
            {
                return Ok(Transformed::yes(cast(x, (*ty).clone())));
            }
            Ok(Transformed::no(x))
        })?
        .data)
}

fn try_rewrite(plan: &LogicalPlan, merge_in_scan: bool) -> Result<Option<LogicalPlan>> {
    let LogicalPlan::Aggregate(agg) = plan else {
        return Ok(None);
    };
    // The scan, possibly under projections of its columns and expressions of them (common
    // subexpression elimination hoists `CAST(v AS Float64)` shared by several aggregates),
    // aliases (`FROM tet(...) AS x`, subqueries, views) and filters of the conditions the
    // scan does not resolve exactly (those on `v`).
    let mut layers = Vec::new();
    let mut input = agg.input.as_ref();
    loop {
        let (layer, below) = match input {
            LogicalPlan::Projection(p) => (Layer::Projection(p), &p.input),
            LogicalPlan::SubqueryAlias(a) => (Layer::Alias(a), &a.input),
            LogicalPlan::Filter(f) => (Layer::Filter(&f.predicate), &f.input),
            _ => break,
        };
        layers.push(layer);
        input = below.as_ref();
    }
    let LogicalPlan::TableScan(scan) = input else {
        return Ok(None);
    };
    // An expression over the output of `layers[from]` as one over the scan's columns.
    let resolve_from = |e: &Expr, from: usize| -> Result<Expr> {
        layers[from..].iter().try_fold(e.clone(), |e, layer| layer.resolve(e))
    };
    let resolve = |e: &Expr| resolve_from(e, 0);
    let filters: Vec<Expr> = layers
        .iter()
        .enumerate()
        .filter_map(|(i, layer)| match layer {
            Layer::Filter(p) => Some(resolve_from(p, i + 1)),
            _ => None,
        })
        .collect::<Result<_>>()?;
    let predicate = conjunction(filters);
    let group_expr = agg.group_expr.iter().map(resolve).collect::<Result<Vec<_>>>()?;
    let aggr_expr = agg.aggr_expr.iter().map(resolve).collect::<Result<Vec<_>>>()?;
    if scan.fetch.is_some() {
        return Ok(None);
    }
    let provider = source_as_provider(&scan.source)?;
    let Some(provider) = provider.downcast_ref::<TetTableProvider>() else {
        return Ok(None);
    };
    let table = provider.model();
    let qualifier = scan.table_name.clone();
    // Providers see filters with unqualified columns, as DataFusion's planner hands them over.
    let filters = datafusion::logical_expr::expr_rewriter::unnormalize_cols(scan.filters.clone());
    let (aggregation, input, output) = if table.is_uniform() {
        let schema = scan.projected_schema.as_ref();
        let Some(aggregation) = aggregation_of(table, schema, &group_expr, &aggr_expr, predicate)? else {
            return Ok(None);
        };
        let output = match merge_in_scan && aggregation.fits_one_output(table) {
            true => AggregateOutput::Values,
            // Order statistics have no partial states, and the groups of a key of the
            // value are found as the fold meets them: DataFusion's own plan takes both.
            false if aggregation.has_order_statistics() || aggregation.value_key.is_some() => return Ok(None),
            false => AggregateOutput::States,
        };
        let folded = TetAggregateTable::new(table.clone(), filters, aggregation.clone(), output);
        (aggregation, fold_scan(&qualifier, folded)?, output)
    } else {
        let query = Query {
            group_expr: &group_expr,
            aggr_expr: &aggr_expr,
            predicate: predicate.as_ref(),
            filters: &filters,
        };
        let Some((aggregation, input)) = fold_by_storage_class(table, &qualifier, query)? else {
            return Ok(None);
        };
        if aggregation.value_key.is_some() {
            return Ok(None);
        }
        (aggregation, input, AggregateOutput::States)
    };
    let (keys, aggs) = (aggregation.key_names(), &aggregation.aggs);
    let column = |name: String| Expr::Column(Column::new(Some(qualifier.clone()), name));
    // The original output: names, qualifiers and types.
    let restore = |input: LogicalPlan, finals: Vec<Expr>| -> Result<LogicalPlan> {
        let mut projection = Vec::new();
        for (i, (q, field)) in agg.schema.iter().enumerate() {
            let e = match i.checked_sub(keys.len()) {
                None => column(keys[i].clone()),
                Some(a) => finals[a].clone(),
            };
            let e = cast(e, field.data_type().clone());
            projection.push(e.alias_qualified(q.cloned(), field.name()));
        }
        LogicalPlanBuilder::from(input).project(projection)?.build()
    };
    if output == AggregateOutput::Values {
        // The scan's rows are the answer: one per group, each aggregate's value.
        let values = (0..aggs.len()).map(|i| column(aggregation.value_name(i))).collect();
        return restore(input, values).map(Some);
    }

    let state = column;
    let group_exprs: Vec<Expr> = keys.iter().map(|k| state(k.clone())).collect();
    let mut merge_exprs = Vec::new();
    let mut finals = Vec::new();
    let sum = datafusion::functions_aggregate::expr_fn::sum;
    let min = datafusion::functions_aggregate::expr_fn::min;
    let max = datafusion::functions_aggregate::expr_fn::max;
    for (i, spec) in aggs.iter().enumerate() {
        let m = |s: &str| format!("__tet_m{i}_{s}");
        let a = |s: State| state(aggregation.state_name(i, s));
        let r = |s: &str| Expr::Column(Column::from_name(m(s)));
        let zero_if_null = |e: Expr| when(e.clone().is_null(), lit(0i64)).otherwise(e);
        let fin = match spec.func {
            AggFunc::CountStar => {
                merge_exprs.push(sum(a(State::Cells)).alias(m("cells")));
                zero_if_null(r("cells"))?
            }
            AggFunc::Count => {
                merge_exprs.push(sum(a(State::Count)).alias(m("n")));
                zero_if_null(r("n"))?
            }
            AggFunc::Sum => {
                merge_exprs.push(sum(a(State::Sum)).alias(m("sum")));
                r("sum")
            }
            AggFunc::Avg => {
                merge_exprs.push(sum(a(State::Count)).alias(m("n")));
                merge_exprs.push(sum(a(State::Sum)).alias(m("sum")));
                cast(r("sum"), DataType::Float64) / cast(r("n"), DataType::Float64)
            }
            AggFunc::Min | AggFunc::Max if is_float(&spec.input_type) => {
                let is_max = spec.func == AggFunc::Max;
                let (s, st) = if is_max {
                    ("max", State::Max)
                } else {
                    ("min", State::Min)
                };
                let udaf = AggregateUDF::from(FloatExtreme::new(is_max));
                merge_exprs.push(udaf.call(vec![cast(a(st), DataType::Float64)]).alias(m(s)));
                r(s)
            }
            AggFunc::Min => {
                merge_exprs.push(min(a(State::Min)).alias(m("min")));
                r("min")
            }
            AggFunc::Max => {
                merge_exprs.push(max(a(State::Max)).alias(m("max")));
                r("max")
            }
            f if f.is_comoment() => {
                let Some(merge) = MergeCoMoments::new(f) else {
                    return internal_err!("no merge of the co-moments of {}", f.name());
                };
                let udaf = AggregateUDF::from(merge);
                let states = [
                    State::Count,
                    State::Mean,
                    State::MeanY,
                    State::M2,
                    State::M2Y,
                    State::CoM2,
                ];
                merge_exprs.push(udaf.call(states.map(a).to_vec()).alias(m("co")));
                r("co")
            }
            f if f.is_order_statistic() => {
                return internal_err!("no merge of the partial states of {}", f.name());
            }
            f => {
                let kind = match f {
                    AggFunc::VarPop => MomentKind::VarPop,
                    AggFunc::VarSamp => MomentKind::VarSamp,
                    AggFunc::StddevPop => MomentKind::StddevPop,
                    _ => MomentKind::StddevSamp,
                };
                let udaf = AggregateUDF::from(MergeMoments::new(kind));
                merge_exprs.push(
                    udaf.call(vec![a(State::Count), a(State::Mean), a(State::M2)])
                        .alias(m("var")),
                );
                r("var")
            }
        };
        finals.push(fin);
    }
    let merged = LogicalPlanBuilder::from(input)
        .aggregate(group_exprs, merge_exprs)?
        .build()?;
    restore(merged, finals).map(Some)
}

/// A projection over the rewrite's own projection (of merged states, or of the scan's
/// values), as one projection: what `optimize_projections` would do in the optimizer's
/// next pass (a pass of every rule), done while the rule is at it. Output names,
/// qualifiers and types are the outer projection's.
fn merge_projections(plan: &LogicalPlan) -> Result<Option<LogicalPlan>> {
    let LogicalPlan::Projection(outer) = plan else {
        return Ok(None);
    };
    let LogicalPlan::Projection(inner) = outer.input.as_ref() else {
        return Ok(None);
    };
    let below = match inner.input.as_ref() {
        LogicalPlan::Aggregate(agg) => agg.input.as_ref(),
        other => other,
    };
    let LogicalPlan::TableScan(scan) = below else {
        return Ok(None);
    };
    let ours = source_as_provider(&scan.source)
        .ok()
        .is_some_and(|p| p.downcast_ref::<TetAggregateTable>().is_some());
    if !ours {
        return Ok(None);
    }
    let layer = Layer::Projection(inner);
    let exprs = outer
        .expr
        .iter()
        .zip(outer.schema.iter())
        .map(|(e, (q, field))| {
            let e = layer.resolve(e.clone().unalias_nested().data)?;
            Ok(e.alias_qualified(q.cloned(), field.name()))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(LogicalPlan::Projection(Projection::try_new(
        exprs,
        inner.input.clone(),
    )?)))
}
