//! The aggregation kernel: folds runs of payload elements into dense per-group
//! accumulators.
//!
//! A chunk's selected cells are walked as contiguous runs along the innermost axis
//! ([`Runs`](crate::format::hyperslab::Runs)). When the innermost axis is
//! reduced, a whole run folds into one group ([`fold_run`]); when it is grouped, element
//! `i` of the run folds into a group of its own position ([`fold_elementwise`]; as
//! vector passes when the axis is its own key and its groups are consecutive:
//! [`fold_consecutive`]). Which
//! elements count is a [`Keep`]: not missing, and within a [`KeyRange`] when a comparison
//! on `v` filters them. Loops keep eight
//! independent lanes so the compiler vectorizes them without reassociating floats; sums
//! of floats accumulate in f64, integer sums wrap in 64 bits as DataFusion's do, and
//! variance states merge as (count, mean, M2) with Chan's formula.

use super::groups::Rows;
use super::simd::{multiversion, prefetch_ahead, prefetch_distance, prefetch_lines_ahead};
use crate::format::{MissingValues, elements};
use crate::plan::{Affine, AggFunc, KeyRange, NanRule, order_key};
use half::f16;

/// A variance state: count, mean and sum of squared deviations (M2).
#[derive(Debug, Default, Clone, Copy)]
pub struct Moments {
    pub n: u64,
    pub mean: f64,
    pub m2: f64,
}

impl Moments {
    /// Merge another state (Chan et al.).
    pub fn merge(&mut self, n: u64, mean: f64, m2: f64) {
        if n == 0 {
            return;
        }
        if self.n == 0 {
            *self = Moments { n, mean, m2 };
            return;
        }
        let (na, nb) = (self.n as f64, n as f64);
        let total = na + nb;
        let delta = mean - self.mean;
        self.mean += delta * nb / total;
        self.m2 += m2 + delta * delta * na * nb / total;
        self.n += n;
    }

    /// The statistic of variance-family `func` ([`AggFunc::is_moment`]), NULL where
    /// DataFusion's is: no values, or one for the sample forms. `None` for another function.
    pub fn finish(self, func: AggFunc) -> Option<f64> {
        let n = self.n as f64;
        let var = match func {
            AggFunc::VarPop | AggFunc::StddevPop if self.n > 0 => self.m2 / n,
            AggFunc::VarSamp | AggFunc::StddevSamp if self.n > 1 => self.m2 / (n - 1.0),
            _ => return None,
        };
        Some(match func {
            AggFunc::StddevPop | AggFunc::StddevSamp => var.sqrt(),
            _ => var,
        })
    }
}

/// Independent lanes of each sum in [`CoMoment::of`]: four vectors of four f64 (AVX2).
const CO_LANES: usize = 16;

/// The sum of `x` in f64 over [`CO_LANES`] lanes.
#[inline(always)]
fn lane_sum<T: Elem>(x: &[T]) -> f64 {
    let mut s = [0f64; CO_LANES];
    let r = for_blocks(
        x,
        #[inline(always)]
        |a: &[T; CO_LANES]| {
            for i in 0..CO_LANES {
                s[i] += a[i].f();
            }
        },
    );
    for (i, a) in r.iter().enumerate() {
        s[i] += a.f();
    }
    lanes_total(s)
}

/// The sum of `f(x[i], y[i])` in f64 over `x` and `y` (of one length) in `CO_LANES`
/// lanes, as `lane_sum` sums one slice: one pass over both, nothing stored between.
#[inline(always)]
pub fn zip_sum<T: Elem>(x: &[T], y: &[T], f: impl Fn(T, T) -> T) -> f64 {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &y[..n]);
    let mut s = [0f64; CO_LANES];
    let (cx, cy) = (x.chunks_exact(CO_LANES), y.chunks_exact(CO_LANES));
    let (rx, ry) = (cx.remainder(), cy.remainder());
    let ahead = prefetch_distance(std::mem::size_of_val(x));
    for (a, b) in cx.zip(cy) {
        prefetch_ahead(a, ahead);
        prefetch_ahead(b, ahead);
        for i in 0..CO_LANES {
            s[i] += f(a[i], b[i]).f();
        }
    }
    for (i, (&a, &b)) in rx.iter().zip(ry).enumerate() {
        s[i] += f(a, b).f();
    }
    lanes_total(s)
}

/// The number of 1s in `mask` and the f64 sum of the `y[i]` where `mask[i]` is 1 (of one
/// length), in `CO_LANES` lanes as `lane_sum`: the others are skipped, not added as
/// 0 (a NaN or infinity there changes nothing).
#[inline(always)]
pub fn masked_sum<T: Elem>(y: &[T], mask: &[u8]) -> (u64, f64) {
    let n = y.len().min(mask.len());
    let (y, mask) = (&y[..n], &mask[..n]);
    let mut s = [0f64; CO_LANES];
    let (cy, cm) = (y.chunks_exact(CO_LANES), mask.chunks_exact(CO_LANES));
    let (ry, rm) = (cy.remainder(), cm.remainder());
    // `y` or +0 by its bits (`mask` 1 → every bit kept): a select that vectorizes.
    let keep = |a: T, k: u8| f64::from_bits(a.f().to_bits() & (k as u64).wrapping_neg());
    let ahead = prefetch_distance(std::mem::size_of_val(y));
    for (a, k) in cy.zip(cm) {
        prefetch_ahead(a, ahead);
        for i in 0..CO_LANES {
            s[i] += keep(a[i], k[i]);
        }
    }
    for (i, (&a, &k)) in ry.iter().zip(rm).enumerate() {
        s[i] += keep(a, k);
    }
    (ones(mask), lanes_total(s))
}

/// The number of 1s in `mask` (of at most 2^32 bytes: a block's).
#[inline(always)]
pub fn ones(mask: &[u8]) -> u64 {
    mask.iter().map(|&k| k as u32).sum::<u32>() as u64
}

/// The sum of [`CO_LANES`] lanes, pairwise.
#[inline(always)]
fn lanes_total(s: [f64; CO_LANES]) -> f64 {
    let mut w = s;
    let mut k = CO_LANES;
    while k > 1 {
        k /= 2;
        for i in 0..k {
            w[i] += w[i + k];
        }
    }
    w[0]
}

/// A co-moment state of two inputs: count, both means, both sums of squared deviations
/// and the sum of products of deviations (`corr`, `covar_pop`, `covar_samp`).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct CoMoment {
    pub n: u64,
    pub mean_x: f64,
    pub mean_y: f64,
    pub m2_x: f64,
    pub m2_y: f64,
    pub c2: f64,
}

impl CoMoment {
    /// The state from its partial-state columns' values, in their order: count, then
    /// `[mean_x, mean_y, m2_x, m2_y, c2]` (as [`CoMoment::state`] gives them).
    pub fn from_state(n: u64, [mean_x, mean_y, m2_x, m2_y, c2]: [f64; 5]) -> CoMoment {
        CoMoment {
            n,
            mean_x,
            mean_y,
            m2_x,
            m2_y,
            c2,
        }
    }

    /// The count and the other values of the state, in the order of its partial-state
    /// columns (as [`CoMoment::from_state`] takes them).
    pub fn state(self) -> (u64, [f64; 5]) {
        (self.n, [self.mean_x, self.mean_y, self.m2_x, self.m2_y, self.c2])
    }

    /// Add one pair (Welford's update).
    #[inline]
    pub fn add(&mut self, x: f64, y: f64) {
        self.n += 1;
        let n = self.n as f64;
        let dx = x - self.mean_x;
        let dy = y - self.mean_y;
        self.mean_x += dx / n;
        self.mean_y += dy / n;
        self.m2_x += dx * (x - self.mean_x);
        self.m2_y += dy * (y - self.mean_y);
        self.c2 += dx * (y - self.mean_y);
    }

    /// The state of pairs `(x[i], y[i])` (`x` and `y` of one length), by two passes: the
    /// means, then the sums of squared and multiplied deviations from them. Each sum keeps
    /// `CO_LANES` independent lanes, so the loops vectorize and no add waits for the
    /// previous one (one lane per sum would be bound by the add's latency).
    #[inline(always)]
    pub fn of<X: Elem, Y: Elem>(x: &[X], y: &[Y]) -> CoMoment {
        let n = x.len().min(y.len());
        if n == 0 {
            return CoMoment::default();
        }
        let (x, y) = (&x[..n], &y[..n]);
        let (mx, my) = (lane_sum(x) / n as f64, lane_sum(y) / n as f64);
        let (mut qx, mut qy, mut c) = ([0f64; CO_LANES], [0f64; CO_LANES], [0f64; CO_LANES]);
        let (cx, cy) = (x.chunks_exact(CO_LANES), y.chunks_exact(CO_LANES));
        let (rx, ry) = (cx.remainder(), cy.remainder());
        for (a, b) in cx.zip(cy) {
            for i in 0..CO_LANES {
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
            m2_x: lanes_total(qx),
            m2_y: lanes_total(qy),
            c2: lanes_total(c),
        }
    }

    /// The statistic co-moment aggregate `func` finishes with, NULL where DataFusion's is: no
    /// pairs (one, for the sample covariance and the correlation), or a correlation with a
    /// constant input. A correlation of inputs that are all NaN is NaN; of one that has a NaN,
    /// NULL. The regressions of `y` (the first input: `x`, `mean_x`, `m2_x` of the state) on
    /// `x` (the second: `y`, `mean_y`, `m2_y`) are NULL without pairs and, for the slope,
    /// intercept and R², with fewer than two or a constant `x` (or `y`, for R²). `None` for a
    /// function that is not a co-moment one .
    pub fn finish(self, func: AggFunc) -> Option<f64> {
        let m = self;
        let n = m.n as f64;
        // DataFusion tests the population variances.
        let (var_x, var_y) = (m.m2_y / n, m.m2_x / n);
        let slope = (m.c2 / n) / var_x;
        let any = m.n > 0;
        let fitted = m.n > 1 && var_x != 0.0;
        match func {
            AggFunc::CovarPop => (m.n > 0).then(|| m.c2 / n),
            AggFunc::CovarSamp => (m.n > 1).then(|| m.c2 / (n - 1.0)),
            AggFunc::Corr => {
                if m.n > 0 && m.mean_x.is_nan() && m.mean_y.is_nan() {
                    return Some(f64::NAN);
                }
                if m.n < 2 || m.mean_x.is_nan() || m.mean_y.is_nan() || m.m2_x == 0.0 || m.m2_y == 0.0 {
                    return None;
                }
                Some(m.c2 / m.m2_x.sqrt() / m.m2_y.sqrt())
            }
            AggFunc::RegrSlope => fitted.then_some(slope),
            AggFunc::RegrIntercept => fitted.then_some(m.mean_x - slope * m.mean_y),
            AggFunc::RegrR2 => (fitted && var_y != 0.0).then(|| {
                let cov = m.c2 / n;
                (cov * cov) / (var_x * var_y)
            }),
            AggFunc::RegrAvgX => any.then_some(m.mean_y),
            AggFunc::RegrAvgY => any.then_some(m.mean_x),
            AggFunc::RegrSxx => any.then_some(m.m2_y),
            AggFunc::RegrSyy => any.then_some(m.m2_x),
            AggFunc::RegrSxy => any.then_some(m.c2),
            _ => None,
        }
    }

    /// Merge another state (Chan et al.).
    pub fn merge(&mut self, b: CoMoment) {
        if b.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = b;
            return;
        }
        let (na, nb) = (self.n as f64, b.n as f64);
        let total = na + nb;
        let (dx, dy) = (b.mean_x - self.mean_x, b.mean_y - self.mean_y);
        let w = na * nb / total;
        self.mean_x += dx * nb / total;
        self.mean_y += dy * nb / total;
        self.m2_x += b.m2_x + dx * dx * w;
        self.m2_y += b.m2_y + dy * dy * w;
        self.c2 += b.c2 + dx * dy * w;
        self.n += b.n;
    }
}

