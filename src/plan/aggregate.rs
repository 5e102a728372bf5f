//! The aggregate model shared by the logical rewrite (`sql`) and the fold (`exec`): one
//! aggregate ([`AggSpec`]: function ([`AggFunc`]), input, `FILTER`),
//! group keys ([`GroupKey`]: an axis or an expression of one axis), an [`Aggregation`]
//! (keys, aggregates and a row filter) and its typed partial-state columns. Which
//! expressions make an input is `input_forms`.

use super::agg_func::AggFunc;
use super::input_forms::{Affine, expr_columns, is_numeric, values_read, widens};
use super::selection::AxisSelection;
use super::table::TableModel;
use super::value_key::ValueKey;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::logical_expr::Expr;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Aggregations with more dense groups than this are left to DataFusion.
pub const MAX_DENSE_GROUPS: u64 = 1 << 24;

/// Above this many group slots a grouped fold's partitions are split along the grouped
/// axes ([`Aggregation::partition_axes`]): 2^18 slots are ≈ 20 MiB of accumulators per
/// partition for a few aggregates.
pub const SPLIT_GROUPS_ABOVE: u64 = 1 << 18;

/// One partial statistic of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Cells, NULL or not (`count(*)`).
    Cells,
    /// Non-NULL cells.
    Count,
    Sum,
    Min,
    Max,
    Mean,
    /// Sum of squared deviations from the mean.
    M2,
    /// The second input's mean.
    MeanY,
    /// The second input's sum of squared deviations.
    M2Y,
    /// Sum of the products of both inputs' deviations from their means.
    CoM2,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Cells => "cells",
            State::Count => "n",
            State::Sum => "sum",
            State::Min => "min",
            State::Max => "max",
            State::Mean => "mean",
            State::M2 => "m2",
            State::MeanY => "mean_y",
            State::M2Y => "m2_y",
            State::CoM2 => "c2",
        }
    }
}

/// What a fold emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggregateOutput {
    /// Per output partition, one row per group it touched: the keys, then the partial
    /// states of every aggregate ([`Aggregation::state_columns`]), merged by an aggregate
    /// above. A distributed plan (Ballista) needs these: its partitions run apart.
    States,
    /// One output partition that folds every planned partition itself and emits one row
    /// per group (one row with no keys, as SQL's aggregate over no rows): the keys, then
    /// each aggregate's value ([`AggSpec::value_type`]). Only for aggregations whose groups
    /// fit [`SPLIT_GROUPS_ABOVE`] slots, as each partition then holds all of them.
    Values,
}

/// One partial-state column of an [`Aggregation`]'s output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateColumn {
    /// Which aggregate (index into [`Aggregation::aggs`]).
    pub agg: usize,
    pub state: State,
    pub data_type: DataType,
}

impl StateColumn {
    /// The column name: unique within the aggregation.
    pub fn name(&self) -> String {
        format!("a{}_{}", self.agg, self.state.name())
    }
}

/// Result type of `sum` over `t`.
pub fn sum_type(t: &DataType) -> DataType {
    match t {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => DataType::Int64,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => DataType::UInt64,
        _ => DataType::Float64,
    }
}

/// What an aggregate folds, cell by cell.
#[derive(Debug, Clone, PartialEq)]
pub enum AggInput {
    /// The value column (or a widening cast of it), mapped by `affine` when given (Float64
    /// arithmetic, folded from the statistics of the stored values).
    Value { affine: Option<Affine> },
    /// Any other deterministic expression of value and axis columns (unqualified
    /// columns), evaluated over each decoded tile.
    Expr(Expr),
    /// Two such expressions, the inputs of a function of two (`corr(x, y)`); cells where
    /// either is NULL are skipped.
    Pair(Expr, Expr),
}

/// One aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct AggSpec {
    pub func: AggFunc,
    /// Type of the aggregated expression.
    pub input_type: DataType,
    pub input: AggInput,
    /// `FILTER (WHERE …)`: an expression of `v` and axis columns.
    pub filter: Option<Expr>,
    /// The percentile of [`AggFunc::PercentileCont`] (or its approximation) in ascending
    /// order, in `[0, 1]` (`1 - p` for `p` of a descending order, as DataFusion computes
    /// it); `None` for the other functions.
    pub percentile: Option<f64>,
}

