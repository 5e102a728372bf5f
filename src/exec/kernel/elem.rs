//! The element types of payloads as the kernels read them ([`Elem`]), and DataFusion's
//! order of floats (-0.0 before +0.0, NaNs flagged apart) as the kernels apply it.

use crate::plan::order_key;
use half::f16;

/// The smaller of `a` and `b` in DataFusion's order of floats among numbers (-0.0 before
/// +0.0), a NaN operand skipped: the accumulators' slots start as NaN ("none yet"), and
/// NaNs are flagged apart (`Accumulators::nan`).
#[inline(always)]
pub fn fmin(a: f64, b: f64) -> f64 {
    // `f64::min` skips a NaN operand; equal operands differ only as zeros, whose sign
    // bits OR to -0.0. Written as a select of `a` itself, `*slot = fmin(*slot, x)` over
    // a slice became a masked store on x86 (slow on AMD: benches/RESULTS.md, maps).
    let m = a.min(b);
    if a == b {
        f64::from_bits(a.to_bits() | b.to_bits())
    } else {
        m
    }
}

/// The larger of `a` and `b` as [`fmin`] orders them (+0.0 after -0.0), NaN skipped.
#[inline(always)]
pub fn fmax(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if a == b {
        f64::from_bits(a.to_bits() & b.to_bits())
    } else {
        m
    }
}

