//! Exact order statistics in the fold (`median`, `percentile_cont`): the compiled input
//! each gathers ([`order_program`]), each group's values gathered per partition
//! ([`GatheredValues`], by [`GatherKernel`] over a task's cells), and the statistics of
//! the groups computed from every partition's values ([`order_arrays`]).
//!
//! The values are kept as the input computes them (the stored type for `v`, f32 for an
//! f32 result widened to f64), so a group holds its values once; their bytes are reserved
//! in the session's pool as they grow.

use super::cell_walk::CellKernel;
use crate::exec::kernel::simd::multiversion;
use crate::exec::kernel::{Elem, GroupValues, OrderStat, Ordered, Statistic, order_stat};
use crate::exec::program::{BLOCK, Cells, Lane, Program, Scratch, Ty};
use crate::exec::walk::{Segment, Target};
use crate::plan::{AggFunc, AggSpec, TableModel};
use arrow::array::{ArrayRef, PrimitiveArray};
use arrow::datatypes::{ArrowPrimitiveType, DataType, Float32Type, Float64Type};
use datafusion::common::{Result, internal_err};
use datafusion::logical_expr::Expr;
use std::sync::Arc;

/// The program an order statistic of `e` (of type `data_type`) gathers, when the fold
/// computes it as DataFusion does: `e` compiles, to a result of `data_type`, and under a
/// `FILTER` (`filtered`) evaluating it cannot fail (DataFusion evaluates an input on rows
/// its `FILTER` drops too, and a negative square root fails the query there).
pub(crate) fn order_program(table: &TableModel, e: &Expr, data_type: &DataType, filtered: bool) -> Option<Program> {
    let p = Program::compile(table, e)?;
    let typed = matches!(
        (p.ty(), data_type),
        (Ty::F32, DataType::Float32) | (Ty::F64, DataType::Float64)
    );
    (typed && !(filtered && p.fallible())).then_some(p)
}

/// The statistic an aggregate asks.
pub(super) fn order_stat_of(spec: &AggSpec) -> Result<OrderStat> {
    match (spec.func, spec.percentile) {
        (AggFunc::Median, _) => Ok(OrderStat::Median),
        (AggFunc::PercentileCont, Some(p)) => Ok(OrderStat::Percentile(p)),
        (f, _) => internal_err!("TetAggregateExec: {} is not an order statistic", f.name()),
    }
}

/// One partition's values of an order statistic's input, per group, in the type the
/// program evaluates in ([`Program::eval_ty`]).
#[derive(Debug)]
pub(super) enum GatheredValues {
    F32(GroupValues<f32>),
    F64(GroupValues<f64>),
}

impl GatheredValues {
    /// No values yet in `groups` groups, for `program`'s results.
    pub(super) fn new(program: &Program, groups: usize) -> Self {
        match program.eval_ty() {
            Ty::F32 => GatheredValues::F32(GroupValues::new(groups)),
            Ty::F64 => GatheredValues::F64(GroupValues::new(groups)),
        }
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> usize {
        match self {
            GatheredValues::F32(v) => v.bytes(),
            GatheredValues::F64(v) => v.bytes(),
        }
    }

    /// The f32 values, if they are.
    fn f32s(&self) -> Option<&GroupValues<f32>> {
        match self {
            GatheredValues::F32(v) => Some(v),
            GatheredValues::F64(_) => None,
        }
    }

    /// The f64 values, if they are.
    fn f64s(&self) -> Option<&GroupValues<f64>> {
        match self {
            GatheredValues::F64(v) => Some(v),
            GatheredValues::F32(_) => None,
        }
    }

    /// Bytes one value takes.
    pub(super) fn width(program: &Program) -> usize {
        match program.eval_ty() {
            Ty::F32 => size_of::<f32>(),
            Ty::F64 => size_of::<f64>(),
        }
    }
}

/// Gathers a program's results over the kept cells of a task into their groups.
pub(super) struct GatherKernel<'a> {
    pub(super) values: &'a mut GatheredValues,
    pub(super) program: &'a Program,
    pub(super) scratch: Scratch,
    pub(super) at: Vec<u32>,
}

impl CellKernel for GatherKernel<'_> {
    #[inline(always)]
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool {
        let (p, scratch, at) = (self.program, &mut self.scratch, &mut self.at[..]);
        match &mut *self.values {
            GatheredValues::F32(v) => gather_run::<C, f32>(v, s, cells, p, scratch, at),
            GatheredValues::F64(v) => gather_run::<C, f64>(v, s, cells, p, scratch, at),
        }
    }
}

