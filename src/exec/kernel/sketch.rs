//! Approximate order statistics (`approx_percentile_cont`, `approx_median`): each group's
//! values counted into buckets of their magnitude ([`Sketch`]), a summary that merges by
//! adding counts, so partitions fold apart and combine exactly as one would have.
//!
//! A bucket holds the finite values of one sign whose magnitudes share their exponent and
//! first [`SKETCH_BITS`] fraction bits: its width is at most `2^-12` of any value in it.
//! A rank's value is estimated inside its bucket (spread evenly over the bucket, and
//! within the group's exact minimum and maximum), so it is off by less than `2^-12` of the
//! value. Each sign keeps at most [`MAX_BUCKETS`] buckets (16 binades): when a group's
//! magnitudes span more, its smallest ones share one floor bucket `[0, t)` with `t` at most
//! `2^-15` of the group's largest magnitude, and their error is below `t`. NaNs and
//! infinities are counted apart, in DataFusion's order of floats (a negative NaN first, a
//! positive NaN last).

use super::order_stats::Ordered;

/// Fraction bits of a value's magnitude its bucket keeps.
pub const SKETCH_BITS: u32 = 12;

/// Buckets one sign of a group keeps before its smallest magnitudes share a floor bucket.
pub const MAX_BUCKETS: usize = 1 << 16;

/// A float type a sketch counts.
pub trait Sketched: Ordered {
    /// How far a magnitude's bits shift right to its bucket.
    const SHIFT: u32;
    /// The bits of `|self|`, which order as the magnitudes do.
    fn magnitude(self) -> u64;
    /// The bucket of `|self|` (`magnitude >> SHIFT`, below 2^24), in 32 bits: so that a
    /// run's buckets are found in lanes of the value's own width.
    fn bucket(self) -> u32;
    /// The magnitude of bits `m`, in f64.
    fn of_magnitude(m: u64) -> f64;
    /// True when the sign bit is set (also of `-0.0` and a negative NaN).
    fn negative(self) -> bool;
    /// True when neither infinite nor NaN.
    fn finite(self) -> bool;
    /// True for a NaN.
    fn nan(self) -> bool;
    /// The order key ([`Ordered::key`]) in 64 bits.
    fn key64(self) -> u64;
    /// The value of a 64-bit order key, in f64.
    fn of_key64(k: u64) -> f64;
    /// The 64-bit order keys of `-inf`, `-0.0`, `+0.0` and `+inf`.
    fn key_limits() -> [u64; 4];
    /// An order key in 64 bits.
    fn key_to_64(k: Self::Key) -> u64;
    /// The magnitude's bits ([`Sketched::magnitude`]) of the value of 64-bit key `k`.
    fn magnitude_of_key(k: u64) -> u64;
}

/// [`Sketched`] for float type `$f`, whose bits are the unsigned `$bits`.
macro_rules! sketched {
    ($f:ident, $bits:ident) => {
        impl Sketched for $f {
            const SHIFT: u32 = $f::MANTISSA_DIGITS - 1 - SKETCH_BITS;

            #[inline(always)]
            fn magnitude(self) -> u64 {
                u64::from(self.to_bits() & !(1 << ($bits::BITS - 1)))
            }
            #[inline(always)]
            fn bucket(self) -> u32 {
                ((self.to_bits() & !(1 << ($bits::BITS - 1))) >> Self::SHIFT) as u32
            }
            fn of_magnitude(m: u64) -> f64 {
                f64::from($f::from_bits(m as $bits))
            }
            #[inline(always)]
            fn negative(self) -> bool {
                self.is_sign_negative()
            }
            #[inline(always)]
            fn finite(self) -> bool {
                self.is_finite()
            }
            #[inline(always)]
            fn nan(self) -> bool {
                self.is_nan()
            }
            #[inline(always)]
            fn key64(self) -> u64 {
                u64::from(self.key())
            }
            fn of_key64(k: u64) -> f64 {
                f64::from($f::of_key(k as $bits))
            }
            fn key_limits() -> [u64; 4] {
                [$f::NEG_INFINITY, -0.0, 0.0, $f::INFINITY].map(Sketched::key64)
            }
            #[inline(always)]
            fn key_to_64(k: $bits) -> u64 {
                u64::from(k)
            }
            #[inline(always)]
            fn magnitude_of_key(k: u64) -> u64 {
                $f::of_key(k as $bits).magnitude()
            }
        }
    };
}

sketched!(f32, u32);
sketched!(f64, u64);

