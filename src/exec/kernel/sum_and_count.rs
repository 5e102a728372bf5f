//! Two folds of one run in one pass: the sums of the kept values and the count of those
//! within a range (`avg(v), count(*) FILTER (WHERE v > c)`), bit for bit what two
//! [`fold_run`](super::fold_run)s give, reading the run from memory once.

use super::accumulators::{Accumulators, Needs};
use super::elem::Elem;
use super::keep::{Keep, MissingCheck, RangeCheck};
use super::lanes::{COUNT_BLOCK, L, eight_lanes_total, for_blocks};
use super::run_stats::{RunStats, run_stats};
use super::runs::add_run;
use super::simd::multiversion;

/// [`run_stats`] of two inputs over `run` in one pass: `sums`, without a range, needing
/// sums at most, and `counts`, counting the elements within its range, under the same
/// missing rule of NaNs or one fill value, over f32 or f64 (else `None`). The lanes add in
/// [`run_stats`]' order, so the statistics are its own, bit for bit.
#[inline(always)]
pub(super) fn sum_and_count_stats<T: Elem>(
    run: &[T],
    sums: &Keep<T>,
    sums_needs: Needs,
    counts: &Keep<T>,
    counts_needs: Needs,
) -> Option<(RunStats<T>, RunStats<T>)> {
    let missing = &sums.missing;
    let range = counts.range?;
    let fits = T::FLOAT && std::mem::size_of::<T>() >= 4 && sums.range.is_none() && sums_needs.sum_at_most();
    if !fits || counts_needs != Needs::default() || *missing != counts.missing {
        return None;
    }
    // The range as `run_stats` tests it; the bounds chosen here, outside the loops.
    let r = RangeCheck::<T>::of(range, missing.nan);
    let (lo, hi) = (r.lo, r.hi);
    let (sum, count, nans) = match r.native {
        Some((l, h)) => sum_and_count_by_rule(
            run,
            missing.check(),
            r.nan_in,
            #[inline(always)]
            |x: T| (l <= x) & (x <= h),
        )?,
        None => sum_and_count_by_rule(
            run,
            missing.check(),
            r.nan_in,
            #[inline(always)]
            |x: T| (lo <= x.f()) & (x.f() <= hi),
        )?,
    };
    // Decided by keys as `run_stats` decides them: the range holds some NaNs, and the
    // lanes met one.
    let count = match r.nan_by_keys && nans > 0 {
        true => run_stats(run, counts, counts_needs),
        false => count,
    };
    Some((sum, count))
}

/// [`sum_and_count_lanes`] with the test of the missing rule that decides it; `None` for a list
/// of values (the sum and count does not take it). `nan_in`: the range holds NaNs.
#[inline(always)]
pub(super) fn sum_and_count_by_rule<T: Elem>(
    run: &[T],
    check: MissingCheck<T>,
    nan_in: bool,
    inside: impl Fn(T) -> bool,
) -> Option<(RunStats<T>, RunStats<T>, u64)> {
    Some(match check {
        #[allow(clippy::eq_op)]
        MissingCheck::Nan => sum_and_count_lanes::<T, false, false>(
            run,
            #[inline(always)]
            |x| x == x,
            inside,
        ),
        MissingCheck::Nothing if nan_in => sum_and_count_lanes::<T, true, true>(
            run,
            #[inline(always)]
            |_| true,
            inside,
        ),
        MissingCheck::Nothing => sum_and_count_lanes::<T, true, false>(
            run,
            #[inline(always)]
            |_| true,
            inside,
        ),
        MissingCheck::Fill(fv) if nan_in => sum_and_count_lanes::<T, false, true>(
            run,
            #[inline(always)]
            |x| x != fv,
            inside,
        ),
        MissingCheck::Fill(fv) => sum_and_count_lanes::<T, false, false>(
            run,
            #[inline(always)]
            |x| x != fv,
            inside,
        ),
        MissingCheck::List => return None,
    })
}

/// Elements of a piece of a run in [`sum_and_count_lanes`]: 2 KiB of f32 (the prefetch distance),
/// in L1 for the second loop while the first one's prefetches ahead keep memory busy
/// (larger pieces measured slower: docs/performance.md).
pub(super) const PIECE: usize = 512;

