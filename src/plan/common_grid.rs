//! The common grid of a table of several datasets: where its tasks are cut, and each task
//! made from its place in it — all of them for a selection ([`aligned_tasks`]), or one per
//! id ([`tasks_by_id`]) without making the others.
//!
//! Along each axis, tasks are cut at the chunk boundaries of the first dataset and of
//! every dataset whose chunks are at least as long there (each adds at most one cut per
//! chunk of the first), so a task lies inside one chunk of each of those. A dataset whose
//! chunks are shorter along an axis is not cut along it: the task spans several of its
//! chunks ([`Spread`]), which the payload assembles into one tile. The tasks are thus at
//! most `datasets^axes` per chunk of the first dataset, whatever the grids: cutting at
//! every boundary of every grid would cut a dataset chunked by rows and one chunked by
//! columns into single cells (16 M tasks for 4096 × 4096). Where every dataset has the
//! first's chunk shape, a task is a chunk (its id the chunk id).

use super::selection::AxisSelection;
use super::tasks::{ChunkTask, Spread, TilePart};
use crate::format::DatasetRecord;
use crate::format::hyperslab::odometer_next;
use std::collections::HashSet;

/// One stretch of an axis that tasks are cut into: the stretch of positions between two
/// cuts, what the selection holds of it, and where that lies in each dataset's grid.
#[derive(Debug)]
struct Piece {
    /// The stretch's first position (the cell's origin along the axis).
    origin: u64,
    /// The selected global ranges inside the stretch, ascending.
    ranges: Vec<(u64, u64)>,
    /// Per dataset, the chunk coordinates `lo..hi` the selected ranges touch (one chunk for
    /// the datasets cut along this axis).
    keys: Vec<(u64, u64)>,
}

/// Per dataset, whether tasks are cut at its chunk boundaries along axis `d`: the first
/// dataset's always, another's when its chunks are at least as long there.
fn cut_along(recs: &[&DatasetRecord], d: usize) -> Vec<bool> {
    let first = recs[0].chunk_shape[d];
    recs.iter().map(|r| r.chunk_shape[d] >= first).collect()
}

/// The stretch between cuts holding position `p` of axis `d` (`cut` from [`cut_along`]):
/// its first position and its end.
fn stretch_at(recs: &[&DatasetRecord], cut: &[bool], d: usize, p: u64) -> (u64, u64) {
    let mut stretch = (0, recs[0].shape[d]);
    for (r, _) in recs.iter().zip(cut).filter(|(_, c)| **c) {
        let s = r.chunk_shape[d].max(1);
        let start = p / s * s;
        // start + chunk may pass 2^64 on the last chunk of a long axis.
        stretch = (stretch.0.max(start), stretch.1.min(start.saturating_add(s)));
    }
    stretch
}

/// A piece of axis `d` from its origin and selected ranges (non-empty).
fn piece(recs: &[&DatasetRecord], d: usize, origin: u64, ranges: Vec<(u64, u64)>) -> Piece {
    let (first, last) = (ranges[0].0, ranges[ranges.len() - 1].1 - 1);
    let keys = recs
        .iter()
        .map(|r| {
            let s = r.chunk_shape[d].max(1);
            (first / s, last / s + 1)
        })
        .collect();
    Piece { origin, ranges, keys }
}

/// The selection of axis `d` cut into the task grid's stretches: one piece per stretch the
/// selection touches, in order.
fn pieces(recs: &[&DatasetRecord], sel: &AxisSelection, d: usize) -> Vec<Piece> {
    let cut = cut_along(recs, d);
    let mut out: Vec<(u64, Vec<(u64, u64)>)> = Vec::new();
    for &(lo, hi) in sel.ranges() {
        let mut p = lo;
        while p < hi {
            let (origin, end) = stretch_at(recs, &cut, d, p);
            let end = end.min(hi);
            match out.last_mut() {
                Some((o, ranges)) if *o == origin => ranges.push((p, end)),
                _ => out.push((origin, vec![(p, end)])),
            }
            p = end;
        }
    }
    out.into_iter().map(|(o, r)| piece(recs, d, o, r)).collect()
}

