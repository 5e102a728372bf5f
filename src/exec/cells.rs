//! Cell-level kernels: walking a chunk's selected sub-box in row-major order, building the
//! value column from payload bytes (zero-copy when the whole tile is selected and aligned)
//! and the axis position columns arithmetically.

use crate::format::DType;
use crate::format::hyperslab::odometer_next;
use crate::plan::ChunkTask;
use arrow::array::{ArrayRef, PrimitiveArray};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, ScalarBuffer};
use arrow::datatypes::{
    ArrowPrimitiveType, Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use std::sync::Arc;

/// Call `f(offset, len)` (in elements of the tile) for each maximal contiguous run of the
/// selected cells of a tile of extent `tile`, with per-axis selected ranges `local`, in
/// row-major order of the selection.
pub fn for_each_selected_run(tile: &[u64], local: &[Vec<(u64, u64)>], mut f: impl FnMut(u64, u64)) {
    let n = tile.len();
    if n == 0 || local.iter().any(|r| r.is_empty()) {
        return;
    }
    let mut strides = vec![1u64; n];
    for d in (0..n - 1).rev() {
        strides[d] = strides[d + 1] * tile[d + 1];
    }
    let outer: Vec<Vec<u64>> = local[..n - 1]
        .iter()
        .map(|r| r.iter().flat_map(|&(a, b)| a..b).collect())
        .collect();
    let extents: Vec<usize> = outer.iter().map(Vec::len).collect();
    let mut idx = vec![0usize; n - 1];
    let mut pending: Option<(u64, u64)> = None;
    loop {
        let base: u64 = (0..n - 1).map(|d| outer[d][idx[d]] * strides[d]).sum();
        for &(a, b) in &local[n - 1] {
            let (start, len) = (base + a, b - a);
            pending = match pending {
                Some((s, l)) if s + l == start => Some((s, l + len)),
                Some(p) => {
                    f(p.0, p.1);
                    Some((start, len))
                }
                None => Some((start, len)),
            };
        }
        if !odometer_next(&mut idx, &extents) {
            if let Some(p) = pending {
                f(p.0, p.1);
            }
            return;
        }
    }
}

/// Global positions along axis `d` for each selected cell of `task`, row-major.
pub fn axis_positions(task: &ChunkTask, tile_start: &[u64], d: usize) -> Vec<u64> {
    let counts: Vec<u64> = task.local.iter().map(|r| r.iter().map(|(a, b)| b - a).sum()).collect();
    let inner: u64 = counts[d + 1..].iter().product();
    let outer: u64 = counts[..d].iter().product();
    let mut out = Vec::with_capacity(task.cells as usize);
    for _ in 0..outer {
        for &(a, b) in &task.local[d] {
            for p in a..b {
                let g = tile_start[d] + p;
                out.extend(std::iter::repeat_n(g, inner as usize));
            }
        }
    }
    out
}

/// The value column for the selected cells of a decoded tile (`tile` = the tile's raw
/// little-endian bytes). Cells equal to `fill` (LE bytes) are NULL.
pub fn value_array(dtype: DType, tile: Buffer, task: &ChunkTask, fill: Option<&[u8]>) -> ArrayRef {
    let size = dtype.size();
    let bytes = if task.is_full() {
        tile
    } else {
        let mut out = Vec::with_capacity(task.cells as usize * size);
        let src = tile.as_slice();
        for_each_selected_run(&task.tile_extent, &task.local, |off, len| {
            let (a, b) = (off as usize * size, (off + len) as usize * size);
            out.extend_from_slice(&src[a..b]);
        });
        Buffer::from_vec(out)
    };
    let nulls = fill.and_then(|f| {
        let valid = BooleanBuffer::collect_bool(bytes.len() / size, |i| &bytes[i * size..(i + 1) * size] != f);
        (valid.count_set_bits() < valid.len()).then(|| NullBuffer::new(valid))
    });
    match dtype {
        DType::F32 => primitive::<Float32Type>(bytes, nulls),
        DType::F64 => primitive::<Float64Type>(bytes, nulls),
        DType::F16 => primitive::<Float16Type>(bytes, nulls),
        DType::I16 => primitive::<Int16Type>(bytes, nulls),
        DType::I32 => primitive::<Int32Type>(bytes, nulls),
        DType::I64 => primitive::<Int64Type>(bytes, nulls),
        DType::U8 => primitive::<UInt8Type>(bytes, nulls),
        DType::U16 => primitive::<UInt16Type>(bytes, nulls),
        DType::U32 => primitive::<UInt32Type>(bytes, nulls),
        DType::U64 => primitive::<UInt64Type>(bytes, nulls),
    }
}

#[cfg(not(target_endian = "little"))]
compile_error!("datafusion-tet reinterprets little-endian payloads in place: little-endian targets only");

/// A primitive array over `bytes`, shared when aligned, copied otherwise.
fn primitive<T: ArrowPrimitiveType>(bytes: Buffer, nulls: Option<NullBuffer>) -> ArrayRef {
    let size = std::mem::size_of::<T::Native>();
    let len = bytes.len() / size;
    let values = if bytes.as_ptr().align_offset(std::mem::align_of::<T::Native>()) == 0 {
        ScalarBuffer::<T::Native>::new(bytes, 0, len)
    } else {
        let mut v: Vec<T::Native> = vec![T::Native::default(); len];
        // SAFETY: Arrow native types are plain old data with no invalid bit patterns; the
        // destination holds exactly `len * size` bytes.
        let dst = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, len * size) };
        dst.copy_from_slice(&bytes.as_slice()[..len * size]);
        ScalarBuffer::from(v)
    };
    Arc::new(PrimitiveArray::<T>::new(values, nulls))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Float32Array};

    fn task(tile: Vec<u64>, local: Vec<Vec<(u64, u64)>>) -> ChunkTask {
        let cells = local
            .iter()
            .map(|r| r.iter().map(|(a, b)| b - a).sum::<u64>())
            .product();
        ChunkTask {
            linear: 0,
            coords: vec![0; tile.len()],
            local,
            tile_extent: tile,
            cells,
        }
    }

    #[test]
    fn runs_and_positions_agree_with_brute_force() {
        let t = task(
            vec![3, 4, 5],
            vec![vec![(0, 1), (2, 3)], vec![(0, 4)], vec![(1, 2), (3, 5)]],
        );
        let mut offs = Vec::new();
        for_each_selected_run(&t.tile_extent, &t.local, |o, l| offs.extend(o..o + l));
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
        let p0 = axis_positions(&t, &start, 0);
        let p2 = axis_positions(&t, &start, 2);
        let w0: Vec<u64> = want.iter().map(|o| 10 + o / 20).collect();
        let w2: Vec<u64> = want.iter().map(|o| 30 + o % 5).collect();
        assert_eq!((p0, p2), (w0, w2));
        // A full-width inner selection coalesces into one run per outer position.
        let mut runs = 0;
        for_each_selected_run(&[2, 3], &[vec![(0, 2)], vec![(0, 3)]], |_, _| runs += 1);
        assert_eq!(runs, 1);
    }

    #[test]
    fn value_array_handles_fill_and_misalignment() {
        let vals: Vec<u8> = [1.0f32, -9.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&vals);
        let buf = Buffer::from_vec(shifted).slice(1);
        let t = task(vec![4], vec![vec![(0, 4)]]);
        let a = value_array(DType::F32, buf, &t, Some(&(-9.0f32).to_le_bytes()));
        let a = a.as_any().downcast_ref::<Float32Array>().unwrap();
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            vec![Some(1.0), None, Some(3.0), Some(4.0)]
        );
        let t = task(vec![4], vec![vec![(2, 4)]]);
        let a = value_array(DType::F32, Buffer::from_vec(vals), &t, None);
        assert_eq!(a.len(), 2);
    }
}
