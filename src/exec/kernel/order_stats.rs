//! Exact order statistics of groups' values, as DataFusion's `median` and
//! `percentile_cont` compute them: each group's values gathered ([`GroupValues`]), the
//! ranks asked selected in DataFusion's order of floats (a negative NaN first, a positive
//! NaN last, as `total_cmp` orders them), a percentile interpolated between two ranks
//! ([`order_stat`]).
//!
//! The values are selected as unsigned keys whose order is that order ([`Ordered::key`]):
//! comparing integers is cheaper than `total_cmp`, and a rank's value is the same either
//! way.

/// DataFusion quantizes a percentile's interpolation weight to millionths (its
/// `INTERPOLATION_PRECISION`).
const WEIGHT_STEPS: f64 = 1_000_000.0;

/// A float type values are gathered in.
pub trait Ordered: Copy + Send + Sync + 'static {
    /// An unsigned integer of the float's width.
    type Key: Ord + Copy + Send + Sync + 'static;
    /// The key of `self`: keys order as DataFusion orders the floats.
    fn key(self) -> Self::Key;
    /// The float of key `k`.
    fn of_key(k: Self::Key) -> Self;
}

impl Ordered for f32 {
    type Key = u32;

    #[inline(always)]
    fn key(self) -> u32 {
        let b = self.to_bits();
        // Negative floats order backwards by their bits: flip them all; positive ones
        // go above every negative one.
        if b >> 31 == 1 { !b } else { b | 1 << 31 }
    }

    #[inline(always)]
    fn of_key(k: u32) -> f32 {
        f32::from_bits(if k >> 31 == 1 { k & !(1 << 31) } else { !k })
    }
}

impl Ordered for f64 {
    type Key = u64;

    #[inline(always)]
    fn key(self) -> u64 {
        let b = self.to_bits();
        if b >> 63 == 1 { !b } else { b | 1 << 63 }
    }

    #[inline(always)]
    fn of_key(k: u64) -> f64 {
        f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
    }
}

/// The float type an order statistic is computed in (the aggregate's type), which the
/// gathered type widens to exactly.
pub trait Statistic: Copy {
    fn f(self) -> f64;
    /// `x` rounded to this type (`as`).
    fn of_f64(x: f64) -> Self;
    /// `(a + b) / 2` in this type.
    fn midpoint(a: Self, b: Self) -> Self;
}

impl Statistic for f32 {
    fn f(self) -> f64 {
        self as f64
    }
    fn of_f64(x: f64) -> f32 {
        x as f32
    }
    fn midpoint(a: f32, b: f32) -> f32 {
        (a + b) / 2.0
    }
}

impl Statistic for f64 {
    fn f(self) -> f64 {
        self
    }
    fn of_f64(x: f64) -> f64 {
        x
    }
    fn midpoint(a: f64, b: f64) -> f64 {
        (a + b) / 2.0
    }
}

/// Which order statistic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OrderStat {
    /// `median`: the middle value, or the mean of the two middle ones in the value's type.
    Median,
    /// `percentile_cont(p)` in ascending order (a descending order asks `1 - p`): rank
    /// `p·(n-1)`, interpolated in f64 between the ranks around it.
    Percentile(f64),
}

/// DataFusion's value of `stat` over the values whose keys are `keys` (reordered in
/// place), in type `S`; `None` over no values.
pub fn order_stat<G, S>(keys: &mut [G::Key], stat: OrderStat) -> Option<S>
where
    G: Ordered,
    S: Statistic + From<G>,
{
    let n = keys.len();
    if n == 0 {
        return None;
    }
    let value = |k: G::Key| S::from(G::of_key(k));
    // Rank `k`'s value; after it, every key of `keys[k + 1..]` is at least it.
    let rank = |keys: &mut [G::Key], k: usize| value(*keys.select_nth_unstable(k).1);
    match stat {
        OrderStat::Median if n % 2 == 1 => Some(rank(keys, n / 2)),
        OrderStat::Median => {
            let high = rank(keys, n / 2);
            let low = value(*keys[..n / 2].iter().max()?);
            Some(S::midpoint(low, high))
        }
        OrderStat::Percentile(p) => {
            let index = p * (n - 1) as f64;
            let low = index.floor() as usize;
            let lower = rank(keys, low);
            if index.ceil() as usize == low {
                return Some(lower);
            }
            let upper = value(*keys[low + 1..].iter().min()?);
            let weight = ((index - low as f64) * WEIGHT_STEPS) as usize as f64 / WEIGHT_STEPS;
            Some(S::of_f64(lower.f() + (upper.f() - lower.f()) * weight))
        }
    }
}

