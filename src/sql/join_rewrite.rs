//! Joins on every axis as an aligned scan: a logical rule.
//!
//! ```text
//! Join(Inner, on: l.a0 = r.a0 AND … for every axis, no other condition)
//!   [SubqueryAlias | Projection(columns) | Filter]* TableScan(TetTableProvider l)
//!   [SubqueryAlias | Projection(columns) | Filter]* TableScan(TetTableProvider r)
//! ```
//! where both tables have the same axis columns — names, lengths and values (the same
//! file, or files on one grid) — becomes
//! ```text
//! Projection(every join output column, its qualifier and name kept)
//!   [Filter(the sides' filters)]
//!     TableScan(TetTableProvider of both tables' value columns, both sides' pushed filters)
//! ```
//! Equal axis values mean each cell of one table meets exactly the cell at the same
//! position of the other, so the join is the cells side by side: one scan of the common
//! grid reads each payload once (and an aggregate above it folds in one pass, see
//! [`super::TetAggregatePushdown`]), instead of a hash join of every cell. That holds only
//! when every axis' values are distinct and not NULL: an axis whose labels or coordinates
//! repeat joins many-to-many, and keeps DataFusion's join. Outer joins,
//! joins on some axes, on values, with other conditions or of tables whose axes differ
//! keep DataFusion's plan. `SET tet.join_rewrite = false` turns the rule off.

use super::session_options::TetConfig;
use super::table::TetTableProvider;
use crate::plan::{TableModel, ValueColumn};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result, TableReference};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, JoinType, LogicalPlan, LogicalPlanBuilder};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use std::collections::HashMap;
use std::sync::Arc;

/// The logical rule (registered by [`crate::register`], before the aggregate pushdown).
#[derive(Debug, Default)]
pub struct TetJoinRewrite;

impl OptimizerRule for TetJoinRewrite {
    fn name(&self) -> &str {
        "tet_join_rewrite"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let enabled = config
            .options()
            .extensions
            .get::<TetConfig>()
            .is_none_or(|c| c.join_rewrite);
        if !enabled {
            return Ok(Transformed::no(plan));
        }
        match try_rewrite(&plan)? {
            Some(p) => Ok(Transformed::yes(p)),
            None => Ok(Transformed::no(plan)),
        }
    }
}

/// One input of the join: a scan of a `.tet` table under column-only projections,
/// aliases and filters.
struct Side {
    table: Arc<TableModel>,
    scan_name: TableReference,
    /// The table column each output column of the side is.
    columns: Vec<String>,
    /// Filters pushed into the scan, over the table's columns.
    pushed: Vec<Expr>,
    /// Filters above the scan, over the table's columns.
    residual: Vec<Expr>,
}

fn side_of(plan: &LogicalPlan) -> Result<Option<Side>> {
    Ok(match plan {
        LogicalPlan::TableScan(scan) => {
            if scan.fetch.is_some() {
                return Ok(None);
            }
            let provider = source_as_provider(&scan.source)?;
            let Some(provider) = provider.downcast_ref::<TetTableProvider>() else {
                return Ok(None);
            };
            Some(Side {
                table: provider.model().clone(),
                scan_name: scan.table_name.clone(),
                columns: scan
                    .projected_schema
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect(),
                pushed: datafusion::logical_expr::expr_rewriter::unnormalize_cols(scan.filters.clone()),
                residual: vec![],
            })
        }
        LogicalPlan::SubqueryAlias(a) => side_of(&a.input)?,
        LogicalPlan::Filter(f) => {
            let Some(mut side) = side_of(&f.input)? else {
                return Ok(None);
            };
            let Some(p) = to_table_columns(&f.predicate, f.input.schema(), &side.columns) else {
                return Ok(None);
            };
            side.residual.push(p);
            Some(side)
        }
        LogicalPlan::Projection(p) => {
            let Some(mut side) = side_of(&p.input)? else {
                return Ok(None);
            };
            let mut columns = Vec::with_capacity(p.expr.len());
            for e in &p.expr {
                let Expr::Column(c) = e.clone().unalias_nested().data else {
                    return Ok(None);
                };
                let Ok(i) = p.input.schema().index_of_column(&c) else {
                    return Ok(None);
                };
                columns.push(side.columns[i].clone());
            }
            side.columns = columns;
            Some(side)
        }
        _ => None,
    })
}

/// `e` (over the columns of a plan of `schema`, whose column `i` is table column
/// `columns[i]`) over the table's own column names.
fn to_table_columns(e: &Expr, schema: &datafusion::common::DFSchema, columns: &[String]) -> Option<Expr> {
    let mut ok = true;
    let out = e
        .clone()
        .transform(|x| {
            if let Expr::Column(c) = &x {
                return Ok(match schema.index_of_column(c) {
                    Ok(i) => Transformed::yes(Expr::Column(Column::from_name(columns[i].clone()))),
                    Err(_) => {
                        ok = false;
                        Transformed::no(x)
                    }
                });
            }
            Ok(Transformed::no(x))
        })
        .ok()?
        .data;
    ok.then_some(out)
}

/// `e` with column names renamed by `names` (others kept).
fn renamed(e: &Expr, names: &HashMap<String, String>) -> Result<Expr> {
    Ok(e.clone()
        .transform(|x| {
            if let Expr::Column(c) = &x
                && let Some(n) = names.get(&c.name)
            {
                return Ok(Transformed::yes(Expr::Column(Column::from_name(n.clone()))));
            }
            Ok(Transformed::no(x))
        })?
        .data)
}

