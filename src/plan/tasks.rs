//! Chunk tasks: which chunks a selection touches, and the sub-box to emit from each.
//!
//! A table of several datasets reads them on their common grid ([`super::common_grid`]):
//! where their chunk grids agree, one task per chunk; where they differ, tasks cut so
//! that each lies inside one chunk of the first dataset and where the others' cells lie
//! ([`TilePart`]: one tile of each, or several assembled into one, [`Spread`]).

use super::selection::AxisSelection;
use crate::format::hyperslab::{Runs, odometer_next};
use std::sync::{Arc, Mutex};

/// One chunk to read and the part of it that is selected; in a table of several datasets,
/// the chunk of the first and, in `parts`, where the same cells lie in the others' tiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkTask {
    /// The task's id in its table: the chunk id when the datasets share one chunk grid
    /// (always for one dataset), else the row-major index of the task's first cell
    /// (see [`aligned_tasks`](super::common_grid::aligned_tasks)).
    pub id: u64,
    /// The file of the table the task reads (its position among an archive's members,
    /// see [`TableModel::file_of`](super::TableModel::file_of)); 0 in a table of one
    /// file. `linear`, `coords`, `local`, `tile_extent` and `parts` are in that file.
    pub file: u32,
    /// Row-major chunk id (of the first dataset).
    pub linear: u64,
    /// Chunk grid coordinates.
    pub coords: Vec<u64>,
    /// Per axis, the selected ranges in tile-local positions.
    pub local: Vec<Vec<(u64, u64)>>,
    /// Per axis, the tile's (clipped) extent.
    pub tile_extent: Vec<u64>,
    /// Number of selected cells.
    pub cells: u64,
    /// For each further dataset of the table, the tile holding the same cells.
    pub parts: Vec<TilePart>,
}

/// Where a task's cells lie in the tile of another dataset of its table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TilePart {
    /// Row-major chunk id in that dataset (of the first chunk it holds of the task when
    /// the task spans several: see `spread`).
    pub linear: u64,
    /// Chunk grid coordinates in that dataset (of that first chunk).
    pub coords: Vec<u64>,
    /// Per axis, that tile's (clipped) extent; the task's own tile's when `spread`.
    pub tile_extent: Vec<u64>,
    /// Per axis, what a position local to the task's own tile adds to be local to this
    /// one (the difference of the two tiles' starts; zero when `spread`).
    pub shift: Vec<i64>,
    /// `Some` when the task's cells lie in several chunks of that dataset (its chunks
    /// are finer than the first dataset's along some axis): the payload then assembles
    /// them into one tile laid out as the task's own (see [`Spread`]).
    pub spread: Option<Spread>,
}

/// The chunks of another dataset a task spans, where that dataset's grid is finer than the
/// first's along some axis: its cells of the task are copied into a tile of the task's
/// own geometry (the first dataset's chunk), so that the task reads like one on a shared
/// grid. Cutting the task there instead would multiply tasks: two datasets chunked one by
/// rows, the other by columns, cut each other into single cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spread {
    /// Per axis, the global start of the task's own tile (the assembled tile's origin).
    pub origin: Vec<u64>,
    /// That dataset's chunk shape.
    pub chunk_shape: Vec<u64>,
    /// That dataset's chunk grid (chunks per axis).
    pub grid: Vec<u64>,
}