/// The buckets of one sign: counts of magnitudes' buckets `base..base + counts.len()`;
/// when `floored`, `counts[0]` counts every magnitude below bucket `base + 1`.
#[derive(Debug, Clone, Default)]
struct Side {
    base: u64,
    counts: Vec<u64>,
    floored: bool,
}

impl Side {
    /// Count `n` values of bucket `b`.
    #[inline(always)]
    fn add(&mut self, b: u64, n: u64) {
        let i = b.wrapping_sub(self.base);
        if i < self.counts.len() as u64 {
            self.counts[i as usize] += n;
        } else {
            self.add_outside(b, n);
        }
    }

    /// [`Side::add`] of a bucket outside the window: the window grows to it, or the
    /// floor takes it or the buckets the window can no longer keep.
    #[cold]
    fn add_outside(&mut self, b: u64, n: u64) {
        if self.counts.is_empty() {
            self.base = b;
            self.counts.push(n);
            return;
        }
        if b < self.base {
            if !self.floored {
                self.floored = b < self.reach_down(b);
            }
            let i = b.saturating_sub(self.base) as usize;
            self.counts[i] += n;
            return;
        }
        // Above the window: keep the top MAX_BUCKETS buckets, the rest in the floor.
        self.floor_at((b + 1).saturating_sub(MAX_BUCKETS as u64));
        let i = (b - self.base) as usize;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += n;
    }

    /// Grow a window that starts above bucket `b` down to `b`, or as far as it may keep
    /// [`MAX_BUCKETS`]; the bucket it starts at now.
    fn reach_down(&mut self, b: u64) -> u64 {
        let top = self.base + self.counts.len() as u64 - 1;
        let low = b.max((top + 1).saturating_sub(MAX_BUCKETS as u64));
        let more = (self.base - low) as usize;
        self.counts.splice(0..0, std::iter::repeat_n(0, more));
        self.base = low;
        low
    }

    /// Make the floor hold at least every magnitude below bucket `b + 1` (nothing when
    /// the window starts above `b` and no value lies below it).
    fn floor_at(&mut self, b: u64) {
        if self.counts.is_empty() || b <= self.base {
            return;
        }
        let cut = ((b - self.base) as usize).min(self.counts.len() - 1);
        let below: u64 = self.counts.drain(..cut).sum();
        self.counts[0] += below;
        self.base += cut as u64;
        if self.base < b {
            // Every bucket kept was below `b`: the one left is the floor at `b`.
            self.base = b;
        }
        self.floored = true;
    }

    /// Add every count of `other` (of the same bucket widths).
    fn merge(&mut self, other: &Side) {
        if other.counts.is_empty() {
            return;
        }
        if other.floored {
            self.floor_below(other.base);
        }
        for (i, &c) in other.counts.iter().enumerate() {
            if c > 0 {
                self.add(other.base + i as u64, c);
            }
        }
    }

    /// Make the floor reach bucket `b` at least, so a floor counted up to `b` adds into it.
    fn floor_below(&mut self, b: u64) {
        if self.counts.is_empty() {
            self.base = b;
            self.counts.push(0);
            self.floored = true;
        } else if b > self.base {
            self.floor_at(b);
        } else if !self.floored {
            // Every value kept is at or above `b`: the window reaches down to `b` (or as
            // far as it may), and its first bucket becomes the floor.
            self.reach_down(b);
            self.floored = true;
        }
    }

    fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The magnitudes of bucket `i`, as bits, from and to (inclusive).
    fn bounds(&self, i: usize, shift: u32) -> (u64, u64) {
        let b = self.base + i as u64;
        let from = if self.floored && i == 0 { 0 } else { b << shift };
        (from, ((b + 1) << shift) - 1)
    }
}

/// One group's values counted: finite ones in buckets of each sign, NaNs and infinities
/// apart, and the order keys of the smallest and largest finite value.
#[derive(Debug, Clone)]
pub struct Sketch {
    negative: Side,
    positive: Side,
    negative_nan: u64,
    negative_inf: u64,
    positive_inf: u64,
    positive_nan: u64,
    min_key: u64,
    max_key: u64,
}

impl Default for Sketch {
    fn default() -> Self {
        Sketch {
            negative: Side::default(),
            positive: Side::default(),
            negative_nan: 0,
            negative_inf: 0,
            positive_inf: 0,
            positive_nan: 0,
            min_key: u64::MAX,
            max_key: 0,
        }
    }
}

