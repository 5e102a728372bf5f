//! The aggregate model shared by the logical rewrite (`sql`) and the fold (`exec`): the
//! functions the pushdown computes, one aggregate ([`AggSpec`]), an [`Aggregation`]
//! (grouped axes and aggregates) and its typed partial-state columns.

use super::axes::Axis;
use super::table::TableModel;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

/// Aggregations with more dense groups than this are left to DataFusion.
pub const MAX_DENSE_GROUPS: u64 = 1 << 24;

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
}

impl AggFunc {
    /// Every function.
    pub const ALL: [AggFunc; 10] = [
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
        }
    }

    /// The function of SQL name `name` (as [`AggFunc::name`] writes it).
    pub fn from_name(name: &str) -> Option<AggFunc> {
        AggFunc::ALL.into_iter().find(|f| f.name() == name)
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
        }
    }
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

/// One aggregate over `v` (or `CAST(v AS input_type)`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AggSpec {
    pub func: AggFunc,
    /// Type of the aggregated expression.
    pub input_type: DataType,
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
            _ => vec![
                (State::Count, DataType::UInt64),
                (State::Mean, DataType::Float64),
                (State::M2, DataType::Float64),
            ],
        }
    }

    /// Whether the aggregate needs payload values (counts of cells do not, nor counts of
    /// non-NULL cells of a dataset without a fill value).
    pub fn reads_payload(&self, nullable: bool) -> bool {
        !(self.func == AggFunc::CountStar || (self.func == AggFunc::Count && !nullable))
    }
}

/// What to aggregate: grouped axes (in output order) and aggregates.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregation {
    /// Axis indices grouped by, in output order.
    pub groups: Vec<usize>,
    pub aggs: Vec<AggSpec>,
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

    /// Output schema: the grouped axis columns, then every partial-state column.
    pub fn schema(&self, axes: &[Axis]) -> SchemaRef {
        let mut fields: Vec<Field> = self
            .groups
            .iter()
            .map(|&d| Field::new(&axes[d].name, axes[d].data_type(), false))
            .collect();
        fields.extend(
            self.state_columns()
                .into_iter()
                .map(|c| Field::new(c.name(), c.data_type, true)),
        );
        Arc::new(Schema::new(fields))
    }

    /// Dense group slots (the product of the grouped axes' extents, saturating).
    pub fn dense_groups(&self, axes: &[Axis]) -> u64 {
        self.groups.iter().fold(1u64, |n, &d| {
            n.saturating_mul(axes.get(d).map_or(1, |a| a.extent.max(1)))
        })
    }

    /// Whether any aggregate needs payload values (see [`AggSpec::reads_payload`]).
    pub fn reads_payload(&self, nullable: bool) -> bool {
        self.aggs.iter().any(|a| a.reads_payload(nullable))
    }

    /// Check an aggregation (e.g. one received in a serialized plan) against the table it
    /// runs on: grouped axes exist, are distinct and within [`MAX_DENSE_GROUPS`], and every
    /// input type is one the pushdown itself produces for the value column.
    pub fn check(&self, table: &TableModel) -> Result<(), String> {
        let mut seen = vec![false; table.axes.len()];
        for &d in &self.groups {
            if d >= seen.len() || std::mem::replace(&mut seen[d], true) {
                return Err(format!("group axis {d} is out of range or repeated"));
            }
        }
        let dense = self.dense_groups(&table.axes);
        if dense > MAX_DENSE_GROUPS {
            return Err(format!("{dense} groups exceed the limit of {MAX_DENSE_GROUPS}"));
        }
        let v_type = table.value_type();
        for a in &self.aggs {
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
                .map(|&func| AggSpec {
                    func,
                    input_type: DataType::Int16,
                })
                .collect(),
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