impl AggSpec {
    /// The partial states this aggregate emits, with their types.
    pub fn states(&self) -> Vec<(State, DataType)> {
        match self.func {
            AggFunc::CountStar => vec![(State::Cells, DataType::Int64)],
            AggFunc::Count => vec![(State::Count, DataType::Int64)],
            AggFunc::Sum => vec![(State::Sum, sum_type(&self.input_type))],
            AggFunc::Avg => vec![(State::Count, DataType::Int64), (State::Sum, DataType::Float64)],
            AggFunc::Min => vec![(State::Min, self.input_type.clone())],
            AggFunc::Max => vec![(State::Max, self.input_type.clone())],
            f if f.is_order_statistic() => vec![],
            f if f.is_comoment() => vec![
                (State::Count, DataType::UInt64),
                (State::Mean, DataType::Float64),
                (State::MeanY, DataType::Float64),
                (State::M2, DataType::Float64),
                (State::M2Y, DataType::Float64),
                (State::CoM2, DataType::Float64),
            ],
            _ => vec![
                (State::Count, DataType::UInt64),
                (State::Mean, DataType::Float64),
                (State::M2, DataType::Float64),
            ],
        }
    }

    /// The type of the aggregate's value as [`AggregateOutput::Values`] emits it: counts
    /// Int64, sums of the sum type, extremes and order statistics of the input type, the
    /// rest Float64 (the types DataFusion's own functions return).
    pub fn value_type(&self) -> DataType {
        match self.func {
            AggFunc::CountStar | AggFunc::Count => DataType::Int64,
            AggFunc::Sum => sum_type(&self.input_type),
            AggFunc::Min | AggFunc::Max => self.input_type.clone(),
            f if f.is_order_statistic() => self.input_type.clone(),
            _ => DataType::Float64,
        }
    }

    /// An aggregate of `v` (input type `input_type`) without `FILTER`.
    pub fn of_value(func: AggFunc, input_type: DataType) -> Self {
        AggSpec {
            func,
            input_type,
            input: AggInput::Value { affine: None },
            filter: None,
            percentile: None,
        }
    }

    /// The value columns (indices into `table.values`) whose payload the aggregate needs:
    /// counts of cells need none, nor counts of non-NULL cells of a dataset without a fill
    /// value; an expression or filter needs those it reads.
    pub fn value_columns(&self, table: &TableModel) -> BTreeSet<usize> {
        let mut out: BTreeSet<usize> = self.filter.iter().flat_map(|f| values_read(table, f)).collect();
        match &self.input {
            AggInput::Expr(e) => out.extend(values_read(table, e)),
            AggInput::Pair(x, y) => out.extend(values_read(table, x).into_iter().chain(values_read(table, y))),
            AggInput::Value { .. } => {
                if !(self.func == AggFunc::CountStar || (self.func == AggFunc::Count && !table.has_missing())) {
                    out.insert(0);
                }
            }
        }
        out
    }
}

/// A group key: an axis column, or a deterministic expression of one axis column
/// (`date_trunc('month', time)`, `floor(lat / 10)`), evaluated once per position.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupKey {
    /// The axis the key depends on.
    pub axis: usize,
    /// The expression (unqualified columns); `None` for the axis column itself.
    pub expr: Option<Expr>,
    /// Output column name of the partial aggregate.
    pub name: String,
    pub data_type: DataType,
}

impl GroupKey {
    /// The axis column `d` of `table` as a key.
    pub fn axis(table: &TableModel, d: usize) -> Self {
        GroupKey {
            axis: d,
            expr: None,
            name: table.axes[d].name.clone(),
            data_type: table.axes[d].data_type(),
        }
    }
}

/// What to aggregate: group keys (in output order), aggregates, and a row filter.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregation {
    /// The keys of axes.
    pub groups: Vec<GroupKey>,
    /// A key of the value, when the query groups by one: its groups are found as the
    /// fold meets its values.
    pub value_key: Option<ValueKey>,
    pub aggs: Vec<AggSpec>,
    /// `WHERE` conditions the scan does not resolve exactly (they involve `v`), as one
    /// expression of `v` and axis columns: cells where it is not true are skipped.
    pub filter: Option<Expr>,
}

impl Aggregation {
    /// Every partial-state column, in output order (after the group columns).
    pub fn state_columns(&self) -> Vec<StateColumn> {
        self.aggs
            .iter()
            .enumerate()
            .flat_map(|(agg, a)| {
                a.states()
                    .into_iter()
                    .map(move |(state, data_type)| StateColumn { agg, state, data_type })
            })
            .collect()
    }

    /// The name of aggregate `agg`'s `state` column.
    pub fn state_name(&self, agg: usize, state: State) -> String {
        StateColumn {
            agg,
            state,
            data_type: DataType::Null,
        }
        .name()
    }

