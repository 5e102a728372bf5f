//! Chunk tasks: which chunks a selection touches, and the sub-box to emit from each.
//!
//! A table of several datasets ([`aligned_tasks`]) reads them on their common grid: where
//! their chunk grids agree, one task per chunk; where they differ, one task per cell of
//! the grid cut at every dataset's chunk boundaries, so that each task lies inside one
//! chunk of every dataset ([`TilePart`]).

use super::selection::AxisSelection;
use crate::format::DatasetRecord;
use crate::format::hyperslab::{Runs, odometer_next};
use std::sync::{Arc, Mutex};

/// One chunk to read and the part of it that is selected; in a table of several datasets,
/// the chunk of the first and, in `parts`, where the same cells lie in the others' tiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkTask {
    /// The task's id in its table: the chunk id when the datasets share one chunk grid
    /// (always for one dataset), else the row-major index of the task's first cell
    /// (see [`aligned_tasks`]).
    pub id: u64,
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
    /// Row-major chunk id in that dataset.
    pub linear: u64,
    /// Chunk grid coordinates in that dataset.
    pub coords: Vec<u64>,
    /// Per axis, that tile's (clipped) extent.
    pub tile_extent: Vec<u64>,
    /// Per axis, what a position local to the task's own tile adds to be local to this
    /// one (the difference of the two tiles' starts).
    pub shift: Vec<i64>,
}

