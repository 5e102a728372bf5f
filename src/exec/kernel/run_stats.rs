//! The statistics of one run ([`RunStats`]): the lanes of a run folded by the loop its
//! missing rule, range and needed statistics choose, then combined; and the sum of
//! squared deviations of a run's kept values (the M2 of a variance).

use super::accumulators::Needs;
use super::elem::{Elem, nan_sign};
use super::keep::{Keep, MissingCheck, RangeCheck};
use super::lanes::{COUNT_BLOCK, L, eight_lanes_total, for_blocks};

/// Statistics of one run (valid = not missing).
#[derive(Debug, Clone, Copy)]
pub(super) struct RunStats<T> {
    pub(super) n: u64,
    pub(super) fsum: f64,
    pub(super) isum: i64,
    pub(super) min: T,
    pub(super) max: T,
    /// NaN elements among the valid ones.
    pub(super) nans: u64,
    /// [`NAN_POSITIVE`] and/or [`NAN_NEGATIVE`]: the signs of those NaNs.
    pub(super) nan_signs: u8,
}

/// Per-lane partial statistics of a run.
pub(super) struct Lanes<T> {
    pub(super) n: [u64; L],
    pub(super) fs: [f64; L],
    pub(super) is: [i64; L],
    pub(super) mn: [T; L],
    pub(super) mx: [T; L],
    /// NaN elements seen (counted only where a range's NaNs need a second look).
    pub(super) nans: [u64; L],
}

/// Fold the whole lanes of `run` taking the elements `ok` accepts: `FS` float sums, `IS`
/// integer sums, `MM` min/max, `NAN` counts NaNs. One instance per combination keeps
/// each loop free of work it does not need, so it vectorizes. Counts run in 32-bit
/// lanes (the width of an f32 comparison's mask) over blocks short enough not to wrap.
#[inline(always)]
pub(super) fn lanes<T: Elem, const FS: bool, const IS: bool, const MM: bool, const NAN: bool>(
    run: &[T],
    ok: impl Fn(T) -> bool,
) -> Lanes<T> {
    let mut s = Lanes {
        n: [0; L],
        fs: [0.0; L],
        is: [0; L],
        mn: [T::MAX; L],
        mx: [T::MIN; L],
        nans: [0; L],
    };
    if !(FS || IS || MM) && std::mem::size_of::<T>() == 4 {
        // Counting only, 32-bit elements: a comparison's mask is one 32-bit count lane per
        // element, so fixed lanes over whole blocks need no shuffle (the plain reduction
        // below indexed its loads). The general loop at the end does the same counting,
        // but measured slower for it (docs/performance.md).
        for block in run.chunks(COUNT_BLOCK) {
            let (mut n, mut nans) = ([0u32; L], [0u32; L]);
            for_blocks(
                block,
                #[inline(always)]
                |c: &[T; L]| {
                    for i in 0..L {
                        n[i] += ok(c[i]) as u32;
                        if NAN {
                            #[allow(clippy::eq_op)]
                            let nan = c[i] != c[i];
                            nans[i] += nan as u32;
                        }
                    }
                },
            );
            s.n[0] += n.iter().map(|&k| k as u64).sum::<u64>();
            s.nans[0] += nans.iter().map(|&k| k as u64).sum::<u64>();
        }
        return s;
    }
    if !(FS || IS || MM) {
        // Counting only: integer sums are exact in any order, so plain reductions that
        // the compiler vectorizes as it likes (fixed lanes here make it shuffle them).
        let whole = &run[..run.len() / L * L];
        for block in whole.chunks(1 << 30) {
            s.n[0] += block.iter().map(|&x| ok(x) as u32).sum::<u32>() as u64;
            if NAN {
                #[allow(clippy::eq_op)]
                let nans = block.iter().map(|&x| (x != x) as u32).sum::<u32>();
                s.nans[0] += nans as u64;
            }
        }
        return s;
    }
    for block in run.chunks(COUNT_BLOCK) {
        let mut n = [0u32; L];
        let mut nans = [0u32; L];
        for_blocks(
            block,
            #[inline(always)]
            |c: &[T; L]| {
                for i in 0..L {
                    let x = c[i];
                    let k = ok(x);
                    n[i] += k as u32;
                    if FS {
                        s.fs[i] += if k { x.f() } else { 0.0 };
                    }
                    if IS {
                        s.is[i] = s.is[i].wrapping_add(if k { x.bits() } else { 0 });
                    }
                    if MM {
                        // Plain comparisons keep this loop vectorized; zeros of the
                        // other sign are looked for once per run (`signed_zeros`).
                        s.mn[i] = if k && x < s.mn[i] { x } else { s.mn[i] };
                        s.mx[i] = if k && x > s.mx[i] { x } else { s.mx[i] };
                    }
                    if NAN {
                        #[allow(clippy::eq_op)]
                        let nan = x != x;
                        nans[i] += nan as u32;
                    }
                }
            },
        );
        for i in 0..L {
            s.n[i] += n[i] as u64;
            s.nans[i] += nans[i] as u64;
        }
    }
    s
}

