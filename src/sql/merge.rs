//! `tet_var_pop`, `tet_var_samp`, `tet_stddev_pop`, `tet_stddev_samp` `(n, mean, m2)`:
//! merge per-partition variance states (count, mean, sum of squared deviations) with
//! Chan's formula and finish them as DataFusion's `var_pop`/`var_samp`/`stddev_pop`/
//! `stddev_samp` would (NULL for no values; the sample forms also for one). The aggregate
//! pushdown uses them so partial states stay exact instead of being rebuilt from sums of
//! squares.
//!
//! `tet_corr`, `tet_covar_pop`, `tet_covar_samp` `(n, mean_x, mean_y, m2_x, m2_y, c2)`:
//! the same for co-moment states, finished as DataFusion's `corr`, `covar_pop` and
//! `covar_samp` would.
//!
//! Both finish by [`Moments::finish`] and [`CoMoment::finish`], as the fold does when it
//! merges its partitions itself.

use crate::exec::kernel::{CoMoment, Moments};
use crate::plan::AggFunc;
use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Field, FieldRef, Float64Type, UInt64Type};
use datafusion::common::{Result, ScalarValue, internal_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};
use std::sync::Arc;

/// Which statistic a merge aggregate finishes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MomentKind {
    VarPop,
    VarSamp,
    StddevPop,
    StddevSamp,
}

impl MomentKind {
    /// All four, for registration.
    pub const ALL: [MomentKind; 4] = [
        MomentKind::VarPop,
        MomentKind::VarSamp,
        MomentKind::StddevPop,
        MomentKind::StddevSamp,
    ];

    /// Registered name.
    pub fn udaf_name(self) -> &'static str {
        match self {
            MomentKind::VarPop => "tet_var_pop",
            MomentKind::VarSamp => "tet_var_samp",
            MomentKind::StddevPop => "tet_stddev_pop",
            MomentKind::StddevSamp => "tet_stddev_samp",
        }
    }

    /// The aggregate function it finishes as.
    pub fn func(self) -> AggFunc {
        match self {
            MomentKind::VarPop => AggFunc::VarPop,
            MomentKind::VarSamp => AggFunc::VarSamp,
            MomentKind::StddevPop => AggFunc::StddevPop,
            MomentKind::StddevSamp => AggFunc::StddevSamp,
        }
    }
}

/// Every merge function the aggregate pushdown's plans call (registered by
/// [`crate::register`]; carried by name in serialized plans).
pub fn merge_functions() -> Vec<datafusion::logical_expr::AggregateUDF> {
    let mut out: Vec<datafusion::logical_expr::AggregateUDF> = MomentKind::ALL
        .into_iter()
        .map(|k| MergeMoments::new(k).into())
        .collect();
    out.extend([false, true].map(|max| FloatExtreme::new(max).into()));
    out.extend(AggFunc::ALL.into_iter().filter_map(MergeCoMoments::new).map(Into::into));
    out
}

/// The merge UDAF of one co-moment aggregate ([`AggFunc::is_comoment`]), registered as
/// `tet_` and the function's name.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MergeCoMoments {
    func: AggFunc,
    name: String,
    signature: Signature,
}

impl MergeCoMoments {
    /// The merge of `func`, if it is a function of two inputs.
    pub fn new(func: AggFunc) -> Option<Self> {
        let mut types = vec![DataType::UInt64];
        types.extend(std::iter::repeat_n(DataType::Float64, 5));
        func.is_comoment().then(|| MergeCoMoments {
            func,
            name: format!("tet_{}", func.name()),
            signature: Signature::exact(types, Volatility::Immutable),
        })
    }
}

/// The co-moment state's fields, in argument order.
const COMOMENT_FIELDS: [&str; 6] = ["n", "mean_x", "mean_y", "m2_x", "m2_y", "c2"];

impl AggregateUDFImpl for MergeCoMoments {
    fn name(&self) -> &str {
        &self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn accumulator(&self, _acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CoMomentsAccumulator {
            func: self.func,
            m: CoMoment::default(),
        }))
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(COMOMENT_FIELDS
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let t = if i == 0 { DataType::UInt64 } else { DataType::Float64 };
                Arc::new(Field::new(format!("{}[{f}]", args.name), t, true))
            })
            .collect())
    }
}

/// Accumulator of the co-moment merge UDAFs.
#[derive(Debug)]
struct CoMomentsAccumulator {
    func: AggFunc,
    m: CoMoment,
}

