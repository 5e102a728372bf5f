//! The cells of one chunk task in several value columns side by side, for the compiled
//! kernels over tables of several datasets.
//!
//! Each column's selected cells are taken from its own tile (the task's
//! [`part`](ChunkTask::part) in that dataset) in the task's order, so that cell `i` of every
//! column is the same grid cell: shared with the tile when the whole of it is selected
//! (datasets on one chunk grid), copied otherwise. A column with a missing-value rule
//! also gets a byte per cell saying whether the cell holds a value.

use super::lane::{BLOCK, Cells, Lane, convert};
use crate::exec::kernel::simd::multiversion;
use crate::exec::kernel::{Elem, Missing};
use crate::exec::tile::selected_bytes;
use crate::format::{DType, Packing, elements, with_dtype};
use crate::plan::{ChunkTask, TableModel};
use crate::plan::{ColumnComparison, KeyRange, NanRule, ValueRanges, order_key32};
use arrow::buffer::Buffer;
use datafusion::common::{Result, internal_err};
use std::borrow::Cow;

/// One value column's cells of a task.
struct Column {
    dtype: DType,
    /// The cells' stored values, aligned for `dtype`.
    bytes: Buffer,
    packing: Option<Packing>,
    /// Per cell, 1 where it holds a value (`None`: the column has no missing-value rule).
    valid: Option<Vec<u8>>,
}

/// The cells of one chunk task in the value columns a fold reads.
pub struct AlignedCells {
    /// Per value column of the table, its cells when read.
    columns: Vec<Option<Column>>,
    /// Per set of ranges the fold's filters make, a byte per cell: 1 where the cells
    /// pass them (every column named holds a value in its range).
    kept: Vec<(ValueRanges, Vec<u8>)>,
}

impl AlignedCells {
    /// The cells of `task` in value columns `wanted` (indices into `table.values`), from
    /// their decoded tiles `tiles` (one per value column, as the payload stream hands
    /// them out), and which of them pass each of `filters` (each among the columns
    /// wanted): one pass per filter over the task, however many kernels read it.
    pub fn new(
        table: &TableModel,
        task: &ChunkTask,
        tiles: &[Option<Buffer>],
        wanted: &[usize],
        filters: &[ValueRanges],
    ) -> Result<Self> {
        let mut columns: Vec<Option<Column>> = (0..table.values.len()).map(|_| None).collect();
        for &k in wanted {
            let (Some(v), Some(Some(tile))) = (table.values.get(k), tiles.get(k)) else {
                return internal_err!("the fold reads value column {k} without its tile");
            };
            let dtype = v.dataset().dtype();
            let size = dtype.size();
            let mut bytes = selected_bytes(size, tile.clone(), &task.part(k));
            if bytes.len() != task.cells as usize * size {
                return internal_err!("value column {k} has {} bytes for {} cells", bytes.len(), task.cells);
            }
            if bytes.as_ptr().align_offset(size) != 0 {
                // An aligned copy, so that blocks are read in place.
                bytes = Buffer::from_slice_ref(bytes.as_slice());
            }
            let valid = with_dtype!(dtype, T => {
                let rule = Missing::<T>::of(&v.missing);
                (!rule.is_empty()).then(|| validity(&elements::<T>(bytes.as_slice()), &rule))
            });
            columns[k] = Some(Column {
                dtype,
                bytes,
                packing: v.packing,
                valid,
            });
        }
        let mut kept = Vec::with_capacity(filters.len());
        for ranges in filters {
            let mut pass = vec![1u8; task.cells as usize];
            for (k, r) in ranges.iter() {
                let Some(Some(c)) = columns.get(k) else {
                    return internal_err!("a filter compares value column {k}, which the fold did not read");
                };
                if let Some(valid) = &c.valid {
                    pass.iter_mut().zip(valid).for_each(|(p, &v)| *p &= v);
                }
                with_dtype!(c.dtype, T => in_range(&elements::<T>(c.bytes.as_slice()), r, &mut pass));
            }
            for cmp in ranges.comparisons() {
                let (Some(Some(l)), Some(Some(r))) = (columns.get(cmp.left), columns.get(cmp.right)) else {
                    return internal_err!("a filter compares value columns the fold did not read");
                };
                compare_columns(l, r, cmp, &mut pass);
            }
            kept.push((ranges.clone(), pass));
        }
        Ok(AlignedCells { columns, kept })
    }