impl ChunkTask {
    /// Call `f` with each chunk id of value column `k`'s dataset that holds selected cells
    /// of this task (one, unless the part of `k` is [`Spread`]), with its grid
    /// coordinates, in row-major order.
    pub fn for_each_chunk(&self, k: usize, mut f: impl FnMut(u64, &[u64])) {
        let part = k.checked_sub(1).and_then(|i| self.parts.get(i));
        let Some(p) = part else {
            f(self.linear, &self.coords);
            return;
        };
        let Some(s) = &p.spread else {
            f(p.linear, &p.coords);
            return;
        };
        // Per axis, the chunk coordinates the selected positions touch, ascending.
        let touched: Vec<Vec<u64>> = self
            .local
            .iter()
            .enumerate()
            .map(|(d, ranges)| {
                let (o, c) = (s.origin[d], s.chunk_shape[d].max(1));
                let mut out: Vec<u64> = Vec::new();
                for &(a, b) in ranges.iter().filter(|(a, b)| a < b) {
                    let (lo, hi) = ((o + a) / c, (o + b - 1) / c);
                    let from = match out.last() {
                        Some(&l) if l >= lo => l + 1,
                        _ => lo,
                    };
                    out.extend(from..=hi);
                }
                out
            })
            .collect();
        if touched.iter().any(Vec::is_empty) {
            return;
        }
        let extents: Vec<usize> = touched.iter().map(Vec::len).collect();
        let mut idx = vec![0usize; touched.len()];
        let mut coords: Vec<u64> = touched.iter().map(|t| t[0]).collect();
        loop {
            let linear = coords.iter().zip(&s.grid).fold(0u64, |acc, (&c, &g)| acc * g + c);
            f(linear, &coords);
            if !odometer_next(&mut idx, &extents) {
                return;
            }
            for (d, c) in coords.iter_mut().enumerate() {
                *c = touched[d][idx[d]];
            }
        }
    }

    /// The part of value column `k`'s dataset when this task spans several of its chunks.
    pub fn spread_of(&self, k: usize) -> Option<&Spread> {
        k.checked_sub(1)
            .and_then(|i| self.parts.get(i))
            .and_then(|p| p.spread.as_ref())
    }

    /// The (clipped) extent of the tile of value column `k`'s dataset that holds this
    /// task's cells.
    pub fn tile_extent_of(&self, k: usize) -> &[u64] {
        match k.checked_sub(1).and_then(|i| self.parts.get(i)) {
            None => &self.tile_extent,
            Some(p) => &p.tile_extent,
        }
    }

    /// This task as seen from value column `k`'s dataset: its chunk, and the same cells
    /// as positions local to that chunk's tile, in the same order. Where the task spans
    /// several chunks of it ([`Spread`]), the tile is the one the payload assembles, of
    /// the task's own geometry: the task itself.
    pub fn part(&self, k: usize) -> ChunkTask {
        let p = k.checked_sub(1).and_then(|i| self.parts.get(i));
        let Some(p) = p.filter(|p| p.spread.is_none()) else {
            return ChunkTask {
                parts: vec![],
                ..self.clone()
            };
        };
        let local = self
            .local
            .iter()
            .zip(&p.shift)
            .map(|(ranges, &s)| {
                let at = |x: u64| x.wrapping_add_signed(s);
                ranges.iter().map(|&(a, b)| (at(a), at(b))).collect()
            })
            .collect();
        ChunkTask {
            id: self.id,
            file: self.file,
            linear: p.linear,
            coords: p.coords.clone(),
            local,
            tile_extent: p.tile_extent.clone(),
            cells: self.cells,
            parts: vec![],
        }
    }

    /// True when the whole tile is selected.
    pub fn is_full(&self) -> bool {
        self.cells == self.tile_extent.iter().product::<u64>()
    }

