//! Chunk tasks: which chunks a selection touches, and the sub-box to emit from each.

use super::selection::AxisSelection;
use crate::format::DatasetRecord;
use crate::format::hyperslab::{Runs, odometer_next};

/// One chunk to read and the part of it that is selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkTask {
    /// Row-major chunk id.
    pub linear: u64,
    /// Chunk grid coordinates.
    pub coords: Vec<u64>,
    /// Per axis, the selected ranges in tile-local positions.
    pub local: Vec<Vec<(u64, u64)>>,
    /// Per axis, the tile's (clipped) extent.
    pub tile_extent: Vec<u64>,
    /// Number of selected cells.
    pub cells: u64,
}

impl ChunkTask {
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
    /// its cells in its order; a task that fits is returned whole.
    pub fn slabs(&self, max_cells: u64) -> Vec<ChunkTask> {
        if self.cells <= max_cells || self.local.is_empty() {
            return vec![self.clone()];
        }
        let count = |r: &[(u64, u64)]| r.iter().map(|(a, b)| b - a).sum::<u64>();
        // The axis `d` to cut: the outermost whose inner axes together fit.
        let mut d = self.local.len() - 1;
        let mut per = 1u64;
        while d > 0 {
            match per.checked_mul(count(&self.local[d])) {
                Some(p) if p <= max_cells => {
                    per = p;
                    d -= 1;
                }
                _ => break,
            }
        }
        let take = (max_cells / per).max(1);
        // Axis `d`'s selected ranges cut into pieces of `take` positions.
        let mut pieces: Vec<Vec<(u64, u64)>> = vec![Vec::new()];
        let mut room = take;
        for &(a, b) in &self.local[d] {
            let mut p = a;
            while p < b {
                if room == 0 {
                    pieces.push(Vec::new());
                    room = take;
                }
                let end = b.min(p + room);
                pieces.last_mut().expect("one piece at least").push((p, end));
                room -= end - p;
                p = end;
            }
        }
        // Every combination of single positions on the outer axes, times every piece.
        let outer: Vec<Vec<(u64, u64)>> = self.local[..d]
            .iter()
            .map(|r| r.iter().flat_map(|&(a, b)| (a..b).map(|p| (p, p + 1))).collect())
            .collect();
        let mut out = Vec::new();
        let mut at = vec![0usize; d];
        if outer.iter().any(|o| o.is_empty()) {
            return vec![self.clone()];
        }
        loop {
            for piece in &pieces {
                let mut local: Vec<Vec<(u64, u64)>> = (0..d).map(|e| vec![outer[e][at[e]]]).collect();
                local.push(piece.clone());
                local.extend(self.local[d + 1..].iter().cloned());
                out.push(ChunkTask {
                    linear: self.linear,
                    coords: self.coords.clone(),
                    cells: count(piece) * per,
                    local,
                    tile_extent: self.tile_extent.clone(),
                });
            }
            // Next outer combination, last axis fastest.
            let mut e = d;
            loop {
                if e == 0 {
                    return out;
                }
                e -= 1;
                at[e] += 1;
                if at[e] < outer[e].len() {
                    break;
                }
                at[e] = 0;
            }
        }
    }

    /// Global start of the tile per axis.
    pub fn tile_start(&self, chunk_shape: &[u64]) -> Vec<u64> {
        self.coords.iter().zip(chunk_shape).map(|(c, s)| c * s).collect()
    }
}

/// Per axis: the chunk indices along it that hold a selected position, each with the
/// selected ranges local to that chunk.
fn per_axis(sel: &AxisSelection, chunk: u64, extent: u64) -> Vec<(u64, Vec<(u64, u64)>)> {
    let mut out: Vec<(u64, Vec<(u64, u64)>)> = Vec::new();
    for &(lo, hi) in sel.ranges() {
        let mut p = lo;
        while p < hi {
            let k = p / chunk;
            let end = ((k + 1) * chunk).min(hi).min(extent);
            let local = (p - k * chunk, end - k * chunk);
            match out.last_mut() {
                Some((last, ranges)) if *last == k => ranges.push(local),
                _ => out.push((k, vec![local])),
            }
            p = end;
        }
    }
    out
}