/// Which statistics the aggregates need.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// Float sum (sum of floats, avg).
    pub fsum: bool,
    /// Wrapping 64-bit integer sum (sum of integers).
    pub isum: bool,
    pub min_max: bool,
    /// Count, mean and M2 (variance).
    pub moments: bool,
}

impl Needs {
    /// At most the float sum and counts (`sum`, `avg` of floats, `count`).
    pub fn sum_at_most(self) -> bool {
        !(self.isum || self.min_max || self.moments)
    }

    /// The float sum and counts, nothing else (`sum`, `avg` of floats).
    pub fn sum_only(self) -> bool {
        self.fsum && self.sum_at_most()
    }

    /// Whether a fold needing these statistics has to look at the values at all: not
    /// when it only counts cells, nothing is missing and no value range applies (the count
    /// is then the number of cells). The kernels skip the run; the walk does not count
    /// such an input among those that read a tile.
    pub fn reads_values(self, something_missing: bool, ranged: bool) -> bool {
        self != Needs::default() || something_missing || ranged
    }
}

/// Dense accumulators, one slot per group. Vectors a query does not need stay empty.
#[derive(Debug, Clone, Default)]
pub struct Accumulators {
    pub needs: Needs,
    /// All cells, NULL or not (`count(*)`).
    pub cells: Vec<u64>,
    /// Non-NULL cells (`count(v)`).
    pub n: Vec<u64>,
    pub fsum: Vec<f64>,
    /// Wrapping sum; unsigned sums are the same bits read as u64.
    pub isum: Vec<i64>,
    /// Min/max of the non-NaN float inputs; NaN until a group sees one (see `nan`).
    pub fmin: Vec<f64>,
    pub fmax: Vec<f64>,
    /// Min/max of integer inputs.
    pub imin: Vec<i128>,
    pub imax: Vec<i128>,
    /// The signs of the NaNs a group saw ([`NAN_POSITIVE`], [`NAN_NEGATIVE`]).
    pub nan: Vec<u8>,
    pub mean: Vec<f64>,
    pub m2: Vec<f64>,
    /// Counts not yet added to `cells` and `n`, as a difference array over the groups
    /// (entry `g` adds to every group from `g` on, wrapping): a run of consecutive groups
    /// whose elements all count adds one to each of its groups in two entries instead of
    /// two passes over the groups. Empty until [`fold_consecutive`] defers a count;
    /// [`Accumulators::settle`] adds it in. Never used with `needs.moments` (Welford
    /// reads `n` as it folds).
    pending: Vec<u64>,
}

impl Accumulators {
    /// Accumulators for `groups` groups of a float (`float`) or integer input.
    pub fn new(groups: usize, needs: Needs, float: bool) -> Self {
        let v = |on: bool, x| if on { vec![x; groups] } else { vec![] };
        Accumulators {
            needs,
            cells: vec![0; groups],
            n: vec![0; groups],
            fsum: v(needs.fsum, 0.0),
            isum: if needs.isum { vec![0; groups] } else { vec![] },
            fmin: v(needs.min_max && float, f64::NAN),
            fmax: v(needs.min_max && float, f64::NAN),
            imin: if needs.min_max && !float {
                vec![i128::MAX; groups]
            } else {
                vec![]
            },
            imax: if needs.min_max && !float {
                vec![i128::MIN; groups]
            } else {
                vec![]
            },
            nan: if needs.min_max && float {
                vec![0; groups]
            } else {
                vec![]
            },
            mean: v(needs.moments, 0.0),
            m2: v(needs.moments, 0.0),
            pending: vec![],
        }
    }

    /// Count one cell and one value in each of the groups `g..g + len` (not yet: see
    /// `pending`).
    #[inline(always)]
    fn count_later(&mut self, g: usize, len: usize) {
        if self.pending.is_empty() {
            self.pending = vec![0; self.len() + 1];
        }
        self.pending[g] = self.pending[g].wrapping_add(1);
        self.pending[g + len] = self.pending[g + len].wrapping_sub(1);
    }

    /// Add to group `g` `cells` cells, of which `n` hold values summing to `sum` (when
    /// the sum is asked).
    #[inline(always)]
    pub fn add_sum(&mut self, g: usize, cells: u64, n: u64, sum: f64) {
        self.cells[g] += cells;
        self.n[g] += n;
        if self.needs.fsum {
            self.fsum[g] += sum;
        }
    }

    /// Add the deferred counts into `cells` and `n`; call before reading them.
    pub fn settle(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        let mut runs = 0u64;
        for ((d, c), n) in pending.iter().zip(self.cells.iter_mut()).zip(self.n.iter_mut()) {
            runs = runs.wrapping_add(*d);
            *c += runs;
            *n += runs;
        }
    }

    /// Bytes the accumulators of `groups` groups allocate at most (saturating), so that a
    /// caller can reserve them before allocating.
    pub fn bytes(groups: usize, needs: Needs, float: bool) -> usize {
        let per_group = 24 // cells, n, pending
            + 8 * (needs.fsum as usize + needs.isum as usize + 2 * needs.moments as usize)
            + if !needs.min_max {
                0
            } else if float {
                17 // fmin, fmax, nan
            } else {
                32 // imin, imax
            };
        groups.saturating_mul(per_group).saturating_add(8)
    }

    /// Bytes held by the accumulators' vectors.
    pub fn held_bytes(&self) -> usize {
        fn b<T>(v: &[T]) -> usize {
            std::mem::size_of_val(v)
        }
        b(&self.cells)
            + b(&self.n)
            + b(&self.fsum)
            + b(&self.isum)
            + b(&self.fmin)
            + b(&self.fmax)
            + b(&self.imin)
            + b(&self.imax)
            + b(&self.nan)
            + b(&self.mean)
            + b(&self.m2)
            + b(&self.pending)
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// True when there are no groups.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Merge group `g` with a partial (n, mean, M2).
    /// Merge group `g` with a partial (n, mean, M2); `self.n[g]` already counts `n_b`.
    fn merge_moments(&mut self, g: usize, n_b: u64, mean_b: f64, m2_b: f64) {
        let mut m = Moments {
            n: self.n[g] - n_b,
            mean: self.mean[g],
            m2: self.m2[g],
        };
        m.merge(n_b, mean_b, m2_b);
        self.mean[g] = m.mean;
        self.m2[g] = m.m2;
    }

    /// Merge `other` (same groups) into `self`.
    pub fn merge(&mut self, other: &Accumulators) {
        if !other.pending.is_empty() {
            if self.pending.is_empty() {
                self.pending = vec![0; self.len() + 1];
            }
            for (a, b) in self.pending.iter_mut().zip(&other.pending) {
                *a = a.wrapping_add(*b);
            }
        }
        for g in 0..self.len() {
            let nb = other.n[g];
            self.cells[g] += other.cells[g];
            self.n[g] += nb;
            if self.needs.fsum {
                self.fsum[g] += other.fsum[g];
            }
            if self.needs.isum {
                self.isum[g] = self.isum[g].wrapping_add(other.isum[g]);
            }
            if !self.fmin.is_empty() {
                self.fmin[g] = fmin(self.fmin[g], other.fmin[g]);
                self.fmax[g] = fmax(self.fmax[g], other.fmax[g]);
                self.nan[g] |= other.nan[g];
            }
            if !self.imin.is_empty() {
                self.imin[g] = self.imin[g].min(other.imin[g]);
                self.imax[g] = self.imax[g].max(other.imax[g]);
            }
            if self.needs.moments {
                self.merge_moments(g, nb, other.mean[g], other.m2[g]);
            }
        }
    }
}

/// The smaller of `a` and `b` in DataFusion's order of floats among numbers (-0.0 before
/// +0.0), a NaN operand skipped: the accumulators' slots start as NaN ("none yet"), and
/// NaNs are flagged apart (`Accumulators::nan`).
#[inline(always)]
pub fn fmin(a: f64, b: f64) -> f64 {
    // Bitwise `|`/`&`, not `||`/`&&`: a select without branches, which vectorizes.
    let take = a.is_nan() | (b < a) | ((b == a) & b.is_sign_negative());
    if take { b } else { a }
}

/// The larger of `a` and `b` as [`fmin`] orders them (+0.0 after -0.0), NaN skipped.
#[inline(always)]
pub fn fmax(a: f64, b: f64) -> f64 {
    let take = a.is_nan() | (b > a) | ((b == a) & b.is_sign_positive());
    if take { b } else { a }
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
    fn bounds(_: f64, _: f64) -> Option<(Self, Self)> {
        None
    }
}

/// Which elements of type `T` are missing (NULL): [`MissingValues`] specialised to `T`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Missing<T> {
    /// Values that mark a missing element (compared as numbers).
    pub values: Vec<T>,
    /// Every NaN is missing.
    pub nan: bool,
}

