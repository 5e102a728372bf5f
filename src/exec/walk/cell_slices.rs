//! The walk of a per-cell fold ([`CellSlices`]): when the outer axes of a table are not
//! grouped and its innermost axis is (`GROUP BY lat, lon` over `(time, lat, lon)`), every
//! position of the outer axes in a tile (a slice) holds the same cells, each in the group of
//! its inner position. The fold then takes the selected inner cells cell block by cell
//! block, each over a stack of slices at once ([`fold_cell_block`](crate::exec::kernel::fold_cell_block)).

use super::group_index::GroupIndex;
use crate::exec::kernel::{CELL_BLOCK, Piece};
use crate::format::hyperslab::Runs;
use crate::plan::ChunkTask;

/// The axis from which a per-cell fold over `gi` takes its slices' cells: the first grouped
/// axis, when it is not the outermost and the innermost axis is grouped. `None` otherwise.
pub fn per_cell_axis(gi: &GroupIndex) -> Option<usize> {
    let k = gi.ids.iter().position(Option::is_some)?;
    (k > 0 && gi.ids.last().is_some_and(Option::is_some)).then_some(k)
}

/// The selected cells of one slice of the tiles of a per-cell fold, in cell blocks: the cells
/// of axes `axis..` that tiles of the same extent, selection and start along those axes
/// share, whatever their outer position.
#[derive(Debug)]
pub struct CellSlices {
    axis: usize,
    /// What tiles share these cells: their extent, selection and start from `axis` on.
    extent: Vec<u64>,
    local: Vec<Vec<(u64, u64)>>,
    start: Vec<u64>,
    /// Elements in one slice of the tile.
    slice_len: usize,
    /// The group of each selected cell, in the walk's order (cell block `b` is the cells from
    /// `b · CELL_BLOCK`).
    groups: Vec<usize>,
    /// Per cell block, where its cells lie in a slice.
    blocks: Vec<Vec<Piece>>,
}

impl CellSlices {
    /// Bytes [`CellSlices::new`] allocates for `task` (saturating), to reserve first.
    pub fn bytes(task: &ChunkTask, axis: usize) -> usize {
        let cells: u64 = task.local[axis..]
            .iter()
            .map(|r| r.iter().map(|(a, b)| b - a).sum::<u64>())
            .product();
        let runs: usize = task.local[axis..].iter().map(Vec::len).product();
        let cells = usize::try_from(cells).unwrap_or(usize::MAX);
        cells.saturating_mul(size_of::<usize>()).saturating_add(
            runs.saturating_add(cells / CELL_BLOCK + 1)
                .saturating_mul(size_of::<Piece>()),
        )
    }

    /// The cells of `task` (its tile starting at `start`) from `axis` on, grouped by `gi`.
    pub fn new(gi: &GroupIndex, task: &ChunkTask, start: &[u64], axis: usize) -> Self {
        let (extent, local) = (&task.tile_extent[axis..], &task.local[axis..]);
        let last = extent.len() - 1;
        let mut groups = Vec::new();
        let mut blocks: Vec<Vec<Piece>> = Vec::new();
        let mut runs = Runs::new(extent, local);
        while let Some(r) = runs.next() {
            let base: usize = (0..last)
                .map(|d| gi.offset(axis + d, start[axis + d] + runs.outer()[d]))
                .sum();
            let (mut offset, mut len) = (r.offset as usize, r.len as usize);
            let mut first = start[axis + last] + r.first;
            while len > 0 {
                let slot = groups.len() % CELL_BLOCK;
                if slot == 0 {
                    blocks.push(Vec::new());
                }
                let n = len.min(CELL_BLOCK - slot);
                groups.extend((0..n as u64).map(|i| base + gi.offset(axis + last, first + i)));
                if let Some(pieces) = blocks.last_mut() {
                    pieces.push(Piece { slot, offset, len: n });
                }
                (offset, len, first) = (offset + n, len - n, first + n as u64);
            }
        }
        CellSlices {
            axis,
            extent: extent.to_vec(),
            local: local.to_vec(),
            start: start[axis..].to_vec(),
            slice_len: extent.iter().product::<u64>() as usize,
            groups,
            blocks,
        }
    }

    /// Whether the slices of `task` (its tile starting at `start`) hold these cells.
    pub fn fits(&self, task: &ChunkTask, start: &[u64]) -> bool {
        let a = self.axis;
        task.tile_extent[a..] == self.extent[..] && task.local[a..] == self.local[..] && start[a..] == self.start[..]
    }

    /// Elements in one slice.
    pub fn slice_len(&self) -> usize {
        self.slice_len
    }

    /// The selected cells' cell blocks: per cell block, its pieces and the groups of its slots.
    pub fn cell_blocks(&self) -> impl Iterator<Item = (&[Piece], &[usize])> {
        self.blocks
            .iter()
            .zip(self.groups.chunks(CELL_BLOCK))
            .map(|(p, g)| (p.as_slice(), g))
    }

    /// The groups of the selected cells.
    pub fn groups(&self) -> &[usize] {
        &self.groups
    }

    /// The number of selected slices of `task`.
    pub fn slice_count(&self, task: &ChunkTask) -> usize {
        task.local[..self.axis]
            .iter()
            .map(|r| r.iter().map(|(a, b)| (b - a) as usize).sum::<usize>())
            .product()
    }

    /// The element offset in its tile of each selected slice of `task` (which these cells
    /// fit).
    pub fn slices<'t>(&self, task: &'t ChunkTask) -> impl Iterator<Item = usize> + 't {
        let (a, slice_len) = (self.axis, self.slice_len);
        Runs::new(&task.tile_extent[..a], &task.local[..a])
            .flat_map(move |r| (r.offset..r.offset + r.len).map(move |o| o as usize * slice_len))
    }
}
