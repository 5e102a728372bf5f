use super::task_fold::TaskFold;
use crate::exec::kernel::{Elem, Keep, Missing};
use crate::exec::program::AlignedCells;
use crate::exec::program::{Cells, Lane, convert};
use crate::exec::walk::{Segment, walk_segments};
use crate::format::{Packing, elements, with_dtype};
use crate::plan::ValueRanges;
use arrow::buffer::Buffer;
use datafusion::common::{Result, exec_err, internal_err};

/// Where a compiled expression reads a task's cells: a table of one dataset reads the
/// stored values of its tile, a table of several their aligned cells.
#[derive(Clone, Copy)]
pub(super) enum TaskCells<'a> {
    Tile(Option<&'a Buffer>),
    Aligned(&'a AlignedCells),
}

/// A kernel over the cells of a task, one segment at a time.
pub(super) trait CellKernel {
    /// Fold segment `s`'s cells; true when a square root met a negative kept value.
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool;
}

/// The cells of a task (or a slab of one: its first cell is the task's cell `cell_base`)
/// that the compiled kernels walk.
#[derive(Clone, Copy)]
pub(super) struct CellWalk<'a> {
    pub(super) at: TaskFold<'a>,
    pub(super) cells: TaskCells<'a>,
    pub(super) cell_base: usize,
}

impl CellWalk<'_> {
    /// Walk the segments, split at each position of axis `split` if any, with `kernel`
    /// over a dataset's stored values kept by its missing rule and `ranges`, or the
    /// aligned cells of value columns `columns` kept by theirs and `ranges`.
    pub(super) fn run<K: CellKernel>(
        &self,
        columns: &[usize],
        ranges: &ValueRanges,
        split: Option<usize>,
        kernel: &mut K,
    ) -> Result<()> {
        let CellWalk {
            at: TaskFold { table, gi, task, start },
            cells,
            cell_base,
        } = *self;
        let mut negative = false;
        match cells {
            TaskCells::Tile(None) => return internal_err!("TetAggregateExec: an expression of v without its tile"),
            TaskCells::Tile(Some(tile)) => with_dtype!(table.dataset().dtype(), T => {
                let keep = Keep {
                    missing: Missing::<T>::of(&table.value().missing),
                    range: ranges.of(0),
                };
                let t = elements::<T>(tile);
                walk_segments(gi, task, start, split, |s| {
                    let run = StoredRun {
                        x: &t[s.tile_offset..s.tile_offset + s.len],
                        packing: table.value().packing,
                        keep: &keep,
                    };
                    negative |= kernel.segment(&s, &run);
                });
            }),
            TaskCells::Aligned(cells) => {
                let mut run = cells.run(columns, ranges)?;
                walk_segments(gi, task, start, split, |s| {
                    run.at(cell_base + s.cell_offset);
                    negative |= kernel.segment(&s, &run);
                })
            }
        }
        if negative {
            return exec_err!("cannot take square root of a negative number");
        }
        Ok(())
    }
}

/// A run of one dataset's stored values, kept by its missing rule and a range of them.
pub(super) struct StoredRun<'a, T> {
    pub(super) x: &'a [T],
    pub(super) packing: Option<Packing>,
    pub(super) keep: &'a Keep<T>,
}

impl<T: Elem> Cells for StoredRun<'_, T> {
    #[inline(always)]
    fn plain(&self) -> bool {
        self.keep.takes_all()
    }

    #[inline(always)]
    fn ranged(&self) -> bool {
        self.keep.ranged()
    }

    #[inline(always)]
    fn mask(&self, from: usize, n: usize, out: &mut [u8]) {
        out.iter_mut()
            .zip(&self.x[from..from + n])
            .for_each(|(o, &v)| *o = self.keep.test(v) as u8);
    }

    #[inline(always)]
    fn load<F: Lane>(&self, _k: usize, from: usize, at: Option<&[u32]>, out: &mut [F], with: impl Fn(F, F) -> F) {
        convert(&self.x[from..], self.packing, at, out, with)
    }
}