impl Sketch {
    /// Count `x`.
    #[inline(always)]
    pub fn add<F: Sketched>(&mut self, x: F) {
        let negative = x.negative();
        if x.finite() {
            let k = x.key64();
            self.min_key = self.min_key.min(k);
            self.max_key = self.max_key.max(k);
            let b = u64::from(x.bucket());
            if negative {
                self.negative.add(b, 1)
            } else {
                self.positive.add(b, 1)
            }
        } else {
            let special = match (x.nan(), negative) {
                (true, true) => &mut self.negative_nan,
                (true, false) => &mut self.positive_nan,
                (false, true) => &mut self.negative_inf,
                (false, false) => &mut self.positive_inf,
            };
            *special += 1;
        }
    }

    /// Count `xs`: when every value is finite and of one sign (what the run's extreme keys
    /// tell), the window grows once to the run's buckets and each value is only counted.
    #[inline(always)]
    pub fn add_run<F: Sketched>(&mut self, xs: &[F]) {
        let Some((lo, hi)) = key_range(xs) else {
            return;
        };
        let [neg_inf, neg_zero, pos_zero, pos_inf] = F::key_limits();
        let side = if lo >= pos_zero && hi < pos_inf {
            &mut self.positive
        } else if lo > neg_inf && hi <= neg_zero {
            &mut self.negative
        } else {
            xs.iter().for_each(|&x| self.add(x));
            return;
        };
        self.min_key = self.min_key.min(lo);
        self.max_key = self.max_key.max(hi);
        let (a, b) = (F::magnitude_of_key(lo) >> F::SHIFT, F::magnitude_of_key(hi) >> F::SHIFT);
        let (a, b) = (a.min(b), a.max(b));
        side.add(a, 0);
        side.add(b, 0);
        // Both ends may be in the floor (`counts[0]`), which takes a magnitude below the
        // window: the run's buckets from `low` (the window's or the run's lowest) counted.
        let base = side.base;
        let (from, to) = (a.saturating_sub(base) as usize, b.saturating_sub(base) as usize);
        let low = (base + from as u64) as u32;
        let counts = &mut side.counts[from..=to];
        let last = counts.len() - 1;
        // A block's buckets in one vector pass, then each counted (clamping to `last`
        // changes nothing but lets the compiler drop the bounds check).
        let mut at = [0u32; 256];
        for xs in xs.chunks(at.len()) {
            let at = &mut at[..xs.len()];
            at.iter_mut().zip(xs).for_each(|(i, &x)| *i = x.bucket().max(low) - low);
            at.iter().for_each(|&i| counts[(i as usize).min(last)] += 1);
        }
    }

    /// Add every count of `other`.
    pub fn merge(&mut self, other: &Sketch) {
        self.negative.merge(&other.negative);
        self.positive.merge(&other.positive);
        self.negative_nan += other.negative_nan;
        self.negative_inf += other.negative_inf;
        self.positive_inf += other.positive_inf;
        self.positive_nan += other.positive_nan;
        self.min_key = self.min_key.min(other.min_key);
        self.max_key = self.max_key.max(other.max_key);
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.finite() + self.specials()
    }

    /// NaNs and infinities counted.
    fn specials(&self) -> u64 {
        self.negative_nan + self.negative_inf + self.positive_inf + self.positive_nan
    }

    fn finite(&self) -> u64 {
        self.negative.total() + self.positive.total()
    }

    /// Bytes held beyond the sketch itself.
    pub fn heap_bytes(&self) -> usize {
        (self.negative.counts.capacity() + self.positive.counts.capacity()) * size_of::<u64>()
    }

    /// The estimate of `percentile_cont(p)` (`p` in `[0, 1]`) of the values of type `F`
    /// counted: rank `p·(n-1)`, interpolated between the ranks around it; `None` over no
    /// values.
    pub fn percentile<F: Sketched>(&self, p: f64) -> Option<f64> {
        let finite = self.finite();
        let n = finite + self.specials();
        if n == 0 {
            return None;
        }
        let index = p * (n - 1) as f64;
        let low = index.floor() as u64;
        let lower = self.rank::<F>(low, finite);
        if index.ceil() as u64 == low {
            return Some(lower);
        }
        let upper = self.rank::<F>(low + 1, finite);
        if lower == upper {
            return Some(lower);
        }
        Some(lower + (upper - lower) * (index - low as f64))
    }

    /// The estimate of the value of rank `k` (from 0, in DataFusion's order) of a sketch
    /// of `finite` finite values.
    fn rank<F: Sketched>(&self, mut k: u64, finite: u64) -> f64 {
        for (count, value) in [(self.negative_nan, -f64::NAN), (self.negative_inf, f64::NEG_INFINITY)] {
            if k < count {
                return value;
            }
            k -= count;
        }
        if k < finite {
            return self.finite_rank::<F>(k, finite);
        }
        k -= finite;
        if k < self.positive_inf { f64::INFINITY } else { f64::NAN }
    }