    /// The name of aggregate `agg`'s column in [`AggregateOutput::Values`]: prefixed
    /// `__tet_`, as expression keys are, so that it does not meet the axes' names of keys.
    pub fn value_name(&self, agg: usize) -> String {
        format!("__tet_value{agg}")
    }

    /// The key columns of the fold's output in the query's order of keys: the axis keys
    /// with the value key at its position.
    pub fn key_names(&self) -> Vec<String> {
        let axis = self.groups.iter().map(|k| k.name.clone()).collect();
        self.in_key_order(axis, |k| k.name.clone())
    }

    /// `axis` (an item per axis key, in their order) with the value key's item, `value`,
    /// at its position among the query's keys.
    pub fn in_key_order<T>(&self, mut axis: Vec<T>, value: impl FnOnce(&ValueKey) -> T) -> Vec<T> {
        if let Some(k) = &self.value_key {
            axis.insert(k.position.min(axis.len()), value(k));
        }
        axis
    }

    /// How many key columns the fold emits.
    pub fn key_count(&self) -> usize {
        self.groups.len() + usize::from(self.value_key.is_some())
    }

    /// Output schema of `output`: the axis keys, the value key, then every partial-state
    /// column or every aggregate's value.
    pub fn schema(&self, output: AggregateOutput) -> SchemaRef {
        let mut fields: Vec<Field> = self
            .groups
            .iter()
            .map(|k| Field::new(&k.name, k.data_type.clone(), k.expr.is_some()))
            .collect();
        fields.extend(
            self.value_key
                .iter()
                .map(|k| Field::new(&k.name, k.data_type.clone(), true)),
        );
        match output {
            AggregateOutput::States => fields.extend(
                self.state_columns()
                    .into_iter()
                    .map(|c| Field::new(c.name(), c.data_type, true)),
            ),
            AggregateOutput::Values => fields.extend(
                self.aggs
                    .iter()
                    .enumerate()
                    .map(|(i, a)| Field::new(self.value_name(i), a.value_type(), true)),
            ),
        }
        Arc::new(Schema::new(fields))
    }

    /// True when an aggregate is an order statistic ([`AggFunc::is_order_statistic`]):
    /// the aggregation then folds only into [`AggregateOutput::Values`].
    pub fn has_order_statistics(&self) -> bool {
        self.aggs.iter().any(|a| a.func.is_order_statistic())
    }

    /// Whether [`AggregateOutput::Values`] may fold this aggregation over `table`: its
    /// grouped axes span at most [`SPLIT_GROUPS_ABOVE`] slots whatever is selected, so
    /// partitions are never split along them and each holds every group.
    pub fn fits_one_output(&self, table: &TableModel) -> bool {
        self.dense_groups(table) <= SPLIT_GROUPS_ABOVE
    }

