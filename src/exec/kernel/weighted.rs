//! Runs folded with weights: one weight per run ([`fold_weighted_run`],
//! [`fold_scaled`]) or per element ([`fold_dot`]), for weighted sums and means.

use super::accumulators::{Accumulators, Needs};
use super::elem::Elem;
use super::keep::Keep;
use super::lanes::{COUNT_BLOCK, L, WIDE, eight_lanes_total, for_blocks, wide_lanes_total};
use super::run_stats::run_stats;
use super::simd::multiversion;
use crate::plan::Affine;

multiversion! {
    /// Fold a run whose cells all carry weight `w` (`None`: NULL, nothing folds) into group
    /// `g`: the kept values mapped by `map` times `w` (`map` `None`: the weight alone, per
    /// kept cell). Counts the kept cells; sums `w · (s·Σx + o·n)`.
    pub fn fold_weighted_run[T](
        acc: &mut Accumulators,
        g: usize,
        run: &[T],
        keep: &Keep<T>,
        map: Option<Affine>,
        w: Option<f64>,
    ) where [T: Elem] = fold_weighted_run_body;
}

/// The body of [`fold_weighted_run`], compiled into each of its copies.
#[inline(always)]
fn fold_weighted_run_body<T>(
    acc: &mut Accumulators,
    g: usize,
    run: &[T],
    keep: &Keep<T>,
    map: Option<Affine>,
    w: Option<f64>,
) where
    T: Elem,
{
    let needs = Needs {
        fsum: acc.needs.fsum && map.is_some(),
        ..Needs::default()
    };
    let st = run_stats(run, keep, needs);
    acc.cells[g] += keep.cells(run.len(), || st.n);
    let Some(w) = w else { return };
    acc.n[g] += st.n;
    if acc.needs.fsum {
        acc.fsum[g] += match map {
            Some(m) => w * (m.scale * st.fsum + m.offset * st.n as f64),
            None => w * st.n as f64,
        };
    }
}

/// Per lane: the count and the sum of `product(x, w)` over the elements `x` of `run` (whole
/// lanes) that `ok` takes and whose weight `w = weight(i)` is not NULL.
#[inline(always)]
pub(super) fn dot_lanes<T: Elem>(
    run: &[T],
    ok: impl Fn(T) -> bool,
    product: &impl Fn(T, f64) -> f64,
    weight: &impl Fn(usize) -> Option<f64>,
) -> ([u64; L], [f64; L]) {
    let mut n = [0u64; L];
    let mut s = [0f64; L];
    // Counts in 32-bit lanes (as `lanes`) over blocks short enough not to wrap.
    for (b, block) in run.chunks(COUNT_BLOCK).enumerate() {
        let base = b * COUNT_BLOCK;
        let mut m = [0u32; L];
        let mut at = base;
        for_blocks(
            block,
            #[inline(always)]
            |c: &[T; L]| {
                for i in 0..L {
                    let x = c[i];
                    let w = weight(at + i);
                    let take = w.is_some() & ok(x);
                    m[i] += take as u32;
                    s[i] += if take { product(x, w.unwrap_or(0.0)) } else { 0.0 };
                }
                at += L;
            },
        );
        for i in 0..L {
            n[i] += m[i] as u64;
        }
    }
    (n, s)
}

multiversion! {
    /// Fold `run` into group `g`, element `i` with weight `weight(i)` (`None`: NULL): Σ
    /// `product(x, w)` over the kept elements with a weight.
    pub fn fold_dot[T, P, W](
        acc: &mut Accumulators,
        g: usize,
        run: &[T],
        keep: &Keep<T>,
        product: P,
        weight: W,
    ) where [T: Elem, P: Fn(T, f64) -> f64, W: Fn(usize) -> Option<f64>] = fold_dot_body;
}

/// The body of [`fold_dot`], compiled into each of its copies.
#[inline(always)]
fn fold_dot_body<T, P, W>(acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>, product: P, weight: W)
where
    T: Elem,
    P: Fn(T, f64) -> f64,
    W: Fn(usize) -> Option<f64>,
{
    let plain = keep.takes_all();
    let chunks = run.len() / L * L;
    // One loop per case, so neither branches per element.
    let (n, s) = if plain {
        dot_lanes(
            &run[..chunks],
            #[inline(always)]
            |_| true,
            &product,
            &weight,
        )
    } else {
        dot_lanes(
            &run[..chunks],
            #[inline(always)]
            |x| keep.test(x),
            &product,
            &weight,
        )
    };
    dot_rest(acc, g, run, keep, (n, s), product, weight);
}

multiversion! {
    /// [`fold_dot`] of the product in f32 (`(x as f32 * w as f32) as f64`, DataFusion's
    /// product of an f32 value and an f32 weight) with one weight `w` for the whole run.
    /// Without a missing rule or range, the sum keeps `WIDE` lanes (as
    /// [`CoMoment::of`]'s), a form the compiler vectorizes whole (shorter chains than
    /// eight lanes: the same error bound or better).
    pub fn fold_scaled[T](acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>, w: f64) where [T: Elem] = fold_scaled_body;
}

/// The body of [`fold_scaled`], compiled into each of its copies.
#[inline(always)]
fn fold_scaled_body<T>(acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>, w: f64)
where
    T: Elem,
{
    let wf = w as f32;
    let product = move |x: T, _: f64| (x.f32() * wf) as f64;
    if !keep.takes_all() {
        // As `fold_dot` with the weight constant.
        let chunks = run.len() / L * L;
        let lanes = dot_lanes(
            &run[..chunks],
            #[inline(always)]
            |x| keep.test(x),
            &product,
            &|_| Some(w),
        );
        return dot_rest(acc, g, run, keep, lanes, product, |_| Some(w));
    }
    let mut s = [0f64; WIDE];
    let rest = for_blocks(
        run,
        #[inline(always)]
        |a: &[T; WIDE]| {
            for i in 0..WIDE {
                s[i] += (a[i].f32() * wf) as f64;
            }
        },
    );
    for (i, &x) in rest.iter().enumerate() {
        s[i] += (x.f32() * wf) as f64;
    }
    let n = run.len() as u64;
    acc.add_sum(g, n, n, wide_lanes_total(s));
}

/// The rest of a dot product after its whole lanes `(n, s)`: the remainder of `run`, then
/// the run's cells, count and sum into group `g`.
#[inline(always)]
pub(super) fn dot_rest<T: Elem>(
    acc: &mut Accumulators,
    g: usize,
    run: &[T],
    keep: &Keep<T>,
    (mut n, mut s): ([u64; L], [f64; L]),
    product: impl Fn(T, f64) -> f64,
    weight: impl Fn(usize) -> Option<f64>,
) {
    let chunks = run.len() / L * L;
    for (j, &x) in run.iter().enumerate().skip(chunks) {
        if let Some(w) = weight(j)
            && keep.test(x)
        {
            n[j - chunks] += 1;
            s[j - chunks] += product(x, w);
        }
    }
    // With a range, cells are the rows it keeps.
    acc.cells[g] += keep.cells(run.len(), || run.iter().filter(|x| keep.test(**x)).count() as u64);
    acc.n[g] += n.iter().sum::<u64>();
    if acc.needs.fsum {
        acc.fsum[g] += eight_lanes_total(s);
    }
}