/// Whether an equi-join of `axis` with itself pairs each position with itself alone: no
/// value repeats (a repeated label or coordinate would meet every position holding it,
/// many-to-many) and none is NULL (which a join never matches, though the positions
/// exist).
fn joins_one_to_one(axis: &crate::plan::Axis) -> bool {
    axis.distinct && axis.values.as_ref().is_none_or(|v| v.null_count() == 0)
}

fn try_rewrite(plan: &LogicalPlan) -> Result<Option<LogicalPlan>> {
    let LogicalPlan::Join(join) = plan else {
        return Ok(None);
    };
    if join.join_type != JoinType::Inner || join.filter.is_some() || join.null_aware {
        return Ok(None);
    }
    let (Some(left), Some(right)) = (side_of(&join.left)?, side_of(&join.right)?) else {
        return Ok(None);
    };
    let (lt, rt) = (&left.table, &right.table);
    if !lt.same_axes(rt) || !lt.axes.iter().all(joins_one_to_one) {
        return Ok(None);
    }
    // The keys: every axis, each joined to itself.
    let mut joined = vec![false; lt.axes.len()];
    for (l, r) in &join.on {
        let (Expr::Column(l), Expr::Column(r)) = (l, r) else {
            return Ok(None);
        };
        let (Ok(li), Ok(ri)) = (
            join.left.schema().index_of_column(l),
            join.right.schema().index_of_column(r),
        ) else {
            return Ok(None);
        };
        match (lt.axis_index(&left.columns[li]), rt.axis_index(&right.columns[ri])) {
            (Some(a), Some(b)) if a == b => joined[a] = true,
            _ => return Ok(None),
        }
    }
    if !joined.iter().all(|&j| j) {
        return Ok(None);
    }
    // The value columns of both, named by their datasets (made distinct).
    let mut taken: Vec<String> = lt.axes.iter().map(|a| a.name.clone()).collect();
    let mut rename = |v: &ValueColumn| -> ValueColumn {
        let base = if v.name == crate::plan::VALUE_COLUMN {
            v.dataset().name().to_owned()
        } else {
            v.name.clone()
        };
        let mut name = base.clone();
        let mut k = 2;
        while taken.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        taken.push(name.clone());
        ValueColumn { name, ..v.clone() }
    };
    let lvalues: Vec<ValueColumn> = lt.values.iter().map(&mut rename).collect();
    let rvalues: Vec<ValueColumn> = rt.values.iter().map(&mut rename).collect();
    let names_of = |old: &[ValueColumn], new: &[ValueColumn]| -> HashMap<String, String> {
        old.iter()
            .zip(new)
            .map(|(o, n)| (o.name.clone(), n.name.clone()))
            .collect()
    };
    let (lnames, rnames) = (names_of(&lt.values, &lvalues), names_of(&rt.values, &rvalues));
    let names: Vec<String> = lvalues.iter().chain(&rvalues).map(|v| v.name.clone()).collect();
    let Ok(table) = lt.joined(rt, &names) else {
        return Ok(None);
    };
    let table = Arc::new(table);
    let provider = Arc::new(TetTableProvider::from_shared(table.clone()));
    // Both sides' columns in the merged table.
    let merged = |side: &Side, names: &HashMap<String, String>| -> Vec<String> {
        side.columns
            .iter()
            .map(|c| names.get(c).cloned().unwrap_or_else(|| c.clone()))
            .collect()
    };
    let outputs: Vec<String> = merged(&left, &lnames)
        .into_iter()
        .chain(merged(&right, &rnames))
        .collect();
    let mut projection: Vec<usize> = Vec::new();
    for c in &outputs {
        let Ok(i) = table.schema.index_of(c) else {
            return Ok(None);
        };
        if !projection.contains(&i) {
            projection.push(i);
        }
    }
    let mut filters = Vec::new();
    for (side, names) in [(&left, &lnames), (&right, &rnames)] {
        for f in &side.pushed {
            let f = renamed(f, names)?;
            if !filters.contains(&f) {
                filters.push(f);
            }
        }
    }
    let mut residual = Vec::new();
    for (side, names) in [(&left, &lnames), (&right, &rnames)] {
        for f in &side.residual {
            residual.push(renamed(f, names)?);
        }
    }
    let name = left.scan_name.clone();
    let mut builder =
        LogicalPlanBuilder::scan_with_filters(name.clone(), provider_as_source(provider), Some(projection), filters)?;
    if let Some(p) = conjunction(residual) {
        let qualify = |e: Expr| -> Result<Expr> {
            Ok(e.transform(|x| {
                if let Expr::Column(c) = &x
                    && c.relation.is_none()
                {
                    return Ok(Transformed::yes(Expr::Column(Column::new(
                        Some(name.clone()),
                        c.name.clone(),
                    ))));
                }
                Ok(Transformed::no(x))
            })?
            .data)
        };
        builder = builder.filter(qualify(p)?)?;
    }
    let exprs: Vec<Expr> = join
        .schema
        .iter()
        .zip(&outputs)
        .map(|((q, field), c)| {
            Expr::Column(Column::new(Some(name.clone()), c.clone())).alias_qualified(q.cloned(), field.name())
        })
        .collect();
    if exprs.len() != outputs.len() {
        return Ok(None);
    }
    Ok(Some(builder.project(exprs)?.build()?))
}