    /// The selected cells as contiguous runs of the tile (see [`Runs`]).
    pub fn runs(&self) -> Runs<'_> {
        Runs::new(&self.tile_extent, &self.local)
    }

    /// The task cut into slabs of at most `max_cells` (≥ 1) selected cells: consecutive
    /// positions of one axis, with every axis outside it at a single position and every
    /// axis inside it whole. The slabs share the task's tile and, in order, hold
    /// its cells in its order; a task that fits is returned whole. Lazy: each slab is
    /// made when asked for, so a tile of any size costs nothing up front.
    pub fn slabs(self: &Arc<Self>, max_cells: u64) -> Slabs {
        let max_cells = max_cells.max(1);
        if self.cells <= max_cells || self.local.is_empty() {
            return Slabs {
                task: self.clone(),
                state: SlabState::Whole,
            };
        }
        // The axis `d` to cut: the outermost whose inner axes together fit. (The task has
        // cells, so every axis has a range.)
        let mut d = self.local.len() - 1;
        let mut per = 1u64;
        while d > 0 {
            match per.checked_mul(range_count(&self.local[d])) {
                Some(p) if p <= max_cells => {
                    per = p;
                    d -= 1;
                }
                _ => break,
            }
        }
        let at = self.local[..=d].iter().map(|r| (0, r[0].0)).collect();
        Slabs {
            state: SlabState::Cut(Cut {
                axis: d,
                per,
                take: (max_cells / per).max(1),
                at,
            }),
            task: self.clone(),
        }
    }

    /// Global start of the tile per axis.
    pub fn tile_start(&self, chunk_shape: &[u64]) -> Vec<u64> {
        self.coords.iter().zip(chunk_shape).map(|(c, s)| c * s).collect()
    }
}

/// Positions in sorted disjoint ranges.
fn range_count(r: &[(u64, u64)]) -> u64 {
    r.iter().map(|(a, b)| b - a).sum()
}

/// The slabs of a task ([`ChunkTask::slabs`]), made one at a time.
#[derive(Debug, Clone)]
pub struct Slabs {
    task: Arc<ChunkTask>,
    state: SlabState,
}

#[derive(Debug, Clone)]
enum SlabState {
    /// The task fits: it is the one slab.
    Whole,
    Cut(Cut),
    Done,
}

/// Where the walk of [`Slabs`] stands.
#[derive(Debug, Clone)]
struct Cut {
    /// The axis cut into pieces; axes before it are at one position, after it whole.
    axis: usize,
    /// Selected cells per position of `axis`.
    per: u64,
    /// Positions of `axis` per slab.
    take: u64,
    /// Per axis up to `axis`: (range index, position) of the next slab's first cell.
    at: Vec<(usize, u64)>,
}

impl Iterator for Slabs {
    type Item = Arc<ChunkTask>;

    fn next(&mut self) -> Option<Arc<ChunkTask>> {
        let cut = match &mut self.state {
            SlabState::Cut(cut) => cut,
            SlabState::Whole => {
                self.state = SlabState::Done;
                return Some(self.task.clone());
            }
            SlabState::Done => return None,
        };
        let task = &self.task;
        let d = cut.axis;
        // The next piece of axis `d`: up to `take` positions from the cursor.
        let ranges = &task.local[d];
        let mut piece = Vec::new();
        let mut room = cut.take;
        let (mut ri, mut pos) = cut.at[d];
        while room > 0 && ri < ranges.len() {
            let end = ranges[ri].1.min(pos + room);
            piece.push((pos, end));
            room -= end - pos;
            pos = end;
            if pos == ranges[ri].1 {
                ri += 1;
                if let Some(&(a, _)) = ranges.get(ri) {
                    pos = a;
                }
            }
        }
        let mut local: Vec<Vec<(u64, u64)>> = cut.at[..d].iter().map(|&(_, p)| vec![(p, p + 1)]).collect();
        let cells = range_count(&piece) * cut.per;
        local.push(piece);
        local.extend(task.local[d + 1..].iter().cloned());
        let slab = ChunkTask {
            id: task.id,
            file: task.file,
            linear: task.linear,
            coords: task.coords.clone(),
            local,
            tile_extent: task.tile_extent.clone(),
            cells,
            parts: task.parts.clone(),
        };
        // Advance: the rest of axis `d`, else the next outer position (last axis fastest).
        if ri < ranges.len() {
            cut.at[d] = (ri, pos);
            return Some(Arc::new(slab));
        }
        cut.at[d] = (0, ranges[0].0);
        for e in (0..d).rev() {
            let r = &task.local[e];
            let (ri, p) = cut.at[e];
            if p + 1 < r[ri].1 {
                cut.at[e] = (ri, p + 1);
                return Some(Arc::new(slab));
            }
            if ri + 1 < r.len() {
                cut.at[e] = (ri + 1, r[ri + 1].0);
                return Some(Arc::new(slab));
            }
            cut.at[e] = (0, r[0].0);
        }
        self.state = SlabState::Done;
        Some(Arc::new(slab))
    }
}

