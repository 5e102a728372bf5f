use super::cell_walk::CellKernel;
use crate::exec::kernel::simd::multiversion;
use crate::exec::kernel::{Accumulators, CoMoment, Elem, Keep, fold_run, fold_value, masked_sum, ones};
use crate::exec::program::{BLOCK, Cells, Lane, Program, Scratch, Ty};
use crate::exec::walk::{AxisValues, Segment, Target};
use crate::format::DType;

/// A compiled expression folded into one input's accumulators.
pub(super) struct ProgramKernel<'a> {
    pub(super) acc: &'a mut Accumulators,
    pub(super) program: &'a Program,
    pub(super) scratch: Scratch,
    pub(super) at: Vec<u32>,
}

impl CellKernel for ProgramKernel<'_> {
    #[inline(always)]
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool {
        let (acc, p, scratch, at) = (&mut *self.acc, self.program, &mut self.scratch, &mut self.at[..]);
        match p.eval_ty() {
            Ty::F64 => fold_program_run::<C, f64>(acc, s, cells, p, scratch, at),
            Ty::F32 => fold_program_run::<C, f32>(acc, s, cells, p, scratch, at),
        }
    }
}

/// The rows that ranges of stored values keep (in a table of several datasets), counted.
pub(super) struct RowKernel<'a> {
    pub(super) acc: &'a mut Accumulators,
    pub(super) at: Vec<u32>,
}

impl CellKernel for RowKernel<'_> {
    #[inline(always)]
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool {
        count_rows(self.acc, s, cells, &mut self.at);
        false
    }
}

multiversion! {
    /// Count segment `s`'s kept cells as rows (cells and values) of their groups.
    fn count_rows[C](acc: &mut Accumulators, s: &Segment, cells: &C, at: &mut [u32]) where [C: Cells] = count_rows_body;
}

/// The body of [`count_rows`], compiled into each of its copies.
#[inline(always)]
fn count_rows_body<C>(acc: &mut Accumulators, s: &Segment, cells: &C, at: &mut [u32])
where
    C: Cells,
{
    let mut mask = [0u8; BLOCK];
    for b in 0..s.len.div_ceil(BLOCK) {
        let from = b * BLOCK;
        let n = BLOCK.min(s.len - from);
        match s.target {
            Target::One(g) => {
                cells.mask(from, n, &mut mask[..n]);
                let m = ones(&mask[..n]);
                acc.cells[g] += m;
                acc.n[g] += m;
            }
            t @ Target::Each { .. } => {
                let m = cells.kept(from, n, at);
                for &i in &at[..m] {
                    let g = t.group(from + i as usize);
                    acc.cells[g] += 1;
                    acc.n[g] += 1;
                }
            }
        }
    }
}

/// Two compiled expressions folded into co-moments.
pub(super) struct PairKernel<'a> {
    pub(super) acc: &'a mut [CoMoment],
    pub(super) x: &'a Program,
    pub(super) y: &'a Program,
    pub(super) sx: Scratch,
    pub(super) sy: Scratch,
    pub(super) at: Vec<u32>,
}

impl CellKernel for PairKernel<'_> {
    #[inline(always)]
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool {
        let (acc, at) = (&mut *self.acc, &mut self.at[..]);
        let (x, y, sx, sy) = (self.x, self.y, &mut self.sx, &mut self.sy);
        match (x.eval_ty(), y.eval_ty()) {
            (Ty::F64, Ty::F64) => fold_pair_run::<C, f64, f64>(acc, s, cells, (x, y), (sx, sy), at),
            (Ty::F64, Ty::F32) => fold_pair_run::<C, f64, f32>(acc, s, cells, (x, y), (sx, sy), at),
            (Ty::F32, Ty::F64) => fold_pair_run::<C, f32, f64>(acc, s, cells, (x, y), (sx, sy), at),
            (Ty::F32, Ty::F32) => fold_pair_run::<C, f32, f32>(acc, s, cells, (x, y), (sx, sy), at),
        }
    }
}

/// A compiled expression times a weight of one axis, folded into one input's
/// accumulators.
pub(super) struct WeightedProgramKernel<'a> {
    pub(super) acc: &'a mut Accumulators,
    pub(super) program: &'a Program,
    pub(super) weights: &'a AxisValues,
    /// The weight's axis is the innermost one (a weight per cell of a segment, else one
    /// for the whole segment).
    pub(super) inner: bool,
    pub(super) f32_product: bool,
    pub(super) scratch: Scratch,
    pub(super) at: Vec<u32>,
    pub(super) products: Vec<f64>,
}