    /// The distinct grouped axes, ascending.
    pub fn grouped_axes(&self) -> Vec<usize> {
        self.groups
            .iter()
            .map(|k| k.axis)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// An upper bound of the dense group slots: the product of the grouped axes' extents
    /// (saturating); keys of one axis share its positions.
    pub fn dense_groups(&self, table: &TableModel) -> u64 {
        self.grouped_axes().into_iter().fold(1u64, |n, d| {
            n.saturating_mul(table.axes.get(d).map_or(1, |a| a.extent.max(1)))
        })
    }

    /// The axes to split partitions along ([`AccessPlan::partitions`](super::AccessPlan::partitions)):
    /// the grouped axes when the selected stretches of them span more than
    /// [`SPLIT_GROUPS_ABOVE`] group slots, so that each partition holds its own part of
    /// the groups instead of all of them; none otherwise (partitions then follow the file).
    pub fn partition_axes(&self, selection: &[AxisSelection]) -> Vec<usize> {
        let axes = self.grouped_axes();
        let slots = axes.iter().fold(1u64, |n, &d| {
            let span = selection
                .get(d)
                .and_then(AxisSelection::bounds)
                .map_or(0, |(lo, hi)| hi - lo + 1);
            n.saturating_mul(span)
        });
        if slots > SPLIT_GROUPS_ABOVE { axes } else { Vec::new() }
    }

    /// The value columns (indices into `table.values`, ascending) whose payload any
    /// aggregate or the row filter needs (see [`AggSpec::value_columns`]).
    pub fn value_columns(&self, table: &TableModel) -> Vec<usize> {
        let mut out: BTreeSet<usize> = self.filter.iter().flat_map(|f| values_read(table, f)).collect();
        out.extend(self.value_key.iter().flat_map(|k| values_read(table, &k.expr)));
        for a in &self.aggs {
            out.extend(a.value_columns(table));
        }
        out.into_iter().collect()
    }

    /// Check an aggregation (e.g. one received in a serialized plan) against the table it
    /// runs on: grouped axes exist, are distinct and within [`MAX_DENSE_GROUPS`], and every
    /// input type is one the pushdown itself produces for the value column.
    pub fn check(&self, table: &TableModel) -> Result<(), String> {
        let mut names = BTreeSet::new();
        for k in &self.groups {
            if k.axis >= table.axes.len() {
                return Err(format!("group key on axis {} of {}", k.axis, table.axes.len()));
            }
            if !names.insert(k.name.as_str()) {
                return Err(format!("group key {} is repeated", k.name));
            }
            match &k.expr {
                None if k.name != table.axes[k.axis].name || k.data_type != table.axes[k.axis].data_type() => {
                    return Err(format!("group key {} is not axis {}", k.name, table.axes[k.axis].name));
                }
                Some(e) if expr_columns(table, e) != Some(vec![k.axis]) => {
                    return Err(format!(
                        "group key {e} is not an expression of axis {}",
                        table.axes[k.axis].name
                    ));
                }
                _ => {}
            }
        }
        let dense = self.dense_groups(table);
        if dense > MAX_DENSE_GROUPS {
            return Err(format!("{dense} groups exceed the limit of {MAX_DENSE_GROUPS}"));
        }
        let v_type = table.value_type();
        let foldable = |e: &Expr| expr_columns(table, e).is_some();
        for a in &self.aggs {
            let ok = match &a.input {
                AggInput::Value { affine: None } => widens(&v_type, &a.input_type),
                AggInput::Value { affine: Some(m) } => {
                    a.input_type == DataType::Float64 && m.scale.is_finite() && m.offset.is_finite() && m.scale != 0.0
                }
                AggInput::Expr(e) => foldable(e) && is_numeric(&a.input_type) && !a.func.is_comoment(),
                AggInput::Pair(x, y) => foldable(x) && foldable(y) && a.func.is_comoment(),
            };
            // An order statistic gathers a float expression; its percentile is in [0, 1].
            let order_ok = match a.func.has_percentile() {
                true => a.percentile.is_some_and(|p| (0.0..=1.0).contains(&p)),
                false => a.percentile.is_none(),
            } && (!a.func.is_order_statistic()
                || (matches!(a.input, AggInput::Expr(_))
                    && matches!(a.input_type, DataType::Float32 | DataType::Float64)));
            if !ok || !order_ok || !a.filter.as_ref().is_none_or(foldable) {
                return Err(format!(
                    "{} over {} is not an aggregate of {v_type} or the axes",
                    a.func.name(),
                    a.input_type
                ));
            }
        }
        if !self.filter.as_ref().is_none_or(foldable) {
            return Err("the row filter is not an expression of the value and the axes".into());
        }
        if let Some(k) = &self.value_key {
            let of_value = expr_columns(table, &k.expr) == Some(vec![table.value_index()]);
            // Each aggregate folds the stored values (or counts cells), without FILTER.
            let plain = self.aggs.iter().all(|a| {
                a.filter.is_none()
                    && !a.func.is_comoment()
                    && !a.func.is_order_statistic()
                    && (a.func == AggFunc::CountStar || a.input == AggInput::Value { affine: None })
            });
            let float = matches!(k.data_type, DataType::Float32 | DataType::Float64);
            if table.is_multi() || !of_value || !plain || !float || names.contains(k.name.as_str()) {
                return Err(format!("value key {} is not one the fold groups by", k.sql()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_columns_are_typed_and_uniquely_named() {
        let agg = Aggregation {
            groups: vec![],
            aggs: AggFunc::ALL
                .iter()
                .map(|&func| AggSpec::of_value(func, DataType::Int16))
                .collect(),
            value_key: None,
            filter: None,
        };
        let cols = agg.state_columns();
        let names: std::collections::HashSet<String> = cols.iter().map(StateColumn::name).collect();
        assert_eq!(names.len(), cols.len());
        let sum = cols.iter().find(|c| c.agg == 2).unwrap();
        assert_eq!((sum.state, &sum.data_type), (State::Sum, &DataType::Int64));
        assert_eq!(
            agg.state_name(3, State::Sum),
            cols.iter()
                .find(|c| c.agg == 3 && c.state == State::Sum)
                .unwrap()
                .name()
        );
        assert!(AggFunc::ALL.iter().all(|f| AggFunc::from_name(f.name()) == Some(*f)));
    }
}
