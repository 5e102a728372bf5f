//! Runs folded element by element, each element into a group of its own: by a group
//! lookup ([`fold_elementwise`]) or, when the groups are consecutive, as passes over the
//! run and the groups' accumulators side by side ([`fold_consecutive`]).

use super::accumulators::Accumulators;
use super::elem::{Elem, fmax, fmin, nan_sign};
use super::keep::{Keep, MissingCheck, RangeCheck};
use super::simd::multiversion;

/// Fold one value (a cell already counted) into group `g`.
#[inline(always)]
pub fn fold_value<T: Elem>(acc: &mut Accumulators, g: usize, x: T) {
    let needs = acc.needs;
    acc.n[g] += 1;
    let xf = x.f();
    if needs.fsum {
        acc.fsum[g] += xf;
    }
    if needs.isum {
        acc.isum[g] = acc.isum[g].wrapping_add(x.bits());
    }
    if needs.min_max {
        if T::FLOAT {
            if x.is_nan() {
                acc.nan[g] |= nan_sign(x);
            } else {
                acc.fmin[g] = fmin(acc.fmin[g], xf);
                acc.fmax[g] = fmax(acc.fmax[g], xf);
            }
        } else {
            acc.imin[g] = acc.imin[g].min(x.wide());
            acc.imax[g] = acc.imax[g].max(x.wide());
        }
    }
    if needs.moments {
        // Welford.
        let n = acc.n[g] as f64;
        let d = xf - acc.mean[g];
        acc.mean[g] += d / n;
        acc.m2[g] += d * (xf - acc.mean[g]);
    }
}

/// Fold element `i` of `run` into group `group(i)`.
#[inline(always)]
pub fn fold_elementwise<T: Elem>(acc: &mut Accumulators, run: &[T], keep: &Keep<T>, group: impl Fn(usize) -> usize) {
    for (i, &x) in run.iter().enumerate() {
        let g = group(i);
        let ok = keep.test(x);
        acc.cells[g] += keep.cells(1, || ok as u64);
        if ok {
            fold_value(acc, g, x);
        }
    }
}

multiversion! {
    /// Fold element `i` of `run` into group `g + i` (a grouped innermost axis that is its
    /// own key): [`fold_elementwise`] without a group lookup per element, as passes over
    /// the run and the groups' accumulators side by side, which vectorize (a variance's
    /// Welford step too: each group takes one element of the run).
    pub fn fold_consecutive[T](acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>) where [T: Elem] = fold_consecutive_body;
}

/// The body of [`fold_consecutive`], compiled into each of its copies.
#[inline(always)]
fn fold_consecutive_body<T>(acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>)
where
    T: Elem,
{
    match (keep.missing.check(), keep.range) {
        // Welford reads each group's count as it folds: not deferred then.
        (MissingCheck::Nothing, None) if !acc.needs.moments => {
            acc.count_later(g, run.len());
            consecutive(
                acc,
                g,
                run,
                Counts::Done,
                #[inline(always)]
                |_| true,
            )
        }
        (MissingCheck::Nothing, None) => consecutive(
            acc,
            g,
            run,
            Counts::Each,
            #[inline(always)]
            |_| true,
        ),
        #[allow(clippy::eq_op)]
        (MissingCheck::Nan, None) => consecutive(
            acc,
            g,
            run,
            Counts::Each,
            #[inline(always)]
            |x| x == x,
        ),
        (MissingCheck::Fill(fv), None) => consecutive(
            acc,
            g,
            run,
            Counts::Each,
            #[inline(always)]
            |x| x != fv,
        ),
        (MissingCheck::List, None) => consecutive(
            acc,
            g,
            run,
            Counts::Each,
            #[inline(always)]
            |x| keep.test(x),
        ),
        (check, Some(range)) => {
            // As `run_stats` tests a range: in the stored type where the bounds convert
            // exactly, NaNs by the rule; by keys (a scalar loop) only for a list of missing
            // values, or a range holding some NaNs but not all when the run has a NaN
            // (found by a pass that vectorizes: `fold`, not `any`'s exit per element).
            let r = RangeCheck::<T>::of(range, keep.missing.nan);
            let by_keys = matches!(check, MissingCheck::List)
                || (r.nan_by_keys && run.iter().fold(false, |any, x| any | x.is_nan()));
            match check.fill() {
                _ if by_keys => consecutive(
                    acc,
                    g,
                    run,
                    Counts::Kept,
                    #[inline(always)]
                    |x| keep.test(x),
                ),
                Some(fv) => consecutive(
                    acc,
                    g,
                    run,
                    Counts::Kept,
                    #[inline(always)]
                    |x| r.contains(x) & (x != fv),
                ),
                None => consecutive(
                    acc,
                    g,
                    run,
                    Counts::Kept,
                    #[inline(always)]
                    |x| r.contains(x),
                ),
            }
        }
    }
}