/// The task of the cell whose piece along each axis is `axes[d]`.
fn task_of(recs: &[&DatasetRecord], same_grid: bool, axes: &[&Piece]) -> ChunkTask {
    let first = recs[0];
    let n = axes.len();
    let coords: Vec<u64> = axes.iter().map(|p| p.keys[0].0).collect();
    let (start, tile_extent) = first.tile_box(&coords);
    let local: Vec<Vec<(u64, u64)>> = axes
        .iter()
        .zip(&start)
        .map(|(p, &s)| p.ranges.iter().map(|&(a, b)| (a - s, b - s)).collect())
        .collect();
    let cells = local
        .iter()
        .map(|r| r.iter().map(|(a, b)| b - a).sum::<u64>())
        .product();
    let parts = recs[1..]
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let c: Vec<u64> = axes.iter().map(|p| p.keys[i + 1].0).collect();
            let linear = r.linear_chunk_id(&c);
            if axes.iter().all(|p| p.keys[i + 1].1 == p.keys[i + 1].0 + 1) {
                let (s, e) = r.tile_box(&c);
                return TilePart {
                    linear,
                    shift: start
                        .iter()
                        .zip(&s)
                        .map(|(&a, &b)| (a as i128 - b as i128) as i64)
                        .collect(),
                    coords: c,
                    tile_extent: e,
                    spread: None,
                };
            }
            TilePart {
                linear,
                coords: c,
                tile_extent: tile_extent.clone(),
                shift: vec![0; n],
                spread: Some(Spread {
                    origin: start.clone(),
                    chunk_shape: r.chunk_shape.clone(),
                    grid: r.grid.clone(),
                }),
            }
        })
        .collect();
    let linear = first.linear_chunk_id(&coords);
    let id = match same_grid {
        true => linear,
        false => axes.iter().zip(&first.shape).fold(0u64, |acc, (p, &extent)| {
            acc.wrapping_mul(extent).wrapping_add(p.origin)
        }),
    };
    ChunkTask {
        id,
        file: 0,
        linear,
        coords,
        local,
        tile_extent,
        cells,
        parts,
    }
}

/// Whether every dataset has the first's chunk shape (then a task is a chunk).
fn same_grid(recs: &[&DatasetRecord]) -> bool {
    recs.iter().all(|r| r.chunk_shape == recs[0].chunk_shape)
}

/// The tasks of a table of the datasets `recs` (one or more, of one shape) under `sel`, in
/// row-major order: one per chunk when every dataset has the first's chunk shape (task id
/// = chunk id), else one per cell of the task grid (see the module) that the selection
/// touches (task id = row-major index of the cell's first position). Each task holds the
/// first dataset's chunk and, in `parts`, the others'.
pub fn aligned_tasks(recs: &[&DatasetRecord], sel: &[AxisSelection]) -> Vec<ChunkTask> {
    let Some(first) = recs.first() else {
        return vec![];
    };
    let n = first.ndim();
    let same = same_grid(recs);
    let axes: Vec<Vec<Piece>> = (0..n).map(|d| pieces(recs, &sel[d], d)).collect();
    if axes.iter().any(|a| a.is_empty()) {
        return vec![];
    }
    let extents: Vec<usize> = axes.iter().map(Vec::len).collect();
    let mut out = Vec::new();
    let mut idx = vec![0usize; n];
    loop {
        let cell: Vec<&Piece> = (0..n).map(|d| &axes[d][idx[d]]).collect();
        out.push(task_of(recs, same, &cell));
        if !odometer_next(&mut idx, &extents) {
            return out;
        }
    }
}

/// Tasks in the task grid of `recs` over every cell: chunks of the first when every
/// dataset has its chunk shape, else the product over axes of the stretches between cuts.
pub fn grid_count(recs: &[&DatasetRecord]) -> u64 {
    let Some(first) = recs.first() else {
        return 0;
    };
    if same_grid(recs) {
        return first.chunk_count;
    }
    (0..first.ndim())
        .map(|d| {
            let cut = cut_along(recs, d);
            let mut bounds: Vec<u64> = recs
                .iter()
                .zip(&cut)
                .filter(|(_, c)| **c)
                .flat_map(|(r, _)| (1..r.grid[d]).map(move |k| k * r.chunk_shape[d]))
                .collect();
            bounds.sort_unstable();
            bounds.dedup();
            bounds.len() as u64 + 1
        })
        .fold(1, u64::saturating_mul)
}

/// How many task ids the datasets `recs` use: ids of their tasks lie below it (chunk ids
/// when every dataset has the first's chunk shape, else cell indices).
pub fn id_space(recs: &[&DatasetRecord]) -> u64 {
    match recs.first() {
        None => 0,
        Some(first) if same_grid(recs) => first.chunk_count,
        Some(first) => first.cell_count,
    }
}