/// The lanes of [`sum_and_count_stats`]: the sums and count of the elements `base` takes, and the
/// count of those `inside` takes too; `ALL`: `base` takes every element; `NAN`: NaNs are
/// inside, and counted (the third value). Piece by piece, a loop that sums (from memory)
/// and one that counts (from L1): as one loop, LLVM left the lanes scalar, as it did with
/// the range's bounds chosen inside the count loop.
#[inline(always)]
pub(super) fn sum_and_count_lanes<T: Elem, const ALL: bool, const NAN: bool>(
    run: &[T],
    base: impl Fn(T) -> bool,
    inside: impl Fn(T) -> bool,
) -> (RunStats<T>, RunStats<T>, u64) {
    let mut fs = [0f64; L];
    let (mut taken, mut counted, mut nans) = (0u64, 0u64, 0u64);
    for block in run.chunks(COUNT_BLOCK) {
        let (mut t, mut c, mut z) = ([0u32; L], [0u32; L], [0u32; L]);
        for piece in block.chunks(PIECE) {
            for_blocks(
                piece,
                #[inline(always)]
                |b: &[T; L]| {
                    for i in 0..L {
                        fs[i] += if base(b[i]) { b[i].f() } else { 0.0 };
                    }
                },
            );
            for_blocks(
                piece,
                #[inline(always)]
                |b: &[T; L]| {
                    for i in 0..L {
                        let k = base(b[i]);
                        if !ALL {
                            t[i] += k as u32;
                        }
                        #[allow(clippy::eq_op)]
                        let nan = NAN && b[i] != b[i];
                        c[i] += (k & (inside(b[i]) | nan)) as u32;
                        z[i] += nan as u32;
                    }
                },
            );
        }
        taken += t.iter().map(|&k| k as u64).sum::<u64>();
        counted += c.iter().map(|&k| k as u64).sum::<u64>();
        nans += z.iter().map(|&k| k as u64).sum::<u64>();
    }
    // Opaque to LLVM, as in `run_stats`: the pairwise total below otherwise reorders
    // the lanes' vectors.
    let mut fs = std::hint::black_box(fs);
    for (i, &x) in run.chunks_exact(L).remainder().iter().enumerate() {
        #[allow(clippy::eq_op)]
        let nan = NAN && x != x;
        if base(x) {
            fs[i] += x.f();
            taken += 1;
            counted += (inside(x) | nan) as u64;
        }
        nans += nan as u64;
    }
    let stats = |n, fsum| RunStats {
        n,
        fsum,
        isum: 0,
        min: T::MAX,
        max: T::MIN,
        nans: 0,
        nan_signs: 0,
    };
    let taken = if ALL { run.len() as u64 } else { taken };
    (stats(taken, eight_lanes_total(fs)), stats(counted, 0.0), nans)
}

// As `fold_run`: its loops.
multiversion! {
    up_to_avx2;
    /// Fold a whole run into group `g` of two inputs over the same stored values:
    /// `sums` (no range) and `counts` (the cells within a range). What [`fold_run`] gives
    /// each, bit for bit, reading the run from memory once when `sum_and_count_stats` takes the
    /// two: a second pass per slab, even from L2, left memory idle (docs/performance.md).
    pub fn fold_run_sum_and_count[T](
        sums: &mut Accumulators,
        counts: &mut Accumulators,
        g: usize,
        run: &[T],
        keep_sums: &Keep<T>,
        keep_counts: &Keep<T>,
    ) where [T: Elem] = fold_run_sum_and_count_body;
}

/// The body of [`fold_run_sum_and_count`], compiled into each of its copies.
#[inline(always)]
fn fold_run_sum_and_count_body<T>(
    sums: &mut Accumulators,
    counts: &mut Accumulators,
    g: usize,
    run: &[T],
    keep_sums: &Keep<T>,
    keep_counts: &Keep<T>,
) where
    T: Elem,
{
    let (a, b) = match sum_and_count_stats(run, keep_sums, sums.needs, keep_counts, counts.needs) {
        Some(both) => both,
        None => (
            run_stats(run, keep_sums, sums.needs),
            run_stats(run, keep_counts, counts.needs),
        ),
    };
    add_run(sums, g, run, keep_sums, a);
    add_run(counts, g, run, keep_counts, b);
}
