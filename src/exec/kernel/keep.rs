//! Which elements a fold takes ([`Keep`]): the one rule of what counts, as missing values
//! ([`Missing`]) and a value range, and the simplest test that decides each
//! ([`MissingCheck`], [`RangeCheck`]) for the kernels to choose their loops by.

use super::elem::Elem;
use crate::format::{MissingValues, elements};
use crate::plan::{KeyRange, NanRule};

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
    #[inline(always)]
    pub(super) fn check(&self) -> MissingCheck<T> {
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
pub(super) enum MissingCheck<T> {
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
    #[inline(always)]
    pub(super) fn fill(self) -> Option<T> {
        match self {
            MissingCheck::Fill(v) => Some(v),
            _ => None,
        }
    }
}

/// A value range as the kernels test it: in the stored type where its bounds convert
/// exactly (`native`), else as f64 (`lo`, `hi`).
#[derive(Debug, Clone, Copy)]
pub(super) struct RangeCheck<T> {
    pub(super) native: Option<(T, T)>,
    pub(super) lo: f64,
    pub(super) hi: f64,
    /// The range holds NaNs, and they are not missing: the loops count NaNs as inside.
    pub(super) nan_in: bool,
    /// The range holds some NaNs but not all (by payload): a run that holds a NaN is
    /// decided again by keys ([`Keep::test`]).
    pub(super) nan_by_keys: bool,
}

impl<T: Elem> RangeCheck<T> {
    #[inline(always)]
    pub(super) fn of(range: KeyRange, nan_missing: bool) -> Self {
        let b = range.float_bounds();
        RangeCheck {
            native: T::bounds(b.lo, b.hi),
            lo: b.lo,
            hi: b.hi,
            nan_in: b.nan() != NanRule::None && !nan_missing,
            nan_by_keys: b.nan() == NanRule::Some,
        }
    }

    /// Whether `x` lies in the range: between the native bounds where they convert
    /// exactly, else as f64; a NaN inside when `nan_in`. A method, not a closure: the
    /// kernels that inline it live in other files, and a closure is compiled where it is
    /// written unless inlined there.
    #[inline(always)]
    pub(super) fn contains(&self, x: T) -> bool {
        #[allow(clippy::eq_op)]
        let nan = self.nan_in && x != x;
        let inside = match self.native {
            Some((l, h)) => (l <= x) & (x <= h),
            None => (self.lo <= x.f()) & (x.f() <= self.hi),
        };
        inside | nan
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

    /// Whether every element is folded: nothing is missing and no range applies.
    #[inline(always)]
    pub fn takes_all(&self) -> bool {
        self.missing.is_empty() && self.range.is_none()
    }

    /// Whether a range decides which cells are rows ([`cells_counted`]).
    #[inline(always)]
    pub fn ranged(&self) -> bool {
        self.range.is_some()
    }

    /// [`cells_counted`] of `len` cells of which `kept()` are folded.
    #[inline(always)]
    pub fn cells(&self, len: usize, kept: impl FnOnce() -> u64) -> u64 {
        if self.ranged() { kept() } else { len as u64 }
    }
}

/// The one rule of which cells count as rows (`count(*)`, the cells of a group): with a
/// range (a `WHERE` or `FILTER` comparison on a value), the `kept` cells only, since a
/// comparison is never true of a NULL and rows outside it are not rows of the query;
/// without, all `len` cells, NULL or not. Values (`count(v)`, sums) are always the kept
/// cells.
#[inline(always)]
pub fn cells_counted(ranged: bool, len: u64, kept: u64) -> u64 {
    if ranged { kept } else { len }
}