/// Which sums the lanes of elements of type `T` keep for `needs`: f64 sums (every loop
/// that tracks float extremes also sums: a non-finite sum flags NaNs) and integer sums.
#[inline(always)]
pub(super) fn lane_sums<T: Elem>(needs: Needs) -> (bool, bool) {
    (
        needs.fsum || needs.moments || (T::FLOAT && needs.min_max),
        needs.isum && !T::FLOAT,
    )
}

/// [`lanes`] for the statistics `needs` asks of elements of type `T`.
#[inline(always)]
pub(super) fn lanes_for<T: Elem, const NAN: bool>(run: &[T], needs: Needs, ok: impl Fn(T) -> bool) -> Lanes<T> {
    let (fs, is) = lane_sums::<T>(needs);
    match (fs, is, needs.min_max) {
        (false, false, false) => lanes::<T, false, false, false, NAN>(run, ok),
        (true, false, false) => lanes::<T, true, false, false, NAN>(run, ok),
        (false, true, false) => lanes::<T, false, true, false, NAN>(run, ok),
        (true, true, false) => lanes::<T, true, true, false, NAN>(run, ok),
        (false, false, true) => lanes::<T, false, false, true, NAN>(run, ok),
        (true, false, true) => lanes::<T, true, false, true, NAN>(run, ok),
        (false, true, true) => lanes::<T, false, true, true, NAN>(run, ok),
        (true, true, true) => lanes::<T, true, true, true, NAN>(run, ok),
    }
}

/// [`run_stats`] of a run of which only the sum is needed, from its lanes' sums `s`: the
/// remainder past the lanes added to them, then their total.
#[inline(always)]
pub(super) fn summed<T: Elem>(run: &[T], mut s: [f64; L]) -> RunStats<T> {
    for (i, x) in run.chunks_exact(L).remainder().iter().enumerate() {
        s[i] += x.f();
    }
    RunStats {
        n: run.len() as u64,
        fsum: eight_lanes_total(s),
        isum: 0,
        min: T::MAX,
        max: T::MIN,
        nans: 0,
        nan_signs: 0,
    }
}