/// The values of each group, gathered in the order met, and the bytes their vectors hold.
#[derive(Debug)]
pub struct GroupValues<G> {
    groups: Vec<Vec<G>>,
    bytes: usize,
}

impl<G: Copy> GroupValues<G> {
    /// No values in each of `count` groups.
    pub fn new(count: usize) -> Self {
        GroupValues {
            groups: (0..count).map(|_| Vec::new()).collect(),
            bytes: count * size_of::<Vec<G>>(),
        }
    }

    /// Bytes held: the vectors and their capacity.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Group `g`'s values.
    pub fn of(&self, g: usize) -> &[G] {
        &self.groups[g]
    }

    /// Append `x` to group `g`'s values.
    #[inline(always)]
    pub fn push(&mut self, g: usize, x: G) {
        let v = &mut self.groups[g];
        if v.len() == v.capacity() {
            let before = v.capacity();
            v.reserve(1);
            self.bytes += (v.capacity() - before) * size_of::<G>();
        }
        v.push(x);
    }

    /// Append `xs` to group `g`'s values.
    #[inline(always)]
    pub fn extend(&mut self, g: usize, xs: &[G]) {
        let v = &mut self.groups[g];
        let before = v.capacity();
        v.extend_from_slice(xs);
        self.bytes += (v.capacity() - before) * size_of::<G>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statistic by sorting a copy with `total_cmp` (the order DataFusion uses), and
    /// interpolating as its documentation says.
    fn sorted_stat(values: &[f32], stat: OrderStat) -> Option<f32> {
        let mut v = values.to_vec();
        v.sort_by(f32::total_cmp);
        let n = v.len();
        match (n, stat) {
            (0, _) => None,
            (_, OrderStat::Median) if n % 2 == 1 => Some(v[n / 2]),
            (_, OrderStat::Median) => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
            (_, OrderStat::Percentile(p)) => {
                let i = p * (n - 1) as f64;
                let (lo, hi) = (i.floor() as usize, i.ceil() as usize);
                let w = ((i - lo as f64) * 1e6).floor() / 1e6;
                Some((v[lo] as f64 + (v[hi] as f64 - v[lo] as f64) * w) as f32)
            }
        }
    }

    #[test]
    fn keys_order_floats_as_total_cmp() {
        let xs = [
            -f32::NAN,
            f32::NEG_INFINITY,
            -1.5,
            -0.0,
            0.0,
            f32::MIN_POSITIVE,
            2.0,
            f32::INFINITY,
            f32::NAN,
        ];
        for a in xs {
            assert_eq!(f32::of_key(a.key()).to_bits(), a.to_bits());
            for b in xs {
                assert_eq!(a.key().cmp(&b.key()), a.total_cmp(&b), "{a} vs {b}");
                let (a, b) = (a as f64, b as f64);
                assert_eq!(a.key().cmp(&b.key()), a.total_cmp(&b), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn order_stats_equal_a_sort() {
        // Ties, NaNs of both signs, one value, and sizes odd and even.
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        for n in 0..60 {
            let values: Vec<f32> = (0..n)
                .map(|_| match next() % 11 {
                    0 => f32::NAN,
                    1 => -f32::NAN,
                    2 => 3.0,
                    r => r as f32 * 0.37 - (next() % 5) as f32,
                })
                .collect();
            for stat in [0.0, 0.1, 0.25, 0.5, 0.9, 0.999, 1.0]
                .map(OrderStat::Percentile)
                .into_iter()
                .chain([OrderStat::Median])
            {
                let mut keys: Vec<u32> = values.iter().map(|x| x.key()).collect();
                let got = order_stat::<f32, f32>(&mut keys, stat);
                let want = sorted_stat(&values, stat);
                assert_eq!(got.map(f32::to_bits), want.map(f32::to_bits), "{stat:?} of {values:?}");
            }
        }
    }
}
