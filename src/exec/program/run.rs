//! A [`Program`] run over blocks of cells: its steps, one function per kind of cells and
//! instruction set, and the sums of two columns read as they are combined.

use super::lane::{BLOCK, Cells, Lane, Scratch};
use super::steps::{Arith, Op, Program, Step, Ty};
use crate::exec::kernel::simd::multiversion;
use crate::exec::kernel::{Elem, zip_sum};

impl Program {
    /// The results for cells `from..from + n` read in place, without evaluating: when
    /// the program is one value column that `cells` holds as `F` ([`Cells::view`]).
    #[inline(always)]
    pub fn view<'a, C: Cells, F: Lane>(&self, cells: &'a C, from: usize, n: usize) -> Option<&'a [F]> {
        match self.ops[..] {
            [Op::Step(ty, Step::Load(k))] if ty == self.eval_ty() => cells.view(k, from, n),
            _ => None,
        }
    }

    /// The f64 sum of the results times `scale` (in `F`) over cells `from..from + n` in
    /// one pass over the stored values, nothing stored between: when the program is two
    /// value columns combined ([`Step::LoadCombined`]) that `cells` holds in place as `F`.
    /// The results are those [`eval`](Self::eval) computes (the same operation on the
    /// same values); a scale of 1 changes none of them.
    #[inline(always)]
    pub fn combined_sum<C: Cells, F: Lane + Elem>(&self, cells: &C, from: usize, n: usize, scale: F) -> Option<f64> {
        let [Op::Step(ty, Step::LoadCombined(j, k, a))] = self.ops[..] else {
            return None;
        };
        if ty != self.eval_ty() {
            return None;
        }
        let (x, y) = (cells.view::<F>(j, from, n)?, cells.view::<F>(k, from, n)?);
        Some(combined_sum_of(x, y, a, scale))
    }

    /// The results over `n` (at most [`BLOCK`]) cells of `cells`: those from `from`, or
    /// with `at`, those at `from + at[i]` (`n` = `at.len()`), of type `F` =
    /// [`eval_ty`](Self::eval_ty); evaluated into `s`, or read in place
    /// ([`view`](Self::view)). True when a square root met a negative input.
    #[inline(always)]
    pub fn eval<'a, C: Cells, F: Lane>(
        &self,
        cells: &'a C,
        from: usize,
        at: Option<&[u32]>,
        n: usize,
        s: &'a mut Scratch,
    ) -> (&'a [F], bool) {
        if let (None, Some(x)) = (at, self.view(cells, from, n)) {
            return (x, false);
        }
        let negative = run_steps(self, cells, from, at, n, s);
        (F::result(s, n), negative)
    }

    /// Run the steps over the cells [`eval`](Self::eval) names, into `s`.
    #[inline(always)]
    fn run<C: Cells>(&self, cells: &C, from: usize, at: Option<&[u32]>, n: usize, s: &mut Scratch) -> bool {
        let mut h = (0usize, 0usize);
        let src = Operands { cells, from, at, n };
        let mut negative = false;
        for &op in &self.ops {
            negative |= match op {
                Op::Cast(Ty::F64) => {
                    let src = &s.f32[(h.0 - 1) * BLOCK..][..n];
                    let dst = &mut s.f64[h.1 * BLOCK..][..n];
                    dst.iter_mut().zip(src).for_each(|(d, &v)| *d = f64::of_other(v));
                    h = (h.0 - 1, h.1 + 1);
                    false
                }
                Op::Cast(Ty::F32) => {
                    let src = &s.f64[(h.1 - 1) * BLOCK..][..n];
                    let dst = &mut s.f32[h.0 * BLOCK..][..n];
                    dst.iter_mut().zip(src).for_each(|(d, &v)| *d = f32::of_other(v));
                    h = (h.0 + 1, h.1 - 1);
                    false
                }
                Op::Step(Ty::F32, st) => step(st, &src, &mut s.f32, &mut h.0),
                Op::Step(Ty::F64, st) => step(st, &src, &mut s.f64, &mut h.1),
            };
        }
        negative
    }
}

multiversion! {
    /// [`Program::run`], compiled once per kind of cells (and instruction set) rather
    /// than inlined into every kernel that evaluates a program: the kernels stay small
    /// (and quick to build), at the cost of one call per block.
    #[inline(never)]
    fn run_steps[C](program: &Program, cells: &C, from: usize, at: Option<&[u32]>, n: usize, s: &mut Scratch) -> bool where [C: Cells] = run_steps_body;
}

/// The body of [`run_steps`], compiled into each of its copies.
#[inline(always)]
fn run_steps_body<C>(program: &Program, cells: &C, from: usize, at: Option<&[u32]>, n: usize, s: &mut Scratch) -> bool
where
    C: Cells,
{
    program.run(cells, from, at, n, s)
}

multiversion! {
    /// The f64 sum of `(x[i] op y[i]) * scale` ([`zip_sum`]), one loop per operation.
    #[inline(never)]
    fn combined_sum_of[F](x: &[F], y: &[F], op: Arith, scale: F) -> f64 where [F: Lane + Elem] = combined_sum_of_body;
}