impl ChunkTask {
    /// The chunk id of value column `k`'s dataset that holds this task's cells.
    pub fn chunk_of(&self, k: usize) -> u64 {
        match k.checked_sub(1) {
            None => self.linear,
            Some(i) => self.parts[i].linear,
        }
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
    /// as positions local to that chunk's tile, in the same order.
    pub fn part(&self, k: usize) -> ChunkTask {
        let Some(p) = k.checked_sub(1).and_then(|i| self.parts.get(i)) else {
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

/// The chunks of `rec` that intersect the selection, in row-major chunk order (the tasks
/// of a table of one dataset: [`aligned_tasks`] of `rec` alone).
pub fn chunk_tasks(rec: &DatasetRecord, sel: &[AxisSelection]) -> Vec<ChunkTask> {
    aligned_tasks(&[rec], sel)
}

/// A stretch of one axis inside one chunk of every dataset: the chunk index in each, and
/// the selected global ranges.
type Piece = (Vec<u64>, Vec<(u64, u64)>);

/// The selection of axis `d` cut at every chunk boundary of any of `recs`: pieces in the
/// same chunk of every dataset merged, in order.
fn pieces(recs: &[&DatasetRecord], sel: &AxisSelection, d: usize) -> Vec<Piece> {
    let extent = recs[0].shape[d];
    let mut out: Vec<Piece> = Vec::new();
    for &(lo, hi) in sel.ranges() {
        let mut p = lo;
        while p < hi {
            let keys: Vec<u64> = recs.iter().map(|r| p / r.chunk_shape[d]).collect();
            // (k + 1) · chunk may pass 2^64 on the last chunk of a long axis.
            let end = recs
                .iter()
                .zip(&keys)
                .map(|(r, k)| (k * r.chunk_shape[d]).saturating_add(r.chunk_shape[d]))
                .fold(hi.min(extent), u64::min);
            match out.last_mut() {
                Some((last, ranges)) if *last == keys => ranges.push((p, end)),
                _ => out.push((keys, vec![(p, end)])),
            }
            p = end;
        }
    }
    out
}

/// The tasks of a table of the datasets `recs` (one or more, of one shape) under `sel`:
/// one task per chunk when every dataset has the first's chunk shape (task id = chunk
/// id), else one per cell of the grid cut at every dataset's chunk boundaries that the
/// selection touches (task id = row-major index of the cell's first position), in
/// row-major order. Each task holds the first dataset's chunk and, in `parts`, the
/// others'.
pub fn aligned_tasks(recs: &[&DatasetRecord], sel: &[AxisSelection]) -> Vec<ChunkTask> {
    let Some(first) = recs.first() else {
        return vec![];
    };
    let n = first.ndim();
    let same_grid = recs.iter().all(|r| r.chunk_shape == first.chunk_shape);
    let axes: Vec<Vec<Piece>> = (0..n).map(|d| pieces(recs, &sel[d], d)).collect();
    if axes.iter().any(|a| a.is_empty()) {
        return vec![];
    }
    let extents: Vec<usize> = axes.iter().map(Vec::len).collect();
    let mut out = Vec::new();
    let mut idx = vec![0usize; n];
    loop {
        let piece = |d: usize| &axes[d][idx[d]];
        let coords_of = |i: usize| (0..n).map(|d| piece(d).0[i]).collect::<Vec<u64>>();
        let coords = coords_of(0);
        let (start, tile_extent) = first.tile_box(&coords);
        let local: Vec<Vec<(u64, u64)>> = (0..n)
            .map(|d| piece(d).1.iter().map(|&(a, b)| (a - start[d], b - start[d])).collect())
            .collect();
        let cells = local.iter().map(|r| range_count(r)).product();
        let parts = recs[1..]
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let c = coords_of(i + 1);
                let (s, e) = r.tile_box(&c);
                TilePart {
                    linear: r.linear_chunk_id(&c),
                    shift: start
                        .iter()
                        .zip(&s)
                        .map(|(&a, &b)| (a as i128 - b as i128) as i64)
                        .collect(),
                    coords: c,
                    tile_extent: e,
                }
            })
            .collect();
        let linear = first.linear_chunk_id(&coords);
        // Where the grids differ: the cell's origin, the latest chunk start of any
        // dataset, per axis.
        let id = match same_grid {
            true => linear,
            false => (0..n).fold(0u64, |acc, d| {
                let origin = recs
                    .iter()
                    .enumerate()
                    .map(|(i, r)| piece(d).0[i] * r.chunk_shape[d])
                    .max();
                acc.wrapping_mul(first.shape[d]).wrapping_add(origin.unwrap_or(0))
            }),
        };
        out.push(ChunkTask {
            id,
            linear,
            coords,
            local,
            tile_extent,
            cells,
            parts,
        });
        if !odometer_next(&mut idx, &extents) {
            return out;
        }
    }
}

/// Tasks in the common grid of `recs` over every cell: chunks of the first when every
/// dataset has its chunk shape, else the product over axes of the pieces between
/// boundaries of any grid.
pub fn grid_count(recs: &[&DatasetRecord]) -> u64 {
    let Some(first) = recs.first() else {
        return 0;
    };
    if recs.iter().all(|r| r.chunk_shape == first.chunk_shape) {
        return first.chunk_count;
    }
    (0..first.ndim())
        .map(|d| {
            let mut bounds: Vec<u64> = recs
                .iter()
                .flat_map(|r| (1..r.grid[d]).map(move |k| k * r.chunk_shape[d]))
                .collect();
            bounds.sort_unstable();
            bounds.dedup();
            bounds.len() as u64 + 1
        })
        .fold(1, u64::saturating_mul)
}

/// Tasks of [`aligned_tasks`] rebuilt from their ids (e.g. of a serialized plan): for
/// each id, the task made for it under `sel`, in the order given. An id the selection
/// does not touch, or one listed twice, is an error.
pub fn tasks_by_id(
    recs: &[&DatasetRecord],
    sel: &[AxisSelection],
    ids: &[Vec<u64>],
) -> Result<Vec<Vec<ChunkTask>>, String> {
    let Some(first) = recs.first() else {
        return Err("a table without datasets".into());
    };
    if sel.len() != first.ndim() {
        return Err(format!("{} axis selections for {} axes", sel.len(), first.ndim()));
    }
    let mut by_id: std::collections::HashMap<u64, ChunkTask> =
        aligned_tasks(recs, sel).into_iter().map(|t| (t.id, t)).collect();
    ids.iter()
        .map(|part| {
            part.iter()
                .map(|id| {
                    by_id
                        .remove(id)
                        .ok_or_else(|| format!("chunk {id} is not selected or is listed twice"))
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::DType;

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

    /// The cells of `t` as tile-local coordinates, in the task's order.
    fn cells_of(t: &ChunkTask) -> Vec<Vec<u64>> {
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

    /// Global coordinates of the cells of `t` (a task of a dataset with `chunk_shape`), in
    /// the task's order.
    fn global_cells(t: &ChunkTask, chunk_shape: &[u64]) -> Vec<Vec<u64>> {
        let start = t.tile_start(chunk_shape);
        cells_of(t)
            .into_iter()
            .map(|c| c.iter().zip(&start).map(|(a, b)| a + b).collect())
            .collect()
    }

    #[test]
    fn aligned_tasks_hold_every_selected_cell_once_in_each_dataset() {
        let shapes = [vec![3u64, 4, 2], vec![4, 3, 2], vec![5, 7, 1], vec![3, 4, 2]];
        let recs: Vec<DatasetRecord> = shapes
            .iter()
            .map(|c| DatasetRecord::new("t", "a".into(), DType::F32, vec![10, 7, 3], c.clone()).unwrap())
            .collect();
        let sel = vec![
            AxisSelection::from_sorted_ranges(10, [(0, 2), (3, 9)]),
            AxisSelection::from_sorted_ranges(7, [(1, 7)]),
            AxisSelection::all(3),
        ];
        for take in [&[0usize, 1, 2][..], &[0, 3], &[2, 0], &[1]] {
            let rs: Vec<&DatasetRecord> = take.iter().map(|&i| &recs[i]).collect();
            let tasks = aligned_tasks(&rs, &sel);
            let mut all: Vec<Vec<u64>> = Vec::new();
            let mut ids = std::collections::HashSet::new();
            for t in &tasks {
                assert!(ids.insert(t.id), "{take:?}: id {} twice", t.id);
                let cells = global_cells(t, &rs[0].chunk_shape);
                assert_eq!(cells.len() as u64, t.cells);
                // Every dataset's part holds the same cells, in order, inside its tile.
                for (k, r) in rs.iter().enumerate() {
                    let p = t.part(k);
                    assert_eq!(p.linear, t.chunk_of(k));
                    assert_eq!(p.coords, r.chunk_coords(p.linear));
                    assert_eq!(p.tile_extent, r.tile_box(&p.coords).1);
                    assert_eq!(t.tile_extent_of(k), p.tile_extent.as_slice());
                    for (d, ranges) in p.local.iter().enumerate() {
                        assert!(
                            ranges.iter().all(|&(a, b)| a < b && b <= p.tile_extent[d]),
                            "{take:?} {p:?}"
                        );
                    }
                    assert_eq!(global_cells(&p, &r.chunk_shape), cells, "{take:?} part {k}");
                }
                all.extend(cells);
            }
            let mut want = Vec::new();
            for i in sel[0].positions() {
                for j in sel[1].positions() {
                    for k in sel[2].positions() {
                        want.push(vec![i, j, k]);
                    }
                }
            }
            all.sort();
            assert_eq!(all, want, "{take:?}");
            // Same grids: one task per chunk, ids the chunk ids, every part that chunk.
            if rs.iter().all(|r| r.chunk_shape == rs[0].chunk_shape) {
                let chunks: std::collections::HashSet<Vec<u64>> = tasks.iter().map(|t| t.coords.clone()).collect();
                assert_eq!(chunks.len(), tasks.len());
                for t in &tasks {
                    assert_eq!(t.id, t.linear);
                    assert!(
                        t.parts
                            .iter()
                            .all(|p| p.coords == t.coords && p.shift.iter().all(|&x| x == 0))
                    );
                }
            }
            let ids: Vec<Vec<u64>> = vec![tasks.iter().rev().map(|t| t.id).collect()];
            let mut back = tasks_by_id(&rs, &sel, &ids).unwrap().remove(0);
            back.reverse();
            assert_eq!(back, tasks);
            assert!(grid_count(&rs) >= tasks.len() as u64);
        }
    }

    #[test]
    fn tasks_rebuilt_from_ids_equal_the_planned_ones() {
        let rec = DatasetRecord::new("t", "a".into(), DType::F32, vec![10, 7], vec![3, 4]).unwrap();
        let sel = vec![
            AxisSelection::from_sorted_ranges(10, [(1, 2), (4, 8)]),
            AxisSelection::from_sorted_ranges(7, [(3, 5)]),
        ];
        let tasks = chunk_tasks(&rec, &sel);
        let mut planned = crate::plan::split_balanced(tasks.clone(), 3, |t| t.cells);
        planned[0].reverse();
        let ids: Vec<Vec<u64>> = planned.iter().map(|p| p.iter().map(|t| t.linear).collect()).collect();
        assert_eq!(tasks_by_id(&[&rec], &sel, &ids).unwrap(), planned);
        // A chunk the selection misses, a repeated chunk, a wrong rank.
        assert!(tasks_by_id(&[&rec], &sel, &[vec![6]]).is_err());
        assert!(tasks_by_id(&[&rec], &sel, &[vec![ids[0][0]], vec![ids[0][0]]]).is_err());
        assert!(tasks_by_id(&[&rec], &sel[..1], &ids).is_err());
    }
}