/// The piece of axis `d` whose stretch starts at `origin`, or why there is none under
/// `sel`.
fn piece_at(recs: &[&DatasetRecord], sel: &AxisSelection, d: usize, origin: u64) -> Result<Piece, String> {
    let cut = cut_along(recs, d);
    let (start, end) = stretch_at(recs, &cut, d, origin);
    if start != origin {
        return Err(format!("position {origin} of axis {d} does not start a task"));
    }
    let ranges: Vec<(u64, u64)> = sel.ranges_within(start, end).collect();
    if ranges.is_empty() {
        return Err(format!("positions {start}..{end} of axis {d} are not selected"));
    }
    Ok(piece(recs, d, origin, ranges))
}

/// The task with id `id` under `sel`, made alone.
fn task_by_id(recs: &[&DatasetRecord], sel: &[AxisSelection], same: bool, id: u64) -> Result<ChunkTask, String> {
    let first = recs[0];
    // Per axis, the first position of the task's cell.
    let origin: Vec<u64> = match same {
        true if id < first.chunk_count => first
            .chunk_coords(id)
            .iter()
            .zip(&first.chunk_shape)
            .map(|(c, s)| c * s)
            .collect(),
        false if id < first.cell_count => {
            let mut rest = id;
            let mut origin = vec![0; first.ndim()];
            for (o, &extent) in origin.iter_mut().zip(&first.shape).rev() {
                *o = rest % extent.max(1);
                rest /= extent.max(1);
            }
            origin
        }
        _ => return Err(format!("chunk {id} is not in the grid of the table's tasks")),
    };
    let axes = origin
        .iter()
        .enumerate()
        .map(|(d, &o)| piece_at(recs, &sel[d], d, o))
        .collect::<Result<Vec<Piece>, String>>()
        .map_err(|e| format!("chunk {id}: {e}"))?;
    let cell: Vec<&Piece> = axes.iter().collect();
    Ok(task_of(recs, same, &cell))
}

/// Tasks of [`aligned_tasks`] made from their ids (e.g. of a serialized plan), each alone,
/// with work proportional to the ids given, not to the selection: for each id, the task
/// made for it under `sel`, in the order given. An id the selection does not touch, or
/// one listed twice, is an error.
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
    if let Some(r) = recs.iter().find(|r| r.shape != first.shape) {
        return Err(format!("datasets of shapes {:?} and {:?}", first.shape, r.shape));
    }
    let same = same_grid(recs);
    let mut seen = HashSet::new();
    ids.iter()
        .map(|part| {
            part.iter()
                .map(|&id| match seen.insert(id) {
                    true => task_by_id(recs, sel, same, id),
                    false => Err(format!("chunk {id} is listed twice")),
                })
                .collect()
        })
        .collect()
}

