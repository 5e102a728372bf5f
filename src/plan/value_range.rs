//! Comparisons of value columns with constants as ranges of order keys: the order
//! DataFusion compares floats in, Arrow's IEEE 754 totalOrder (NaN above +inf, a NaN with
//! its sign bit set below -inf) after DataFusion maps -0 to +0. The fold tests a range
//! with one integer comparison per element instead of evaluating the predicate.
//! Comparisons of two value columns (`WHERE t2m > d2m`) compare the keys of both.

use super::input_forms::widens;
use super::table::TableModel;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};

/// The position of `x` in IEEE 754 totalOrder as a signed integer, with -0 and +0 equal
/// (as DataFusion compares them).
#[inline(always)]
pub fn order_key(x: f64) -> i64 {
    let x = if x == 0.0 { 0.0 } else { x };
    let b = x.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

/// The values a comparison keeps: totalOrder keys `lo..=hi` (see [`order_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRange {
    pub lo: i64,
    pub hi: i64,
}

impl KeyRange {
    /// Every value.
    pub const ALL: KeyRange = KeyRange {
        lo: i64::MIN,
        hi: i64::MAX,
    };

    /// Values in both ranges.
    pub fn and(self, o: KeyRange) -> KeyRange {
        KeyRange {
            lo: self.lo.max(o.lo),
            hi: self.hi.min(o.hi),
        }
    }

    /// Whether key `k` is in the range.
    #[inline(always)]
    pub fn contains(self, k: i64) -> bool {
        self.lo <= k && k <= self.hi
    }
}

/// The position of f32 `x` in IEEE 754 totalOrder of f32, with -0 and +0 equal: how
/// DataFusion compares two f32 columns (the f64 key of a converted value would order two
/// NaNs by their converted payloads, which a signaling NaN's quieting can swap).
#[inline(always)]
pub fn order_key32(x: f32) -> i64 {
    let x = if x == 0.0 { 0.0 } else { x };
    let b = x.to_bits() as i32;
    (b ^ ((((b >> 31) as u32) >> 1) as i32)) as i64
}

/// The inverse of [`order_key`] (a key of -0 gives -0).
#[inline]
fn from_key(k: i64) -> f64 {
    f64::from_bits((k ^ ((((k >> 63) as u64) >> 1) as i64)) as u64)
}

/// Which NaNs of one sign a [`KeyRange`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NanRule {
    /// No NaN.
    None,
    /// Every NaN.
    All,
    /// Some NaNs (by payload) but not all: only their keys tell.
    Some,
}

impl NanRule {
    /// Whether a NaN is in, when the rule decides without its key.
    fn decided(self) -> Option<bool> {
        match self {
            NanRule::None => Some(false),
            NanRule::All => Some(true),
            NanRule::Some => None,
        }
    }
}

/// A [`KeyRange`] as float comparisons: a non-NaN `x` is in the range exactly when
/// `lo <= x && x <= hi` (`lo` is NaN when no number is); NaNs as the rule of their sign
/// says (in totalOrder the NaNs with the sign bit clear lie above +inf, those with it set
/// below -inf: `v > c` keeps every positive NaN and no negative one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloatBounds {
    pub lo: f64,
    pub hi: f64,
    /// The NaNs whose sign bit is clear.
    pub positive_nan: NanRule,
    /// The NaNs whose sign bit is set.
    pub negative_nan: NanRule,
}

impl FloatBounds {
    /// Which NaNs, of either sign, the range holds.
    pub fn nan(&self) -> NanRule {
        match (self.positive_nan, self.negative_nan) {
            (NanRule::None, NanRule::None) => NanRule::None,
            (NanRule::All, NanRule::All) => NanRule::All,
            _ => NanRule::Some,
        }
    }

    /// Whether a positive and whether a negative NaN is in, when the sign alone decides
    /// (`None`: some NaNs of a sign are in and others not, which only their keys tell).
    pub fn nan_by_sign(&self) -> Option<(bool, bool)> {
        Some((self.positive_nan.decided()?, self.negative_nan.decided()?))
    }
}

