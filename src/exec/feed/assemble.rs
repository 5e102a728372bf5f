//! Tiles assembled for tasks spread over several chunks of a dataset (see
//! [`crate::plan::Spread`]): that dataset's cells of the task, copied from each chunk's
//! decoded tile into one tile laid out as the task's own, so that every kernel reads the
//! task as one on a shared grid.

use crate::plan::{ChunkTask, TableModel};
use arrow::buffer::Buffer;
use datafusion::common::{Result, internal_err};

/// The tile of value column `k` of `table` for `task`, whose cells of it lie in several of
/// its chunks, from those chunks' decoded tiles (`tile_of(chunk id)`): of the task's own
/// tile's extent, the box from its first to its last selected position per axis copied,
/// row by row, from the chunks that hold it; the rest zero (never selected). The access
/// plan checked its size against `tet.max_tile_bytes`.
pub(crate) fn assemble<'a>(
    table: &TableModel,
    k: usize,
    task: &ChunkTask,
    tile_of: impl Fn(u64) -> Option<&'a Buffer>,
) -> Result<Buffer> {
    let (Some(v), Some(spread)) = (table.file_of(task).values.get(k), task.spread_of(k)) else {
        return internal_err!("value column {k} of task {} is not spread over chunks", task.id);
    };
    let rec = &v.dataset().record;
    let size = v.dataset().dtype().size();
    let extent = &task.tile_extent;
    let n = extent.len();
    if n == 0 {
        return internal_err!("task {} of no axes is spread over chunks", task.id);
    }
    let cells = extent
        .iter()
        .try_fold(1usize, |a, &e| a.checked_mul(usize::try_from(e).ok()?));
    let Some(bytes) = cells.and_then(|c| c.checked_mul(size)) else {
        return internal_err!("the tile assembled for task {} does not fit in memory", task.id);
    };
    let mut out = vec![0u8; bytes];
    // Per axis, the selected box of the task, global.
    let mut boxed = Vec::with_capacity(n);
    for (d, r) in task.local.iter().enumerate() {
        let (Some(first), Some(last)) = (r.first(), r.last()) else {
            return Ok(Buffer::from_vec(out));
        };
        boxed.push((spread.origin[d] + first.0, spread.origin[d] + last.1));
    }
    let strides = row_major_strides(extent);
    let mut failed = None;
    let (mut lo, mut hi, mut pos, mut chunk_strides) = (vec![0; n], vec![0; n], vec![0; n], vec![0; n]);
    task.for_each_chunk(k, |linear, coords| {
        if failed.is_some() {
            return;
        }
        let Some(tile) = tile_of(linear) else {
            failed = Some(format!("chunk {linear} of {} was not read", v.describe()));
            return;
        };
        // The chunk's box, clipped to the selected box, and its tile's extent.
        let mut empty = false;
        let per_axis = lo.iter_mut().zip(hi.iter_mut()).zip(chunk_strides.iter_mut());
        for (d, ((l, h), e)) in per_axis.enumerate() {
            let s = rec.chunk_shape[d];
            let start = coords[d] * s;
            *e = s.min(rec.shape[d] - start);
            (*l, *h) = (boxed[d].0.max(start), boxed[d].1.min(start + *e));
            empty |= *l >= *h;
        }
        if empty {
            return;
        }
        // Row-major strides of the chunk's tile.
        let mut acc = 1u64;
        for e in chunk_strides.iter_mut().rev() {
            (*e, acc) = (acc, acc * *e);
        }
        let row = (hi[n - 1] - lo[n - 1]) as usize * size;
        let src = tile.as_slice();
        pos.copy_from_slice(&lo);
        loop {
            let (mut from, mut to) = (0u64, 0u64);
            for (d, &p) in pos.iter().enumerate() {
                from += (p - coords[d] * rec.chunk_shape[d]) * chunk_strides[d];
                to += (p - spread.origin[d]) * strides[d];
            }
            let (from, to) = (from as usize * size, to as usize * size);
            match (src.get(from..from + row), out.get_mut(to..to + row)) {
                (Some(s), Some(o)) => o.copy_from_slice(s),
                _ => {
                    failed = Some(format!(
                        "chunk {linear} of {}: a tile of {} bytes, short of its cells",
                        v.describe(),
                        src.len()
                    ));
                    return;
                }
            }
            // The next row: axes before the last, last fastest.
            let mut d = n - 1;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                pos[d] += 1;
                if pos[d] < hi[d] {
                    break;
                }
                pos[d] = lo[d];
            }
        }
    });
    match failed {
        Some(e) => internal_err!("{}: {e}", v.source.location),
        None => Ok(Buffer::from_vec(out)),
    }
}

/// Row-major strides (in elements) of a tile of `extent`.
fn row_major_strides(extent: &[u64]) -> Vec<u64> {
    let mut strides = vec![1u64; extent.len()];
    for d in (0..extent.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * extent[d + 1];
    }
    strides
}
