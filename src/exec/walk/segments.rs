//! The one walk of a chunk task's cells: as segments that each fold into one group or one
//! group per position ([`walk_segments`]), or in blocks of whole rows ([`walk_rows`]).

use super::group_index::GroupIndex;
use crate::exec::kernel::Rows;
use crate::format::hyperslab::Runs;
use crate::plan::ChunkTask;

/// Segments of equal ids at least this long fold as one run (vectorized).
const MIN_RUN: usize = 16;

/// Where a segment's cells go.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// Every cell into group `g`.
    One(usize),
    /// Cell `i` into group `base + ids[i] · stride`; with `consecutive`, `ids[i]` is
    /// `ids[0] + i`.
    Each {
        base: usize,
        stride: usize,
        ids: &'a [u32],
        consecutive: bool,
    },
}

impl Target<'_> {
    /// The group of the segment's cell `i`.
    #[inline(always)]
    pub fn group(&self, i: usize) -> usize {
        match *self {
            Target::One(g) => g,
            Target::Each { base, stride, ids, .. } => base + ids[i] as usize * stride,
        }
    }
}

/// A stretch of selected cells: contiguous in the tile (from `tile_offset`) and in the
/// order the scan produces cells (from `cell_offset`).
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    pub tile_offset: usize,
    pub cell_offset: usize,
    pub len: usize,
    pub target: Target<'a>,
    /// With a split axis: the global position on it of the segment's first cell (the
    /// following cells are the next positions when it is the innermost axis, else the
    /// same one); 0 without.
    pub pos: u64,
}