impl<T: Elem> Missing<T> {
    /// The rule for elements of type `T` (the dataset's dtype).
    pub fn of(m: &MissingValues) -> Self {
        Missing {
            values: m.values.iter().map(|b| elements::<T>(b)[0]).collect(),
            nan: m.nan && T::FLOAT,
        }
    }

    /// True when no element is missing.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && !self.nan
    }

    /// Whether `x` is missing.
    #[inline(always)]
    pub fn test(&self, x: T) -> bool {
        (self.nan && x.is_nan()) || self.values.contains(&x)
    }

    /// The simplest test that decides this rule, for the kernels to choose their loop by
    /// (`test` looks through the list of values, which keeps a loop scalar).
    fn check(&self) -> MissingCheck<T> {
        match (self.values.as_slice(), self.nan) {
            ([], false) => MissingCheck::Nothing,
            ([], true) => MissingCheck::Nan,
            ([v], false) => MissingCheck::Fill(*v),
            _ => MissingCheck::List,
        }
    }
}

/// [`Missing::check`]: which elements are missing, as the simplest test that tells.
#[derive(Debug, Clone, Copy)]
enum MissingCheck<T> {
    /// None.
    Nothing,
    /// NaNs (`x != x`).
    Nan,
    /// One fill value, NaNs being values (`x == fill`).
    Fill(T),
    /// Several values, or values and NaNs: [`Missing::test`].
    List,
}

impl<T: Copy> MissingCheck<T> {
    /// The fill value, when it is the one test.
    fn fill(self) -> Option<T> {
        match self {
            MissingCheck::Fill(v) => Some(v),
            _ => None,
        }
    }
}

/// A value range as the kernels test it: in the stored type where its bounds convert
/// exactly (`native`), else as f64 (`lo`, `hi`).
#[derive(Debug, Clone, Copy)]
struct RangeCheck<T> {
    native: Option<(T, T)>,
    lo: f64,
    hi: f64,
    /// The range holds NaNs, and they are not missing: the loops count NaNs as inside.
    nan_in: bool,
    /// The range holds some NaNs but not all (by payload): a run that holds a NaN is
    /// decided again by keys ([`Keep::test`]).
    nan_by_keys: bool,
}

impl<T: Elem> RangeCheck<T> {
    fn of(range: KeyRange, nan_missing: bool) -> Self {
        let b = range.float_bounds();
        RangeCheck {
            native: T::bounds(b.lo, b.hi),
            lo: b.lo,
            hi: b.hi,
            nan_in: b.nan() != NanRule::None && !nan_missing,
            nan_by_keys: b.nan() == NanRule::Some,
        }
    }
}

/// Which elements a fold takes: those not missing and, with a range, whose value lies in
/// it (a `WHERE`/`FILTER` comparison on `v`: rows outside are skipped, cells too).
#[derive(Debug, Clone, Default)]
pub struct Keep<T> {
    pub missing: Missing<T>,
    pub range: Option<KeyRange>,
}

impl<T: Elem> Keep<T> {
    /// Whether `x` is folded.
    #[inline(always)]
    pub fn test(&self, x: T) -> bool {
        !self.missing.test(x) && self.range.is_none_or(|r| r.contains(x.key()))
    }
}

/// A positive NaN (the largest value in DataFusion's order of floats).
pub const NAN_POSITIVE: u8 = 1;
/// A NaN with its sign bit set (the smallest).
pub const NAN_NEGATIVE: u8 = 2;

/// [`NAN_NEGATIVE`] or [`NAN_POSITIVE`] for a NaN `x`.
#[inline(always)]
fn nan_sign<T: Elem>(x: T) -> u8 {
    if x.f().is_sign_negative() {
        NAN_NEGATIVE
    } else {
        NAN_POSITIVE
    }
}

const L: usize = 8;

/// The sum of the [`L`] lanes of a run's f64 sum, pairwise: every lane's sum passes through
/// three adds here (the `+ 3` of the error bound in docs/pushdown.md).
#[inline(always)]
fn eight_lanes_total(s: [f64; L]) -> f64 {
    ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))
}

