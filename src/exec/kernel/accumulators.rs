//! Dense per-group accumulators, and [`Needs`], the statistics a fold asks of them.

use super::elem::{fmax, fmin};
use super::moments::Moments;
use super::simd::multiversion;

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
        let mut acc = Accumulators {
            needs,
            ..Accumulators::default()
        };
        acc.reset(groups, float);
        acc
    }

    /// Empty the accumulators and make them `groups` groups of a float (`float`) or
    /// integer input, reusing their vectors.
    pub fn reset(&mut self, groups: usize, float: bool) {
        self.cells.clear();
        self.n.clear();
        self.fsum.clear();
        self.isum.clear();
        self.fmin.clear();
        self.fmax.clear();
        self.imin.clear();
        self.imax.clear();
        self.nan.clear();
        self.mean.clear();
        self.m2.clear();
        self.pending.clear();
        self.grow(groups, float);
    }

    /// Add empty groups up to `groups` groups of a float (`float`) or integer input (the
    /// settled accumulators of a fold whose groups are found as it goes).
    pub fn grow(&mut self, groups: usize, float: bool) {
        fn set<T: Copy>(v: &mut Vec<T>, groups: usize, on: bool, x: T) {
            if on && v.len() < groups {
                v.resize(groups, x);
            }
        }
        let needs = self.needs;
        let (float_extremes, int_extremes) = (needs.min_max && float, needs.min_max && !float);
        set(&mut self.cells, groups, true, 0);
        set(&mut self.n, groups, true, 0);
        set(&mut self.fsum, groups, needs.fsum, 0.0);
        set(&mut self.isum, groups, needs.isum, 0);
        set(&mut self.fmin, groups, float_extremes, f64::NAN);
        set(&mut self.fmax, groups, float_extremes, f64::NAN);
        set(&mut self.imin, groups, int_extremes, i128::MAX);
        set(&mut self.imax, groups, int_extremes, i128::MIN);
        set(&mut self.nan, groups, float_extremes, 0);
        set(&mut self.mean, groups, needs.moments, 0.0);
        set(&mut self.m2, groups, needs.moments, 0.0);
    }

    /// Count one cell and one value in each of the groups `g..g + len` (not yet: see
    /// `pending`).
    #[inline(always)]
    pub(super) fn count_later(&mut self, g: usize, len: usize) {
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

    /// Merge group `g` with a partial (n, mean, M2); `self.n[g]` already counts `n_b`.
    pub(super) fn merge_moments(&mut self, g: usize, n_b: u64, mean_b: f64, m2_b: f64) {
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
        self.merge_consecutive(other, 0);
    }

    /// Merge each slot `i` of `other` (settled, as for [`Accumulators::merge_mapped`])
    /// into group `g + i`: as passes over the two sets of slots side by side, which
    /// vectorize.
    pub fn merge_consecutive(&mut self, other: &Accumulators, g: usize) {
        merge_consecutive(self, other, g)
    }

    /// Merge each slot `i` of `other` (settled: no deferred counts; its `mean` and `m2`
    /// filled when `self` needs moments) into group `to(i)` of `self`.
    pub fn merge_mapped(&mut self, other: &Accumulators, to: impl Fn(usize) -> usize) {
        for i in 0..other.len() {
            let g = to(i);
            let nb = other.n[i];
            self.cells[g] += other.cells[i];
            self.n[g] += nb;
            if self.needs.fsum {
                self.fsum[g] += other.fsum[i];
            }
            if self.needs.isum {
                self.isum[g] = self.isum[g].wrapping_add(other.isum[i]);
            }
            if !self.fmin.is_empty() {
                self.fmin[g] = fmin(self.fmin[g], other.fmin[i]);
                self.fmax[g] = fmax(self.fmax[g], other.fmax[i]);
                self.nan[g] |= other.nan[i];
            }
            if !self.imin.is_empty() {
                self.imin[g] = self.imin[g].min(other.imin[i]);
                self.imax[g] = self.imax[g].max(other.imax[i]);
            }
            if self.needs.moments {
                self.merge_moments(g, nb, other.mean[i], other.m2[i]);
            }
        }
    }
}

multiversion! {
    /// [`Accumulators::merge_consecutive`].
    fn merge_consecutive[](a: &mut Accumulators, b: &Accumulators, g: usize) where [] = merge_consecutive_body;
}

/// The body of [`merge_consecutive`], compiled into each of its copies. Selects choose
/// between computed values, never a slot's own (`*slot = if c { x } else { *slot }` became
/// a slow masked store on x86).
#[inline(always)]
fn merge_consecutive_body(a: &mut Accumulators, b: &Accumulators, g: usize) {
    let at = g..g + b.len();
    if a.needs.moments {
        // Chan's formula as `Moments::merge` computes it, before the counts are added.
        let (n, mean, m2) = (&a.n[at.clone()], &mut a.mean[at.clone()], &mut a.m2[at.clone()]);
        let slots = n.iter().zip(mean.iter_mut()).zip(m2.iter_mut());
        for (((&n_a, mean_a), m2_a), ((&n_b, &mean_b), &m2_b)) in slots.zip(b.n.iter().zip(&b.mean).zip(&b.m2)) {
            let (na, nb) = (n_a as f64, n_b as f64);
            let total = na + nb;
            let delta = if n_b == 0 { 0.0 } else { mean_b - *mean_a };
            let merged_mean = *mean_a + delta * nb / total;
            let merged_m2 = *m2_a + (m2_b + delta * delta * na * nb / total);
            *mean_a = if n_a == 0 { mean_b } else { merged_mean };
            *m2_a = if n_a == 0 { m2_b } else { merged_m2 };
        }
    }
    a.cells[at.clone()].iter_mut().zip(&b.cells).for_each(|(x, y)| *x += y);
    a.n[at.clone()].iter_mut().zip(&b.n).for_each(|(x, y)| *x += y);
    if a.needs.fsum {
        a.fsum[at.clone()].iter_mut().zip(&b.fsum).for_each(|(x, y)| *x += y);
    }
    if a.needs.isum {
        a.isum[at.clone()]
            .iter_mut()
            .zip(&b.isum)
            .for_each(|(x, y)| *x = x.wrapping_add(*y));
    }
    if !a.fmin.is_empty() {
        a.fmin[at.clone()]
            .iter_mut()
            .zip(&b.fmin)
            .for_each(|(x, &y)| *x = fmin(*x, y));
        a.fmax[at.clone()]
            .iter_mut()
            .zip(&b.fmax)
            .for_each(|(x, &y)| *x = fmax(*x, y));
        a.nan[at.clone()].iter_mut().zip(&b.nan).for_each(|(x, y)| *x |= y);
    }
    if !a.imin.is_empty() {
        a.imin[at.clone()]
            .iter_mut()
            .zip(&b.imin)
            .for_each(|(x, &y)| *x = (*x).min(y));
        a.imax[at].iter_mut().zip(&b.imax).for_each(|(x, &y)| *x = (*x).max(y));
    }
}
