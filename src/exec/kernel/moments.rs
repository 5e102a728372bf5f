//! The states of the variance family and of the co-moment family, with their updates,
//! merges and finishing statistics: one definition that the fold's accumulators, its
//! kernels and the partial-state merge of `sql::merge` all use.
//!
//! Each state merges by Chan et al.'s formula and adds one value by Welford's; the two
//! states keep their own order of operations, which is part of their answers' bits.

use crate::plan::AggFunc;

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
