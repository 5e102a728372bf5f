use super::fold_plan::{FoldPlan, Input, Slot};
use super::value_keys::KeyedFold;
use crate::exec::kernel::{Accumulators, CoMoment, Moments, NAN_NEGATIVE, NAN_POSITIVE};
use crate::exec::walk::GroupIndex;
use crate::plan::{Affine, AggFunc, AggInput, AggregateOutput, Aggregation, State, StateColumn, TableModel};
use arrow::array::{ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, RecordBatchOptions, UInt64Array};
use arrow::datatypes::{DataType, Float64Type, SchemaRef, UInt64Type};
use datafusion::common::{Result, internal_err};
use datafusion::error::DataFusionError;
use std::sync::Arc;

/// What the emit of a fold reads: the table, the aggregation and its fold plan.
#[derive(Debug, Clone, Copy)]
pub(super) struct Emit<'a> {
    pub(super) table: &'a TableModel,
    pub(super) aggregation: &'a Aggregation,
    pub(super) fold: &'a FoldPlan,
}

impl Emit<'_> {
    /// Each aggregate's value from its partial states (`states`, as [`Emit::states`]
    /// makes them), as DataFusion's merge of them would finish: counts and sums as they
    /// are, a mean as the sum over the count, the variance family and the co-moment
    /// functions by [`Moments::finish`] and [`CoMoment::finish`]; an order statistic's
    /// values are `order[i]`, selected from the values its groups gathered.
    pub(super) fn values(
        &self,
        states: &RecordBatch,
        mut order: Vec<Option<ArrayRef>>,
        schema: SchemaRef,
    ) -> Result<RecordBatch> {
        let keys = self.aggregation.key_count();
        let mut cols: Vec<ArrayRef> = states.columns()[..keys].to_vec();
        for (i, spec) in self.aggregation.aggs.iter().enumerate() {
            if let Some(values) = order.get_mut(i).and_then(Option::take) {
                cols.push(arrow::compute::cast(&values, &spec.value_type())?);
                continue;
            }
            let state = |s: State| -> Result<&ArrayRef> {
                let name = self.aggregation.state_name(i, s);
                states
                    .column_by_name(&name)
                    .ok_or_else(|| DataFusionError::Internal(format!("TetAggregateExec: no state {name}")))
            };
            let f64s = |s: State| -> Result<ArrayRef> { Ok(arrow::compute::cast(state(s)?, &DataType::Float64)?) };
            let u64s = |s: State| -> Result<ArrayRef> { Ok(arrow::compute::cast(state(s)?, &DataType::UInt64)?) };
            let value: ArrayRef = match spec.func {
                AggFunc::CountStar => state(State::Cells)?.clone(),
                AggFunc::Count | AggFunc::Sum | AggFunc::Min | AggFunc::Max => {
                    let s = match spec.func {
                        AggFunc::Count => State::Count,
                        AggFunc::Sum => State::Sum,
                        AggFunc::Min => State::Min,
                        _ => State::Max,
                    };
                    state(s)?.clone()
                }
                AggFunc::Avg => arrow::compute::kernels::numeric::div(&f64s(State::Sum)?, &f64s(State::Count)?)?,
                f if f.is_moment() => {
                    let (n, mean, m2) = (u64s(State::Count)?, f64s(State::Mean)?, f64s(State::M2)?);
                    let (n, mean, m2) = (
                        n.as_primitive::<UInt64Type>(),
                        mean.as_primitive::<Float64Type>(),
                        m2.as_primitive::<Float64Type>(),
                    );
                    Arc::new(Float64Array::from_iter((0..n.len()).map(|g| {
                        let m = Moments {
                            n: n.value(g),
                            mean: mean.value(g),
                            m2: m2.value(g),
                        };
                        m.finish(f)
                    })))
                }
                f if f.is_order_statistic() => {
                    return internal_err!("TetAggregateExec: {} without its values", f.name());
                }
                f => {
                    let n = u64s(State::Count)?;
                    let n = n.as_primitive::<UInt64Type>();
                    let parts = [State::Mean, State::MeanY, State::M2, State::M2Y, State::CoM2]
                        .map(f64s)
                        .into_iter()
                        .collect::<Result<Vec<_>>>()?;
                    let v: Vec<&Float64Array> = parts.iter().map(|a| a.as_primitive::<Float64Type>()).collect();
                    Arc::new(Float64Array::from_iter((0..n.len()).map(|g| {
                        CoMoment::from_state(n.value(g), std::array::from_fn(|k| v[k].value(g))).finish(f)
                    })))
                }
            };
            cols.push(arrow::compute::cast(&value, &spec.value_type())?);
        }
        Ok(RecordBatch::try_new(schema, cols)?)
    }

    /// The groups a row folded into, or `every_group`.
    pub(super) fn touched(&self, accs: &[Accumulators], every_group: bool) -> Vec<usize> {
        let rows = &accs[self.fold.rows];
        (0..rows.len()).filter(|&g| every_group || rows.cells[g] > 0).collect()
    }

    /// The keys and partial states of the `touched` groups ([`Self::touched`]): the axis
    /// keys of `gi`, the key of the value of `keyed` when the fold groups by one.
    pub(super) fn states(
        &self,
        accs: &[Accumulators],
        pairs: &[Vec<CoMoment>],
        (gi, keyed): (&GroupIndex, Option<&KeyedFold>),
        touched: &[usize],
    ) -> Result<RecordBatch> {
        let mut cols = gi.key_columns(touched)?;
        // A key of the value follows the axis keys.
        cols.extend(keyed.map(|k| k.slots.column(touched, k.count())));
        for column in self.aggregation.state_columns() {
            cols.push(match self.fold.of_agg[column.agg] {
                Slot::Input(i) => self.state_array(&column, &self.fold.inputs[i], &accs[i], touched)?,
                Slot::Pair(j) => comoment_array(column.state, &pairs[j], touched)?,
                Slot::Order(_) => return internal_err!("TetAggregateExec: a partial state of an order statistic"),
            });
        }
        // Order statistics have no states: without keys, the batch may have no column.
        let rows = RecordBatchOptions::new().with_row_count(Some(touched.len()));
        Ok(RecordBatch::try_new_with_options(
            self.aggregation.schema(AggregateOutput::States),
            cols,
            &rows,
        )?)
    }

    /// One partial-state column over the `touched` groups. The accumulators hold
    /// statistics of the folded values; the aggregate's input is those values mapped by
    /// an affine map (a packed dataset's `x·s + o`, an affine input such as `v * 1.8 + 32`,
    /// or both): sums map by `s·sum + o·n`, means likewise, M2 by `s²`, and the minimum and
    /// maximum swap when `s` has its sign set (-0.0 included).
    pub(super) fn state_array(
        &self,
        column: &StateColumn,
        input: &Input,
        acc: &Accumulators,
        touched: &[usize],
    ) -> Result<ArrayRef> {
        let nonempty = |g: usize| acc.n[g] > 0;
        let f64s = |v: &[f64], map: &dyn Fn(usize, f64) -> f64| -> ArrayRef {
            Arc::new(Float64Array::from_iter(
                touched.iter().map(|&g| nonempty(g).then(|| map(g, v[g]))),
            ))
        };
        let spec = &self.aggregation.aggs[column.agg];
        let packing = self.table.value().packing.filter(|_| input.packed).map(Affine::from);
        let affine = match spec.input {
            AggInput::Value { affine } => affine,
            AggInput::Expr(_) | AggInput::Pair(..) => None,
        };
        let map = match (packing, affine) {
            (Some(p), Some(a)) => Some(p.then(a)),
            (p, a) => p.or(a),
        };
        // Extremes of the folded values: (smallest non-NaN, largest non-NaN, saw NaN).
        let extreme = |g: usize, low: bool| -> f64 {
            if !acc.fmin.is_empty() {
                if low { acc.fmin[g] } else { acc.fmax[g] }
            } else if low {
                acc.imin[g] as f64
            } else {
                acc.imax[g] as f64
            }
        };
        // The minimum or maximum of the folded values mapped by `m`, in DataFusion's
        // order of floats: a positive NaN is the largest value, a negative one the
        // smallest; without a number among them the extreme is a NaN of the other sign.
        let float_extreme = |g: usize, is_min: bool, m: Affine| -> f64 {
            let (beyond, other) = if is_min {
                (NAN_NEGATIVE, -f64::NAN)
            } else {
                (NAN_POSITIVE, f64::NAN)
            };
            if !acc.nan.is_empty() && acc.nan[g] & beyond != 0 {
                return other;
            }
            // A scale of -0.0 reverses the order of the zeros it makes, as a negative one
            // reverses the numbers.
            let raw = extreme(g, is_min != m.scale.is_sign_negative());
            if raw.is_nan() { -other } else { m.apply(raw) }
        };
        let same = |_: usize, x: f64| x;
        if let Some(m) = map {
            match column.state {
                State::Sum => return Ok(f64s(&acc.fsum, &|g, x| m.scale * x + m.offset * acc.n[g] as f64)),
                State::Mean => return Ok(f64s(&acc.mean, &|_, x| m.apply(x))),
                State::M2 => return Ok(f64s(&acc.m2, &|_, x| m.scale * m.scale * x)),
                State::Min | State::Max => {
                    let is_min = column.state == State::Min;
                    let arr: ArrayRef = Arc::new(Float64Array::from_iter(
                        touched
                            .iter()
                            .map(|&g| nonempty(g).then(|| float_extreme(g, is_min, m))),
                    ));
                    return Ok(arrow::compute::cast(&arr, &column.data_type)?);
                }
                State::Cells | State::Count | State::MeanY | State::M2Y | State::CoM2 => {}
            }
        }
        let counts = |v: &[u64]| -> ArrayRef {
            match column.data_type {
                DataType::UInt64 => Arc::new(UInt64Array::from_iter_values(touched.iter().map(|&g| v[g]))),
                _ => Arc::new(Int64Array::from_iter_values(touched.iter().map(|&g| v[g] as i64))),
            }
        };
        Ok(match (column.state, &column.data_type) {
            (State::Cells, _) => counts(&acc.cells),
            (State::Count, _) => counts(&acc.n),
            (State::Sum, DataType::Float64) => f64s(&acc.fsum, &same),
            (State::Sum, DataType::Int64) => Arc::new(Int64Array::from_iter(
                touched.iter().map(|&g| nonempty(g).then(|| acc.isum[g])),
            )),
            (State::Sum, DataType::UInt64) => Arc::new(UInt64Array::from_iter(
                touched.iter().map(|&g| nonempty(g).then(|| acc.isum[g] as u64)),
            )),
            (State::Min | State::Max, t) => {
                let is_min = column.state == State::Min;
                let arr: ArrayRef = if !acc.fmin.is_empty() {
                    Arc::new(Float64Array::from_iter(
                        touched
                            .iter()
                            .map(|&g| nonempty(g).then(|| float_extreme(g, is_min, Affine::IDENTITY))),
                    ))
                } else {
                    let v = touched
                        .iter()
                        .map(|&g| nonempty(g).then(|| if is_min { acc.imin[g] } else { acc.imax[g] }));
                    if input.unsigned {
                        Arc::new(UInt64Array::from_iter(v.map(|x| x.map(|x| x as u64))))
                    } else {
                        Arc::new(Int64Array::from_iter(v.map(|x| x.map(|x| x as i64))))
                    }
                };
                arrow::compute::cast(&arr, t)?
            }
            (State::Mean, _) => f64s(&acc.mean, &same),
            (State::M2, _) => f64s(&acc.m2, &same),
            (State::Sum, t) => {
                return Err(DataFusionError::Internal(format!(
                    "TetAggregateExec: a sum state of type {t}"
                )));
            }
            (s @ (State::MeanY | State::M2Y | State::CoM2), _) => {
                return internal_err!("TetAggregateExec: a {s:?} state of one input");
            }
        })
    }
}

/// One co-moment state column over the `touched` groups (NULL where a group has no pair).
pub(super) fn comoment_array(state: State, acc: &[CoMoment], touched: &[usize]) -> Result<ArrayRef> {
    let at = |g: usize| acc[g];
    if state == State::Count {
        return Ok(Arc::new(UInt64Array::from_iter_values(
            touched.iter().map(|&g| at(g).n),
        )));
    }
    let pick = |m: CoMoment| match state {
        State::Mean => Ok(m.mean_x),
        State::MeanY => Ok(m.mean_y),
        State::M2 => Ok(m.m2_x),
        State::M2Y => Ok(m.m2_y),
        State::CoM2 => Ok(m.c2),
        other => internal_err!("TetAggregateExec: no {other:?} state of a pair of inputs"),
    };
    let values = touched
        .iter()
        .map(|&g| {
            let m = at(g);
            if m.n == 0 { Ok(None) } else { pick(m).map(Some) }
        })
        .collect::<Result<Float64Array>>()?;
    Ok(Arc::new(values))
}