/// A payload element type.
pub trait Elem: crate::format::Element + PartialEq + PartialOrd {
    const FLOAT: bool;
    const MAX: Self;
    const MIN: Self;
    fn f(self) -> f64;
    /// The value as f32 (one rounding, as Arrow casts it).
    fn f32(self) -> f32;
    fn bits(self) -> i64;
    fn wide(self) -> i128;
    fn is_nan(self) -> bool;
    /// Bounds `l <= x && x <= h` in this type that hold for exactly the non-NaN `x` with
    /// `lo <= x as f64 <= hi` (`lo`, `hi` not NaN); `None` where the type compares no
    /// faster than f64 or cannot say it exactly.
    fn bounds(lo: f64, hi: f64) -> Option<(Self, Self)>;
    /// `run` as f32 when `Self` is f32 (for the kernels' hand-written f32 loops).
    #[inline(always)]
    fn as_f32(run: &[Self]) -> Option<&[f32]> {
        let _ = run;
        None
    }
    /// Whether `self` replaces `m` as a minimum: it is less, or (floats) it is the same
    /// zero with its sign set, since DataFusion's order of floats puts -0.0 before +0.0.
    #[inline(always)]
    fn before(self, m: Self) -> bool {
        self < m
    }
    /// Whether `self` replaces `m` as a maximum: greater, or +0.0 over -0.0.
    #[inline(always)]
    fn after(self, m: Self) -> bool {
        self > m
    }
    /// The value's order key ([`order_key`]: DataFusion's order of floats); exact for
    /// every type but 64-bit integers.
    #[inline(always)]
    fn key(self) -> i64 {
        order_key(self.f())
    }
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const FLOAT: bool = false;
            const MAX: Self = <$t>::MAX;
            const MIN: Self = <$t>::MIN;
            #[inline(always)] fn f(self) -> f64 { self as f64 }
            #[inline(always)] fn f32(self) -> f32 { self as f32 }
            #[inline(always)] fn bits(self) -> i64 { self as i64 }
            #[inline(always)] fn wide(self) -> i128 { self as i128 }
            #[inline(always)] fn is_nan(self) -> bool { false }
            #[inline(always)]
            fn bounds(lo: f64, hi: f64) -> Option<(Self, Self)> {
                // Every value of these types is exact as f64; 64-bit ones take no range.
                if size_of::<$t>() == 8 {
                    return None;
                }
                let (lo, hi) = (lo.ceil(), hi.floor());
                if lo.is_nan() || hi.is_nan() || lo > hi || lo > <$t>::MAX as f64 || hi < <$t>::MIN as f64 {
                    return Some((<$t>::MAX, <$t>::MIN));
                }
                Some((lo.max(<$t>::MIN as f64) as $t, hi.min(<$t>::MAX as f64) as $t))
            }
        }
    )*};
}
int_elem!(i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_elem {
    ($($t:ty: $as_f32:expr),*) => {$(
        impl Elem for $t {
            #[inline(always)] fn as_f32(run: &[Self]) -> Option<&[f32]> { $as_f32(run) }
            const FLOAT: bool = true;
            const MAX: Self = <$t>::INFINITY;
            const MIN: Self = <$t>::NEG_INFINITY;
            #[inline(always)] fn f(self) -> f64 { self as f64 }
            #[inline(always)] fn f32(self) -> f32 { self as f32 }
            #[inline(always)] fn bits(self) -> i64 { self as i64 }
            #[inline(always)] fn wide(self) -> i128 { self as i128 }
            #[inline(always)] fn is_nan(self) -> bool { <$t>::is_nan(self) }
            #[inline(always)] fn before(self, m: Self) -> bool { self < m || (self == m && self.is_sign_negative()) }
            #[inline(always)] fn after(self, m: Self) -> bool { self > m || (self == m && self.is_sign_positive()) }
            #[inline(always)]
            fn bounds(lo: f64, hi: f64) -> Option<(Self, Self)> {
                // Round inward: the least value not below `lo`, the greatest not above `hi`.
                let (mut l, mut h) = (lo as $t, hi as $t);
                if (l as f64) < lo {
                    l = l.next_up();
                }
                if (h as f64) > hi {
                    h = h.next_down();
                }
                Some((l, h))
            }
        }
    )*};
}
/// `Some(run)`: [`Elem::as_f32`] of f32.
#[inline(always)]
fn itself(run: &[f32]) -> Option<&[f32]> {
    Some(run)
}
float_elem!(f32: itself, f64: |_| None);

impl Elem for f16 {
    const FLOAT: bool = true;
    const MAX: Self = f16::INFINITY;
    const MIN: Self = f16::NEG_INFINITY;
    #[inline(always)]
    fn f(self) -> f64 {
        self.to_f64()
    }
    #[inline(always)]
    fn f32(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn bits(self) -> i64 {
        self.to_f64() as i64
    }
    #[inline(always)]
    fn wide(self) -> i128 {
        self.to_f64() as i128
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f16::is_nan(self)
    }
    #[inline(always)]
    fn before(self, m: Self) -> bool {
        self < m || (self == m && self.is_sign_negative())
    }
    #[inline(always)]
    fn after(self, m: Self) -> bool {
        self > m || (self == m && self.is_sign_positive())
    }
    #[inline(always)]
    fn bounds(_: f64, _: f64) -> Option<(Self, Self)> {
        None
    }
}

/// A positive NaN (the largest value in DataFusion's order of floats).
pub const NAN_POSITIVE: u8 = 1;
/// A NaN with its sign bit set (the smallest).
pub const NAN_NEGATIVE: u8 = 2;

/// [`NAN_NEGATIVE`] or [`NAN_POSITIVE`] for a NaN `x`.
#[inline(always)]
pub(super) fn nan_sign<T: Elem>(x: T) -> u8 {
    if x.f().is_sign_negative() {
        NAN_NEGATIVE
    } else {
        NAN_POSITIVE
    }
}

#[cfg(test)]
mod tests {
    use super::{fmax, fmin};
    use std::cmp::Ordering;

    /// `fmin`/`fmax` against the order they promise, by brute force over pairs: NaN
    /// skipped, numbers in total order (so -0.0 before +0.0).
    #[test]
    fn extremes_skip_nan_and_order_zeros() {
        let xs = [
            f64::NAN,
            -f64::NAN,
            f64::NEG_INFINITY,
            -1.5,
            -0.0,
            0.0,
            1e-310,
            2.0,
            f64::INFINITY,
        ];
        let pick = |a: f64, b: f64, want: Ordering| match (a.is_nan(), b.is_nan()) {
            (true, _) => b,
            (_, true) => a,
            _ if b.total_cmp(&a) == want => b,
            _ => a,
        };
        let same = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
        for &a in &xs {
            for &b in &xs {
                assert!(same(fmin(a, b), pick(a, b, Ordering::Less)), "fmin({a:?}, {b:?})");
                assert!(same(fmax(a, b), pick(a, b, Ordering::Greater)), "fmax({a:?}, {b:?})");
            }
        }
    }
}
