//! Order statistics in the fold (`median`, `percentile_cont` and their approximations):
//! the compiled input each gathers ([`order_program`]), each group's values gathered per
//! partition, or a sketch of them ([`GatheredValues`], by [`GatherKernel`] over a task's
//! cells), and the statistics of the groups computed from every partition's values
//! ([`order_arrays`]).
//!
//! The values are kept as the input computes them (the stored type for `v`, f32 for an
//! f32 result widened to f64), so a group holds its values once; their bytes are reserved
//! in the session's pool as they grow.

use super::cell_walk::CellKernel;
use crate::exec::kernel::simd::multiversion;
use crate::exec::kernel::{
    Elem, GroupSketches, GroupValues, OrderStat, Ordered, Sketch, Sketched, Statistic, order_stat,
};
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

/// The statistic an aggregate asks (an approximate median is the percentile 0.5).
pub(super) fn order_stat_of(spec: &AggSpec) -> Result<OrderStat> {
    match (spec.func, spec.percentile) {
        (AggFunc::Median, _) => Ok(OrderStat::Median),
        (AggFunc::ApproxMedian, _) => Ok(OrderStat::Percentile(0.5)),
        (AggFunc::PercentileCont | AggFunc::ApproxPercentileCont, Some(p)) => Ok(OrderStat::Percentile(p)),
        (f, _) => internal_err!("TetAggregateExec: {} is not an order statistic", f.name()),
    }
}

/// One partition's values of an order statistic's input, per group, in the type the
/// program evaluates in ([`Program::eval_ty`]): all of them for an exact statistic, a
/// sketch of them for an approximate one.
#[derive(Debug)]
pub(super) enum GatheredValues {
    F32(GroupValues<f32>),
    F64(GroupValues<f64>),
    Sketch32(GroupSketches<f32>),
    Sketch64(GroupSketches<f64>),
}