/// How [`consecutive`] counts cells and values.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Counts {
    /// Already counted (deferred: every element counts).
    Done,
    /// Every element is a cell; the ones `ok` takes are values.
    Each,
    /// Only the elements `ok` takes are cells and values (a range's comparison is never
    /// true of a NULL).
    Kept,
}

/// [`fold_consecutive`] taking the elements `ok` accepts.
#[inline(always)]
pub(super) fn consecutive<T: Elem>(
    acc: &mut Accumulators,
    g: usize,
    run: &[T],
    counts: Counts,
    ok: impl Fn(T) -> bool,
) {
    let (needs, groups) = (acc.needs, g..g + run.len());
    match counts {
        Counts::Done => {}
        Counts::Each => acc.cells[groups.clone()].iter_mut().for_each(|c| *c += 1),
        Counts::Kept => {
            for (c, &x) in acc.cells[groups.clone()].iter_mut().zip(run) {
                *c += ok(x) as u64;
            }
        }
    }
    if counts != Counts::Done {
        for (n, &x) in acc.n[groups.clone()].iter_mut().zip(run) {
            *n += ok(x) as u64;
        }
    }
    if needs.fsum {
        for (s, &x) in acc.fsum[groups.clone()].iter_mut().zip(run) {
            *s += if ok(x) { x.f() } else { 0.0 };
        }
    }
    if needs.isum {
        for (s, &x) in acc.isum[groups.clone()].iter_mut().zip(run) {
            *s = s.wrapping_add(if ok(x) { x.bits() } else { 0 });
        }
    }
    if needs.min_max {
        if T::FLOAT {
            let (lo, hi) = (&mut acc.fmin[groups.clone()], &mut acc.fmax[groups.clone()]);
            for ((lo, hi), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(run) {
                // fmin/fmax skip a NaN operand: NaNs are flagged below.
                let v = if ok(x) { x.f() } else { f64::NAN };
                *lo = fmin(*lo, v);
                *hi = fmax(*hi, v);
            }
            // One vector pass tells whether there is a NaN to flag (rarely).
            if run.iter().fold(false, |any, &x| any | (x.is_nan() & ok(x))) {
                for (flag, &x) in acc.nan[groups.clone()].iter_mut().zip(run) {
                    if x.is_nan() && ok(x) {
                        *flag |= nan_sign(x);
                    }
                }
            }
        } else {
            let (lo, hi) = (&mut acc.imin[groups.clone()], &mut acc.imax[groups.clone()]);
            for ((lo, hi), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(run) {
                if ok(x) {
                    *lo = (*lo).min(x.wide());
                    *hi = (*hi).max(x.wide());
                }
            }
        }
    }
    if needs.moments {
        // Welford, as `fold_value` steps it, each group's count already taken.
        let (n, mean, m2) = (
            &acc.n[groups.clone()],
            &mut acc.mean[groups.clone()],
            &mut acc.m2[groups],
        );
        for (((&n, mu), m), &x) in n.iter().zip(mean.iter_mut()).zip(m2.iter_mut()).zip(run) {
            let (xf, kept) = (x.f(), ok(x));
            let d = xf - *mu;
            let next = if kept { *mu + d / n as f64 } else { *mu };
            *m += if kept { d * (xf - next) } else { 0.0 };
            *mu = next;
        }
    }
}
