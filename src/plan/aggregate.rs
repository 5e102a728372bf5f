//! The aggregate model shared by the logical rewrite (`sql`) and the fold (`exec`): the
//! functions the pushdown computes, one aggregate ([`AggSpec`]: function, input, `FILTER`),
//! group keys ([`GroupKey`]: an axis or an expression of one axis), an [`Aggregation`]
//! (keys, aggregates and a row filter) and its typed partial-state columns.

use super::selection::AxisSelection;
use super::table::TableModel;
use super::values::VALUE_COLUMN;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::TreeNode;
use datafusion::logical_expr::{Expr, Operator};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Aggregations with more dense groups than this are left to DataFusion.
pub const MAX_DENSE_GROUPS: u64 = 1 << 24;

/// Above this many group slots a grouped fold's partitions are split along the grouped
/// axes ([`Aggregation::partition_axes`]): 2^18 slots are ≈ 20 MiB of accumulators per
/// partition for a few aggregates.
pub const SPLIT_GROUPS_ABOVE: u64 = 1 << 18;

/// An aggregate function the pushdown computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggFunc {
    CountStar,
    Count,
    Sum,
    Avg,
    Min,
    Max,
    VarPop,
    VarSamp,
    StddevPop,
    StddevSamp,
    /// `corr(x, y)`.
    Corr,
    /// `covar_pop(x, y)`.
    CovarPop,
    /// `covar_samp(x, y)` (`covar`).
    CovarSamp,
    /// `regr_slope(y, x)` and the other linear regressions of `y` on `x`.
    RegrSlope,
    RegrIntercept,
    RegrR2,
    RegrAvgX,
    RegrAvgY,
    RegrSxx,
    RegrSyy,
    RegrSxy,
}

impl AggFunc {
    /// Every function.
    pub const ALL: [AggFunc; 21] = [
        AggFunc::CountStar,
        AggFunc::Count,
        AggFunc::Sum,
        AggFunc::Avg,
        AggFunc::Min,
        AggFunc::Max,
        AggFunc::VarPop,
        AggFunc::VarSamp,
        AggFunc::StddevPop,
        AggFunc::StddevSamp,
        AggFunc::Corr,
        AggFunc::CovarPop,
        AggFunc::CovarSamp,
        AggFunc::RegrSlope,
        AggFunc::RegrIntercept,
        AggFunc::RegrR2,
        AggFunc::RegrAvgX,
        AggFunc::RegrAvgY,
        AggFunc::RegrSxx,
        AggFunc::RegrSyy,
        AggFunc::RegrSxy,
    ];

    /// SQL name.
    pub fn name(self) -> &'static str {
        match self {
            AggFunc::CountStar => "count(*)",
            AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Avg => "avg",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
            AggFunc::VarPop => "var_pop",
            AggFunc::VarSamp => "var_samp",
            AggFunc::StddevPop => "stddev_pop",
            AggFunc::StddevSamp => "stddev_samp",
            AggFunc::Corr => "corr",
            AggFunc::CovarPop => "covar_pop",
            AggFunc::CovarSamp => "covar_samp",
            AggFunc::RegrSlope => "regr_slope",
            AggFunc::RegrIntercept => "regr_intercept",
            AggFunc::RegrR2 => "regr_r2",
            AggFunc::RegrAvgX => "regr_avgx",
            AggFunc::RegrAvgY => "regr_avgy",
            AggFunc::RegrSxx => "regr_sxx",
            AggFunc::RegrSyy => "regr_syy",
            AggFunc::RegrSxy => "regr_sxy",
        }
    }

    /// The function of SQL name `name` (as [`AggFunc::name`] writes it).
    pub fn from_name(name: &str) -> Option<AggFunc> {
        AggFunc::ALL.into_iter().find(|f| f.name() == name)
    }

    /// True for the functions of two inputs, whose partial state is the co-moments
    /// (count, both means, both M2, and the sum of products of deviations).
    pub fn is_comoment(self) -> bool {
        matches!(
            self,
            AggFunc::Corr
                | AggFunc::CovarPop
                | AggFunc::CovarSamp
                | AggFunc::RegrSlope
                | AggFunc::RegrIntercept
                | AggFunc::RegrR2
                | AggFunc::RegrAvgX
                | AggFunc::RegrAvgY
                | AggFunc::RegrSxx
                | AggFunc::RegrSyy
                | AggFunc::RegrSxy
        )
    }

    /// True for the variance family, whose partial state is (count, mean, M2).
    pub fn is_moment(self) -> bool {
        matches!(
            self,
            AggFunc::VarPop | AggFunc::VarSamp | AggFunc::StddevPop | AggFunc::StddevSamp
        )
    }
}

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

