//! Aggregate pushdown as a logical rewrite, so it fires in a local `SessionContext` and
//! survives Ballista (whose adaptive planner drops custom physical rules).
//!
//! ```text
//! Aggregate(group: axes, aggr: count/sum/avg/min/max/var*/stddev*(v))
//!   TableScan(TetTableProvider, exact axis filters)
//! ```
//! becomes
//! ```text
//! Projection(final values, original names and types)
//!   Aggregate(group: axes, aggr: merges of partial states)
//!     TableScan(TetPartialAggregate)   -- scans as TetAggregateExec
//! ```
//! `TetAggregateExec` emits, per partition, one row of partial states per group it
//! touched; the merge aggregate combines partitions and groups whose labels are equal.
//! Partial variance states are (count, mean, M2), merged by the `tet_*` UDAFs.

use super::axes::arrow_type;
use super::merge_m2::{FloatExtreme, MergeMoments, MomentKind};
use super::session_options::TetConfig;
use super::table::{TetTableProvider, VALUE_COLUMN};
use crate::exec::{AggFunc, AggSpec, AggregatePlan, MAX_DENSE_GROUPS, TetAggregateExec};
use crate::plan::split_balanced;
use arrow::datatypes::{DataType, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result};
use datafusion::datasource::{TableType, provider_as_source, source_as_provider};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::{
    AggregateUDF, Expr, LogicalPlan, LogicalPlanBuilder, TableProviderFilterPushDown, cast, lit, when,
};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use datafusion::physical_plan::ExecutionPlan;
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
        let enabled = config
            .options()
            .extensions
            .get::<TetConfig>()
            .is_none_or(|c| c.aggregate_pushdown);
        if !enabled {
            return Ok(Transformed::no(plan));
        }
        match try_rewrite(&plan)? {
            Some(p) => Ok(Transformed::yes(p)),
            None => Ok(Transformed::no(plan)),
        }
    }
}

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64)
}

/// `v`, or `CAST(v AS t)` to a type that holds every value of `v` exactly.
fn value_input(e: &Expr, v_type: &DataType) -> Option<DataType> {
    match e {
        Expr::Column(c) if c.name == VALUE_COLUMN => Some(v_type.clone()),
        Expr::Cast(c)
            if value_input(&c.expr, v_type).as_ref() == Some(v_type) && widens(v_type, c.field.data_type()) =>
        {
            Some(c.field.data_type().clone())
        }
        Expr::TryCast(c)
            if value_input(&c.expr, v_type).as_ref() == Some(v_type) && widens(v_type, c.field.data_type()) =>
        {
            Some(c.field.data_type().clone())
        }
        _ => None,
    }
}

/// Whether every value of `from` converts to `to` without loss (or `to` is Float64, the
/// type DataFusion itself coerces numeric aggregates to).
fn widens(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    if from == to || *to == Float64 {
        return true;
    }
    matches!(
        (from, to),
        (Float16, Float32)
            | (Int16, Int32 | Int64 | Float32)
            | (Int32, Int64)
            | (UInt8, Int16 | Int32 | Int64 | UInt16 | UInt32 | UInt64 | Float32)
            | (UInt16, Int32 | Int64 | UInt32 | UInt64 | Float32)
            | (UInt32, Int64 | UInt64)
    )
}

/// Dense group slots of grouping by `groups` (saturating).
fn dense_groups(axes: &[crate::sql::axes::Axis], groups: &[usize]) -> u64 {
    groups
        .iter()
        .fold(1u64, |n, &d| n.saturating_mul(axes[d].extent.max(1)))
}

/// Check an aggregation received from elsewhere (a serialized plan) against the table it
/// runs on: grouped axes exist, are distinct and within the dense-group limit, and every
/// input type is one the pushdown itself would produce.
#[cfg(feature = "ballista")]
pub(crate) fn check_plan(plan: &AggregatePlan, table: &TetTableProvider) -> std::result::Result<(), String> {
    let axes = table.axes();
    let mut seen = vec![false; axes.len()];
    for &d in &plan.groups {
        if d >= axes.len() || std::mem::replace(&mut seen[d], true) {
            return Err(format!("group axis {d} is out of range or repeated"));
        }
    }
    let dense = dense_groups(axes, &plan.groups);
    if dense > MAX_DENSE_GROUPS {
        return Err(format!("{dense} groups exceed the limit of {MAX_DENSE_GROUPS}"));
    }
    let v_type = arrow_type(table.source().catalog.datasets[table.dataset_index()].dtype());
    for a in &plan.aggs {
        if !widens(&v_type, &a.input_type) {
            return Err(format!(
                "{} over {} is not an aggregate of {v_type}",
                a.func.name(),
                a.input_type
            ));
        }
    }
    Ok(())
}