/// The chunks of `rec` that intersect the selection, in row-major chunk order (the tasks
/// of a table of one dataset: [`aligned_tasks`] of `rec` alone).
pub fn chunk_tasks(rec: &DatasetRecord, sel: &[AxisSelection]) -> Vec<ChunkTask> {
    aligned_tasks(&[rec], sel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::DType;
    use crate::plan::tasks::tests::cells_of;

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
        let shapes = [
            vec![3u64, 4, 2],
            vec![4, 3, 2],
            vec![5, 7, 1],
            vec![3, 4, 2],
            vec![1, 7, 3],
        ];
        let recs: Vec<DatasetRecord> = shapes
            .iter()
            .map(|c| DatasetRecord::new("t", "a".into(), DType::F32, vec![10, 7, 3], c.clone()).unwrap())
            .collect();
        let sel = vec![
            AxisSelection::from_sorted_ranges(10, [(0, 2), (3, 9)]),
            AxisSelection::from_sorted_ranges(7, [(1, 7)]),
            AxisSelection::all(3),
        ];
        let takes = [&[0usize, 1, 2][..], &[0, 3], &[2, 0], &[1], &[4, 2], &[2, 4, 0]];
        for take in takes {
            let rs: Vec<&DatasetRecord> = take.iter().map(|&i| &recs[i]).collect();
            let tasks = aligned_tasks(&rs, &sel);
            let mut all: Vec<Vec<u64>> = Vec::new();
            let mut ids = HashSet::new();
            for t in &tasks {
                assert!(ids.insert(t.id), "{take:?}: id {} twice", t.id);
                let cells = global_cells(t, &rs[0].chunk_shape);
                assert_eq!(cells.len() as u64, t.cells);
                // Every dataset's part holds the same cells, in order: inside its tile, or,
                // spread over several of its chunks, in a tile of the task's own geometry.
                for (k, r) in rs.iter().enumerate() {
                    let p = t.part(k);
                    let mut chunks = Vec::new();
                    t.for_each_chunk(k, |linear, coords| {
                        assert_eq!(r.chunk_coords(linear), coords);
                        chunks.push(linear);
                    });
                    assert_eq!(t.tile_extent_of(k), p.tile_extent.as_slice());
                    for (d, ranges) in p.local.iter().enumerate() {
                        assert!(
                            ranges.iter().all(|&(a, b)| a < b && b <= p.tile_extent[d]),
                            "{take:?} {p:?}"
                        );
                    }
                    // The chunks named are those holding the cells.
                    let mut holding: Vec<u64> = cells
                        .iter()
                        .map(|c| {
                            let coords: Vec<u64> = c.iter().zip(&r.chunk_shape).map(|(x, s)| x / s).collect();
                            r.linear_chunk_id(&coords)
                        })
                        .collect();
                    holding.sort_unstable();
                    holding.dedup();
                    chunks.sort_unstable();
                    assert_eq!(chunks, holding, "{take:?} part {k}");
                    match t.spread_of(k) {
                        None => {
                            assert_eq!(chunks, vec![p.linear]);
                            assert_eq!(p.coords, r.chunk_coords(p.linear));
                            assert_eq!(p.tile_extent, r.tile_box(&p.coords).1);
                            assert_eq!(global_cells(&p, &r.chunk_shape), cells, "{take:?} part {k}");
                        }
                        Some(s) => {
                            assert!(chunks.len() > 1, "{take:?} part {k}");
                            assert_eq!(s.origin, t.tile_start(&rs[0].chunk_shape));
                            assert_eq!(global_cells(&p, &rs[0].chunk_shape), cells, "{take:?} part {k}");
                        }
                    }
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
            // Never more tasks than the first dataset's chunks times datasets^axes.
            let first_chunks: std::collections::HashSet<u64> = tasks.iter().map(|t| t.linear).collect();
            assert!(tasks.len() <= first_chunks.len() * rs.len().pow(3), "{take:?}");
            // Same grids: one task per chunk, ids the chunk ids, every part that chunk.
            if rs.iter().all(|r| r.chunk_shape == rs[0].chunk_shape) {
                assert_eq!(first_chunks.len(), tasks.len());
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
    fn crossed_grids_make_a_task_per_chunk_of_the_first() {
        // `a` by rows, `b` by columns: the full cut would be 2^20 single cells.
        let n = 1024u64;
        let a = DatasetRecord::new("t", "a".into(), DType::U8, vec![n, n], vec![1, n]).unwrap();
        let b = DatasetRecord::new("t", "b".into(), DType::U8, vec![n, n], vec![n, 1]).unwrap();
        let recs = [&a, &b];
        assert_eq!(grid_count(&recs), n);
        let sel = vec![
            AxisSelection::all(n),
            AxisSelection::from_sorted_ranges(n, [(3, 5), (9, 10)]),
        ];
        let tasks = aligned_tasks(&recs, &sel);
        assert_eq!(tasks.len() as u64, n);
        let t = &tasks[7];
        assert_eq!((t.linear, t.cells), (7, 3));
        let mut chunks = Vec::new();
        t.for_each_chunk(1, |linear, _| chunks.push(linear));
        assert_eq!(chunks, vec![3, 4, 9]);
        // One task made from its id alone, as the planned one.
        assert_eq!(tasks_by_id(&recs, &sel, &[vec![t.id]]).unwrap(), vec![vec![t.clone()]]);
        // An id inside a task's stretch, or outside the selection, names no task.
        assert!(tasks_by_id(&recs, &sel, &[vec![t.id + 1]]).is_err());
        let narrow = vec![AxisSelection::from_sorted_ranges(n, [(0, 5)]), AxisSelection::all(n)];
        assert!(tasks_by_id(&recs, &narrow, &[vec![t.id]]).is_err());
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
        // A chunk the selection misses, one outside the grid, a repeated chunk, a wrong rank.
        assert!(tasks_by_id(&[&rec], &sel, &[vec![6]]).is_err());
        assert!(tasks_by_id(&[&rec], &sel, &[vec![8]]).is_err());
        assert!(tasks_by_id(&[&rec], &sel, &[vec![ids[0][0]], vec![ids[0][0]]]).is_err());
        assert!(tasks_by_id(&[&rec], &sel[..1], &ids).is_err());
    }
}