    /// The cells as read by a kernel over value columns `columns`, kept by `ranges`
    /// (one of the filters the cells were made with, or none): a cell is kept where
    /// every column read holds a value and it passes the filter. The run starts at the
    /// task's first cell ([`AlignedRun::at`] moves it).
    pub fn run(&self, columns: &[usize], ranges: &ValueRanges) -> Result<AlignedRun<'_>> {
        let mut masks: Vec<&[u8]> = columns
            .iter()
            .filter_map(|&k| self.columns.get(k)?.as_ref()?.valid.as_deref())
            .collect();
        let ranged = !ranges.is_empty();
        if ranged {
            let Some((_, pass)) = self.kept.iter().find(|(r, _)| r == ranges) else {
                return internal_err!("the fold keeps cells by a filter the aligned cells were not made with");
            };
            masks.push(pass);
        }
        Ok(AlignedRun {
            cells: self,
            masks,
            ranged,
            offset: 0,
        })
    }
}

impl AlignedRun<'_> {
    /// Start the run at the task's cell `offset`.
    pub fn at(&mut self, offset: usize) {
        self.offset = offset;
    }
}

/// Per element of `x`, 1 where `rule` does not mark it missing: one pass per fill value
/// (and for NaN), each a loop that vectorizes.
fn validity<T: Elem>(x: &[T], rule: &Missing<T>) -> Vec<u8> {
    let mut valid = vec![1u8; x.len()];
    for &f in &rule.values {
        valid.iter_mut().zip(x).for_each(|(v, &e)| *v &= (e != f) as u8);
    }
    if rule.nan {
        // NaN is the one value unequal to itself.
        #[allow(clippy::eq_op)]
        valid.iter_mut().zip(x).for_each(|(v, &e)| *v &= (e == e) as u8);
    }
    valid
}

multiversion! {
    /// `valid[i] &= x[i]` lies in `r` (by order key): as float comparisons where they are
    /// exact ([`KeyRange::float_bounds`]) and the sign decides the NaNs
    /// ([`FloatBounds::nan_by_sign`](crate::plan::FloatBounds::nan_by_sign)), which
    /// vectorize; else by keys.
    fn in_range[T](x: &[T], r: KeyRange, valid: &mut [u8]) where [T: Elem] = in_range_body;
}

/// The body of [`in_range`], compiled into each of its copies.
#[inline(always)]
fn in_range_body<T>(x: &[T], r: KeyRange, valid: &mut [u8])
where
    T: Elem,
{
    let b = r.float_bounds();
    match (T::bounds(b.lo, b.hi), b.nan(), b.nan_by_sign()) {
        (Some((lo, hi)), NanRule::None, ..) => valid
            .iter_mut()
            .zip(x)
            .for_each(|(v, &e)| *v &= ((lo <= e) & (e <= hi)) as u8),
        (Some((lo, hi)), _, Some((pos, neg))) => valid.iter_mut().zip(x).for_each(|(v, &e)| {
            let f = e.f();
            #[allow(clippy::eq_op)]
            let nan_in = (f != f) & if f.is_sign_negative() { neg } else { pos };
            *v &= (((lo <= e) & (e <= hi)) | nan_in) as u8
        }),
        _ => valid
            .iter_mut()
            .zip(x)
            .for_each(|(v, &e)| *v &= r.contains(e.key()) as u8),
    }
}

impl Column {
    /// The stored bytes of cells `from..from + n`.
    fn cells(&self, from: usize, n: usize) -> &[u8] {
        let size = self.dtype.size();
        &self.bytes.as_slice()[from * size..(from + n) * size]
    }
}