fn agg_spec(e: &Expr, v_type: &DataType) -> Option<AggSpec> {
    let Expr::AggregateFunction(AggregateFunction { func, params }) = e.clone().unalias_nested().data else {
        return None;
    };
    if params.distinct || params.filter.is_some() || !params.order_by.is_empty() || params.null_treatment.is_some() {
        return None;
    }
    let [arg] = params.args.as_slice() else { return None };
    let func = match func.name() {
        "count" => {
            if let Expr::Literal(v, _) = arg
                && !v.is_null()
            {
                return Some(AggSpec {
                    func: AggFunc::CountStar,
                    input_type: v_type.clone(),
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
    let input_type = value_input(arg, v_type)?;
    Some(AggSpec { func, input_type })
}

fn try_rewrite(plan: &LogicalPlan) -> Result<Option<LogicalPlan>> {
    let LogicalPlan::Aggregate(agg) = plan else {
        return Ok(None);
    };
    // The scan, possibly under a projection of its columns and casts of them (common
    // subexpression elimination hoists `CAST(v AS Float64)` shared by several aggregates).
    let (scan, projection) = match agg.input.as_ref() {
        LogicalPlan::TableScan(scan) => (scan, None),
        LogicalPlan::Projection(p) => match p.input.as_ref() {
            LogicalPlan::TableScan(scan) => (scan, Some(p)),
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    let resolve = |e: &Expr| -> Result<Expr> {
        let Some(p) = projection else { return Ok(e.clone()) };
        Ok(e.clone()
            .transform(|x| {
                if let Expr::Column(c) = &x
                    && let Some(i) = p.schema.iter().position(|(_, f)| f.name() == &c.name)
                {
                    return Ok(Transformed::yes(p.expr[i].clone().unalias_nested().data));
                }
                Ok(Transformed::no(x))
            })?
            .data)
    };
    let group_expr = agg.group_expr.iter().map(resolve).collect::<Result<Vec<_>>>()?;
    let aggr_expr = agg.aggr_expr.iter().map(resolve).collect::<Result<Vec<_>>>()?;
    if scan.fetch.is_some() {
        return Ok(None);
    }
    let provider = source_as_provider(&scan.source)?;
    let Some(table) = provider.downcast_ref::<TetTableProvider>() else {
        return Ok(None);
    };
    let axes = table.axes();
    let mut groups = Vec::new();
    for g in &group_expr {
        let Expr::Column(c) = g else { return Ok(None) };
        let Some(d) = axes.iter().position(|a| a.name == c.name) else {
            return Ok(None);
        };
        groups.push(d);
    }
    let dense = dense_groups(axes, &groups);
    if dense > MAX_DENSE_GROUPS {
        return Ok(None);
    }
    let v_type = arrow_type(table.source().catalog.datasets[table.dataset_index()].dtype());
    let Some(aggs) = aggr_expr
        .iter()
        .map(|e| agg_spec(e, &v_type))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    // A bare count(*) is answered by DataFusion from the scan's exact statistics.
    if groups.is_empty() && aggs.iter().all(|a| a.func == AggFunc::CountStar) {
        return Ok(None);
    }
    let plan_spec = AggregatePlan {
        groups: groups.clone(),
        aggs: aggs.clone(),
    };
    // Providers see filters with unqualified columns, as DataFusion's planner hands them over.
    let filters = datafusion::logical_expr::expr_rewriter::unnormalize_cols(scan.filters.clone());
    let partial = TetPartialAggregate::new(table.clone(), filters, plan_spec);
    let qualifier = scan.table_name.clone();
    let input = LogicalPlanBuilder::scan(qualifier.clone(), provider_as_source(Arc::new(partial)), None)?.build()?;

    let state = |name: String| Expr::Column(Column::new(Some(qualifier.clone()), name));
    let group_exprs: Vec<Expr> = groups.iter().map(|&d| state(axes[d].name.clone())).collect();
    let mut merge_exprs = Vec::new();
    let mut finals = Vec::new();
    let sum = datafusion::functions_aggregate::expr_fn::sum;
    let min = datafusion::functions_aggregate::expr_fn::min;
    let max = datafusion::functions_aggregate::expr_fn::max;
    for (i, spec) in aggs.iter().enumerate() {
        let m = |s: &str| format!("__tet_m{i}_{s}");
        let a = |s: &str| state(format!("a{i}_{s}"));
        let r = |s: &str| Expr::Column(Column::from_name(m(s)));
        let zero_if_null = |e: Expr| when(e.clone().is_null(), lit(0i64)).otherwise(e);
        let fin = match spec.func {
            AggFunc::CountStar => {
                merge_exprs.push(sum(a("cells")).alias(m("cells")));
                zero_if_null(r("cells"))?
            }
            AggFunc::Count => {
                merge_exprs.push(sum(a("n")).alias(m("n")));
                zero_if_null(r("n"))?
            }
            AggFunc::Sum => {
                merge_exprs.push(sum(a("sum")).alias(m("sum")));
                r("sum")
            }
            AggFunc::Avg => {
                merge_exprs.push(sum(a("n")).alias(m("n")));
                merge_exprs.push(sum(a("sum")).alias(m("sum")));
                cast(r("sum"), DataType::Float64) / cast(r("n"), DataType::Float64)
            }
            AggFunc::Min | AggFunc::Max if is_float(&spec.input_type) => {
                let is_max = spec.func == AggFunc::Max;
                let s = if is_max { "max" } else { "min" };
                let udaf = AggregateUDF::from(FloatExtreme::new(is_max));
                merge_exprs.push(udaf.call(vec![cast(a(s), DataType::Float64)]).alias(m(s)));
                r(s)
            }
            AggFunc::Min => {
                merge_exprs.push(min(a("min")).alias(m("min")));
                r("min")
            }
            AggFunc::Max => {
                merge_exprs.push(max(a("max")).alias(m("max")));
                r("max")
            }
            f => {
                let kind = match f {
                    AggFunc::VarPop => MomentKind::VarPop,
                    AggFunc::VarSamp => MomentKind::VarSamp,
                    AggFunc::StddevPop => MomentKind::StddevPop,
                    _ => MomentKind::StddevSamp,
                };
                let udaf = AggregateUDF::from(MergeMoments::new(kind));
                merge_exprs.push(udaf.call(vec![a("n"), a("mean"), a("m2")]).alias(m("var")));
                r("var")
            }
        };
        finals.push(fin);
    }
    let merged = LogicalPlanBuilder::from(input)
        .aggregate(group_exprs, merge_exprs)?
        .build()?;
    // Restore the original output: names, qualifiers and types.
    let out_schema = agg.schema.clone();
    let mut projection = Vec::new();
    for (i, (q, field)) in out_schema.iter().enumerate() {
        let e = if i < groups.len() {
            Expr::Column(Column::new(Some(qualifier.clone()), axes[groups[i]].name.clone()))
        } else {
            finals[i - groups.len()].clone()
        };
        let e = cast(e, field.data_type().clone());
        projection.push(e.alias_qualified(q.cloned(), field.name()));
    }
    Ok(Some(LogicalPlanBuilder::from(merged).project(projection)?.build()?))
}

/// A table whose scan is [`TetAggregateExec`]: the partial states of an aggregation over
/// one dataset with pushed axis filters.
#[derive(Debug, Clone)]
pub struct TetPartialAggregate {
    table: TetTableProvider,
    filters: Vec<Expr>,
    plan: AggregatePlan,
    schema: SchemaRef,
}

impl TetPartialAggregate {
    /// The partial aggregation `plan` over `table` restricted by `filters`.
    pub fn new(table: TetTableProvider, filters: Vec<Expr>, plan: AggregatePlan) -> Self {
        let schema = plan.schema(table.axes());
        TetPartialAggregate {
            table,
            filters,
            plan,
            schema,
        }
    }

    /// The underlying table.
    pub fn table(&self) -> &TetTableProvider {
        &self.table
    }
    /// Pushed axis filters.
    pub fn filters(&self) -> &[Expr] {
        &self.filters
    }
    /// What is aggregated.
    pub fn plan(&self) -> &AggregatePlan {
        &self.plan
    }
}

#[async_trait]
impl TableProvider for TetPartialAggregate {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
    fn table_type(&self) -> TableType {
        TableType::Temporary
    }
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Unsupported; filters.len()])
    }
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let planned = self.table.plan_chunks(state, &self.filters)?;
        let source = self.table.source().clone();
        let ds = &source.catalog.datasets[self.table.dataset_index()];
        let target = state.config().target_partitions().max(1);
        let partitions = split_balanced(planned.tasks, target, |t| {
            source.catalog.chunk(ds, t.linear).1.stored_byte_len
        });
        let exec: Arc<dyn ExecutionPlan> = Arc::new(TetAggregateExec::new(
            source.clone(),
            self.table.dataset_index(),
            self.table.axes_arc(),
            self.plan.clone(),
            planned.selection,
            crate::exec::ChunkFeed::new(partitions)?,
        ));
        match projection {
            Some(p) if *p != (0..self.schema.fields().len()).collect::<Vec<_>>() => {
                let exprs = p
                    .iter()
                    .map(|&i| {
                        let f = self.schema.field(i);
                        let c: Arc<dyn datafusion::physical_expr::PhysicalExpr> =
                            Arc::new(datafusion::physical_expr::expressions::Column::new(f.name(), i));
                        (c, f.name().clone())
                    })
                    .collect::<Vec<_>>();
                Ok(Arc::new(
                    datafusion::physical_plan::projection::ProjectionExec::try_new(exprs, exec)?,
                ))
            }
            _ => Ok(exec),
        }
    }
}
