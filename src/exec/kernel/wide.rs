//! Sums of f64 over [`WIDE`] lanes: of one slice, of two zipped, of one under a mask, and
//! the co-moments of two slices by two such passes. The evaluated programs and the
//! kernels of two inputs use them.

use super::elem::Elem;
use super::lanes::{WIDE, for_blocks, wide_lanes_total};
use super::moments::CoMoment;
use super::simd::{prefetch_ahead, prefetch_distance};

/// The sum of `x` in f64 over [`WIDE`] lanes.
#[inline(always)]
pub(super) fn lane_sum<T: Elem>(x: &[T]) -> f64 {
    let mut s = [0f64; WIDE];
    let r = for_blocks(
        x,
        #[inline(always)]
        |a: &[T; WIDE]| {
            for i in 0..WIDE {
                s[i] += a[i].f();
            }
        },
    );
    for (i, a) in r.iter().enumerate() {
        s[i] += a.f();
    }
    wide_lanes_total(s)
}

/// The sum of `f(x[i], y[i])` in f64 over `x` and `y` (of one length) in `WIDE`
/// lanes, as `lane_sum` sums one slice: one pass over both, nothing stored between.
#[inline(always)]
pub fn zip_sum<T: Elem>(x: &[T], y: &[T], f: impl Fn(T, T) -> T) -> f64 {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &y[..n]);
    let mut s = [0f64; WIDE];
    let (cx, cy) = (x.chunks_exact(WIDE), y.chunks_exact(WIDE));
    let (rx, ry) = (cx.remainder(), cy.remainder());
    let ahead = prefetch_distance(std::mem::size_of_val(x));
    for (a, b) in cx.zip(cy) {
        prefetch_ahead(a, ahead);
        prefetch_ahead(b, ahead);
        for i in 0..WIDE {
            s[i] += f(a[i], b[i]).f();
        }
    }
    for (i, (&a, &b)) in rx.iter().zip(ry).enumerate() {
        s[i] += f(a, b).f();
    }
    wide_lanes_total(s)
}

/// The number of 1s in `mask` and the f64 sum of the `y[i]` where `mask[i]` is 1 (of one
/// length), in `WIDE` lanes as `lane_sum`: the others are skipped, not added as
/// 0 (a NaN or infinity there changes nothing).
#[inline(always)]
pub fn masked_sum<T: Elem>(y: &[T], mask: &[u8]) -> (u64, f64) {
    let n = y.len().min(mask.len());
    let (y, mask) = (&y[..n], &mask[..n]);
    let mut s = [0f64; WIDE];
    let (cy, cm) = (y.chunks_exact(WIDE), mask.chunks_exact(WIDE));
    let (ry, rm) = (cy.remainder(), cm.remainder());
    // `y` or +0 by its bits (`mask` 1 → every bit kept): a select that vectorizes.
    let keep = |a: T, k: u8| f64::from_bits(a.f().to_bits() & (k as u64).wrapping_neg());
    let ahead = prefetch_distance(std::mem::size_of_val(y));
    for (a, k) in cy.zip(cm) {
        prefetch_ahead(a, ahead);
        for i in 0..WIDE {
            s[i] += keep(a[i], k[i]);
        }
    }
    for (i, (&a, &k)) in ry.iter().zip(rm).enumerate() {
        s[i] += keep(a, k);
    }
    (ones(mask), wide_lanes_total(s))
}

/// The number of 1s in `mask` (of at most 2^32 bytes: a block's).
#[inline(always)]
pub fn ones(mask: &[u8]) -> u64 {
    mask.iter().map(|&k| k as u32).sum::<u32>() as u64
}

impl CoMoment {
    /// The state of pairs `(x[i], y[i])` (`x` and `y` of one length), by two passes: the
    /// means, then the sums of squared and multiplied deviations from them. Each sum keeps
    /// `WIDE` independent lanes, so the loops vectorize and no add waits for the
    /// previous one (one lane per sum would be bound by the add's latency).
    #[inline(always)]
    pub fn of<X: Elem, Y: Elem>(x: &[X], y: &[Y]) -> CoMoment {
        let n = x.len().min(y.len());
        if n == 0 {
            return CoMoment::default();
        }
        let (x, y) = (&x[..n], &y[..n]);
        let (mx, my) = (lane_sum(x) / n as f64, lane_sum(y) / n as f64);
        let (mut qx, mut qy, mut c) = ([0f64; WIDE], [0f64; WIDE], [0f64; WIDE]);
        let (cx, cy) = (x.chunks_exact(WIDE), y.chunks_exact(WIDE));
        let (rx, ry) = (cx.remainder(), cy.remainder());
        for (a, b) in cx.zip(cy) {
            for i in 0..WIDE {
                let (dx, dy) = (a[i].f() - mx, b[i].f() - my);
                qx[i] += dx * dx;
                qy[i] += dy * dy;
                c[i] += dx * dy;
            }
        }
        for (i, (a, b)) in rx.iter().zip(ry).enumerate() {
            let (dx, dy) = (a.f() - mx, b.f() - my);
            qx[i] += dx * dx;
            qy[i] += dy * dy;
            c[i] += dx * dy;
        }
        CoMoment {
            n: n as u64,
            mean_x: mx,
            mean_y: my,
            m2_x: wide_lanes_total(qx),
            m2_y: wide_lanes_total(qy),
            c2: wide_lanes_total(c),
        }
    }
}