/// `pass[i] &= ` cell `i` of both columns holds a value and `cmp` keeps their order, a
/// block at a time: as f64 values, and by keys where the block holds a NaN (f32 keys when
/// both columns are f32, as DataFusion compares them in f32; else f64 keys, which every
/// other pair compared widens to exactly).
fn compare_columns(l: &Column, r: &Column, cmp: &ColumnComparison, pass: &mut [u8]) {
    for valid in [&l.valid, &r.valid].into_iter().flatten() {
        pass.iter_mut().zip(valid).for_each(|(p, &v)| *p &= v);
    }
    let f32_keys = l.dtype == DType::F32 && r.dtype == DType::F32;
    let (mut fl, mut fr) = ([0f64; BLOCK], [0f64; BLOCK]);
    let (mut kl, mut kr) = ([0i64; BLOCK], [0i64; BLOCK]);
    for (b, pass) in pass.chunks_mut(BLOCK).enumerate() {
        let (from, n) = (b * BLOCK, pass.len());
        for (c, out) in [(l, &mut fl), (r, &mut fr)] {
            with_dtype!(c.dtype, T => floats_of(&elements::<T>(c.cells(from, n)), &mut out[..n]));
        }
        // Numbers compare as floats exactly (integers and f32 are exact as f64, and -0
        // equals +0 in both orders); a block holding a NaN is compared again by keys.
        if compare_floats(&fl[..n], &fr[..n], *cmp, pass) {
            for (c, keys) in [(l, &mut kl), (r, &mut kr)] {
                with_dtype!(c.dtype, T => keys_of(&elements::<T>(c.cells(from, n)), f32_keys, &mut keys[..n]));
            }
            compare_keys(&kl[..n], &kr[..n], *cmp, pass);
        }
    }
}

multiversion! {
    /// `x` as f64.
    fn floats_of[T](x: &[T], out: &mut [f64]) where [T: Elem] = floats_of_body;
}

/// The body of [`floats_of`], compiled into each of its copies.
#[inline(always)]
fn floats_of_body<T>(x: &[T], out: &mut [f64])
where
    T: Elem,
{
    out.iter_mut().zip(x).for_each(|(f, &e)| *f = e.f());
}

multiversion! {
    /// `pass[i] &= cmp` keeps `l[i]` and `r[i]` as floats, or one of them is NaN (left to
    /// [`compare_keys`]); returns whether one was.
    fn compare_floats[](l: &[f64], r: &[f64], cmp: ColumnComparison, pass: &mut [u8]) -> bool where [] = compare_floats_body;
}

/// The body of [`compare_floats`], compiled into each of its copies.
#[inline(always)]
fn compare_floats_body(l: &[f64], r: &[f64], cmp: ColumnComparison, pass: &mut [u8]) -> bool {
    let mut nan = false;
    for ((p, &a), &b) in pass.iter_mut().zip(l).zip(r) {
        // NaN is the one value unequal to itself.
        #[allow(clippy::eq_op)]
        let either = (a != a) | (b != b);
        nan |= either;
        *p &= (cmp.keeps(a, b) | either) as u8;
    }
    nan
}

multiversion! {
    /// The order keys of `x` ([`order_key32`] or [`order_key`](crate::plan::order_key)).
    fn keys_of[T](x: &[T], f32_keys: bool, out: &mut [i64]) where [T: Elem] = keys_of_body;
}

/// The body of [`keys_of`], compiled into each of its copies.
#[inline(always)]
fn keys_of_body<T>(x: &[T], f32_keys: bool, out: &mut [i64])
where
    T: Elem,
{
    if f32_keys {
        out.iter_mut().zip(x).for_each(|(k, &e)| *k = order_key32(e.f32()));
    } else {
        out.iter_mut().zip(x).for_each(|(k, &e)| *k = e.key());
    }
}

multiversion! {
    /// `pass[i] &= cmp` keeps keys `l[i]` and `r[i]`.
    fn compare_keys[](l: &[i64], r: &[i64], cmp: ColumnComparison, pass: &mut [u8]) where [] = compare_keys_body;
}

/// The body of [`compare_keys`], compiled into each of its copies.
#[inline(always)]
fn compare_keys_body(l: &[i64], r: &[i64], cmp: ColumnComparison, pass: &mut [u8]) {
    for ((p, &a), &b) in pass.iter_mut().zip(l).zip(r) {
        *p &= cmp.keeps(a, b) as u8;
    }
}