/// What [`walk_rows`] visits: a segment, or a block of whole rows.
#[derive(Debug, Clone, Copy)]
pub enum Walked<'a> {
    Segment(Segment<'a>),
    Rows(Rows<'a>),
}

/// A tile extent and its selected ranges per axis.
type FoldedAxes = (Vec<u64>, Vec<Vec<(u64, u64)>>);

/// The tile extent and selected ranges of `task` with its innermost axes folded into one
/// from the outermost axis `c` such that every axis inside `c` is whole and no axis from
/// `c` on is grouped or the `split` axis: the same cells in the same order, as fewer,
/// longer runs. `None` when no axis folds.
fn folded_inner_axes(gi: &GroupIndex, task: &ChunkTask, split: Option<usize>) -> Option<FoldedAxes> {
    let (extent, local) = (&task.tile_extent, &task.local);
    let last = extent.len() - 1;
    let free = |d: usize| gi.ids[d].is_none() && split != Some(d);
    let whole = |d: usize| local[d].as_slice() == [(0, extent[d])];
    let mut c = last;
    while c > 0 && free(c) && whole(c) && free(c - 1) {
        c -= 1;
    }
    if c == last {
        return None;
    }
    // Cells of one position of axis `c`: the product of the whole axes inside it (at
    // most the tile's cell count, which the plan's limits bound).
    let inner: u64 = extent[c + 1..].iter().product();
    let mut folded_extent = extent[..c].to_vec();
    folded_extent.push(extent[c] * inner);
    let mut folded = local[..c].to_vec();
    folded.push(local[c].iter().map(|&(a, b)| (a * inner, b * inner)).collect());
    Some((folded_extent, folded))
}

/// [`walk_segments`] without a split axis, except where the innermost axis is whole in
/// the tile and not grouped while the axis outside it is grouped (`GROUP BY lat` over
/// `(time, lat, lon)`): there each stretch of selected positions of that axis comes as
/// one block of [`Rows`], one group per row, instead of a segment per row (a walk step
/// and a kernel call per 720 values cost `GROUP BY lat` 6% over the full mean).
pub fn walk_rows<'a>(gi: &'a GroupIndex, task: &ChunkTask, start: &[u64], mut f: impl FnMut(Walked<'a>)) {
    let (extent, local) = (&task.tile_extent, &task.local);
    let last = extent.len().saturating_sub(1);
    let rows_of = match (last, &gi.ids[..]) {
        (1.., ids) if ids[last].is_none() && extent[last] > 0 && local[last].as_slice() == [(0, extent[last])] => {
            ids[last - 1].as_ref()
        }
        _ => None,
    };
    let Some(ids) = rows_of else {
        return walk_segments(gi, task, start, None, |s| f(Walked::Segment(s)));
    };
    // Rows are the cells of the outer axes: walk those, a run of them is a block.
    let (row_len, d) = (extent[last] as usize, last - 1);
    let mut runs = Runs::new(&extent[..last], &local[..last]);
    while let Some(r) = runs.next() {
        let base: usize = (0..d).map(|e| gi.offset(e, start[e] + runs.outer()[e])).sum();
        let p0 = (start[d] + r.first - gi.first[d]) as usize;
        f(Walked::Rows(Rows {
            tile_offset: r.offset as usize * row_len,
            row_len,
            base,
            stride: gi.stride[d],
            ids: &ids[p0..p0 + r.len as usize],
        }));
    }
}

/// Walk the selected cells of `task` (tile starting at `start`) as segments: runs of one
/// group joined while contiguous; a grouped innermost axis split into stretches of equal
/// ids (long ones fold as runs) and element-wise stretches. With `split`, runs are joined
/// only at one position of that axis and segments carry it (weights per position).
pub fn walk_segments<'a>(
    gi: &'a GroupIndex,
    task: &ChunkTask,
    start: &[u64],
    split: Option<usize>,
    mut f: impl FnMut(Segment<'a>),
) {
    let last = task.tile_extent.len() - 1;
    let mut cell = 0usize;
    // The split axis's position of the run's element `i`.
    let position = |outer: &[u64], first: u64, i: usize| match split {
        Some(d) if d == last => start[d] + first + i as u64,
        Some(d) => start[d] + outer[d],
        None => 0,
    };
    if let Some(ids) = &gi.ids[last] {
        let mut runs = task.runs();
        let (stride, consecutive) = (gi.stride[last], gi.consecutive[last]);
        while let Some(r) = runs.next() {
            let base: usize = (0..last).map(|d| gi.offset(d, start[d] + runs.outer()[d])).sum();
            let at = |i: usize| position(runs.outer(), r.first, i);
            let p0 = (start[last] + r.first - gi.first[last]) as usize;
            let ids = &ids[p0..p0 + r.len as usize];
            let (off, len) = (r.offset as usize, r.len as usize);
            // Stretches of equal ids: long ones as runs, the rest element-wise (consecutive
            // ids have none: the whole run is one element-wise stretch).
            let mut i = if consecutive { len } else { 0 };
            let mut each_from = 0;
            while i < len {
                let mut j = i + 1;
                while j < len && ids[j] == ids[i] {
                    j += 1;
                }
                if j - i >= MIN_RUN {
                    if each_from < i {
                        f(Segment {
                            tile_offset: off + each_from,
                            cell_offset: cell + each_from,
                            len: i - each_from,
                            target: Target::Each {
                                base,
                                stride,
                                ids: &ids[each_from..i],
                                consecutive,
                            },
                            pos: at(each_from),
                        });
                    }
                    f(Segment {
                        tile_offset: off + i,
                        cell_offset: cell + i,
                        len: j - i,
                        target: Target::One(base + ids[i] as usize * stride),
                        pos: at(i),
                    });
                    each_from = j;
                }
                i = j;
            }
            if each_from < len {
                f(Segment {
                    tile_offset: off + each_from,
                    cell_offset: cell + each_from,
                    len: len - each_from,
                    target: Target::Each {
                        base,
                        stride,
                        ids: &ids[each_from..],
                        consecutive,
                    },
                    pos: at(each_from),
                });
            }
            cell += len;
        }
        return;
    }
    // The innermost axis is not grouped: where the axes inside one are whole and it is
    // neither grouped nor split, its runs lie end to end in one group, so the walk takes
    // them as one run of the axes folded together (one run per tile for a full
    // reduction, instead of one per row).
    let folded = folded_inner_axes(gi, task, split);
    let (mut runs, last) = match &folded {
        Some((extent, ranges)) => (Runs::new(extent, ranges), extent.len() - 1),
        None => (task.runs(), last),
    };
    let mut pending: Option<Segment> = None;
    while let Some(r) = runs.next() {
        let g: usize = (0..last).map(|d| gi.offset(d, start[d] + runs.outer()[d])).sum();
        let (off, len) = (r.offset as usize, r.len as usize);
        let pos = position(runs.outer(), r.first, 0);
        let joins = |p: &Segment| match split {
            None => true,
            Some(d) => d != last && p.pos == pos,
        };
        pending = match pending {
            Some(mut p)
                if matches!(p.target, Target::One(pg) if pg == g) && p.tile_offset + p.len == off && joins(&p) =>
            {
                p.len += len;
                Some(p)
            }
            other => {
                if let Some(p) = other {
                    f(p);
                }
                Some(Segment {
                    tile_offset: off,
                    cell_offset: cell,
                    len,
                    target: Target::One(g),
                    pos,
                })
            }
        };
        cell += len;
    }
    if let Some(p) = pending {
        f(p);
    }
}