impl KeyRange {
    /// The range as float comparisons, which vectorize where keys would not.
    pub fn float_bounds(self) -> FloatBounds {
        let (ninf, pinf) = (order_key(f64::NEG_INFINITY), order_key(f64::INFINITY));
        let empty = self.lo > self.hi;
        // The negative NaNs' keys run from the bottom to just below -inf's, the positive
        // ones' from just above +inf's to the top.
        let rule = |none: bool, all: bool| match (none, all) {
            (true, _) => NanRule::None,
            (_, true) => NanRule::All,
            _ => NanRule::Some,
        };
        let negative_nan = rule(
            empty || self.lo >= ninf,
            !empty && self.lo == i64::MIN && self.hi >= ninf - 1,
        );
        let positive_nan = rule(
            empty || self.hi <= pinf,
            !empty && self.hi == i64::MAX && self.lo <= pinf + 1,
        );
        let (lo, hi) = (self.lo.max(ninf), self.hi.min(pinf));
        if empty || lo > hi {
            return FloatBounds {
                lo: f64::NAN,
                hi: f64::NAN,
                positive_nan,
                negative_nan,
            };
        }
        // Key -1 is -0's bit pattern, which no value has (-0 is 0): as an upper bound it
        // must exclude zero.
        FloatBounds {
            lo: from_key(lo),
            hi: from_key(if hi == -1 { -2 } else { hi }),
            positive_nan,
            negative_nan,
        }
    }
}

/// A comparison of two value columns as DataFusion compares them (totalOrder keys, -0 =
/// +0, by [`order_key32`] when both are f32, else by [`order_key`]): a row is kept where
/// both hold a value and the order of `left`'s key to `right`'s is one the comparison keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ColumnComparison {
    pub left: usize,
    pub right: usize,
    /// Whether `left` less than, equal to, greater than `right` is kept.
    pub keep: [bool; 3],
}

impl ColumnComparison {
    /// `left op right` for a comparison operator.
    fn new(left: usize, op: Operator, right: usize) -> Option<ColumnComparison> {
        let keep = match op {
            Operator::Lt => [true, false, false],
            Operator::LtEq => [true, true, false],
            Operator::Eq => [false, true, false],
            Operator::NotEq => [true, false, true],
            Operator::GtEq => [false, true, true],
            Operator::Gt => [false, false, true],
            _ => return None,
        };
        Some(ColumnComparison { left, right, keep })
    }

    /// Whether keys `l` (of `left`) and `r` (of `right`) are in an order kept (also of
    /// the values as floats where neither is NaN: then the float order is the keys').
    #[inline(always)]
    pub fn keeps<K: PartialOrd>(&self, l: K, r: K) -> bool {
        let [lt, eq, gt] = self.keep;
        ((l < r) & lt) | ((l == r) & eq) | ((l > r) & gt)
    }
}

/// What a filter keeps, as ranges of stored values and comparisons of two value columns:
/// a row is kept where each value column named holds a value (not missing) whose order
/// key lies in that column's range, and every comparison keeps it. Empty: every row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueRanges {
    ranges: Vec<(usize, KeyRange)>,
    comparisons: Vec<ColumnComparison>,
}

impl ValueRanges {
    /// Rows both keep.
    pub fn and(mut self, o: &ValueRanges) -> ValueRanges {
        for &(k, r) in &o.ranges {
            match self.ranges.iter_mut().find(|(j, _)| *j == k) {
                Some((_, q)) => *q = q.and(r),
                None => self.ranges.push((k, r)),
            }
        }
        self.ranges.sort_unstable_by_key(|(k, _)| *k);
        self.comparisons.extend(&o.comparisons);
        self.comparisons.sort_unstable();
        self.comparisons.dedup();
        self
    }

    /// True when every row is kept.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty() && self.comparisons.is_empty()
    }

    /// Value column `k`'s range, if the filter names it.
    pub fn of(&self, k: usize) -> Option<KeyRange> {
        self.ranges.iter().find(|(j, _)| *j == k).map(|(_, r)| *r)
    }

    /// The value columns with a range and their ranges, by column.
    pub fn iter(&self) -> impl Iterator<Item = (usize, KeyRange)> + '_ {
        self.ranges.iter().copied()
    }

    /// The comparisons of two value columns.
    pub fn comparisons(&self) -> &[ColumnComparison] {
        &self.comparisons
    }

    /// The value columns named (by a range or a comparison), ascending.
    pub fn columns(&self) -> impl Iterator<Item = usize> + use<> {
        let compared = self.comparisons.iter().flat_map(|c| [c.left, c.right]);
        let all: std::collections::BTreeSet<usize> = self.ranges.iter().map(|(k, _)| *k).chain(compared).collect();
        all.into_iter()
    }
}

