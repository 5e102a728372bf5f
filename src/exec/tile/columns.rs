//! Cells of one chunk task as Arrow columns: the value column from a decoded tile
//! (zero-copy when the whole tile is selected and aligned) and axis positions, both by
//! walking the task's runs.

use crate::exec::kernel::{Elem, Missing};
use crate::format::{DType, MissingValues, Packing, elements, with_dtype};
use crate::plan::{ChunkTask, ValueColumn, array_from_le};
use arrow::array::{ArrayRef, Float64Array};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer};
use std::sync::Arc;

/// Global positions along axis `d` of the first `limit` selected cells of `task`, in
/// row-major order; `tile_start` is the tile's global start.
pub fn axis_positions(task: &ChunkTask, tile_start: &[u64], d: usize, limit: usize) -> Vec<u64> {
    let last = task.tile_extent.len() - 1;
    let mut out = Vec::with_capacity(limit.min(task.cells as usize));
    let mut runs = task.runs();
    while out.len() < limit
        && let Some(r) = runs.next()
    {
        let take = (r.len as usize).min(limit - out.len());
        if d == last {
            out.extend((0..take as u64).map(|i| tile_start[d] + r.first + i));
        } else {
            out.extend(std::iter::repeat_n(tile_start[d] + runs.outer()[d], take));
        }
    }
    out
}

/// The cells of `value` that `task` (a task of its dataset: see [`ChunkTask::part`])
/// selects of a decoded tile (`tile` = the tile's raw little-endian bytes).
pub fn value_array(value: &ValueColumn, tile: Buffer, task: &ChunkTask) -> ArrayRef {
    value_cells(value.dataset().dtype(), tile, task, &value.missing, value.packing)
}

/// The bytes of the cells `task` selects of a decoded tile (`size` bytes per element), in
/// the task's order: the tile itself when the whole of it is selected, a slice of it when
/// the cells are one contiguous stretch, else a copy.
pub fn selected_bytes(size: usize, tile: Buffer, task: &ChunkTask) -> Buffer {
    let mut runs = task.runs().merged();
    if task.is_full() {
        tile
    } else if let (Some((off, len)), None) = (runs.next(), runs.next()) {
        // One contiguous stretch of the tile: shared, not copied.
        tile.slice_with_length(off as usize * size, len as usize * size)
    } else {
        let mut out = Vec::with_capacity(task.cells as usize * size);
        let src = tile.as_slice();
        for (off, len) in task.runs().merged() {
            let (a, b) = (off as usize * size, (off + len) as usize * size);
            out.extend_from_slice(&src[a..b]);
        }
        Buffer::from_vec(out)
    }
}

/// The value column for the selected cells of a decoded tile (`tile` = the tile's raw
/// little-endian bytes of `dtype`): cells `missing` marks are NULL, and a packed dataset's
/// values are unpacked to Float64. Cells that are one contiguous stretch of the tile
/// share its buffer.
fn value_cells(
    dtype: DType,
    tile: Buffer,
    task: &ChunkTask,
    missing: &MissingValues,
    packing: Option<Packing>,
) -> ArrayRef {
    let bytes = selected_bytes(dtype.size(), tile, task);
    with_dtype!(dtype, T => {
        let (nulls, unpacked) = {
            let elems = elements::<T>(bytes.as_slice());
            let rule = Missing::<T>::of(missing);
            let nulls = (!rule.is_empty())
                .then(|| BooleanBuffer::collect_bool(elems.len(), |i| !rule.test(elems[i])))
                .filter(|valid| valid.count_set_bits() < valid.len())
                .map(NullBuffer::new);
            let unpacked = packing.map(|p| elems.iter().map(|x| p.apply(x.f())).collect::<Vec<f64>>());
            (nulls, unpacked)
        };
        match unpacked {
            Some(v) => Arc::new(Float64Array::new(v.into(), nulls)) as ArrayRef,
            None => array_from_le(dtype, bytes, nulls),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Float32Array, Float64Array};

    fn task(tile: Vec<u64>, local: Vec<Vec<(u64, u64)>>) -> ChunkTask {
        let cells = local
            .iter()
            .map(|r| r.iter().map(|(a, b)| b - a).sum::<u64>())
            .product();
        ChunkTask {
            id: 0,
            file: 0,
            linear: 0,
            coords: vec![0; tile.len()],
            local,
            tile_extent: tile,
            cells,
            parts: vec![],
        }
    }

    #[test]
    fn runs_and_positions_agree_with_brute_force() {
        let t = task(
            vec![3, 4, 5],
            vec![vec![(0, 1), (2, 3)], vec![(0, 4)], vec![(1, 2), (3, 5)]],
        );
        let offs: Vec<u64> = t.runs().merged().flat_map(|(o, l)| o..o + l).collect();
        let mut want = Vec::new();
        for i in [0u64, 2] {
            for j in 0..4u64 {
                for k in [1u64, 3, 4] {
                    want.push(i * 20 + j * 5 + k);
                }
            }
        }
        assert_eq!(offs, want);
        let start = [10, 20, 30];
        let p0 = axis_positions(&t, &start, 0, usize::MAX);
        let p2 = axis_positions(&t, &start, 2, usize::MAX);
        let w0: Vec<u64> = want.iter().map(|o| 10 + o / 20).collect();
        let w2: Vec<u64> = want.iter().map(|o| 30 + o % 5).collect();
        assert_eq!((p0, &p2), (w0, &w2));
        // A full-width inner selection coalesces into one run per outer position.
        let runs = task(vec![2, 3], vec![vec![(0, 2)], vec![(0, 3)]])
            .runs()
            .merged()
            .count();
        assert_eq!(runs, 1);
        // A limit stops the positions early.
        assert_eq!(axis_positions(&t, &start, 2, 4), w2[..4].to_vec());
    }

    #[test]
    fn value_array_handles_fill_and_misalignment() {
        let vals: Vec<u8> = [1.0f32, -9.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&vals);
        let buf = Buffer::from_vec(shifted).slice(1);
        let t = task(vec![4], vec![vec![(0, 4)]]);
        let fill = MissingValues {
            values: vec![(-9.0f32).to_le_bytes().to_vec()],
            nan: false,
        };
        let a = value_cells(DType::F32, buf, &t, &fill, None);
        let a = a.as_any().downcast_ref::<Float32Array>().unwrap();
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            vec![Some(1.0), None, Some(3.0), Some(4.0)]
        );
        let t = task(vec![4], vec![vec![(2, 4)]]);
        let a = value_cells(DType::F32, Buffer::from_vec(vals), &t, &MissingValues::default(), None);
        assert_eq!(a.len(), 2);
        // Packed i16: nulls on the raw value, then raw × scale + offset.
        let raw: Vec<u8> = [10i16, -1, 4].iter().flat_map(|v| v.to_le_bytes()).collect();
        let fill = MissingValues {
            values: vec![(-1i16).to_le_bytes().to_vec()],
            nan: false,
        };
        let packing = Packing {
            scale: 0.5,
            offset: 100.0,
        };
        let t = task(vec![3], vec![vec![(0, 3)]]);
        let a = value_cells(DType::I16, Buffer::from_vec(raw), &t, &fill, Some(packing));
        let a = a.as_any().downcast_ref::<Float64Array>().unwrap();
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![Some(105.0), None, Some(102.0)]);
    }
}