#[inline(always)]
pub(super) fn run_stats<T: Elem>(run: &[T], keep: &Keep<T>, needs: Needs) -> RunStats<T> {
    let missing = &keep.missing;
    if !needs.reads_values(!missing.is_empty(), keep.ranged()) {
        return RunStats {
            n: run.len() as u64,
            fsum: 0.0,
            isum: 0,
            min: T::MAX,
            max: T::MIN,
            nans: 0,
            nan_signs: 0,
        };
    }
    // Sums only (`sum` and `avg` of floats, the mean of a variance), nothing missing, no
    // range: the lanes' sums and the remainder added as `finish` adds them, without its
    // other per-run state (`GROUP BY lat` calls this once per 720-value row).
    if keep.takes_all() && !needs.min_max && (T::FLOAT || !needs.isum) {
        // A long f32 run on an x86-64 copy: the hand-written loop over its whole
        // 16-element blocks, then the lanes below over the rest (at most one 8-element
        // block), added to each lane as the loop would add them.
        #[cfg(target_arch = "x86_64")]
        if let Some(x) = T::as_f32(run)
            && super::simd::current() != super::simd::Isa::Portable
        {
            let mut s = [0f64; L];
            // SAFETY: `current` names a level above the portable one only when the CPU
            // has AVX2, so AVX.
            let done = unsafe { super::simd::f32_lane_sums(x, &mut s) };
            if done > 0 {
                let more = std::hint::black_box(
                    lanes::<T, true, false, false, false>(
                        &run[done..],
                        #[inline(always)]
                        |_| true,
                    )
                    .fs,
                );
                for (a, b) in s.iter_mut().zip(more) {
                    *a += b;
                }
                return summed(run, s);
            }
        }
        // Opaque to LLVM: seeing the pairwise total below, it vectorized the lanes in the
        // total's pairs, with a shuffle per load, which ran slower.
        return summed(
            run,
            std::hint::black_box(
                lanes::<T, true, false, false, false>(
                    run,
                    #[inline(always)]
                    |_| true,
                )
                .fs,
            ),
        );
    }
    let check = missing.check();
    let s = match (keep.range, check) {
        (_, MissingCheck::List) => lanes_for::<T, false>(
            run,
            needs,
            #[inline(always)]
            |x| keep.test(x),
        ),
        (None, MissingCheck::Nothing) => lanes_for::<T, false>(
            run,
            needs,
            #[inline(always)]
            |_| true,
        ),
        #[allow(clippy::eq_op)]
        (None, MissingCheck::Nan) => lanes_for::<T, false>(
            run,
            needs,
            #[inline(always)]
            |x| x == x,
        ),
        (None, MissingCheck::Fill(fv)) => lanes_for::<T, false>(
            run,
            needs,
            #[inline(always)]
            |x| x != fv,
        ),
        (Some(range), check) => {
            // Comparisons in the stored type where bounds convert exactly, else as f64;
            // NaNs decided by the rule, or (some NaNs only, as `v > c` keeps the positive
            // ones) kept here and decided by keys when the run holds any: a test of the
            // sign in the loop measured far slower on `WHERE v > 290`.
            let r = RangeCheck::<T>::of(range, missing.nan);
            let s = match check.fill() {
                None if r.nan_in => lanes_for::<T, true>(
                    run,
                    needs,
                    #[inline(always)]
                    |x| r.contains(x),
                ),
                None => lanes_for::<T, false>(
                    run,
                    needs,
                    #[inline(always)]
                    |x| r.contains(x),
                ),
                Some(fv) if r.nan_in => lanes_for::<T, true>(
                    run,
                    needs,
                    #[inline(always)]
                    |x| r.contains(x) & (x != fv),
                ),
                Some(fv) => lanes_for::<T, false>(
                    run,
                    needs,
                    #[inline(always)]
                    |x| r.contains(x) & (x != fv),
                ),
            };
            if r.nan_by_keys && s.nans.iter().any(|&k| k > 0) {
                lanes_for::<T, false>(
                    run,
                    needs,
                    #[inline(always)]
                    |x| keep.test(x),
                )
            } else {
                s
            }
        }
    };
    combine_lanes(run, keep, needs, s)
}