    /// The estimate of the finite value of rank `k` among the `finite` ones: exact at the
    /// ends, else spread over its bucket within the group's extremes.
    fn finite_rank<F: Sketched>(&self, k: u64, finite: u64) -> f64 {
        let (min, max) = (F::of_key64(self.min_key), F::of_key64(self.max_key));
        if k == 0 {
            return min;
        }
        if k + 1 == finite {
            return max;
        }
        // Negative values first, from the largest magnitude down.
        let sides = [(&self.negative, true), (&self.positive, false)];
        let mut seen = 0;
        for (side, negative) in sides {
            let len = side.counts.len();
            for j in 0..len {
                let i = if negative { len - 1 - j } else { j };
                let c = side.counts[i];
                if k < seen + c {
                    let (from, to) = side.bounds(i, F::SHIFT);
                    let (from, to) = (F::of_magnitude(from), F::of_magnitude(to));
                    let (a, b) = if negative { (-to, -from) } else { (from, to) };
                    let (a, b) = (a.max(min), b.min(max));
                    let within = (k - seen) as f64 + 0.5;
                    return a + (b - a) * (within / c as f64);
                }
                seen += c;
            }
        }
        max
    }
}

/// A sketch of each group's values of type `F`.
#[derive(Debug)]
pub struct GroupSketches<F> {
    groups: Vec<Sketch>,
    _type: std::marker::PhantomData<F>,
}

impl<F: Sketched> GroupSketches<F> {
    /// No values in each of `count` groups.
    pub fn new(count: usize) -> Self {
        GroupSketches {
            groups: vec![Sketch::default(); count],
            _type: std::marker::PhantomData,
        }
    }

    /// Bytes held: the sketches and their buckets.
    pub fn bytes(&self) -> usize {
        self.groups.len() * size_of::<Sketch>() + self.groups.iter().map(Sketch::heap_bytes).sum::<usize>()
    }

    /// Group `g`'s sketch.
    pub fn of(&self, g: usize) -> &Sketch {
        &self.groups[g]
    }

    /// Count `x` in group `g`.
    #[inline(always)]
    pub fn push(&mut self, g: usize, x: F) {
        self.groups[g].add(x);
    }

    /// Count `xs` in group `g`.
    #[inline(always)]
    pub fn extend(&mut self, g: usize, xs: &[F]) {
        self.groups[g].add_run(xs);
    }
}