/// Call `f` on each whole block of `N` elements of `x`, in order, two blocks per step of
/// the loop with a prefetch ahead of each step; returns the elements past the last whole
/// block. The one-input kernels' loops go through here: over `chunks_exact(N)` LLVM
/// addressed the loads as base + index × size, which Intel cores split into more
/// micro-ops, and the same arithmetic ran 15% slower at memory speed (one thread over the
/// 508 MiB cube: 44 ms against 38 ms for the C loop, which addresses them as one pointer
/// plus constant offsets, as steps over whole arrays do).
#[inline(always)]
fn for_blocks<T, const N: usize>(x: &[T], mut f: impl FnMut(&[T; N])) -> &[T] {
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

/// Statistics of one run (valid = not missing).
#[derive(Debug, Clone, Copy)]
struct RunStats<T> {
    n: u64,
    fsum: f64,
    isum: i64,
    min: T,
    max: T,
    /// NaN elements among the valid ones.
    nans: u64,
    /// [`NAN_POSITIVE`] and/or [`NAN_NEGATIVE`]: the signs of those NaNs.
    nan_signs: u8,
}

/// Per-lane partial statistics of a run.
struct Lanes<T> {
    n: [u64; L],
    fs: [f64; L],
    is: [i64; L],
    mn: [T; L],
    mx: [T; L],
    /// NaN elements seen (counted only where a range's NaNs need a second look).
    nans: [u64; L],
}

/// Fold the whole lanes of `run` taking the elements `ok` accepts: `FS` float sums, `IS`
/// integer sums, `MM` min/max, `NAN` counts NaNs. One instance per combination keeps
/// each loop free of work it does not need, so it vectorizes. Counts run in 32-bit
/// lanes (the width of an f32 comparison's mask) over blocks short enough not to wrap.
#[inline(always)]
fn lanes<T: Elem, const FS: bool, const IS: bool, const MM: bool, const NAN: bool>(
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
        // below indexed its loads: `WHERE v > 290` took 1.9× the floor, 1.55× here). The
        // general loop at the end does the same counting, but measured slower for it
        // (1.60× on `WHERE v > 290`, 2.14× against 1.88× on a `FILTER` clause, paired).
        for block in run.chunks(L << 24) {
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
    for block in run.chunks(L << 24) {
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
fn lane_sums<T: Elem>(needs: Needs) -> (bool, bool) {
    (
        needs.fsum || needs.moments || (T::FLOAT && needs.min_max),
        needs.isum && !T::FLOAT,
    )
}

/// [`lanes`] for the statistics `needs` asks of elements of type `T`.
#[inline(always)]
fn lanes_for<T: Elem, const NAN: bool>(run: &[T], needs: Needs, ok: impl Fn(T) -> bool) -> Lanes<T> {
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
fn summed<T: Elem>(run: &[T], mut s: [f64; L]) -> RunStats<T> {
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
fn run_stats<T: Elem>(run: &[T], keep: &Keep<T>, needs: Needs) -> RunStats<T> {
    let missing = &keep.missing;
    if !needs.reads_values(!missing.is_empty(), keep.range.is_some()) {
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
    if missing.is_empty() && keep.range.is_none() && !needs.min_max && (T::FLOAT || !needs.isum) {
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
                let more = std::hint::black_box(lanes::<T, true, false, false, false>(&run[done..], |_| true).fs);
                for (a, b) in s.iter_mut().zip(more) {
                    *a += b;
                }
                return summed(run, s);
            }
        }
        // Opaque to LLVM: seeing the pairwise total below, it vectorized the lanes in the
        // total's pairs, with a shuffle per load (1.15x slower over the cube).
        return summed(
            run,
            std::hint::black_box(lanes::<T, true, false, false, false>(run, |_| true).fs),
        );
    }
    let check = missing.check();
    let s = match (keep.range, check) {
        (_, MissingCheck::List) => lanes_for::<T, false>(run, needs, |x| keep.test(x)),
        (None, MissingCheck::Nothing) => lanes_for::<T, false>(run, needs, |_| true),
        #[allow(clippy::eq_op)]
        (None, MissingCheck::Nan) => lanes_for::<T, false>(run, needs, |x| x == x),
        (None, MissingCheck::Fill(fv)) => lanes_for::<T, false>(run, needs, |x| x != fv),
        (Some(range), check) => {
            // Comparisons in the stored type where bounds convert exactly, else as f64;
            // NaNs decided by the rule, or (some NaNs only, as `v > c` keeps the positive
            // ones) kept here and decided by keys when the run holds any: a test of the
            // sign in the loop measured twice as slow on `WHERE v > 290`.
            let RangeCheck {
                native,
                lo,
                hi,
                nan_in,
                nan_by_keys,
            } = RangeCheck::<T>::of(range, missing.nan);
            let in_range = |x: T| {
                #[allow(clippy::eq_op)]
                let nan = nan_in && x != x;
                let inside = match native {
                    Some((l, h)) => (l <= x) & (x <= h),
                    None => (lo <= x.f()) & (x.f() <= hi),
                };
                inside | nan
            };
            let s = match check.fill() {
                None if nan_in => lanes_for::<T, true>(run, needs, in_range),
                None => lanes_for::<T, false>(run, needs, in_range),
                Some(fv) if nan_in => lanes_for::<T, true>(run, needs, |x| in_range(x) & (x != fv)),
                Some(fv) => lanes_for::<T, false>(run, needs, |x| in_range(x) & (x != fv)),
            };
            if nan_by_keys && s.nans.iter().any(|&k| k > 0) {
                lanes_for::<T, false>(run, needs, |x| keep.test(x))
            } else {
                s
            }
        }
    };
    finish(run, keep, needs, s)
}

/// Combine the lanes of `run` and fold its remainder.
#[inline(always)]
fn finish<T: Elem>(run: &[T], keep: &Keep<T>, needs: Needs, mut s: Lanes<T>) -> RunStats<T> {
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
fn signed_zeros<T: Elem>(run: &[T], keep: &Keep<T>, out: &mut RunStats<T>) {
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
/// missing values, which kept the loop scalar: a variance took 6.8× a mean's fold time).
#[inline(always)]
fn run_m2<T: Elem>(run: &[T], keep: &Keep<T>, mean: f64) -> f64 {
    match (keep.range, keep.missing.check()) {
        (None, MissingCheck::Nothing) => m2_of(run, mean, |_| true),
        #[allow(clippy::eq_op)]
        (None, MissingCheck::Nan) => m2_of(run, mean, |x| x == x),
        (None, MissingCheck::Fill(fv)) => m2_of(run, mean, |x| x != fv),
        _ => m2_of(run, mean, |x| keep.test(x)),
    }
}

/// [`run_m2`] over the elements for which `ok` holds.
#[inline(always)]
fn m2_of<T: Elem>(run: &[T], mean: f64, ok: impl Fn(T) -> bool) -> f64 {
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

/// [`run_stats`] of two inputs over `run` in one pass: `sums`, without a range, needing
/// sums at most, and `counts`, counting the elements within its range, under the same
/// missing rule of NaNs or one fill value, over f32 or f64 (else `None`). The lanes add in
/// [`run_stats`]' order, so the statistics are its own, bit for bit.
#[inline(always)]
fn pair_stats<T: Elem>(
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
        Some((l, h)) => pair_by_rule(run, missing.check(), r.nan_in, |x: T| (l <= x) & (x <= h))?,
        None => pair_by_rule(run, missing.check(), r.nan_in, |x: T| (lo <= x.f()) & (x.f() <= hi))?,
    };
    // Decided by keys as `run_stats` decides them: the range holds some NaNs, and the
    // lanes met one.
    let count = match r.nan_by_keys && nans > 0 {
        true => run_stats(run, counts, counts_needs),
        false => count,
    };
    Some((sum, count))
}

/// [`pair_lanes`] with the test of the missing rule that decides it; `None` for a list
/// of values (the pair does not take it). `nan_in`: the range holds NaNs.
#[inline(always)]
fn pair_by_rule<T: Elem>(
    run: &[T],
    check: MissingCheck<T>,
    nan_in: bool,
    inside: impl Fn(T) -> bool,
) -> Option<(RunStats<T>, RunStats<T>, u64)> {
    Some(match check {
        #[allow(clippy::eq_op)]
        MissingCheck::Nan => pair_lanes::<T, false, false>(run, |x| x == x, inside),
        MissingCheck::Nothing if nan_in => pair_lanes::<T, true, true>(run, |_| true, inside),
        MissingCheck::Nothing => pair_lanes::<T, true, false>(run, |_| true, inside),
        MissingCheck::Fill(fv) if nan_in => pair_lanes::<T, false, true>(run, |x| x != fv, inside),
        MissingCheck::Fill(fv) => pair_lanes::<T, false, false>(run, |x| x != fv, inside),
        MissingCheck::List => return None,
    })
}

/// Elements of a piece of a run in [`pair_lanes`]: 2 KiB of f32 (the prefetch distance),
/// in L1 for the second loop while the first one's prefetches ahead keep memory busy
/// (`FILTER` shape, paired: 1.41–1.46× the floor; 1.45–1.70× with 4 KiB pieces).
const PIECE: usize = 512;

/// The lanes of [`pair_stats`]: the sums and count of the elements `base` takes, and the
/// count of those `inside` takes too; `ALL`: `base` takes every element; `NAN`: NaNs are
/// inside, and counted (the third value). Piece by piece, a loop that sums (from memory)
/// and one that counts (from L1): as one loop, LLVM left the lanes scalar (6× the floor),
/// as it did with the range's bounds chosen inside the count loop.
#[inline(always)]
fn pair_lanes<T: Elem, const ALL: bool, const NAN: bool>(
    run: &[T],
    base: impl Fn(T) -> bool,
    inside: impl Fn(T) -> bool,
) -> (RunStats<T>, RunStats<T>, u64) {
    let mut fs = [0f64; L];
    let (mut taken, mut counted, mut nans) = (0u64, 0u64, 0u64);
    for block in run.chunks(L << 24) {
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

multiversion! {
    // AVX-512: LLVM packs the eight minimum and eight maximum lanes of f32 runs into one
    // 512-bit register, moving halves in and out per step (perf annotate: kunpckbw,
    // vinsertf64x4, vextractf64x4); folds with min/max took 1.3–1.6× the AVX2 copy's time.
    up_to_avx2;
    /// Fold a whole run into group `g`. Cells are the run's length, or with a range the
    /// elements in it (a comparison is never true of a NULL).
    pub fn fold_run[T](acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>) where [T: Elem] {
        run_into(acc, g, run, keep)
    }
}

/// The body of [`fold_run`], inlined into each kernel that folds runs.
#[inline(always)]
fn run_into<T: Elem>(acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>) {
    let st = run_stats(run, keep, acc.needs);
    add_run(acc, g, run, keep, st)
}

multiversion! {
    // As `fold_run`: its loops.
    up_to_avx2;
    /// Fold a whole run into group `g` of two inputs over the same stored values:
    /// `sums` (no range) and `counts` (the cells within a range). What [`fold_run`] gives
    /// each, bit for bit, reading the run from memory once when `pair_stats` takes the
    /// pair: a second pass per slab, even from L2, left memory idle (`avg(v), count(*)
    /// FILTER (WHERE v > 290)` took 1.8–2.0× the floor paired, 1.41–1.46× this way;
    /// `avg(v)` alone 1.2×).
    pub fn fold_run_pair[T](
        sums: &mut Accumulators,
        counts: &mut Accumulators,
        g: usize,
        run: &[T],
        keep_sums: &Keep<T>,
        keep_counts: &Keep<T>,
    ) where [T: Elem] {
        let (a, b) = match pair_stats(run, keep_sums, sums.needs, keep_counts, counts.needs) {
            Some(both) => both,
            None => (run_stats(run, keep_sums, sums.needs), run_stats(run, keep_counts, counts.needs)),
        };
        add_run(sums, g, run, keep_sums, a);
        add_run(counts, g, run, keep_counts, b);
    }
}

multiversion! {
    // As `fold_run`: its loops.
    up_to_avx2;
    /// Fold the block of `rows` in `tile`, each row into its group as [`fold_run`] folds a
    /// run, in one call (a call per row of 720 values cost its dispatch and the walk's step
    /// per row).
    pub fn fold_rows[T](acc: &mut Accumulators, tile: &[T], rows: &Rows, keep: &Keep<T>) where [T: Elem] {
        if f32_rows(acc, tile, rows, keep) {
            return;
        }
        // Inlined, as every closure of a kernel must be: a closure is compiled for the
        // baseline unless inlined into the copy (not inlined, this fold of rows ran in
        // SSE2, `GROUP BY lat` 15-30% slower).
        rows.each(
            tile,
            #[inline(always)]
            |g, row| run_into(acc, g, row, keep),
        );
    }
}

/// [`fold_rows`] of f32 rows of a multiple of 16 values when only their sums are needed
/// and nothing is missing or ranged, on an x86-64 copy: each row's total from
/// [`simd::f32_row_totals`](super::simd::f32_row_totals), bit-identical to the row's
/// [`fold_run`]. False (nothing folded) where that does not apply.
#[inline(always)]
fn f32_rows<T: Elem>(acc: &mut Accumulators, tile: &[T], rows: &Rows, keep: &Keep<T>) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use super::simd::{Isa, current, f32_row_totals};
        let len = rows.row_len;
        if !(acc.needs.sum_only() && keep.missing.is_empty() && keep.range.is_none())
            || len == 0
            || !len.is_multiple_of(16)
            || current() == Isa::Portable
        {
            return false;
        }
        let Some(x) = T::as_f32(&tile[rows.tile_offset..rows.tile_offset + rows.len()]) else {
            return false;
        };
        const BATCH: usize = 64;
        let mut totals = [0f64; BATCH];
        for (ids, cells) in rows.ids.chunks(BATCH).zip(x.chunks(BATCH * len)) {
            let totals = &mut totals[..ids.len()];
            // SAFETY: `current` names a level above the portable one only when the CPU
            // has AVX2, so AVX.
            if !unsafe { f32_row_totals(cells, len, totals) } {
                // Not reached: `cells` holds `ids.len()` whole rows of a multiple of 16.
                for (&id, row) in ids.iter().zip(cells.chunks_exact(len)) {
                    run_into(acc, rows.base + id as usize * rows.stride, row, &Keep::default());
                }
                continue;
            }
            for (&id, &total) in ids.iter().zip(totals.iter()) {
                let g = rows.base + id as usize * rows.stride;
                acc.cells[g] += len as u64;
                acc.n[g] += len as u64;
                acc.fsum[g] += total;
            }
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (acc, tile, rows, keep);
        false
    }
}

/// Add the statistics `st` of `run` (kept by `keep`) to group `g`. Cells are the run's
/// length, or with a range the elements in it (a comparison is never true of a NULL).
#[inline(always)]
fn add_run<T: Elem>(acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>, st: RunStats<T>) {
    let needs = acc.needs;
    acc.cells[g] += if keep.range.is_some() { st.n } else { run.len() as u64 };
    acc.n[g] += st.n;
    if needs.fsum {
        acc.fsum[g] += st.fsum;
    }
    if needs.isum {
        acc.isum[g] = acc.isum[g].wrapping_add(st.isum);
    }
    if needs.min_max && st.n > 0 {
        if T::FLOAT {
            // fmin/fmax ignore the NaN the slots start with.
            if st.n > st.nans {
                acc.fmin[g] = fmin(acc.fmin[g], st.min.f());
                acc.fmax[g] = fmax(acc.fmax[g], st.max.f());
            }
            acc.nan[g] |= st.nan_signs;
        } else {
            acc.imin[g] = acc.imin[g].min(st.min.wide());
            acc.imax[g] = acc.imax[g].max(st.max.wide());
        }
    }
    if needs.moments && st.n > 0 {
        let mean = st.fsum / st.n as f64;
        let m2 = run_m2(run, keep, mean);
        acc.merge_moments(g, st.n, mean, m2);
    }
}

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
        if keep.range.is_none() || ok {
            acc.cells[g] += 1;
        }
        if ok {
            fold_value(acc, g, x);
        }
    }
}

multiversion! {
    /// Fold element `i` of `run` into group `g + i` (a grouped innermost axis that is its
    /// own key): [`fold_elementwise`] without a group lookup per element, as passes over
    /// the run and the groups' accumulators side by side, which vectorize. Variances
    /// (Welford, one element after the other) stay element-wise.
    pub fn fold_consecutive[T](acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>) where [T: Elem] {
        if acc.needs.moments {
            return fold_elementwise(acc, run, keep, |i| g + i);
        }
        match (keep.missing.check(), keep.range) {
            (MissingCheck::Nothing, None) => {
                acc.count_later(g, run.len());
                consecutive(acc, g, run, Counts::Done, |_| true)
            }
            #[allow(clippy::eq_op)]
            (MissingCheck::Nan, None) => consecutive(acc, g, run, Counts::Each, |x| x == x),
            (MissingCheck::Fill(fv), None) => consecutive(acc, g, run, Counts::Each, |x| x != fv),
            (MissingCheck::List, None) => consecutive(acc, g, run, Counts::Each, |x| keep.test(x)),
            (_, Some(_)) => consecutive(acc, g, run, Counts::Kept, |x| keep.test(x)),
        }
    }
}

/// How [`consecutive`] counts cells and values.
#[derive(Clone, Copy, PartialEq)]
enum Counts {
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
fn consecutive<T: Elem>(acc: &mut Accumulators, g: usize, run: &[T], counts: Counts, ok: impl Fn(T) -> bool) {
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
            for (flag, &x) in acc.nan[groups].iter_mut().zip(run) {
                if x.is_nan() && ok(x) {
                    *flag |= nan_sign(x);
                }
            }
        } else {
            let (lo, hi) = (&mut acc.imin[groups.clone()], &mut acc.imax[groups]);
            for ((lo, hi), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(run) {
                if ok(x) {
                    *lo = (*lo).min(x.wide());
                    *hi = (*hi).max(x.wide());
                }
            }
        }
    }
}

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
    ) where [T: Elem] {
        let needs = Needs {
            fsum: acc.needs.fsum && map.is_some(),
            ..Needs::default()
        };
        let st = run_stats(run, keep, needs);
        acc.cells[g] += if keep.range.is_some() { st.n } else { run.len() as u64 };
        let Some(w) = w else { return };
        acc.n[g] += st.n;
        if acc.needs.fsum {
            acc.fsum[g] += match map {
                Some(m) => w * (m.scale * st.fsum + m.offset * st.n as f64),
                None => w * st.n as f64,
            };
        }
    }
}

/// Per lane: the count and the sum of `product(x, w)` over the elements `x` of `run` (whole
/// lanes) that `ok` takes and whose weight `w = weight(i)` is not NULL.
#[inline(always)]
fn dot_lanes<T: Elem>(
    run: &[T],
    ok: impl Fn(T) -> bool,
    product: &impl Fn(T, f64) -> f64,
    weight: &impl Fn(usize) -> Option<f64>,
) -> ([u64; L], [f64; L]) {
    let mut n = [0u64; L];
    let mut s = [0f64; L];
    // Counts in 32-bit lanes (as `lanes`) over blocks short enough not to wrap.
    const BLOCK_CHUNKS: usize = 1 << 24;
    for (b, block) in run.chunks(L * BLOCK_CHUNKS).enumerate() {
        let base = b * L * BLOCK_CHUNKS;
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
    ) where [T: Elem, P: Fn(T, f64) -> f64, W: Fn(usize) -> Option<f64>] {
        let plain = keep.missing.is_empty() && keep.range.is_none();
        let chunks = run.len() / L * L;
        // One loop per case, so neither branches per element.
        let (n, s) = if plain {
            dot_lanes(&run[..chunks], |_| true, &product, &weight)
        } else {
            dot_lanes(&run[..chunks], |x| keep.test(x), &product, &weight)
        };
        dot_finish(acc, g, run, keep, (n, s), product, weight);
    }
}

multiversion! {
    /// [`fold_dot`] of the product in f32 (`(x as f32 * w as f32) as f64`, DataFusion's
    /// product of an f32 value and an f32 weight) with one weight `w` for the whole run.
    /// Without a missing rule or range, the sum keeps `CO_LANES` lanes (as
    /// [`CoMoment::of`]'s), a form the compiler vectorizes whole (shorter chains than
    /// eight lanes: the same error bound or better).
    pub fn fold_scaled[T](acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>, w: f64) where [T: Elem] {
        let wf = w as f32;
        let product = move |x: T, _: f64| (x.f32() * wf) as f64;
        if !(keep.missing.is_empty() && keep.range.is_none()) {
            // As `fold_dot` with the weight constant.
            let chunks = run.len() / L * L;
            let lanes = dot_lanes(&run[..chunks], |x| keep.test(x), &product, &|_| Some(w));
            return dot_finish(acc, g, run, keep, lanes, product, |_| Some(w));
        }
        let mut s = [0f64; CO_LANES];
        let rest = for_blocks(run, #[inline(always)] |a: &[T; CO_LANES]| {
            for i in 0..CO_LANES {
                s[i] += (a[i].f32() * wf) as f64;
            }
        });
        for (i, &x) in rest.iter().enumerate() {
            s[i] += (x.f32() * wf) as f64;
        }
        let n = run.len() as u64;
        acc.add_sum(g, n, n, lanes_total(s));
    }
}

/// The rest of a dot product after its whole lanes `(n, s)`: the remainder of `run`, then
/// the run's cells, count and sum into group `g`.
#[inline(always)]
fn dot_finish<T: Elem>(
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
    acc.cells[g] += if keep.range.is_some() {
        run.iter().filter(|x| keep.test(**x)).count() as u64
    } else {
        run.len() as u64
    };
    acc.n[g] += n.iter().sum::<u64>();
    if acc.needs.fsum {
        acc.fsum[g] += eight_lanes_total(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep<T>(missing: Missing<T>) -> Keep<T> {
        Keep { missing, range: None }
    }

    #[test]
    fn co_moments_of_blocks_merge_to_the_definition() {
        // Lengths around the four lanes, merged in uneven blocks, against the two-pass
        // definition in exact-enough f64 (values of moderate size).
        for n in [1usize, 3, 4, 5, 17, 512, 1000] {
            let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 97) as f32 * 0.5 - 20.0).collect();
            let y: Vec<f64> = (0..n)
                .map(|i| ((i * 104729) % 89) as f64 * 0.25 + x[i] as f64)
                .collect();
            let (mx, my) = (
                x.iter().map(|&v| v as f64).sum::<f64>() / n as f64,
                y.iter().sum::<f64>() / n as f64,
            );
            let dev = |a: &dyn Fn(usize) -> f64| (0..n).map(a).sum::<f64>();
            let want = [
                dev(&|i| (x[i] as f64 - mx).powi(2)),
                dev(&|i| (y[i] - my).powi(2)),
                dev(&|i| (x[i] as f64 - mx) * (y[i] - my)),
            ];
            let mut acc = CoMoment::default();
            let mut welford = CoMoment::default();
            let mut at = 0;
            for (k, len) in [1usize, 5, 300, 8].iter().cycle().enumerate() {
                if at >= n {
                    break;
                }
                let end = (at + len + k % 3).min(n);
                acc.merge(CoMoment::of(&x[at..end], &y[at..end]));
                at = end;
            }
            (0..n).for_each(|i| welford.add(x[i] as f64, y[i]));
            for m in [acc, welford] {
                assert_eq!(m.n, n as u64);
                assert!((m.mean_x - mx).abs() <= 1e-12 * mx.abs().max(1.0), "{n}: {m:?}");
                assert!((m.mean_y - my).abs() <= 1e-12 * my.abs().max(1.0), "{n}: {m:?}");
                for (got, want) in [m.m2_x, m.m2_y, m.c2].into_iter().zip(want) {
                    assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{n}: {got} vs {want}");
                }
            }
        }
    }

    fn brute(vals: &[f64]) -> (u64, f64, f64, f64, f64) {
        let n = vals.len() as u64;
        let s: f64 = vals.iter().sum();
        let mean = s / n as f64;
        let m2: f64 = vals.iter().map(|x| (x - mean) * (x - mean)).sum();
        let mn = vals.iter().cloned().fold(f64::INFINITY, f64::min);
        let mx = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        (n, s, m2, mn, mx)
    }

    #[test]
    fn runs_and_elementwise_agree_with_brute_force() {
        let needs = Needs {
            fsum: true,
            isum: true,
            min_max: true,
            moments: true,
        };
        let vals: Vec<f32> = (0..53).map(|i| ((i * 37) % 19) as f32 - 7.5).collect();
        let fill = Missing {
            values: vec![4.5f32],
            nan: false,
        };
        let kept: Vec<f64> = vals.iter().filter(|v| **v != 4.5).map(|v| *v as f64).collect();
        let (n, s, m2, mn, mx) = brute(&kept);
        // Split into uneven runs into one group.
        for (fsum, isum, min_max, moments, float) in
            (0..32).map(|b| (b & 1 != 0, b & 2 != 0, b & 4 != 0, b & 8 != 0, b & 16 != 0))
        {
            let needs = Needs {
                fsum,
                isum,
                min_max,
                moments,
            };
            // With the deferred counts allocated.
            let mut all = Accumulators::new(37, needs, float);
            all.count_later(0, 37);
            assert_eq!(
                Accumulators::bytes(37, needs, float),
                all.held_bytes(),
                "{needs:?}, float {float}"
            );
        }
        let mut acc = Accumulators::new(1, needs, true);
        for r in [&vals[..5], &vals[5..30], &vals[30..]] {
            fold_run(&mut acc, 0, r, &keep(fill.clone()));
        }
        assert_eq!(
            (acc.cells[0], acc.n[0], acc.fsum[0], acc.fmin[0], acc.fmax[0]),
            (53, n, s, mn, mx)
        );
        assert!((acc.m2[0] - m2).abs() < 1e-9 * m2.abs().max(1.0));
        // Elementwise into one group per element, then merged into another accumulator.
        let mut e = Accumulators::new(53, needs, true);
        fold_elementwise(&mut e, &vals, &keep(fill.clone()), |i| i);
        assert_eq!(e.cells.iter().sum::<u64>(), 53);
        assert_eq!(e.n.iter().sum::<u64>(), n);
        let mut a = Accumulators::new(53, needs, true);
        a.merge(&e);
        a.merge(&e);
        assert_eq!(a.fsum.iter().sum::<f64>(), 2.0 * s);
        // Integers: wrapping sums as DataFusion.
        let ints = [i64::MAX, 1, -3];
        let mut acc = Accumulators::new(1, needs, false);
        fold_run(&mut acc, 0, &ints, &Keep::default());
        assert_eq!(acc.isum[0], i64::MAX.wrapping_add(1).wrapping_add(-3));
        assert_eq!((acc.imin[0], acc.imax[0]), (-3, i64::MAX as i128));
        // NaN is seen.
        let mut acc = Accumulators::new(1, needs, true);
        fold_run(&mut acc, 0, &[1.0f64, f64::NAN, 3.0], &Keep::default());
        assert!(acc.nan[0] == NAN_POSITIVE && acc.fsum[0].is_nan());
        assert_eq!((acc.fmin[0], acc.fmax[0]), (1.0, 3.0));
        // Only NaN and +inf: the minimum is +inf; only NaN: no non-NaN bound at all.
        let mut acc = Accumulators::new(2, needs, true);
        fold_run(&mut acc, 0, &[f64::NAN, f64::INFINITY], &Keep::default());
        fold_run(&mut acc, 1, &[f64::NAN, f64::NAN], &Keep::default());
        assert_eq!((acc.fmin[0], acc.fmax[0]), (f64::INFINITY, f64::INFINITY));
        assert!(acc.fmin[1].is_nan() && acc.nan[1] != 0);
        let mut e = Accumulators::new(2, needs, true);
        fold_elementwise(&mut e, &[f64::INFINITY, f64::NAN], &Keep::default(), |i| i);
        assert_eq!(e.fmin[0], f64::INFINITY);
        assert!(e.fmin[1].is_nan() && e.nan[1] != 0);
    }

    #[test]
    fn missing_rules_match_on_every_kernel_path() {
        let needs = Needs {
            fsum: true,
            isum: false,
            min_max: true,
            moments: true,
        };
        // 19 elements: the 8-lane body and the remainder both see every case.
        let vals: Vec<f64> = (0..19)
            .map(|i| match i % 4 {
                0 => f64::NAN,
                1 => -0.0,
                _ => i as f64,
            })
            .collect();
        let rules = [
            (
                Missing {
                    values: vec![],
                    nan: true,
                },
                "nan",
            ),
            (
                Missing {
                    values: vec![0.0],
                    nan: false,
                },
                "zero",
            ),
            (
                Missing {
                    values: vec![0.0, 6.0],
                    nan: true,
                },
                "several",
            ),
        ];
        for (rule, name) in &rules {
            let kept: Vec<f64> = vals.iter().copied().filter(|&x| !rule.test(x)).collect();
            let mut run = Accumulators::new(1, needs, true);
            fold_run(&mut run, 0, &vals, &keep(rule.clone()));
            let mut each = Accumulators::new(1, needs, true);
            fold_elementwise(&mut each, &vals, &keep(rule.clone()), |_| 0);
            for acc in [&run, &each] {
                assert_eq!(acc.n[0], kept.len() as u64, "{name}");
                assert_eq!(acc.cells[0], 19, "{name}");
                let sum: f64 = kept.iter().sum();
                assert!(
                    acc.fsum[0] == sum || (sum.is_nan() && acc.fsum[0].is_nan()),
                    "{name}: {} vs {sum}",
                    acc.fsum[0]
                );
                assert_eq!(acc.nan[0] != 0, kept.iter().any(|x| x.is_nan()), "{name}");
            }
        }
        // Zero matches negative zero; NaN never equals a number.
        assert!(rules[1].0.test(-0.0) && !rules[1].0.test(f64::NAN));
    }

    /// Every set of statistics a fold of elements of type `T` can be asked for (an integer
    /// sum only of integers).
    fn every_needs<T: Elem>() -> impl Iterator<Item = Needs> {
        (0..16u8).map(|b| Needs {
            fsum: b & 1 != 0,
            isum: b & 2 != 0 && !T::FLOAT,
            min_max: b & 4 != 0,
            moments: b & 8 != 0,
        })
    }

    /// Folding a run into consecutive groups gives the element-wise fold's accumulators
    /// bit for bit: every dtype class, missing rule, range and set of statistics, runs
    /// landing on groups already holding values.
    #[test]
    fn consecutive_groups_fold_as_elementwise() {
        fn check<T: Elem + std::fmt::Debug>(vals: &[T], fill: T) {
            let keeps = [
                Keep::default(),
                keep(Missing {
                    values: vec![],
                    nan: T::FLOAT,
                }),
                keep(Missing {
                    values: vec![fill],
                    nan: false,
                }),
                keep(Missing {
                    values: vec![fill, vals[3]],
                    nan: T::FLOAT,
                }),
                Keep {
                    missing: Missing {
                        values: vec![fill],
                        nan: false,
                    },
                    range: Some(KeyRange {
                        lo: order_key(-3.0),
                        hi: order_key(40.0),
                    }),
                },
            ];
            for k in &keeps {
                for needs in every_needs::<T>() {
                    let n = vals.len() + 7;
                    let (mut want, mut got) = (
                        Accumulators::new(n, needs, T::FLOAT),
                        Accumulators::new(n, needs, T::FLOAT),
                    );
                    for (g, w) in [(0, 0..vals.len()), (7, 2..vals.len() - 5), (3, 10..11), (1, 4..4)] {
                        fold_elementwise(&mut want, &vals[w.clone()], k, |i| g + i);
                        fold_consecutive(&mut got, g, &vals[w], k);
                    }
                    // Merged twice before settling: the deferred counts merge too.
                    let mut twice = Accumulators::new(n, needs, T::FLOAT);
                    twice.merge(&got);
                    twice.merge(&got);
                    twice.settle();
                    got.settle();
                    let double = |v: &[u64]| v.iter().map(|c| 2 * c).collect::<Vec<_>>();
                    assert_eq!((twice.cells, twice.n), (double(&want.cells), double(&want.n)));
                    assert_eq!(format!("{got:?}"), format!("{want:?}"), "{needs:?} {k:?}");
                }
            }
        }
        let mut seed = 77;
        let f32s = f32s_with_nans(&mut seed, 203);
        check(&f32s, f32s[6]);
        let f64s: Vec<f64> = f32s.iter().map(|&x| x as f64 * 1.25).collect();
        check(&f64s, f64s[9]);
        let i16s: Vec<i16> = (0..203).map(|_| random(&mut seed) as i16).collect();
        check(&i16s, i16s[2]);
        let u64s: Vec<u64> = (0..203).map(|_| random(&mut seed)).collect();
        check(&u64s, u64s[4]);
    }

    #[test]
    fn rows_fold_as_runs_into_their_groups() {
        fn check<T: Elem + std::fmt::Debug>(vals: &[T], fill: T) {
            let keeps = [
                Keep::default(),
                keep(Missing {
                    values: vec![fill],
                    nan: T::FLOAT,
                }),
                Keep {
                    missing: Missing::default(),
                    range: Some(KeyRange {
                        lo: order_key(-3.0),
                        hi: order_key(40.0),
                    }),
                },
            ];
            // Rows of 23 (a remainder past the lanes), 8, 16 and 48 (the hand-written loop
            // of f32 rows), groups repeated and skipped.
            let ids = [2u32, 0, 2, 5, 1, 1, 4, 0];
            let (base, stride) = (3, 2);
            for k in &keeps {
                for needs in every_needs::<T>() {
                    for row_len in [23, 8, 16, 48] {
                        // The rows start past the tile's first cell.
                        let rows = Rows {
                            tile_offset: 3,
                            row_len,
                            base,
                            stride,
                            ids: &ids,
                        };
                        let n = base + 5 * stride + 1;
                        let new = || Accumulators::new(n, needs, T::FLOAT);
                        let (mut want, mut got) = (new(), new());
                        let row = |i: usize| &vals[3 + i * row_len..3 + (i + 1) * row_len];
                        for (i, &id) in ids.iter().enumerate() {
                            fold_run(&mut want, base + id as usize * stride, row(i), k);
                        }
                        fold_rows(&mut got, vals, &rows, k);
                        fold_rows(&mut got, vals, &Rows { row_len: 0, ..rows }, k);
                        got.settle();
                        want.settle();
                        assert_eq!(format!("{got:?}"), format!("{want:?}"), "{needs:?} {k:?} {row_len}");
                        // Every cell in its row's group, and no other group touched.
                        let mut cells = vec![0u64; n];
                        ids.iter()
                            .for_each(|&id| cells[base + id as usize * stride] += row_len as u64);
                        if k.range.is_none() {
                            assert_eq!(got.cells, cells);
                        }
                    }
                }
            }
        }
        let mut seed = 5;
        let f32s = f32s_with_nans(&mut seed, 400);
        check(&f32s, f32s[6]);
        let i16s: Vec<i16> = (0..400).map(|_| random(&mut seed) as i16).collect();
        check(&i16s, i16s[2]);
    }

    /// `T::bounds` keeps exactly the values the f64 comparison keeps.
    fn bounds_agree<T: Elem + std::fmt::Debug>(xs: &[T], edges: &[f64]) {
        for &lo in edges {
            for &hi in edges {
                let Some((l, h)) = T::bounds(lo, hi) else { continue };
                for &x in xs.iter().filter(|x| !x.is_nan()) {
                    let want = lo <= x.f() && x.f() <= hi;
                    assert_eq!(l <= x && x <= h, want, "{x:?} in [{lo}, {hi}] as [{l:?}, {h:?}]");
                }
            }
        }
    }

    #[test]
    fn native_bounds_agree_with_f64_comparisons() {
        let mut edges = vec![
            f64::NAN,
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::MAX,
            f64::MIN,
            0.0,
            -0.0,
            -4.9e-324,
            4.9e-324,
            1e-46,
            290.0,
            290.0f64.next_up(),
            290.00003,
            -1.5,
            255.0,
            255.5,
            65535.9,
            -32768.5,
            4294967295.0,
            3.4e38,
            3.5e38,
        ];
        edges.extend(edges.clone().iter().map(|x| x.next_down()));
        let f32s: Vec<f32> = edges
            .iter()
            .flat_map(|&x| [x as f32, (x as f32).next_up(), (x as f32).next_down()])
            .collect();
        bounds_agree(&f32s, &edges);
        let f64s: Vec<f64> = edges.iter().flat_map(|&x| [x, x.next_up(), x.next_down()]).collect();
        bounds_agree(&f64s, &edges);
        let u8s: Vec<u8> = (0..=255).collect();
        bounds_agree(&u8s, &edges);
        let i16s: Vec<i16> = (-300..300).chain([i16::MIN, i16::MAX]).collect();
        bounds_agree(&i16s, &edges);
        let u32s: Vec<u32> = [0, 1, 254, 255, 256, 290, 291, u32::MAX - 1, u32::MAX].to_vec();
        bounds_agree(&u32s, &edges);
    }

    #[test]
    fn ranges_agree_with_brute_force_on_every_kernel_path() {
        let specials = [
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1.5,
            -2.5,
            f64::MIN_POSITIVE,
            1e300,
        ];
        let needs = Needs {
            fsum: true,
            isum: false,
            min_max: true,
            moments: true,
        };
        let vals: Vec<f64> = (0..37)
            .map(|i| specials[i % specials.len()] + (i / 10) as f64)
            .collect();
        let ranges = [
            KeyRange {
                lo: order_key(0.0),
                hi: i64::MAX,
            },
            KeyRange {
                lo: order_key(-0.0) + 1,
                hi: order_key(2.0),
            },
            KeyRange {
                lo: i64::MIN,
                hi: order_key(f64::INFINITY),
            },
            KeyRange::ALL,
            KeyRange { lo: i64::MIN, hi: -1 },
            // `v >= NaN`: only the NaNs of the largest payloads, which keys tell.
            KeyRange {
                lo: order_key(f64::NAN),
                hi: i64::MAX,
            },
        ];
        for (r, missing) in ranges.iter().flat_map(|r| {
            [
                (*r, Missing::default()),
                (
                    *r,
                    Missing {
                        values: vec![],
                        nan: true,
                    },
                ),
                (
                    *r,
                    Missing {
                        values: vec![1.5],
                        nan: false,
                    },
                ),
            ]
        }) {
            let kept: Vec<f64> = vals
                .iter()
                .copied()
                .filter(|&x| !missing.test(x) && r.contains(order_key(x)))
                .collect();
            let k = Keep {
                missing: missing.clone(),
                range: Some(r),
            };
            let mut run = Accumulators::new(1, needs, true);
            fold_run(&mut run, 0, &vals, &k);
            let mut each = Accumulators::new(1, needs, true);
            fold_elementwise(&mut each, &vals, &k, |_| 0);
            // Pieces of eight without a NaN take the float-comparison loops.
            let mut pieces = Accumulators::new(1, needs, true);
            for w in [0, 2, 10, 12, 20, 22, 30, 37].windows(2) {
                fold_run(&mut pieces, 0, &vals[w[0]..w[1]], &k);
            }
            for acc in [&run, &each, &pieces] {
                assert_eq!(
                    (acc.cells[0], acc.n[0]),
                    (kept.len() as u64, kept.len() as u64),
                    "{r:?}"
                );
                let sum: f64 = kept.iter().sum();
                assert!(acc.fsum[0] == sum || (sum.is_nan() && acc.fsum[0].is_nan()), "{r:?}");
                let signs = kept.iter().filter(|x| x.is_nan()).fold(0, |s, x| {
                    s | if x.is_sign_negative() {
                        NAN_NEGATIVE
                    } else {
                        NAN_POSITIVE
                    }
                });
                assert_eq!(acc.nan[0], signs, "{r:?}");
            }
        }
    }

    /// `n` f32s: a NaN of each sign in every 17 (at 0 and 5), random sixteenths in
    /// [-50, 75) between.
    fn f32s_with_nans(seed: &mut u64, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| match i % 17 {
                0 => f32::NAN,
                5 => -f32::NAN,
                _ => (random(seed) % 2000) as f32 / 16.0 - 50.0,
            })
            .collect()
    }

    /// A small deterministic generator (xorshift) for the tests below.
    fn random(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn variances_of_runs_agree_with_brute_force() {
        // The squared deviations (`run_m2`) under each rule of what is kept: nothing
        // missing, NaN missing, one fill value, and a range; runs of every length to 40.
        let mut seed = 7;
        let vals: Vec<f32> = f32s_with_nans(&mut seed, 40)
            .into_iter()
            .enumerate()
            .map(|(i, x)| if i % 17 == 5 { 2.5 } else { x })
            .collect();
        let needs = Needs {
            fsum: true,
            moments: true,
            ..Needs::default()
        };
        let missings = [
            Missing::default(),
            Missing {
                values: vec![],
                nan: true,
            },
            Missing {
                values: vec![2.5],
                nan: true,
            },
        ];
        for n in 0..=vals.len() {
            // Without NaNs where nothing is missing: their M2 is NaN whatever the order.
            let plain: Vec<f32> = vals[..n].iter().map(|&x| if x.is_nan() { 1.0 } else { x }).collect();
            let cases = [
                (plain.clone(), Missing::<f32>::default(), None),
                (
                    plain.clone(),
                    Missing {
                        values: vec![2.5],
                        nan: false,
                    },
                    None,
                ),
                (vals[..n].to_vec(), missings[1].clone(), None),
                (vals[..n].to_vec(), missings[2].clone(), None),
                (
                    vals[..n].to_vec(),
                    missings[1].clone(),
                    Some(KeyRange {
                        lo: order_key(-10.0),
                        hi: order_key(30.0),
                    }),
                ),
                (plain, missings[0].clone(), Some(KeyRange::ALL)),
            ];
            for (run, missing, range) in cases {
                let keep = Keep { missing, range };
                let kept: Vec<f64> = run.iter().filter(|&&x| keep.test(x)).map(|&x| x as f64).collect();
                let mean = kept.iter().sum::<f64>() / kept.len().max(1) as f64;
                let m2: f64 = kept.iter().map(|x| (x - mean) * (x - mean)).sum();
                let mut acc = Accumulators::new(1, needs, true);
                fold_run(&mut acc, 0, &run, &keep);
                assert_eq!(acc.n[0], kept.len() as u64, "{keep:?}");
                let tol = 1e-12 * m2.max(1.0);
                assert!((acc.m2[0] - m2).abs() <= tol, "{keep:?}: {} against {m2}", acc.m2[0]);
            }
        }
    }

    #[test]
    fn pairs_fold_in_one_pass_as_apart() {
        // `fold_run_pair` must give each input what `fold_run` gives it alone, bit for bit,
        // whether `pair_stats` takes the pair or not; it must take the pairs it is for.
        fn check<T: Elem + std::fmt::Debug>(vals: &[T], missing: &Missing<T>, range: KeyRange, one_pass: bool) {
            let sums = Keep {
                missing: missing.clone(),
                range: None,
            };
            let counts = Keep {
                missing: missing.clone(),
                range: Some(range),
            };
            let sum_needs = Needs {
                fsum: true,
                ..Needs::default()
            };
            let (mut a, mut b) = (
                Accumulators::new(2, sum_needs, true),
                Accumulators::new(2, Needs::default(), true),
            );
            fold_run_pair(&mut a, &mut b, 1, vals, &sums, &counts);
            let (mut a1, mut b1) = (
                Accumulators::new(2, sum_needs, true),
                Accumulators::new(2, Needs::default(), true),
            );
            fold_run(&mut a1, 1, vals, &sums);
            fold_run(&mut b1, 1, vals, &counts);
            let what = format!("{} values, {missing:?}, {range:?}", vals.len());
            assert_eq!(a.fsum[1].to_bits(), a1.fsum[1].to_bits(), "sum: {what}");
            assert_eq!((a.n[1], a.cells[1]), (a1.n[1], a1.cells[1]), "sum's counts: {what}");
            assert_eq!((b.n[1], b.cells[1]), (b1.n[1], b1.cells[1]), "counts: {what}");
            assert_eq!((a.n[0], b.n[0], a.fsum[0]), (0, 0, 0.0));
            let taken = pair_stats(vals, &sums, sum_needs, &counts, Needs::default()).is_some();
            assert_eq!(taken, one_pass, "one pass: {what}");
        }
        let ranges = [
            // `v > 1.0`: every positive NaN too (some NaNs: decided by keys).
            KeyRange {
                lo: order_key(1.0) + 1,
                hi: i64::MAX,
            },
            // `v BETWEEN -0.1 AND 2`: no NaN; -0.1 is no f32.
            KeyRange {
                lo: order_key(-0.1),
                hi: order_key(2.0),
            },
            // Everything, NaNs included.
            KeyRange::ALL,
        ];
        let mut seed = 7;
        for n in (0..70).chain([1000, 4099]) {
            // Magnitudes far apart (another order of adds gives other bits), a fill value
            // and NaNs of both signs.
            let f32s: Vec<f32> = (0..n)
                .map(|i| match random(&mut seed) % 23 {
                    0 => 1.5,
                    1 if i % 2 == 0 => f32::NAN,
                    1 => -f32::NAN,
                    _ => {
                        let m = (random(&mut seed) % 4096) as f32 - 2048.0;
                        m * 2f32.powi((random(&mut seed) % 40) as i32 - 20)
                    }
                })
                .collect();
            let no_nans: Vec<f32> = f32s.iter().map(|&x| if x.is_nan() { 3.0 } else { x }).collect();
            for vals in [&f32s, &no_nans] {
                let f64s: Vec<f64> = vals.iter().map(|&x| x as f64 * 1.1).collect();
                let fill32 = Missing {
                    values: vec![1.5f32],
                    nan: false,
                };
                let fill64 = Missing {
                    values: vec![1.5f64 * 1.1],
                    nan: false,
                };
                for r in ranges {
                    let nan32 = Missing::<f32> {
                        values: vec![],
                        nan: true,
                    };
                    let nan64 = Missing::<f64> {
                        values: vec![],
                        nan: true,
                    };
                    check(vals, &Missing::default(), r, true);
                    check(vals, &nan32, r, true);
                    check(vals, &fill32, r, true);
                    check(&f64s, &Missing::default(), r, true);
                    check(&f64s, &nan64, r, true);
                    check(&f64s, &fill64, r, true);
                    // Two fill values, and types the pair is not for: two passes.
                    let fills = Missing {
                        values: vec![1.5f32, 3.0],
                        nan: false,
                    };
                    check(vals, &fills, r, false);
                    let ints: Vec<i32> = vals.iter().map(|&x| x as i32).collect();
                    check(&ints, &Missing::default(), r, false);
                }
            }
        }
    }

    #[test]
    fn plain_sums_add_in_the_stated_lane_order() {
        // Sums with nothing missing and no range take their own path (`run_stats`). Its
        // result must be the stated order exactly: element `i` into lane `i` mod 8, the
        // lanes combined pairwise, as the general path (here, with min/max) adds them.
        fn check<T: Elem>(vals: &[T]) {
            let mut lane = [0f64; 8];
            for (i, x) in vals.iter().enumerate() {
                lane[i % 8] += x.f();
            }
            let expected = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
            for needs in [
                Needs {
                    fsum: true,
                    ..Needs::default()
                },
                Needs {
                    fsum: true,
                    min_max: true,
                    ..Needs::default()
                },
            ] {
                let mut acc = Accumulators::new(2, needs, T::FLOAT);
                fold_run(&mut acc, 1, vals, &Keep::default());
                assert_eq!(
                    acc.fsum[1].to_bits(),
                    expected.to_bits(),
                    "{needs:?}, {} values",
                    vals.len()
                );
                assert_eq!((acc.n[1], acc.cells[1]), (vals.len() as u64, vals.len() as u64));
                assert_eq!((acc.n[0], acc.fsum[0]), (0, 0.0));
            }
        }
        let mut seed = 99;
        for n in 0..70 {
            // Magnitudes far apart, so that another order of adds gives other bits.
            let f32s: Vec<f32> = (0..n)
                .map(|_| (random(&mut seed) % 4096) as f32 * 2f32.powi((random(&mut seed) % 40) as i32 - 20))
                .collect();
            check(&f32s);
            check(&f32s.iter().map(|&x| x as f64 * 1.1).collect::<Vec<f64>>());
            check(&(0..n).map(|_| random(&mut seed) as i32).collect::<Vec<i32>>());
        }
    }

    #[test]
    fn counts_of_32_bit_runs_agree_with_brute_force() {
        // Count-only folds (`count(*) … WHERE v > c`) of f32 and i32 runs of every length
        // up to 70, with NaNs, missing rules and ranges.
        fn check<T: Elem + std::fmt::Debug>(vals: &[T], fill: T) {
            let missing = [
                Missing::default(),
                Missing {
                    values: vec![],
                    nan: T::FLOAT,
                },
                Missing {
                    values: vec![fill],
                    nan: false,
                },
            ];
            let ranges = [
                None,
                Some(KeyRange {
                    lo: order_key(0.0),
                    hi: i64::MAX,
                }),
                Some(KeyRange {
                    lo: order_key(-20.0),
                    hi: order_key(25.0),
                }),
            ];
            for (m, range) in missing.iter().flat_map(|m| ranges.map(|r| (m, r))) {
                let k = Keep {
                    missing: m.clone(),
                    range,
                };
                for n in 0..=vals.len() {
                    let mut acc = Accumulators::new(1, Needs::default(), T::FLOAT);
                    fold_run(&mut acc, 0, &vals[..n], &k);
                    let kept = vals[..n].iter().filter(|x| k.test(**x)).count() as u64;
                    let cells = if range.is_some() { kept } else { n as u64 };
                    assert_eq!((acc.cells[0], acc.n[0]), (cells, kept), "{n} {m:?} {range:?}");
                }
            }
        }
        let mut seed = 11;
        let f32s = f32s_with_nans(&mut seed, 70);
        check(&f32s, f32s[6]);
        let i32s: Vec<i32> = (0..70).map(|_| (random(&mut seed) % 100) as i32 - 50).collect();
        check(&i32s, i32s[3]);
    }

    #[test]
    fn blocks_are_visited_once_in_order_and_the_rest_returned() {
        // Lengths with an even and an odd number of whole blocks, with and without a tail.
        for n in 0..70usize {
            let x: Vec<u32> = (0..n as u32).collect();
            let mut seen8 = Vec::new();
            let rest = for_blocks(&x, |b: &[u32; 8]| seen8.extend_from_slice(b));
            assert_eq!(seen8, x[..n / 8 * 8], "n = {n}");
            assert_eq!(rest, &x[n / 8 * 8..], "n = {n}");
            let mut seen16 = Vec::new();
            let rest = for_blocks(&x, |b: &[u32; 16]| seen16.extend_from_slice(b));
            assert_eq!(seen16, x[..n / 16 * 16], "n = {n}");
            assert_eq!(rest, &x[n / 16 * 16..], "n = {n}");
        }
    }

    /// Every kernel of every dtype under each instruction-set copy: the portable copy, the
    /// AVX2 one and the AVX-512 one (where the CPU has them) give bit-identical
    /// accumulators.
    #[test]
    fn isa_copies_agree_bitwise() {
        use crate::exec::simd::{Isa, force};
        fn all<T: Elem>(vals: &[T], fill: T) -> String {
            let needs = Needs {
                fsum: true,
                isum: !T::FLOAT,
                min_max: true,
                moments: true,
            };
            let ranges = [
                None,
                Some(KeyRange {
                    lo: order_key(-3.0),
                    hi: order_key(40.0),
                }),
            ];
            let missings = [
                Missing::default(),
                Missing {
                    values: vec![fill],
                    nan: T::FLOAT,
                },
            ];
            let mut out = String::new();
            for range in ranges {
                for missing in missings.clone() {
                    let k = Keep { missing, range };
                    let mut acc = Accumulators::new(3, needs, T::FLOAT);
                    for (g, w) in [(0, 0..vals.len()), (1, 3..vals.len() / 2), (2, 1..9)] {
                        fold_run(&mut acc, g, &vals[w.clone()], &k);
                        fold_weighted_run(&mut acc, g, &vals[w.clone()], &k, Some(Affine::IDENTITY), Some(0.5));
                        fold_dot(
                            &mut acc,
                            g,
                            &vals[w.clone()],
                            &k,
                            |x, w| x.f() * w,
                            |i| (i % 5 != 0).then_some(i as f64),
                        );
                        // One weight for the run: the dot product with that weight (its
                        // sum in other lanes: equal up to rounding).
                        let f32_product = |x: T, w: f64| (x.f32() * w as f32) as f64;
                        let (mut a, mut b) = (
                            Accumulators::new(1, needs, T::FLOAT),
                            Accumulators::new(1, needs, T::FLOAT),
                        );
                        fold_scaled(&mut a, 0, &vals[w.clone()], &k, 0.3);
                        fold_dot(&mut b, 0, &vals[w.clone()], &k, f32_product, |_| Some(0.3));
                        assert_eq!((a.cells[0], a.n[0]), (b.cells[0], b.n[0]));
                        let (x, y) = (a.fsum[0], b.fsum[0]);
                        let close = x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-12 * y.abs();
                        assert!(close, "{x} vs {y}");
                        fold_scaled(&mut acc, g, &vals[w], &k, 0.3);
                    }
                    out += &format!("{acc:?}");
                    // Consecutive groups, without moments (the vector passes).
                    let needs = Needs {
                        moments: false,
                        ..needs
                    };
                    let mut acc = Accumulators::new(vals.len(), needs, T::FLOAT);
                    fold_consecutive(&mut acc, 0, vals, &k);
                    fold_consecutive(&mut acc, 5, &vals[..vals.len() - 9], &k);
                    acc.settle();
                    out += &format!("{acc:?}");
                }
            }
            out
        }
        let mut seed = 0x9e3779b97f4a7c15;
        let n = 1003;
        let f32s: Vec<f32> = (0..n)
            .map(|_| (random(&mut seed) % 2000) as f32 / 16.0 - 50.0)
            .collect();
        let mut f64s: Vec<f64> = f32s.iter().map(|x| *x as f64 * 1.000001).collect();
        f64s[17] = f64::NAN;
        let i16s: Vec<i16> = (0..n).map(|_| random(&mut seed) as i16).collect();
        let u8s: Vec<u8> = (0..n).map(|_| random(&mut seed) as u8).collect();
        let run = |isa| {
            force(isa);
            [
                all(&f32s, f32s[5]),
                all(&f64s, f64s[6]),
                all(&i16s, i16s[7]),
                all(&u8s, u8s[8]),
            ]
        };
        let portable = run(Isa::Portable);
        let avx2 = run(Isa::Avx2);
        let avx512 = run(Isa::Avx512);
        force(crate::exec::simd::detected());
        assert_eq!(portable, avx2);
        assert_eq!(portable, avx512);
    }

    /// Sums accumulate in f64, eight lanes over a run then pairwise: for `n` elements the
    /// error is at most `(n / 8 + 3) · 2⁻⁵³ · Σ|x|` (f32 and smaller values convert to f64
    /// exactly; no lane holds more than `⌈n/8⌉` elements, the remainder being spread over
    /// the lanes, so an element passes through at most `⌈n/8⌉ − 1` adds in its lane and 3
    /// in the combination). Checked against the exact sum (integers scaled by a power of
    /// two) on large magnitudes that cancel.
    #[test]
    fn sums_stay_within_the_stated_error_bound() {
        let mut seed = 12345;
        let n = 100_003;
        // x = m · 2^e, m < 2^24, e in [-20, 40]: exactly representable in f32.
        let vals: Vec<f32> = (0..n)
            .map(|i| {
                let m = (random(&mut seed) % (1 << 24)) as f32;
                let e = (random(&mut seed) % 61) as i32 - 20;
                let big = if i % 2 == 0 { 1.0 } else { -1.0 };
                big * m * 2f32.powi(e)
            })
            .collect();
        // Exact: every value is an integer multiple of 2^-20.
        let exact: i128 = vals.iter().map(|x| (*x as f64 * 2f64.powi(20)) as i128).sum();
        let exact = exact as f64 / 2f64.powi(20);
        let abs: f64 = vals.iter().map(|x| x.abs() as f64).sum();
        let mut acc = Accumulators::new(
            1,
            Needs {
                fsum: true,
                ..Needs::default()
            },
            true,
        );
        fold_run(&mut acc, 0, &vals, &Keep::default());
        let bound = (n as f64 / 8.0 + 3.0) * 2f64.powi(-53) * abs;
        let err = (acc.fsum[0] - exact).abs();
        assert!(err <= bound, "error {err:e} above the bound {bound:e}");
        // The data cancel: the result is far smaller than its terms.
        assert!(exact.abs() < abs / 10.0);
    }
}