multiversion! {
    /// Evaluate `program` (of type `F`) over segment `s`'s kept cells, block by block,
    /// and append the results to their groups' values; true when a square root met a
    /// negative kept value.
    fn gather_run[C, F](
        values: &mut GroupValues<F>,
        s: &Segment,
        cells: &C,
        program: &Program,
        scratch: &mut Scratch,
        at: &mut [u32],
    ) -> bool where [C: Cells, F: Lane + Elem] = gather_run_body;
}

/// The body of [`gather_run`], compiled into each of its copies.
#[inline(always)]
fn gather_run_body<C, F>(
    values: &mut GroupValues<F>,
    s: &Segment,
    cells: &C,
    program: &Program,
    scratch: &mut Scratch,
    at: &mut [u32],
) -> bool
where
    C: Cells,
    F: Lane + Elem,
{
    let plain = cells.plain();
    if let (Target::One(g), true, Some(y)) = (s.target, plain, program.view::<C, F>(cells, 0, s.len)) {
        values.extend(g, y);
        return false;
    }
    let mut negative = false;
    for b in 0..s.len.div_ceil(BLOCK) {
        let from = b * BLOCK;
        let n = BLOCK.min(s.len - from);
        let m = if plain { n } else { cells.kept(from, n, at) };
        let kept = (m < n).then_some(&at[..m]);
        let (y, neg) = program.eval::<C, F>(cells, from, kept, m, scratch);
        negative |= neg;
        match s.target {
            Target::One(g) => values.extend(g, y),
            t @ Target::Each { .. } => {
                for (j, &v) in y.iter().enumerate() {
                    let i = kept.map_or(j, |a| a[j] as usize);
                    values.push(t.group(from + i), v);
                }
            }
        }
    }
    negative
}

/// The statistics `stats` of one input over the `touched` groups, from every partition's
/// values of it (`parts`), as arrays of the statistic's type `program.ty()`; `scratch`
/// says how many bytes the keys of the largest group take before they are allocated
/// (reserved by the caller).
pub(super) fn order_arrays(
    parts: &[&GatheredValues],
    program: &Program,
    stats: &[OrderStat],
    touched: &[usize],
    scratch: impl FnOnce(usize) -> Result<()>,
) -> Result<Vec<ArrayRef>> {
    // Every part holds values of the type the program evaluates in.
    let f32s: Option<Vec<&GroupValues<f32>>> = parts.iter().map(|p| p.f32s()).collect();
    let f64s: Option<Vec<&GroupValues<f64>>> = parts.iter().map(|p| p.f64s()).collect();
    Ok(match (program.eval_ty(), program.ty(), f32s, f64s) {
        (Ty::F32, Ty::F32, Some(p), _) => arrays::<f32, Float32Type>(stats_of(&p, stats, touched, scratch)?),
        (Ty::F32, Ty::F64, Some(p), _) => {
            arrays::<f64, Float64Type>(stats_of::<f32, f64>(&p, stats, touched, scratch)?)
        }
        (Ty::F64, Ty::F64, _, Some(p)) => arrays::<f64, Float64Type>(stats_of(&p, stats, touched, scratch)?),
        (e, t, ..) => return internal_err!("TetAggregateExec: a {t:?} statistic of {e:?} values gathered otherwise"),
    })
}

/// Each statistic's values as an Arrow array of `A`.
fn arrays<S, A>(columns: Vec<Vec<Option<S>>>) -> Vec<ArrayRef>
where
    A: ArrowPrimitiveType<Native = S>,
{
    columns
        .into_iter()
        .map(|c| Arc::new(c.into_iter().collect::<PrimitiveArray<A>>()) as ArrayRef)
        .collect()
}

/// Per statistic, its value in each of the `touched` groups: the group's values of every
/// part, as keys, selected.
fn stats_of<G, S>(
    parts: &[&GroupValues<G>],
    stats: &[OrderStat],
    touched: &[usize],
    scratch: impl FnOnce(usize) -> Result<()>,
) -> Result<Vec<Vec<Option<S>>>>
where
    G: Ordered,
    S: Statistic + From<G>,
{
    let size = |g: usize| parts.iter().map(|p| p.of(g).len()).sum::<usize>();
    let largest = touched.iter().map(|&g| size(g)).max().unwrap_or(0);
    scratch(largest.saturating_mul(size_of::<G::Key>()))?;
    let mut keys: Vec<G::Key> = Vec::with_capacity(largest);
    let mut out: Vec<Vec<Option<S>>> = stats.iter().map(|_| Vec::with_capacity(touched.len())).collect();
    for &g in touched {
        keys.clear();
        for p in parts {
            keys.extend(p.of(g).iter().map(|x| x.key()));
        }
        for (column, &stat) in out.iter_mut().zip(stats) {
            column.push(order_stat::<G, S>(&mut keys, stat));
        }
    }
    Ok(out)
}