/// `e` as ranges of the value columns' stored values when it is a conjunction of
/// comparisons of value columns (or widening casts of them) with numeric constants (`<`,
/// `<=`, `>`, `>=`, `=`, `BETWEEN`), `IS NOT NULL` of them and comparisons of two of them
/// (`<`, `<=`, `>`, `>=`, `=`, `<>`); `None` for anything else.
/// Only for columns whose stored values are exact as f64 (not 64-bit integers) and not
/// packed, where comparing f64 keys is exactly DataFusion's comparison.
pub fn value_ranges(table: &TableModel, e: &Expr) -> Option<ValueRanges> {
    ranges_of(e, &|e| compared_column(table, e))
}

/// The value column `e` is, or a widening cast of, when its stored values compare as
/// their f64 keys.
fn compared_column(table: &TableModel, e: &Expr) -> Option<usize> {
    let (k, v) = match e {
        Expr::Column(c) => table.value_named(&c.name)?,
        Expr::Cast(c) => {
            let k = compared_column(table, &c.expr)?;
            let from = table.values[k].data_type();
            return (matches!(*c.expr, Expr::Column(_)) && widens(&from, c.field.data_type())).then_some(k);
        }
        Expr::TryCast(c) => {
            let k = compared_column(table, &c.expr)?;
            let from = table.values[k].data_type();
            return (matches!(*c.expr, Expr::Column(_)) && widens(&from, c.field.data_type())).then_some(k);
        }
        _ => return None,
    };
    let dtype = v.dataset().dtype();
    // 64-bit integers are not exact as f64 keys.
    (v.packing.is_none() && (dtype.is_float() || dtype.size() != 8)).then_some(k)
}

/// A numeric constant of an expression: integers exactly, floats as they are (NaN
/// included). Comparisons of `v` use it as f64; axis filters of positions as integers.
#[derive(Debug, Clone, Copy)]
pub(super) enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    /// The literal `e` as a number, when it is a non-NULL integer or float.
    pub(super) fn of(e: &Expr) -> Option<Number> {
        let Expr::Literal(v, _) = e else { return None };
        Some(match v {
            ScalarValue::Float64(Some(x)) => Number::Float(*x),
            ScalarValue::Float32(Some(x)) => Number::Float(*x as f64),
            ScalarValue::Float16(Some(x)) => Number::Float(x.to_f64()),
            ScalarValue::Int8(Some(x)) => Number::Int(*x as i128),
            ScalarValue::Int16(Some(x)) => Number::Int(*x as i128),
            ScalarValue::Int32(Some(x)) => Number::Int(*x as i128),
            ScalarValue::Int64(Some(x)) => Number::Int(*x as i128),
            ScalarValue::UInt8(Some(x)) => Number::Int(*x as i128),
            ScalarValue::UInt16(Some(x)) => Number::Int(*x as i128),
            ScalarValue::UInt32(Some(x)) => Number::Int(*x as i128),
            ScalarValue::UInt64(Some(x)) => Number::Int(*x as i128),
            _ => return None,
        })
    }

    /// The number as f64 (integers rounded to nearest).
    pub(super) fn as_f64(self) -> f64 {
        match self {
            Number::Int(k) => k as f64,
            Number::Float(x) => x,
        }
    }
}

fn constant(e: &Expr) -> Option<f64> {
    Number::of(e).map(Number::as_f64)
}

fn compare(op: Operator, c: f64) -> Option<KeyRange> {
    let k = order_key(c);
    let (lo, hi) = match op {
        Operator::Eq => (k, k),
        Operator::Lt => (i64::MIN, k.checked_sub(1)?),
        Operator::LtEq => (i64::MIN, k),
        Operator::Gt => (k.checked_add(1)?, i64::MAX),
        Operator::GtEq => (k, i64::MAX),
        _ => return None,
    };
    Some(KeyRange { lo, hi })
}