/// The chunks of `rec` that intersect the selection, in row-major chunk order.
pub fn chunk_tasks(rec: &DatasetRecord, sel: &[AxisSelection]) -> Vec<ChunkTask> {
    let n = rec.ndim();
    let axes: Vec<_> = (0..n)
        .map(|d| per_axis(&sel[d], rec.chunk_shape[d], rec.shape[d]))
        .collect();
    if axes.iter().any(|a| a.is_empty()) {
        return vec![];
    }
    let extents: Vec<usize> = axes.iter().map(Vec::len).collect();
    let mut out = Vec::new();
    let mut idx = vec![0usize; n];
    loop {
        let coords: Vec<u64> = (0..n).map(|d| axes[d][idx[d]].0).collect();
        let local: Vec<Vec<(u64, u64)>> = (0..n).map(|d| axes[d][idx[d]].1.clone()).collect();
        let cells = local
            .iter()
            .map(|r| r.iter().map(|(a, b)| b - a).sum::<u64>())
            .product();
        let tile_extent = rec.tile_box(&coords).1;
        out.push(ChunkTask {
            linear: rec.linear_chunk_id(&coords),
            coords,
            local,
            tile_extent,
            cells,
        });
        if !odometer_next(&mut idx, &extents) {
            return out;
        }
    }
}

/// Partitions of chunk tasks rebuilt from chunk ids (e.g. of a serialized plan): for each
/// id, the task [`chunk_tasks`] makes for it under `sel`, in the order given. An id the
/// selection does not touch, or one listed twice, is an error.
pub fn tasks_by_id(
    rec: &DatasetRecord,
    sel: &[AxisSelection],
    ids: &[Vec<u64>],
) -> Result<Vec<Vec<ChunkTask>>, String> {
    if sel.len() != rec.ndim() {
        return Err(format!("{} axis selections for {} axes", sel.len(), rec.ndim()));
    }
    let mut by_id: std::collections::HashMap<u64, ChunkTask> =
        chunk_tasks(rec, sel).into_iter().map(|t| (t.linear, t)).collect();
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
    fn slabs_hold_the_task_cells_in_order_and_fit() {
        let rec = DatasetRecord::new("t", "a".into(), DType::F32, vec![4, 9, 10], vec![4, 9, 10]).unwrap();
        let sel = vec![
            AxisSelection::from_sorted_ranges(4, [(0, 1), (2, 4)]),
            AxisSelection::from_sorted_ranges(9, [(0, 3), (4, 9)]),
            AxisSelection::from_sorted_ranges(10, [(1, 8)]),
        ];
        let task = chunk_tasks(&rec, &sel).remove(0);
        for max in [1, 6, 7, 20, 40, 60, 100, 1000] {
            let slabs = task.slabs(max);
            let joined: Vec<Vec<u64>> = slabs.iter().flat_map(cells_of).collect();
            assert_eq!(joined, cells_of(&task), "max {max}");
            for s in &slabs {
                assert_eq!(s.cells as usize, cells_of(s).len());
                assert!(s.cells <= max, "max {max}: {} cells", s.cells);
            }
            if max >= task.cells {
                assert_eq!(slabs, vec![task.clone()]);
            }
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
        assert_eq!(tasks_by_id(&rec, &sel, &ids).unwrap(), planned);
        // A chunk the selection misses, a repeated chunk, a wrong rank.
        assert!(tasks_by_id(&rec, &sel, &[vec![6]]).is_err());
        assert!(tasks_by_id(&rec, &sel, &[vec![ids[0][0]], vec![ids[0][0]]]).is_err());
        assert!(tasks_by_id(&rec, &sel[..1], &ids).is_err());
    }
}