/// Selections whose tasks a [`TaskCache`] keeps.
const CACHED_SELECTIONS: usize = 4;
/// Task lists longer than this are built per query, never kept: a cache entry stays
/// small beside the table (a task holds a few dozen bytes per axis).
const MAX_CACHED_TASKS: usize = 1 << 16;

/// Tasks shared by the queries of one table ([`TaskCache`]).
pub type SharedTasks = Arc<[Arc<ChunkTask>]>;

/// The tasks of the last few selections of one table (at most `CACHED_SELECTIONS`, each
/// of at most `MAX_CACHED_TASKS` tasks), shared by every query over it: a repeated
/// query neither builds its tasks nor frees them again.
#[derive(Debug, Default)]
pub struct TaskCache {
    /// (selection, its tasks), the most recently used last.
    entries: Mutex<Vec<(Vec<AxisSelection>, SharedTasks)>>,
}

impl TaskCache {
    /// The tasks of `selection`: kept ones, else those `build` makes (then kept when
    /// small enough, the least recently used selection dropped). `build` must depend on
    /// the selection alone, as every caller over one table must build the same tasks.
    pub fn get_or_build(
        &self,
        selection: &[AxisSelection],
        build: impl FnOnce() -> Vec<Arc<ChunkTask>>,
    ) -> SharedTasks {
        // A panic elsewhere while the lock was held leaves a list that is still whole.
        let lock = || self.entries.lock().unwrap_or_else(|e| e.into_inner());
        {
            let mut entries = lock();
            if let Some(i) = entries.iter().position(|(s, _)| s == selection) {
                let hit = entries.remove(i);
                let tasks = hit.1.clone();
                entries.push(hit);
                return tasks;
            }
        }
        let tasks: SharedTasks = build().into();
        if tasks.len() <= MAX_CACHED_TASKS {
            let mut entries = lock();
            if !entries.iter().any(|(s, _)| s == selection) {
                if entries.len() == CACHED_SELECTIONS {
                    entries.remove(0);
                }
                entries.push((selection.to_vec(), tasks.clone()));
            }
        }
        tasks
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::DType;
    use crate::format::DatasetRecord;
    use crate::plan::common_grid::chunk_tasks;

    #[test]
    fn tasks_cover_exactly_the_selected_cells() {
        let rec = DatasetRecord::new("t", "a".into(), DType::F32, vec![10, 7], vec![3, 4]).unwrap();
        let sel = vec![
            AxisSelection::from_sorted_ranges(10, [(1, 2), (4, 8)]),
            AxisSelection::from_sorted_ranges(7, [(3, 5)]),
        ];
        let tasks = chunk_tasks(&rec, &sel);
        let mut cells = Vec::new();
        for t in &tasks {
            let start = t.tile_start(&rec.chunk_shape);
            for &(a0, b0) in &t.local[0] {
                for i in a0..b0 {
                    for &(a1, b1) in &t.local[1] {
                        for j in a1..b1 {
                            cells.push((start[0] + i, start[1] + j));
                        }
                    }
                }
            }
        }
        cells.sort();
        let mut want = Vec::new();
        for i in sel[0].positions() {
            for j in sel[1].positions() {
                want.push((i, j));
            }
        }
        assert_eq!(cells, want);
        assert_eq!(tasks.iter().map(|t| t.cells).sum::<u64>(), 10);
        // Chunks along axis 0: 0 (row 1), 1 (rows 4,5), 2 (rows 6,7); along axis 1: 0 and 1.
        assert_eq!(tasks.len(), 6);
    }

    /// The cells of `t` as tile-local coordinates, in the task's order (tests of the
    /// common grid use it too).
    pub(crate) fn cells_of(t: &ChunkTask) -> Vec<Vec<u64>> {
        let mut out = vec![Vec::new()];
        for axis in &t.local {
            out = out
                .into_iter()
                .flat_map(|prefix| {
                    axis.iter().flat_map(|&(a, b)| a..b).map(move |p| {
                        let mut c = prefix.clone();
                        c.push(p);
                        c
                    })
                })
                .collect();
        }
        out
    }

    #[test]
    fn task_cache_builds_each_selection_once_and_keeps_the_recent_ones() {
        let rec = DatasetRecord::new("t", "a".into(), DType::F32, vec![40, 6], vec![4, 3]).unwrap();
        let sel = |end: u64| vec![AxisSelection::from_sorted_ranges(40, [(0, end)]), AxisSelection::all(6)];
        let cache = TaskCache::default();
        let builds = std::cell::Cell::new(0);
        let get = |end: u64| {
            cache.get_or_build(&sel(end), || {
                builds.set(builds.get() + 1);
                chunk_tasks(&rec, &sel(end)).into_iter().map(Arc::new).collect()
            })
        };
        let first = get(40);
        assert_eq!(first.len(), 20);
        let again = get(40);
        assert!(Arc::ptr_eq(&first, &again), "a repeated selection reuses its tasks");
        assert_eq!(builds.get(), 1);
        // Each answer is what the selection's tasks are, cached or not.
        for end in [1, 5, 8, 13] {
            let want: Vec<ChunkTask> = chunk_tasks(&rec, &sel(end));
            let got: Vec<ChunkTask> = get(end).iter().map(|t| ChunkTask::clone(t)).collect();
            assert_eq!(got, want, "selection 0..{end}");
        }
        assert_eq!(builds.get(), 5);
        // Five selections seen, four kept: the least recently used (0..40) was dropped,
        // the most recent ones are still there.
        get(13);
        get(5);
        assert_eq!(builds.get(), 5);
        get(40);
        assert_eq!(builds.get(), 6);
    }

    #[test]
    fn task_cache_never_keeps_a_long_list() {
        let n = MAX_CACHED_TASKS as u64 + 1;
        let rec = DatasetRecord::new("t", "a".into(), DType::F32, vec![n], vec![1]).unwrap();
        let sel = vec![AxisSelection::all(n)];
        let cache = TaskCache::default();
        let builds = std::cell::Cell::new(0);
        for _ in 0..2 {
            let tasks = cache.get_or_build(&sel, || {
                builds.set(builds.get() + 1);
                chunk_tasks(&rec, &sel).into_iter().map(Arc::new).collect()
            });
            assert_eq!(tasks.len() as u64, n);
        }
        assert_eq!(builds.get(), 2);
    }

    #[test]
    fn slabs_hold_the_task_cells_in_order_and_fit() {
        let rec = DatasetRecord::new("t", "a".into(), DType::F32, vec![4, 9, 10], vec![4, 9, 10]).unwrap();
        let sel = vec![
            AxisSelection::from_sorted_ranges(4, [(0, 1), (2, 4)]),
            AxisSelection::from_sorted_ranges(9, [(0, 3), (4, 9)]),
            AxisSelection::from_sorted_ranges(10, [(1, 8)]),
        ];
        let task = Arc::new(chunk_tasks(&rec, &sel).remove(0));
        for max in [0, 1, 6, 7, 20, 40, 60, 100, 1000] {
            let slabs: Vec<Arc<ChunkTask>> = task.slabs(max).collect();
            let joined: Vec<Vec<u64>> = slabs.iter().flat_map(|s| cells_of(s)).collect();
            assert_eq!(joined, cells_of(&task), "max {max}");
            for s in &slabs {
                assert_eq!(s.cells as usize, cells_of(s).len());
                assert!(s.cells <= max.max(1), "max {max}: {} cells", s.cells);
            }
            if max >= task.cells {
                assert_eq!(slabs, vec![task.clone()]);
            }
        }
    }
}