impl CellKernel for WeightedProgramKernel<'_> {
    #[inline(always)]
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool {
        match self.program.eval_ty() {
            Ty::F64 => fold_weighted_program_run::<C, f64>(self, s, cells),
            Ty::F32 => fold_weighted_program_run::<C, f32>(self, s, cells),
        }
    }
}

multiversion! {
    /// Evaluate `k`'s program (of type `F`) over segment `s`'s kept cells, block by
    /// block, and fold each result times its weight (a NULL weight: a row without a
    /// value); true when a square root met a negative kept value.
    fn fold_weighted_program_run[C, F](k: &mut WeightedProgramKernel<'_>, s: &Segment, cells: &C) -> bool where [C: Cells, F: Lane + Elem] = fold_weighted_program_run_body;
}

/// The body of [`fold_weighted_program_run`], compiled into each of its copies.
#[inline(always)]
fn fold_weighted_program_run_body<C, F>(k: &mut WeightedProgramKernel<'_>, s: &Segment, cells: &C) -> bool
where
    C: Cells,
    F: Lane + Elem,
{
    let WeightedProgramKernel {
        acc,
        program,
        weights,
        inner,
        f32_product,
        scratch,
        at,
        products,
    } = k;
    let (inner, f32_product) = (*inner, *f32_product);
    let (plain, ranged) = (cells.plain(), cells.ranged());
    let p0 = (s.pos - weights.first) as usize;
    let weight_at = |i: usize| {
        let q = if inner { p0 + i } else { p0 };
        weights.valid[q].then(|| weights.values[q])
    };
    let product = |y: F, w: f64| {
        if f32_product {
            (y.f32() * w as f32) as f64
        } else {
            y.f() * w
        }
    };
    // Two value columns combined, in place, times the segment's one weight, summed as
    // they are read: `product` in `F` (f32 for a product in f32, f64 for one in f64).
    if let (Target::One(g), true, false, true) = (s.target, plain, inner, acc.needs.sum_only())
        && f32_product == (F::DTYPE == DType::F32)
        && let Some(w) = weight_at(0)
        && let Some(sum) = program.combined_sum::<C, F>(cells, 0, s.len, F::of_f64(w))
    {
        let n = s.len as u64;
        acc.add_sum(g, n, n, sum);
        return false;
    }
    let mut negative = false;
    for b in 0..s.len.div_ceil(BLOCK) {
        let from = b * BLOCK;
        let n = BLOCK.min(s.len - from);
        let m = if plain { n } else { cells.kept(from, n, at) };
        let gather = (m < n).then_some(&at[..m]);
        let (y, neg) = program.eval::<C, F>(cells, from, gather, m, scratch);
        negative |= neg;
        let cell = |j: usize| from + gather.map_or(j, |a| a[j] as usize);
        let rows = if ranged { m } else { n };
        match s.target {
            Target::One(g) => {
                let mut q = 0;
                if !inner {
                    if let Some(w) = weight_at(0) {
                        products[..m].iter_mut().zip(y).for_each(|(o, &v)| *o = product(v, w));
                        q = m;
                    }
                } else {
                    for (j, &v) in y.iter().enumerate() {
                        if let Some(w) = weight_at(cell(j)) {
                            products[q] = product(v, w);
                            q += 1;
                        }
                    }
                }
                fold_run(acc, g, &products[..q], &Keep::default());
                acc.cells[g] += (rows - q) as u64;
            }
            t @ Target::Each { .. } => {
                if !ranged {
                    (from..from + n).for_each(|i| acc.cells[t.group(i)] += 1);
                }
                for (j, &v) in y.iter().enumerate() {
                    let (i, g) = (cell(j), t.group(cell(j)));
                    if ranged {
                        acc.cells[g] += 1;
                    }
                    if let Some(w) = weight_at(i) {
                        fold_value(acc, g, product(v, w));
                    }
                }
            }
        }
    }
    negative
}

multiversion! {
    /// Evaluate programs `p.0`, `p.1` (of types `X`, `Y`) over segment `s`'s kept cells,
    /// block by block, and fold the pairs as co-moments (a block of one group at once);
    /// true when a square root met a negative kept value.
    fn fold_pair_run[C, X, Y](
        acc: &mut [CoMoment],
        s: &Segment,
        cells: &C,
        p: (&Program, &Program),
        scratch: (&mut Scratch, &mut Scratch),
        at: &mut [u32],
    ) -> bool where [C: Cells, X: Lane + Elem, Y: Lane + Elem] = fold_pair_run_body;
}

/// The body of [`fold_pair_run`], compiled into each of its copies.
#[inline(always)]
fn fold_pair_run_body<C, X, Y>(
    acc: &mut [CoMoment],
    s: &Segment,
    cells: &C,
    p: (&Program, &Program),
    scratch: (&mut Scratch, &mut Scratch),
    at: &mut [u32],
) -> bool
where
    C: Cells,
    X: Lane + Elem,
    Y: Lane + Elem,
{
    let plain = cells.plain();
    let mut negative = false;
    for b in 0..s.len.div_ceil(BLOCK) {
        let from = b * BLOCK;
        let n = BLOCK.min(s.len - from);
        let m = if plain { n } else { cells.kept(from, n, at) };
        let kept = (m < n).then_some(&at[..m]);
        let (xs, neg_x) = p.0.eval::<C, X>(cells, from, kept, m, scratch.0);
        let (ys, neg_y) = p.1.eval::<C, Y>(cells, from, kept, m, scratch.1);
        negative |= neg_x | neg_y;
        match s.target {
            Target::One(g) => acc[g].merge(CoMoment::of(xs, ys)),
            t @ Target::Each { .. } => {
                for (j, (x, y)) in xs.iter().zip(ys).enumerate() {
                    let i = kept.map_or(j, |a| a[j] as usize);
                    acc[t.group(from + i)].add(x.f(), y.f());
                }
            }
        }
    }
    negative
}

multiversion! {
    /// Evaluate `program` (of type `F`) over segment `s`'s cells, block by block, and
    /// fold the results of the kept ones; true when a square root met a negative kept
    /// value. Cells the missing rules drop count as cells; cells outside a range do not.
    fn fold_program_run[C, F](
        acc: &mut Accumulators,
        s: &Segment,
        cells: &C,
        program: &Program,
        scratch: &mut Scratch,
        at: &mut [u32],
    ) -> bool where [C: Cells, F: Lane + Elem] = fold_program_run_body;
}

/// The body of [`fold_program_run`], compiled into each of its copies.
#[inline(always)]
fn fold_program_run_body<C, F>(
    acc: &mut Accumulators,
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
    let ranged = cells.ranged();
    if let (Target::One(g), true, Some(y)) = (s.target, plain, program.view::<C, F>(cells, 0, s.len)) {
        // One value column of the segment, in place: folded as stored values are.
        fold_run(acc, g, y, &Keep::default());
        return false;
    }
    if let (Target::One(g), true, true) = (s.target, plain, acc.needs.sum_only())
        && let Some(sum) = program.combined_sum::<C, F>(cells, 0, s.len, F::of_f64(1.0))
    {
        // Two value columns combined, in place, summed as they are read: every cell
        // holds a value (plain), and only the sum is asked.
        let n = s.len as u64;
        acc.add_sum(g, n, n, sum);
        return false;
    }
    // Sums and counts of kept cells (not all kept) of one group, where evaluating
    // every cell cannot fail: evaluated whole, summed under the mask of kept cells.
    let masked = !plain && !program.fallible() && acc.needs.sum_at_most();
    let mut mask = [0u8; BLOCK];
    let mut negative = false;
    for b in 0..s.len.div_ceil(BLOCK) {
        let from = b * BLOCK;
        let n = BLOCK.min(s.len - from);
        if let (Target::One(g), true) = (s.target, plain) {
            let (y, neg) = program.eval::<C, F>(cells, from, None, n, scratch);
            negative |= neg;
            fold_run(acc, g, y, &Keep::default());
            continue;
        }
        if let (Target::One(g), true) = (s.target, masked) {
            let (y, _) = program.eval::<C, F>(cells, from, None, n, scratch);
            cells.mask(from, n, &mut mask[..n]);
            let (m, sum) = masked_sum(y, &mask[..n]);
            acc.add_sum(g, if ranged { m } else { n as u64 }, m, sum);
            continue;
        }
        // Evaluate only the kept cells (all of the block: read in place).
        let m = cells.kept(from, n, at);
        let at = &at[..m];
        let gather = (m < n).then_some(at);
        let (y, neg) = program.eval::<C, F>(cells, from, gather, m, scratch);
        negative |= neg;
        match s.target {
            Target::One(g) => {
                fold_run(acc, g, y, &Keep::default());
                if !ranged {
                    // Missing cells are cells too.
                    acc.cells[g] += (n - m) as u64;
                }
            }
            t @ Target::Each { .. } => {
                let group = |i: usize| t.group(from + i);
                if !ranged {
                    (0..n).for_each(|i| acc.cells[group(i)] += 1);
                }
                for (&i, &v) in at.iter().zip(y) {
                    let g = group(i as usize);
                    if ranged {
                        acc.cells[g] += 1;
                    }
                    fold_value(acc, g, v);
                }
            }
        }
    }
    negative
}
