//! The lanes every kernel keeps, and the one driver that walks a run block by block.
//!
//! A kernel's loop keeps independent lanes per statistic, so that the compiler vectorizes
//! it without reassociating floats: the order of adds is fixed by the source, and every
//! instruction-set copy gives the same bits. Two widths: [`L`] lanes where a lane also
//! keeps a count, a minimum or a maximum (the runs' kernels), and [`WIDE`] lanes where
//! only f64 sums are kept (co-moments, weighted and masked sums), a form the compiler
//! vectorizes whole. Each width has its own total, because the order of a total is part
//! of the answer's bits.

use super::simd::{prefetch_distance, prefetch_lines_ahead};

/// Lanes of the runs' kernels.
pub(super) const L: usize = 8;

/// Lanes of a kernel that only sums f64: four vectors of four f64 (AVX2).
pub(super) const WIDE: usize = 16;

/// The sum of the [`L`] lanes of a run's f64 sum, pairwise: every lane's sum passes through
/// three adds here (the `+ 3` of the error bound in docs/pushdown.md).
#[inline(always)]
pub(super) fn eight_lanes_total(s: [f64; L]) -> f64 {
    ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))
}

/// The sum of [`WIDE`] lanes, pairwise: each step adds the upper half onto the lower.
#[inline(always)]
pub(super) fn wide_lanes_total(s: [f64; WIDE]) -> f64 {
    let mut w = s;
    let mut k = WIDE;
    while k > 1 {
        k /= 2;
        for i in 0..k {
            w[i] += w[i + k];
        }
    }
    w[0]
}

/// Call `f` on each whole block of `N` elements of `x`, in order, two blocks per step of
/// the loop with a prefetch ahead of each step; returns the elements past the last whole
/// block. Every one-input kernel's loop goes through here: over `chunks_exact(N)` LLVM
/// addressed the loads as base + index × size, which Intel cores split into more
/// micro-ops and which ran measurably slower at memory speed than one pointer plus
/// constant offsets, the form of a step over whole arrays (docs/performance.md).
#[inline(always)]
pub(super) fn for_blocks<T, const N: usize>(x: &[T], mut f: impl FnMut(&[T; N])) -> &[T] {
    let (blocks, rest) = x.as_chunks::<N>();
    let (pairs, last) = blocks.as_chunks::<2>();
    let ahead = prefetch_distance(std::mem::size_of_val(x));
    for [a, b] in pairs {
        // A prefetch per 64 bytes: blocks shorter than a line share the first one's.
        prefetch_lines_ahead(std::slice::from_ref(a), ahead);
        if N * std::mem::size_of::<T>() >= 64 {
            prefetch_lines_ahead(std::slice::from_ref(b), ahead);
        }
        f(a);
        f(b);
    }
    for a in last {
        prefetch_lines_ahead(std::slice::from_ref(a), ahead);
        f(a);
    }
    rest
}

/// Elements of a block whose counts a kernel keeps in u32 lanes: a comparison's mask is
/// as wide as the element (32 bits for f32), so counting in u32 lanes keeps the loop's
/// vectors unshuffled, and each of the [`L`] lanes sees at most 2^24 elements of a block,
/// far below where a u32 wraps. The loops stay written out in each kernel: one driver
/// taking the loop as a closure measured several times slower on counting folds
/// (docs/performance.md).
pub(super) const COUNT_BLOCK: usize = L << 24;