/// A run of a task's aligned cells ([`AlignedCells::run`]).
pub struct AlignedRun<'a> {
    cells: &'a AlignedCells,
    /// The validity of the columns read that have a missing-value rule, and the cells
    /// that pass the filter.
    masks: Vec<&'a [u8]>,
    /// A filter drops cells (they are not rows).
    ranged: bool,
    offset: usize,
}

impl Cells for AlignedRun<'_> {
    #[inline(always)]
    fn plain(&self) -> bool {
        self.masks.is_empty()
    }

    #[inline(always)]
    fn ranged(&self) -> bool {
        self.ranged
    }

    #[inline(always)]
    fn mask(&self, from: usize, n: usize, valid: &mut [u8]) {
        let base = self.offset + from;
        valid[..n].fill(1);
        for mask in &self.masks {
            valid[..n]
                .iter_mut()
                .zip(&mask[base..base + n])
                .for_each(|(v, &m)| *v &= m);
        }
    }

    #[inline(always)]
    fn load<F: Lane>(&self, k: usize, from: usize, at: Option<&[u32]>, out: &mut [F], with: impl Fn(F, F) -> F) {
        let Some(Some(c)) = self.cells.columns.get(k) else {
            // `Program::compile` only names columns of the table, and the fold reads
            // every column its programs name.
            unreachable!("a program reads value column {k}, which the fold did not read");
        };
        with_dtype!(c.dtype, T => {
            let x = elements::<T>(&c.bytes.as_slice()[(self.offset + from) * c.dtype.size()..]);
            convert(&x, c.packing, at, out, with)
        })
    }

    #[inline(always)]
    fn view<F: Lane>(&self, k: usize, from: usize, n: usize) -> Option<&[F]> {
        let c = self.cells.columns.get(k)?.as_ref()?;
        if c.dtype != F::DTYPE || c.packing.is_some() {
            return None;
        }
        let size = c.dtype.size();
        let at = (self.offset + from) * size;
        // The bytes are aligned for their dtype (`AlignedCells::new`): borrowed.
        match elements::<F>(c.bytes.as_slice().get(at..at + n * size)?) {
            Cow::Borrowed(x) => Some(x),
            Cow::Owned(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::order_key;

    /// The vectorized range test keeps exactly the elements whose order key the range
    /// holds, for NaNs of either sign, signed zeros, infinities and subnormals.
    #[test]
    fn in_range_keeps_what_the_keys_say() {
        let specials = crate::plan::ORDER_EDGES;
        let mut ranges = vec![KeyRange::ALL, KeyRange { lo: 3, hi: 2 }];
        for c in specials {
            let k = order_key(c);
            ranges.extend([
                KeyRange { lo: k, hi: k },
                KeyRange { lo: k, hi: i64::MAX },
                KeyRange { lo: i64::MIN, hi: k },
                KeyRange {
                    lo: k.saturating_add(1),
                    hi: i64::MAX,
                },
                KeyRange {
                    lo: i64::MIN,
                    hi: k.saturating_sub(1),
                },
            ]);
        }
        fn check<T: Elem>(x: &[T], ranges: &[KeyRange]) {
            for &r in ranges {
                let mut valid = vec![1u8; x.len()];
                in_range(x, r, &mut valid);
                for (v, &e) in valid.iter().zip(x) {
                    assert_eq!(*v == 1, r.contains(e.key()), "{r:?} {}", e.f());
                }
            }
        }
        let f64s: Vec<f64> = specials.to_vec();
        let f32s: Vec<f32> = specials.iter().map(|&x| x as f32).collect();
        let i16s: Vec<i16> = vec![-3, -1, 0, 1, 2, 100, i16::MIN, i16::MAX];
        let u8s: Vec<u8> = vec![0, 1, 2, 100, 255];
        check(&f64s, &ranges);
        check(&f32s, &ranges);
        check(&i16s, &ranges);
        check(&u8s, &ranges);
    }
}