/// The smallest and largest order key of `xs` (`None` when empty), in one pass of the
/// float's own width so it vectorizes.
#[inline(always)]
fn key_range<F: Sketched>(xs: &[F]) -> Option<(u64, u64)> {
    let first = xs.first()?.key();
    let (lo, hi) = xs
        .iter()
        .fold((first, first), |(lo, hi), &x| (lo.min(x.key()), hi.max(x.key())));
    Some((F::key_to_64(lo), F::key_to_64(hi)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `percentile_cont(p)` of `v` by sorting in DataFusion's order, in f64.
    fn exact(v: &[f64], p: f64) -> (f64, f64, f64) {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        let i = p * (v.len() - 1) as f64;
        let (lo, hi) = (v[i.floor() as usize], v[i.ceil() as usize]);
        let x = if lo == hi { lo } else { lo + (hi - lo) * (i - i.floor()) };
        (x, lo, hi)
    }

    /// A deterministic stream of pseudo-random numbers in [0, 1).
    fn uniform(seed: u64) -> impl Iterator<Item = f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        std::iter::from_fn(move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            Some((s >> 11) as f64 / (1u64 << 53) as f64)
        })
    }

    /// The sketch's percentiles of `values` (counted in `parts` sketches merged) are
    /// within the stated bound of the exact ones.
    fn check<F: Sketched + Into<f64>>(values: &[F], parts: usize) {
        let mut all = Sketch::default();
        for chunk in values.chunks(values.len().div_ceil(parts).max(1)) {
            let mut s = Sketch::default();
            chunk.iter().for_each(|&x| s.add(x));
            all.merge(&s);
        }
        let f: Vec<f64> = values.iter().map(|&x| x.into()).collect();
        let largest = f.iter().filter(|x| x.is_finite()).fold(0f64, |m, x| m.max(x.abs()));
        for p in [0.0, 0.001, 0.1, 0.25, 0.5, 0.77, 0.9, 0.99, 1.0] {
            let got = all.percentile::<F>(p).unwrap();
            let (want, lo, hi) = exact(&f, p);
            if want.is_nan() || lo.is_infinite() || hi.is_infinite() {
                assert_eq!(got.to_bits(), want.to_bits(), "p {p}");
                continue;
            }
            let bound = (lo.abs().max(hi.abs()) * 2f64.powi(-(SKETCH_BITS as i32))).max(largest * 2f64.powi(-15))
                + f64::MIN_POSITIVE;
            assert!((got - want).abs() <= bound, "p {p}: {got} vs {want} (bound {bound})");
        }
        assert_eq!(all.count(), values.len() as u64);
    }

    #[test]
    fn percentiles_are_within_the_bound() {
        let temps: Vec<f32> = uniform(1).take(20_000).map(|u| (200.0 + 120.0 * u) as f32).collect();
        check(&temps, 1);
        check(&temps, 3);
        let winds: Vec<f32> = uniform(2).take(20_000).map(|u| (40.0 * u - 20.0) as f32).collect();
        check(&winds, 2);
        // Magnitudes over many binades, both signs, zeros and the specials.
        let mut wide: Vec<f64> = uniform(3)
            .take(5_000)
            .map(|u| (u - 0.5) * 10f64.powf(60.0 * u - 30.0))
            .collect();
        wide.extend([0.0, -0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -f64::NAN]);
        check(&wide, 1);
        check(&wide, 4);
        let constant = vec![3.25f32; 1000];
        check(&constant, 2);
        check(&[7.5f64], 1);
        check(&[1.0f32, 2.0], 1);
    }

    #[test]
    fn a_constant_group_and_the_extremes_are_exact() {
        let mut s = Sketch::default();
        [5.5f32; 10].iter().for_each(|&x| s.add(x));
        assert_eq!(s.percentile::<f32>(0.3), Some(5.5));
        let mut s = Sketch::default();
        [3.0f32, -1.0, 100.0, 7.0].iter().for_each(|&x| s.add(x));
        assert_eq!(s.percentile::<f32>(0.0), Some(-1.0));
        assert_eq!(s.percentile::<f32>(1.0), Some(100.0));
        assert_eq!(Sketch::default().percentile::<f32>(0.5), None);
    }

    #[test]
    fn a_run_counts_as_its_values_one_by_one() {
        let runs: [&[f32]; 5] = [
            &[280.0, 281.5, 279.25, 300.0],
            &[-3.0, -0.0, -1e-30, -250.0],
            &[1.0, -1.0, f32::NAN],
            &[0.0, 1e-40, 5.0],
            &[f32::INFINITY, 2.0],
        ];
        let long: Vec<f32> = uniform(4).take(999).map(|u| (280.0 + 3.0 * u) as f32).collect();
        let (mut one, mut whole) = (Sketch::default(), Sketch::default());
        for run in runs.into_iter().chain([&long[..]]) {
            run.iter().for_each(|&x| one.add(x));
            whole.add_run(run);
        }
        assert_eq!(one.positive.counts, whole.positive.counts);
        // f64 buckets, negative side, several blocks of the run's bucket pass.
        let long: Vec<f64> = uniform(5).take(700).map(|u| -1e5 * (1.0 + u)).collect();
        let (mut one64, mut whole64) = (Sketch::default(), Sketch::default());
        long.iter().for_each(|&x| one64.add(x));
        whole64.add_run(&long);
        assert_eq!(one64.negative.counts, whole64.negative.counts);
        assert!(one64.negative.counts.len() > 1);
        for p in [0.0, 0.1, 0.3, 0.5, 0.7, 0.95, 1.0] {
            let (a, b) = (one.percentile::<f32>(p).unwrap(), whole.percentile::<f32>(p).unwrap());
            assert!(a.to_bits() == b.to_bits(), "p {p}: {a} vs {b}");
        }
        let mut far = Sketch::default();
        far.add_run(&[1e30f32; 3]);
        far.add_run(&[1e-30f32, 2e-30, 1e30]);
        far.add_run(&[3e-30f32, 1e-31]);
        assert!(far.positive.floored && far.positive.counts.len() <= MAX_BUCKETS);
        assert_eq!(far.count(), 8);
        assert_eq!(far.positive.counts[0], 4);
        assert_eq!(far.percentile::<f32>(0.0), Some(1e-31f32 as f64));
    }

    #[test]
    fn a_wide_group_keeps_its_buckets_bounded() {
        let mut s = Sketch::default();
        for e in -120..120 {
            s.add(2f32.powi(e));
            s.add(-(2f32.powi(e)) * 1.5);
        }
        assert!(s.positive.counts.len() <= MAX_BUCKETS && s.negative.counts.len() <= MAX_BUCKETS);
        assert!(s.positive.floored && s.negative.floored);
        assert_eq!(s.count(), 480);
    }
}