impl Accumulator for CoMomentsAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let [n, rest @ ..] = values else {
            return internal_err!("tet_{} takes (n, mean_x, mean_y, m2_x, m2_y, c2)", self.func.name());
        };
        let n = n.as_primitive::<UInt64Type>();
        let f: Vec<&arrow::array::Float64Array> = rest.iter().map(|a| a.as_primitive::<Float64Type>()).collect();
        if f.len() != 5 {
            return internal_err!("tet_{} takes (n, mean_x, mean_y, m2_x, m2_y, c2)", self.func.name());
        }
        for i in 0..n.len() {
            if n.is_valid(i) && f.iter().all(|a| a.is_valid(i)) {
                self.m
                    .merge(CoMoment::from_state(n.value(i), std::array::from_fn(|k| f[k].value(i))));
            }
        }
        Ok(())
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let (n, rest) = self.m.state();
        let rest = rest.into_iter().map(|x| ScalarValue::Float64(Some(x)));
        Ok(std::iter::once(ScalarValue::UInt64(Some(n))).chain(rest).collect())
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(self.m.finish(self.func)))
    }
    fn size(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

/// The merge UDAF of one [`MomentKind`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MergeMoments {
    kind: MomentKind,
    signature: Signature,
}

impl MergeMoments {
    pub fn new(kind: MomentKind) -> Self {
        MergeMoments {
            kind,
            signature: Signature::exact(
                vec![DataType::UInt64, DataType::Float64, DataType::Float64],
                Volatility::Immutable,
            ),
        }
    }
}

impl AggregateUDFImpl for MergeMoments {
    fn name(&self) -> &str {
        self.kind.udaf_name()
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn accumulator(&self, _acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(MomentsAccumulator {
            kind: self.kind,
            m: Moments::default(),
        }))
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(format!("{}[n]", args.name), DataType::UInt64, true)),
            Arc::new(Field::new(format!("{}[mean]", args.name), DataType::Float64, true)),
            Arc::new(Field::new(format!("{}[m2]", args.name), DataType::Float64, true)),
        ])
    }
}

/// Accumulator of the merge UDAFs.
#[derive(Debug)]
struct MomentsAccumulator {
    kind: MomentKind,
    m: Moments,
}

impl Accumulator for MomentsAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let [n, mean, m2] = values else {
            return internal_err!("{} takes (n, mean, m2)", self.kind.udaf_name());
        };
        let (n, mean, m2) = (
            n.as_primitive::<UInt64Type>(),
            mean.as_primitive::<Float64Type>(),
            m2.as_primitive::<Float64Type>(),
        );
        for i in 0..n.len() {
            if n.is_valid(i) && mean.is_valid(i) && m2.is_valid(i) {
                self.m.merge(n.value(i), mean.value(i), m2.value(i));
            }
        }
        Ok(())
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::UInt64(Some(self.m.n)),
            ScalarValue::Float64(Some(self.m.mean)),
            ScalarValue::Float64(Some(self.m.m2)),
        ])
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(self.m.finish(self.kind.func())))
    }
    fn size(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

/// `tet_fmin` / `tet_fmax` `(Float64)`: min and max of floats in DataFusion's ungrouped
/// semantics (NaN sorts above every number: max is NaN when any value is, min only when
/// all are). DataFusion's grouped min/max skip NaN instead, so the pushdown merges float
/// partials with these to give one answer whether or not the query groups.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct FloatExtreme {
    max: bool,
    signature: Signature,
}

impl FloatExtreme {
    /// The max (`true`) or min (`false`) merge.
    pub fn new(max: bool) -> Self {
        FloatExtreme {
            max,
            signature: Signature::exact(vec![DataType::Float64], Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for FloatExtreme {
    fn name(&self) -> &str {
        if self.max { "tet_fmax" } else { "tet_fmin" }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn accumulator(&self, _acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(ExtremeAccumulator {
            max: self.max,
            value: None,
        }))
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[value]", args.name),
            DataType::Float64,
            true,
        ))])
    }
}

#[derive(Debug)]
struct ExtremeAccumulator {
    max: bool,
    value: Option<f64>,
}

impl Accumulator for ExtremeAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let [v] = values else {
            return internal_err!("tet_fmin/tet_fmax take one argument");
        };
        for x in v.as_primitive::<Float64Type>().iter().flatten() {
            self.value = Some(match self.value {
                None => x,
                Some(cur) => {
                    // DataFusion's order of floats: IEEE totalOrder (a NaN lies beyond
                    // the infinities on the side of its sign).
                    let x_wins = if self.max {
                        x.total_cmp(&cur).is_gt()
                    } else {
                        x.total_cmp(&cur).is_lt()
                    };
                    if x_wins { x } else { cur }
                }
            });
        }
        Ok(())
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Float64(self.value)])
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(self.value))
    }
    fn size(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}