/// The body of [`combined_sum_of`], compiled into each of its copies.
#[inline(always)]
fn combined_sum_of_body<F>(x: &[F], y: &[F], op: Arith, scale: F) -> f64
where
    F: Lane + Elem,
{
    match op {
        Arith::Add => zip_sum(x, y, |a, b| (a + b) * scale),
        Arith::Sub => zip_sum(x, y, |a, b| (a - b) * scale),
        Arith::Mul => zip_sum(x, y, |a, b| (a * b) * scale),
        Arith::Div => zip_sum(x, y, |a, b| (a / b) * scale),
        Arith::Rem => zip_sum(x, y, |a, b| (a % b) * scale),
    }
}

/// `a op b` in type `F`.
#[inline(always)]
pub(super) fn arith<F: Lane>(op: Arith, a: F, b: F) -> F {
    match op {
        Arith::Add => a + b,
        Arith::Sub => a - b,
        Arith::Mul => a * b,
        Arith::Div => a / b,
        Arith::Rem => a % b,
    }
}

/// `top[i] = top[i] op x[i]` for value column `k`'s values `x` of the cells `src` names.
#[inline(always)]
pub(super) fn load_bin<C: Cells, F: Lane>(src: &Operands<C>, k: usize, a: Arith, top: &mut [F]) {
    let (cells, from, at) = (src.cells, src.from, src.at);
    // One loop per operation, so none branches per element.
    match a {
        Arith::Add => cells.load(k, from, at, top, |o, x| o + x),
        Arith::Sub => cells.load(k, from, at, top, |o, x| o - x),
        Arith::Mul => cells.load(k, from, at, top, |o, x| o * x),
        Arith::Div => cells.load(k, from, at, top, |o, x| o / x),
        Arith::Rem => cells.load(k, from, at, top, |o, x| o % x),
    }
}

/// The cells one evaluation reads.
pub(super) struct Operands<'a, C> {
    pub(super) cells: &'a C,
    pub(super) from: usize,
    pub(super) at: Option<&'a [u32]>,
    pub(super) n: usize,
}

/// Apply `op` to the stack of blocks `buf` of height `h` over `src`;
/// true when a square root met a negative input.
#[inline(always)]
pub(super) fn step<C: Cells, F: Lane>(op: Step, src: &Operands<C>, buf: &mut [F], h: &mut usize) -> bool {
    let n = src.n;
    let top = |h: usize| (h - 1) * BLOCK..(h - 1) * BLOCK + n;
    match op {
        Step::Load(k) => {
            src.cells
                .load(k, src.from, src.at, &mut buf[*h * BLOCK..][..n], |_, x| x);
            *h += 1;
        }
        Step::LoadBin(k, a) => load_bin(src, k, a, &mut buf[top(*h)]),
        Step::LoadCombined(j, k, a) => {
            let out = &mut buf[*h * BLOCK..][..n];
            let (cells, from) = (src.cells, src.from);
            match (src.at, cells.view::<F>(j, from, n), cells.view::<F>(k, from, n)) {
                (None, Some(x), Some(y)) => {
                    let pairs = out.iter_mut().zip(x.iter().zip(y));
                    // One loop per operation, so none branches per element.
                    match a {
                        Arith::Add => pairs.for_each(|(o, (&x, &y))| *o = x + y),
                        Arith::Sub => pairs.for_each(|(o, (&x, &y))| *o = x - y),
                        Arith::Mul => pairs.for_each(|(o, (&x, &y))| *o = x * y),
                        Arith::Div => pairs.for_each(|(o, (&x, &y))| *o = x / y),
                        Arith::Rem => pairs.for_each(|(o, (&x, &y))| *o = x % y),
                    }
                }
                _ => {
                    cells.load(j, from, src.at, out, |_, x| x);
                    load_bin(src, k, a, out);
                }
            }
            *h += 1;
        }
        Step::Push(c) => {
            buf[*h * BLOCK..][..n].fill(F::of_f64(c));
            *h += 1;
        }
        Step::Neg => buf[top(*h)].iter_mut().for_each(|o| *o = -*o),
        Step::Abs => buf[top(*h)].iter_mut().for_each(|o| *o = o.abs()),
        Step::Sqrt => {
            // DataFusion's check, as a reduction that vectorizes.
            let mut negative = 0u32;
            for o in &mut buf[top(*h)] {
                negative |= (*o < F::default()) as u32;
                *o = o.sqrt();
            }
            return negative != 0;
        }
        Step::Bin(a) => {
            let (lo, hi) = buf.split_at_mut((*h - 1) * BLOCK);
            let l = &mut lo[(*h - 2) * BLOCK..][..n];
            l.iter_mut().zip(&hi[..n]).for_each(|(o, &r)| *o = arith(a, *o, r));
            *h -= 1;
        }
        Step::BinConst(a, c) => {
            let c = F::of_f64(c);
            buf[top(*h)].iter_mut().for_each(|o| *o = arith(a, *o, c));
        }
        Step::ConstBin(a, c) => {
            let c = F::of_f64(c);
            buf[top(*h)].iter_mut().for_each(|o| *o = arith(a, c, *o));
        }
    }
    false
}