fn ranges_of(e: &Expr, column: &dyn Fn(&Expr) -> Option<usize>) -> Option<ValueRanges> {
    let one = |k: usize, r: KeyRange| {
        Some(ValueRanges {
            ranges: vec![(k, r)],
            comparisons: vec![],
        })
    };
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match (op, column(left), column(right)) {
            (Operator::And, ..) => Some(ranges_of(left, column)?.and(&ranges_of(right, column)?)),
            // Both sides are of one type (DataFusion's coercion), each a column's values
            // exactly; a column compared with itself is left to DataFusion.
            (_, Some(k), Some(j)) if k != j => Some(ValueRanges {
                ranges: vec![],
                comparisons: vec![ColumnComparison::new(k, *op, j)?],
            }),
            (_, Some(k), _) => one(k, compare(*op, constant(right)?)?),
            (_, None, Some(k)) => one(k, compare(op.swap()?, constant(left)?)?),
            _ => None,
        },
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => one(
            column(expr)?,
            compare(Operator::GtEq, constant(low)?)?.and(compare(Operator::LtEq, constant(high)?)?),
        ),
        Expr::IsNotNull(x) => one(column(x)?, KeyRange::ALL),
        _ => None,
    }
}

/// Values at the edges of DataFusion's order of floats, for tests of ranges: NaNs of both
/// signs and several payloads, infinities, signed zeros, subnormals, the extremes.
#[cfg(test)]
pub(crate) const ORDER_EDGES: [f64; 17] = [
    f64::NAN,
    -f64::NAN,
    f64::from_bits(0x7ff0_0000_0000_0001),
    f64::from_bits(0xfff8_0000_0000_0123),
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    1.5,
    -2.5,
    100.0,
    1e-40,
    1e-310,
    -1e-310,
    3.0e38,
    f64::MAX,
    f64::MIN,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_keys_follow_total_order() {
        let xs = ORDER_EDGES;
        for a in xs {
            for b in xs {
                let want = if a == 0.0 && b == 0.0 {
                    std::cmp::Ordering::Equal
                } else {
                    a.total_cmp(&b)
                };
                assert_eq!(order_key(a).cmp(&order_key(b)), want, "{a} vs {b}");
            }
        }
        // Strict bounds exclude the constant itself and nothing else; -0 is 0.
        let gt = compare(Operator::Gt, 0.0).unwrap();
        assert!(!gt.contains(order_key(-0.0)) && gt.contains(order_key(f64::MIN_POSITIVE / 4.0)));
        assert!(compare(Operator::GtEq, 0.0).unwrap().contains(order_key(-0.0)));
    }

    #[test]
    fn float_bounds_agree_with_keys() {
        let xs = ORDER_EDGES;
        let mut ranges = vec![KeyRange::ALL, KeyRange { lo: 3, hi: 2 }, KeyRange { lo: -1, hi: -1 }];
        for c in xs {
            for op in [Operator::Eq, Operator::Lt, Operator::LtEq, Operator::Gt, Operator::GtEq] {
                ranges.extend(compare(op, c));
            }
        }
        for k in [-2, -1, 0, 1, 2] {
            ranges.push(KeyRange { lo: i64::MIN, hi: k });
            ranges.push(KeyRange { lo: k, hi: i64::MAX });
        }
        let n = ranges.len();
        for i in 0..n {
            for j in 0..n {
                ranges.push(ranges[i].and(ranges[j]));
            }
        }
        for r in ranges {
            let b = r.float_bounds();
            for x in xs {
                let want = r.contains(order_key(x));
                if x.is_nan() {
                    let rule = if x.is_sign_negative() {
                        b.negative_nan
                    } else {
                        b.positive_nan
                    };
                    match rule {
                        NanRule::None => assert!(!want, "{r:?} {x}"),
                        NanRule::All => assert!(want, "{r:?} {x}"),
                        // Decided per key by the fold.
                        NanRule::Some => {}
                    }
                    if let Some((pos, neg)) = b.nan_by_sign() {
                        assert_eq!(if x.is_sign_negative() { neg } else { pos }, want, "{r:?} {x}");
                    }
                    assert!(b.nan() != NanRule::None || !want, "{r:?} {x}");
                    assert!(b.nan() != NanRule::All || want, "{r:?} {x}");
                } else {
                    assert_eq!(b.lo <= x && x <= b.hi, want, "{r:?} {b:?} {x}");
                }
            }
        }
    }
}