/// Combine the lanes of `run` and fold its remainder.
#[inline(always)]
pub(super) fn combine_lanes<T: Elem>(run: &[T], keep: &Keep<T>, needs: Needs, mut s: Lanes<T>) -> RunStats<T> {
    // Element `i` of the remainder goes to lane `i`: no lane holds more than ⌈n/8⌉ of the
    // run's `n` elements, which the error bound of the sum counts on.
    // Only what `needs` asks is accumulated in the remainder and combined across lanes: a
    // count over runs of 720 values (`WHERE v > 290 GROUP BY lat`) spent a quarter of its
    // fold in combining lanes it did not use.
    let (fs, is) = lane_sums::<T>(needs);
    for (i, &x) in run.chunks_exact(L).remainder().iter().enumerate() {
        if !keep.test(x) {
            continue;
        }
        s.n[i] += 1;
        if fs {
            s.fs[i] += x.f();
        }
        if is {
            s.is[i] = s.is[i].wrapping_add(x.bits());
        }
        if needs.min_max {
            s.mn[i] = if x.before(s.mn[i]) { x } else { s.mn[i] };
            s.mx[i] = if x.after(s.mx[i]) { x } else { s.mx[i] };
        }
    }
    let fsum = match fs {
        true => eight_lanes_total(s.fs),
        false => 0.0,
    };
    // NaNs: comparisons skip them in the lanes; a second pass counts them only when the
    // sum says there may be one.
    let (nans, nan_signs) = if T::FLOAT && needs.min_max && !fsum.is_finite() {
        run.iter()
            .filter(|x| x.is_nan() && keep.test(**x))
            .fold((0, 0), |(n, s), x| (n + 1, s | nan_sign(*x)))
    } else {
        (0, 0)
    };
    let mut out = RunStats {
        n: s.n.iter().sum(),
        fsum,
        isum: match is {
            true => s.is.iter().fold(0i64, |a, b| a.wrapping_add(*b)),
            false => 0,
        },
        min: T::MAX,
        max: T::MIN,
        nans,
        nan_signs,
    };
    if needs.min_max {
        for i in 0..L {
            if s.mn[i].before(out.min) {
                out.min = s.mn[i];
            }
            if s.mx[i].after(out.max) {
                out.max = s.mx[i];
            }
        }
        if T::FLOAT {
            signed_zeros(run, keep, &mut out);
        }
    }
    out
}

/// DataFusion's order puts -0.0 below +0.0, which the lanes' `<` and `>` cannot see: a
/// run whose minimum came out +0.0 may hold a -0.0 (and a maximum of -0.0, a +0.0). Only
/// then is the run looked over again, for a kept zero of the other sign; a run whose
/// extremes are not zero (nearly every run of most data) costs nothing more.
#[inline(always)]
pub(super) fn signed_zeros<T: Elem>(run: &[T], keep: &Keep<T>, out: &mut RunStats<T>) {
    let zero_of = |x: T, negative: bool| x.f() == 0.0 && x.f().is_sign_negative() == negative;
    if zero_of(out.min, false)
        && let Some(&z) = run.iter().find(|&&x| zero_of(x, true) && keep.test(x))
    {
        out.min = z;
    }
    if zero_of(out.max, true)
        && let Some(&z) = run.iter().find(|&&x| zero_of(x, false) && keep.test(x))
    {
        out.max = z;
    }
}

/// Sum of squared deviations from `mean` over the valid elements of `run`: the rule of
/// `keep` as the simplest test that decides it (`Keep::test` looks through the list of
/// missing values, which kept the loop scalar and a variance many times a mean's time).
#[inline(always)]
pub(super) fn run_m2<T: Elem>(run: &[T], keep: &Keep<T>, mean: f64) -> f64 {
    match (keep.range, keep.missing.check()) {
        (None, MissingCheck::Nothing) => m2_of(
            run,
            mean,
            #[inline(always)]
            |_| true,
        ),
        #[allow(clippy::eq_op)]
        (None, MissingCheck::Nan) => m2_of(
            run,
            mean,
            #[inline(always)]
            |x| x == x,
        ),
        (None, MissingCheck::Fill(fv)) => m2_of(
            run,
            mean,
            #[inline(always)]
            |x| x != fv,
        ),
        _ => m2_of(
            run,
            mean,
            #[inline(always)]
            |x| keep.test(x),
        ),
    }
}

/// [`run_m2`] over the elements for which `ok` holds.
#[inline(always)]
pub(super) fn m2_of<T: Elem>(run: &[T], mean: f64, ok: impl Fn(T) -> bool) -> f64 {
    let mut s = [0f64; L];
    let rest = for_blocks(
        run,
        #[inline(always)]
        |c: &[T; L]| {
            for i in 0..L {
                let d = c[i].f() - mean;
                s[i] += if ok(c[i]) { d * d } else { 0.0 };
            }
        },
    );
    for (i, &x) in rest.iter().enumerate() {
        if ok(x) {
            s[i] += (x.f() - mean) * (x.f() - mean);
        }
    }
    eight_lanes_total(s)
}