/// Whether every value of `from` converts to `to` without loss (or `to` is Float64, the
/// type DataFusion itself coerces numeric aggregates to).
pub fn widens(from: &DataType, to: &DataType) -> bool {
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

/// An affine map `x·scale + offset`, computed in Float64. A map without an offset has
/// the offset -0.0, the additive identity of IEEE floats (x + -0.0 is x for every x, -0.0
/// included; x + 0.0 turns -0.0 into +0.0), so that `v * 2` keeps the sign of a zero as
/// DataFusion's own product does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine {
    pub scale: f64,
    pub offset: f64,
}

impl Affine {
    /// The identity map.
    pub const IDENTITY: Affine = Affine {
        scale: 1.0,
        offset: -0.0,
    };

    /// `x·scale`, without an offset.
    pub fn scaled(scale: f64) -> Affine {
        Affine { scale, offset: -0.0 }
    }

    /// Whether the map adds nothing (its offset is the additive identity -0.0).
    fn no_offset(self) -> bool {
        self.offset == 0.0 && self.offset.is_sign_negative()
    }

    /// `x·scale + offset`.
    #[inline(always)]
    pub fn apply(self, x: f64) -> f64 {
        x * self.scale + self.offset
    }

    /// `then ∘ self`: first `self`, then `then`.
    pub fn then(self, then: Affine) -> Affine {
        Affine {
            scale: self.scale * then.scale,
            offset: if self.no_offset() {
                then.offset
            } else {
                self.offset * then.scale + then.offset
            },
        }
    }
}

