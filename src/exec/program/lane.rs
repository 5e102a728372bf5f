//! What programs read and compute in: [`Cells`] (the columns of a task, in blocks),
//! [`Lane`] (f32 or f64), the per-block [`Scratch`], and the conversions of stored
//! elements into lanes.

use crate::exec::kernel::Elem;
use crate::format::{DType, Element, Packing};
use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

/// Values evaluated per block: short enough that every intermediate stays in L1.
pub const BLOCK: usize = 512;

/// The cells a program reads, by value column, a block at a time: offsets count from the
/// start of a run of cells the fold walks.
pub trait Cells {
    /// True when every cell is kept (no missing value or range drops any).
    fn plain(&self) -> bool;
    /// True when a range of stored values drops cells (a value `WHERE`: dropped cells
    /// are not rows), not only missing values.
    fn ranged(&self) -> bool {
        false
    }
    /// Per cell of `from..from + n` (`n` ≤ [`BLOCK`]), 1 in `out` where it is kept, else 0.
    fn mask(&self, from: usize, n: usize, out: &mut [u8]);
    /// Write to `at` the offsets (from `from`) of the kept cells among `from..from + n`
    /// (`n` ≤ [`BLOCK`]); returns how many.
    #[inline(always)]
    fn kept(&self, from: usize, n: usize, at: &mut [u32]) -> usize {
        let mut mask = [0u8; BLOCK];
        self.mask(from, n, &mut mask[..n]);
        offsets(&mask[..n], at)
    }
    /// Value column `k`'s values converted to `F` (and unpacked), `x`, combined into
    /// `out` as `out[i] = with(out[i], x[i])`: those of cells `from..from + out.len()`,
    /// or with `at`, those of cells `from + at[i]`.
    fn load<F: Lane>(&self, k: usize, from: usize, at: Option<&[u32]>, out: &mut [F], with: impl Fn(F, F) -> F);
    /// Value column `k`'s stored values of cells `from..from + n` in place, when they
    /// are of type `F` and not packed; `None`: read them by [`load`](Self::load).
    fn view<F: Lane>(&self, k: usize, from: usize, n: usize) -> Option<&[F]> {
        let _ = (k, from, n);
        None
    }
}

/// Write to `at` the offsets where `mask` is 1; returns how many. Eight cells at a time
/// where all or none are kept (filters on smooth fields keep runs), one by one elsewhere.
#[inline(always)]
pub fn offsets(mask: &[u8], at: &mut [u32]) -> usize {
    const ALL: u64 = u64::from_ne_bytes([1; 8]);
    let mut m = 0;
    let words = mask.chunks_exact(8);
    let tail = words.remainder();
    for (w, bytes) in words.enumerate() {
        let i = (w * 8) as u32;
        match u64::from_ne_bytes(bytes.try_into().expect("eight bytes")) {
            0 => {}
            ALL => {
                at[m..m + 8].iter_mut().zip(i..).for_each(|(a, j)| *a = j);
                m += 8;
            }
            _ => {
                for (j, &k) in (i..).zip(bytes) {
                    at[m] = j;
                    m += k as usize;
                }
            }
        }
    }
    let base = (mask.len() - tail.len()) as u32;
    for (j, &k) in (base..).zip(tail) {
        at[m] = j;
        m += k as usize;
    }
    m
}

/// Stored values `x` converted (and unpacked by `packing`) and combined into `out` by
/// `with` ([`Cells::load`]): the first `out.len()`, or with `at`, those at `at`.
#[inline(always)]
pub fn convert<T: Elem, F: Lane>(
    x: &[T],
    packing: Option<Packing>,
    at: Option<&[u32]>,
    out: &mut [F],
    with: impl Fn(F, F) -> F,
) {
    match (packing, at) {
        (None, None) => out.iter_mut().zip(x).for_each(|(o, &v)| *o = with(*o, F::of_elem(v))),
        (Some(p), None) => out
            .iter_mut()
            .zip(x)
            .for_each(|(o, &v)| *o = with(*o, F::of_f64(p.apply(v.f())))),
        (None, Some(at)) => out
            .iter_mut()
            .zip(at)
            .for_each(|(o, &i)| *o = with(*o, F::of_elem(x[i as usize]))),
        (Some(p), Some(at)) => out
            .iter_mut()
            .zip(at)
            .for_each(|(o, &i)| *o = with(*o, F::of_f64(p.apply(x[i as usize].f())))),
    }
}

/// Blocks a [`Program`] evaluates into: made once per chunk task by
/// [`Program::scratch`], reused for every block.
pub struct Scratch {
    pub(super) f32: Vec<f32>,
    pub(super) f64: Vec<f64>,
}

/// A float type the programs compute in.
pub trait Lane:
    Element
    + Copy
    + Default
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + Neg<Output = Self>
{
    /// The other float type.
    type Other: Lane<Other = Self>;
    /// The stored type of the same values.
    const DTYPE: DType;
    /// `x` rounded to this type (as Arrow casts f64 to f32).
    fn of_f64(x: f64) -> Self;
    /// A value of the other type converted (Arrow's cast).
    fn of_other(x: Self::Other) -> Self;
    /// A stored value converted (Arrow's cast).
    fn of_elem<T: Elem>(x: T) -> Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    /// The first `n` results of [`Program::eval`] when the program has this type.
    fn result(s: &Scratch, n: usize) -> &[Self];
}

impl Lane for f32 {
    type Other = f64;
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn of_f64(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn of_other(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn of_elem<T: Elem>(x: T) -> Self {
        x.f32()
    }
    #[inline(always)]
    fn abs(self) -> Self {
        f32::abs(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn result(s: &Scratch, n: usize) -> &[Self] {
        &s.f32[..n]
    }
}

impl Lane for f64 {
    type Other = f32;
    const DTYPE: DType = DType::F64;
    #[inline(always)]
    fn of_f64(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn of_other(x: f32) -> Self {
        x as f64
    }
    #[inline(always)]
    fn of_elem<T: Elem>(x: T) -> Self {
        x.f()
    }
    #[inline(always)]
    fn abs(self) -> Self {
        f64::abs(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    #[inline(always)]
    fn result(s: &Scratch, n: usize) -> &[Self] {
        &s.f64[..n]
    }
}