impl GatheredValues {
    /// No values yet in `groups` groups, for `program`'s results, kept whole or
    /// sketched (`approximate`).
    pub(super) fn new(program: &Program, groups: usize, approximate: bool) -> Self {
        match (program.eval_ty(), approximate) {
            (Ty::F32, false) => GatheredValues::F32(GroupValues::new(groups)),
            (Ty::F64, false) => GatheredValues::F64(GroupValues::new(groups)),
            (Ty::F32, true) => GatheredValues::Sketch32(GroupSketches::new(groups)),
            (Ty::F64, true) => GatheredValues::Sketch64(GroupSketches::new(groups)),
        }
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> usize {
        match self {
            GatheredValues::F32(v) => v.bytes(),
            GatheredValues::F64(v) => v.bytes(),
            GatheredValues::Sketch32(s) => s.bytes(),
            GatheredValues::Sketch64(s) => s.bytes(),
        }
    }

    /// The f32 values, if they are.
    fn f32s(&self) -> Option<&GroupValues<f32>> {
        match self {
            GatheredValues::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The f64 values, if they are.
    fn f64s(&self) -> Option<&GroupValues<f64>> {
        match self {
            GatheredValues::F64(v) => Some(v),
            _ => None,
        }
    }

    /// Group `g`'s sketch, if the values are sketched.
    fn sketch(&self, g: usize) -> Option<&Sketch> {
        match self {
            GatheredValues::Sketch32(s) => Some(s.of(g)),
            GatheredValues::Sketch64(s) => Some(s.of(g)),
            _ => None,
        }
    }

    /// Bytes one value may add when kept whole; a sketch grows by its buckets, counted
    /// as it holds them.
    pub(super) fn width(program: &Program, approximate: bool) -> usize {
        match (program.eval_ty(), approximate) {
            (_, true) => 0,
            (Ty::F32, false) => size_of::<f32>(),
            (Ty::F64, false) => size_of::<f64>(),
        }
    }
}

/// Where gathered values of type `F` go: each group's values, or its sketch.
pub(super) trait GroupSink<F> {
    /// Add `x` to group `g`.
    fn push(&mut self, g: usize, x: F);
    /// Add `xs` to group `g`.
    fn extend(&mut self, g: usize, xs: &[F]);
}

impl<F: Copy> GroupSink<F> for GroupValues<F> {
    #[inline(always)]
    fn push(&mut self, g: usize, x: F) {
        GroupValues::push(self, g, x)
    }
    #[inline(always)]
    fn extend(&mut self, g: usize, xs: &[F]) {
        GroupValues::extend(self, g, xs)
    }
}

impl<F: Sketched> GroupSink<F> for GroupSketches<F> {
    #[inline(always)]
    fn push(&mut self, g: usize, x: F) {
        GroupSketches::push(self, g, x)
    }
    #[inline(always)]
    fn extend(&mut self, g: usize, xs: &[F]) {
        GroupSketches::extend(self, g, xs)
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
            GatheredValues::F32(v) => gather_run::<C, f32, _>(v, s, cells, p, scratch, at),
            GatheredValues::F64(v) => gather_run::<C, f64, _>(v, s, cells, p, scratch, at),
            GatheredValues::Sketch32(v) => gather_run::<C, f32, _>(v, s, cells, p, scratch, at),
            GatheredValues::Sketch64(v) => gather_run::<C, f64, _>(v, s, cells, p, scratch, at),
        }
    }
}

multiversion! {
    /// Evaluate `program` (of type `F`) over segment `s`'s kept cells, block by block,
    /// and add the results to their groups' values (or sketches); true when a square root
    /// met a negative kept value.
    fn gather_run[C, F, S](
        values: &mut S,
        s: &Segment,
        cells: &C,
        program: &Program,
        scratch: &mut Scratch,
        at: &mut [u32],
    ) -> bool where [C: Cells, F: Lane + Elem, S: GroupSink<F>] = gather_run_body;
}

/// The body of [`gather_run`], compiled into each of its copies.
#[inline(always)]
fn gather_run_body<C, F, S>(
    values: &mut S,
    s: &Segment,
    cells: &C,
    program: &Program,
    scratch: &mut Scratch,
    at: &mut [u32],
) -> bool
where
    C: Cells,
    F: Lane + Elem,
    S: GroupSink<F>,
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
    if parts
        .first()
        .is_some_and(|p| matches!(p, GatheredValues::Sketch32(_) | GatheredValues::Sketch64(_)))
    {
        return sketch_arrays(parts, program, stats, touched);
    }
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

/// [`order_arrays`] of sketched values: each group's sketches of every part merged, the
/// statistics estimated from it.
fn sketch_arrays(
    parts: &[&GatheredValues],
    program: &Program,
    stats: &[OrderStat],
    touched: &[usize],
) -> Result<Vec<ArrayRef>> {
    let estimate = |f: fn(&Sketch, f64) -> Option<f64>| -> Result<Vec<Vec<Option<f64>>>> {
        let mut out: Vec<Vec<Option<f64>>> = stats.iter().map(|_| Vec::with_capacity(touched.len())).collect();
        for &g in touched {
            let mut merged = Sketch::default();
            for p in parts {
                let Some(s) = p.sketch(g) else {
                    return internal_err!("TetAggregateExec: a sketch merged with values kept whole");
                };
                merged.merge(s);
            }
            for (column, stat) in out.iter_mut().zip(stats) {
                let p = match stat {
                    OrderStat::Percentile(p) => *p,
                    OrderStat::Median => 0.5,
                };
                column.push(f(&merged, p));
            }
        }
        Ok(out)
    };
    let columns = match (program.eval_ty(), parts.first()) {
        (Ty::F32, Some(GatheredValues::Sketch32(_))) => estimate(|s, p| s.percentile::<f32>(p))?,
        (Ty::F64, Some(GatheredValues::Sketch64(_))) => estimate(|s, p| s.percentile::<f64>(p))?,
        (e, _) => return internal_err!("TetAggregateExec: a sketch of {e:?} values counted otherwise"),
    };
    Ok(match program.ty() {
        Ty::F32 => arrays::<f32, Float32Type>(
            columns
                .into_iter()
                .map(|c| c.into_iter().map(|x| x.map(|x| x as f32)).collect())
                .collect(),
        ),
        Ty::F64 => arrays::<f64, Float64Type>(columns),
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