impl From<crate::format::Packing> for Affine {
    fn from(p: crate::format::Packing) -> Self {
        Affine {
            scale: p.scale,
            offset: p.offset,
        }
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
    /// Int64, sums of the sum type, extremes of the input type, the rest Float64 (the
    /// types DataFusion's own functions return).
    pub fn value_type(&self) -> DataType {
        match self.func {
            AggFunc::CountStar | AggFunc::Count => DataType::Int64,
            AggFunc::Sum => sum_type(&self.input_type),
            AggFunc::Min | AggFunc::Max => self.input_type.clone(),
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
    pub groups: Vec<GroupKey>,
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

    /// Output schema of `output`: the group keys, then every partial-state column or
    /// every aggregate's value.
    pub fn schema(&self, output: AggregateOutput) -> SchemaRef {
        let mut fields: Vec<Field> = self
            .groups
            .iter()
            .map(|k| Field::new(&k.name, k.data_type.clone(), k.expr.is_some()))
            .collect();
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
            if !ok || !a.filter.as_ref().is_none_or(foldable) {
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
        Ok(())
    }
}

/// The type of `e` when it is `v` (of type `v_type`), or `CAST(v AS t)` / `TRY_CAST` to a
/// type that holds every value of `v` exactly.
pub fn value_input(e: &Expr, v_type: &DataType) -> Option<DataType> {
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

/// `e` as `v·scale + offset` when every step of it is Float64 arithmetic on `v` (or
/// `CAST(v AS DOUBLE)`) and finite Float64 literals: `v + c`, `c - v`, `v * c`, `v / c`,
/// `-v`, nested.
pub fn affine_of(e: &Expr, v_type: &DataType) -> Option<Affine> {
    let literal = |e: &Expr| match e {
        Expr::Literal(ScalarValue::Float64(Some(c)), _) if c.is_finite() => Some(*c),
        _ => None,
    };
    let m = match e {
        Expr::Column(c) if c.name == VALUE_COLUMN && *v_type == DataType::Float64 => Affine::IDENTITY,
        Expr::Cast(c) if *c.field.data_type() == DataType::Float64 => match c.expr.as_ref() {
            Expr::Column(col) if col.name == VALUE_COLUMN => Affine::IDENTITY,
            inner => affine_of(inner, v_type)?,
        },
        Expr::Negative(x) => affine_of(x, v_type)?.then(Affine::scaled(-1.0)),
        Expr::BinaryExpr(b) => {
            let (x, c, literal_left) = match (literal(&b.left), literal(&b.right)) {
                (None, Some(c)) => (affine_of(&b.left, v_type)?, c, false),
                (Some(c), None) => (affine_of(&b.right, v_type)?, c, true),
                _ => return None,
            };
            let step = match (b.op, literal_left) {
                (Operator::Plus, _) => Affine { scale: 1.0, offset: c },
                (Operator::Minus, false) => Affine { scale: 1.0, offset: -c },
                (Operator::Minus, true) => Affine { scale: -1.0, offset: c },
                (Operator::Multiply, _) => Affine::scaled(c),
                (Operator::Divide, false) if c != 0.0 => Affine::scaled(1.0 / c),
                _ => return None,
            };
            x.then(step)
        }
        _ => return None,
    };
    (m.scale.is_finite() && m.scale != 0.0 && m.offset.is_finite()).then_some(m)
}

/// An aggregate input weighted by one axis: `w(axis)` alone, or the value (`v` or an
/// affine map of it) times `w(axis)`, where `w` is any deterministic Float64 expression
/// of that axis (`cos(radians(lat))`): the area weights of a climate mean. The fold
/// evaluates `w` once per position of the axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighted {
    /// The axis the weight reads.
    pub axis: usize,
    /// The weight: an expression of that axis column alone.
    pub weight: Expr,
    /// The map of `v` the weight multiplies (`None`: the weight alone).
    pub value: Option<Affine>,
    /// The product is computed in f32 (a Float32 `v` times a Float32 weight, as with a
    /// Float32 latitude), then widened to f64 for the sum.
    pub f32_product: bool,
}

/// An aggregate input that is an expression of value columns times a weight of one axis
/// (`a * b * cos(radians(lat))`): the weight evaluated once per position, the rest
/// compiled by the fold.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedExpr {
    /// The axis the weight reads.
    pub axis: usize,
    /// The weight: an expression of that axis column alone.
    pub weight: Expr,
    /// What the weight multiplies: an expression of value columns (and no axis).
    pub value: Expr,
    /// `CAST(value * weight AS DOUBLE)`: the product is taken in Float32 (value and
    /// weight are Float32), then widened; else both are Float64.
    pub f32_product: bool,
}

/// `e` as a [`WeightedExpr`]: `value * w(axis)` or `w(axis) * value`, or that product
/// inside a cast to Float64; `None` when one side is not an expression of one axis alone
/// or the other reads an axis. The types of the two sides are the caller's to check.
pub fn weighted_expr(table: &TableModel, e: &Expr) -> Option<WeightedExpr> {
    let (e, f32_product) = match e {
        Expr::Cast(c) if *c.field.data_type() == DataType::Float64 => (c.expr.as_ref(), true),
        e => (e, false),
    };
    let Expr::BinaryExpr(b) = e else { return None };
    if b.op != Operator::Multiply {
        return None;
    }
    let axis_only = |e: &Expr| match expr_columns(table, e)?.as_slice() {
        [d] if *d < table.axes.len() => Some(*d),
        _ => None,
    };
    let values_only =
        |e: &Expr| expr_columns(table, e).is_some_and(|c| !c.is_empty() && c.iter().all(|&c| c >= table.axes.len()));
    let (value, weight) = match (values_only(&b.left), values_only(&b.right)) {
        (true, false) => (b.left.as_ref(), b.right.as_ref()),
        (false, true) => (b.right.as_ref(), b.left.as_ref()),
        _ => return None,
    };
    Some(WeightedExpr {
        axis: axis_only(weight)?,
        weight: weight.clone(),
        value: value.clone(),
        f32_product,
    })
}

/// `e` (of type Float64) as a [`Weighted`] input: `w(axis)` (of any table), or of a table
/// of one dataset `f(v) * w(axis)` or
/// `w(axis) * f(v)` with `f` a widening cast of `v` to Float64 or an affine map of it,
/// or `CAST(v * w(axis) AS DOUBLE)` of a Float32 `v` and weight.
pub fn weighted_input(table: &TableModel, e: &Expr) -> Option<Weighted> {
    let v_type = table.value_type();
    let axis_only = |e: &Expr| match expr_columns(table, e)?.as_slice() {
        [d] if *d < table.axes.len() => Some(*d),
        _ => None,
    };
    if let Some(axis) = axis_only(e) {
        return Some(Weighted {
            axis,
            weight: e.clone(),
            value: None,
            f32_product: false,
        });
    }
    if table.is_multi() {
        // Products with a value column are `weighted_expr`s of a table of several.
        return None;
    }
    let (e, f32_product) = match e {
        Expr::Cast(c) if *c.field.data_type() == DataType::Float64 && v_type == DataType::Float32 => {
            (c.expr.as_ref(), true)
        }
        e => (e, false),
    };
    let Expr::BinaryExpr(b) = e else { return None };
    if b.op != Operator::Multiply {
        return None;
    }
    let value = |x: &Expr| match value_input(x, &v_type) {
        // Float32 products: `v` itself (so the weight is Float32 too).
        Some(DataType::Float32) if f32_product && matches!(x, Expr::Column(_)) => Some(Affine::IDENTITY),
        Some(DataType::Float64) if !f32_product => Some(Affine::IDENTITY),
        Some(_) => None,
        None if f32_product => None,
        None => affine_of(x, &v_type),
    };
    let (value, weight) = match (value(&b.left), value(&b.right)) {
        (Some(m), None) => (m, b.right.as_ref()),
        (None, Some(m)) => (m, b.left.as_ref()),
        _ => return None,
    };
    Some(Weighted {
        axis: axis_only(weight)?,
        weight: weight.clone(),
        value: Some(value),
        f32_product,
    })
}

/// The value columns of `table` (indices into `table.values`) that `e` reads.
pub fn values_read(table: &TableModel, e: &Expr) -> BTreeSet<usize> {
    e.column_refs()
        .iter()
        .filter_map(|c| table.value_named(&c.name).map(|(k, _)| k))
        .collect()
}

/// Whether `t` is a primitive numeric type (an input the fold accumulates).
pub fn is_numeric(t: &DataType) -> bool {
    t.is_integer() || t.is_floating()
}

/// The table columns (schema indices, ascending) a deterministic expression over value
/// and axis columns reads; `None` for anything else (other columns, volatile functions,
/// subqueries, aggregates, windows, placeholders).
pub fn expr_columns(table: &TableModel, e: &Expr) -> Option<Vec<usize>> {
    if e.is_volatile()
        || e.exists(|x| {
            Ok(matches!(
                x,
                Expr::ScalarSubquery(_)
                    | Expr::Exists(_)
                    | Expr::InSubquery(_)
                    | Expr::AggregateFunction(_)
                    | Expr::WindowFunction(_)
                    | Expr::OuterReferenceColumn(..)
                    | Expr::Placeholder(_)
                    | Expr::GroupingSet(_)
                    | Expr::Unnest(_)
            ))
        })
        .unwrap_or(true)
    {
        return None;
    }
    let mut cols = BTreeSet::new();
    for c in e.column_refs() {
        if c.relation.is_some() {
            return None;
        }
        let i = match table.value_named(&c.name) {
            Some((k, _)) => table.value_index() + k,
            None => table.axis_index(&c.name)?,
        };
        cols.insert(i);
    }
    Some(cols.into_iter().collect())
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
