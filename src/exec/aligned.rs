//! The cells of one chunk task in several value columns side by side, for the compiled
//! kernels over tables of several datasets.
//!
//! Each column's selected cells are taken from its own tile (the task's
//! [`part`](ChunkTask::part) in that dataset) in the task's order, so that cell `i` of every
//! column is the same grid cell: shared with the tile when the whole of it is selected
//! (datasets on one chunk grid), copied otherwise. A column with a missing-value rule
//! also gets a byte per cell saying whether the cell holds a value.

use super::cells::selected_bytes;
use super::fold::{Elem, Missing};
use super::program::{BLOCK, Cells, Lane, convert};
use crate::format::{DType, Packing, elements, with_dtype};
use crate::plan::{ChunkTask, TableModel};
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
}

impl AlignedCells {
    /// The cells of `task` in value columns `wanted` (indices into `table.values`), from
    /// their decoded tiles `tiles` (one per value column, as the payload stream hands
    /// them out).
    pub fn new(table: &TableModel, task: &ChunkTask, tiles: &[Option<Buffer>], wanted: &[usize]) -> Result<Self> {
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
        Ok(AlignedCells { columns })
    }

    /// The cells as read by a kernel over value columns `columns` (all among those
    /// read): a cell is kept where every one of them holds a value. The run starts at
    /// the task's first cell ([`AlignedRun::at`] moves it).
    pub fn run(&self, columns: &[usize]) -> AlignedRun<'_> {
        let masks: Vec<&[u8]> = columns
            .iter()
            .filter_map(|&k| self.columns.get(k)?.as_ref()?.valid.as_deref())
            .collect();
        AlignedRun {
            cells: self,
            masks,
            offset: 0,
        }
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

/// A run of a task's aligned cells ([`AlignedCells::run`]).
pub struct AlignedRun<'a> {
    cells: &'a AlignedCells,
    /// The validity of the columns read that have a missing-value rule.
    masks: Vec<&'a [u8]>,
    offset: usize,
}

impl Cells for AlignedRun<'_> {
    #[inline(always)]
    fn plain(&self) -> bool {
        self.masks.is_empty()
    }

    #[inline(always)]
    fn kept(&self, from: usize, n: usize, at: &mut [u32]) -> usize {
        let base = self.offset + from;
        let mut valid = [1u8; BLOCK];
        for mask in &self.masks {
            valid[..n]
                .iter_mut()
                .zip(&mask[base..base + n])
                .for_each(|(v, &m)| *v &= m);
        }
        let mut m = 0;
        for (i, &v) in valid[..n].iter().enumerate() {
            at[m] = i as u32;
            m += v as usize;
        }
        m
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
