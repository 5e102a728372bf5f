//! Convenience reads of whole chunks and dense boxes (used by tools, tests and the fuzzer;
//! query execution walks chunks itself).

use super::bytes::{ReadAt, read_region};
use super::codec;
use super::error::{FormatError, Result};
use super::file::{Dataset, TetFile};
use super::hyperslab::{Runs, box_ranges, odometer_next};

impl TetFile {
    /// Decode chunk `linear` (row-major chunk order) of `ds` into a fresh buffer, refusing
    /// a tile of more than `max_bytes`.
    pub fn read_chunk<R: ReadAt + ?Sized>(
        &self,
        src: &R,
        ds: &Dataset,
        linear: u64,
        max_bytes: u64,
    ) -> Result<Vec<u8>> {
        let (row, e) = self.chunk(ds, linear);
        // Raw chunks too: their stored bytes are read into a buffer here.
        codec::decoded_len(row, e, max_bytes)?;
        let stored = read_region(src, "chunk payload", e.payload_offset, e.stored_byte_len)?;
        Ok(codec::decode(row, e, &stored, max_bytes)?.into_owned())
    }

    /// Read the box `start .. start + extent` of `ds` as a dense row-major buffer.
    /// Refuses boxes larger than `max_bytes`, and boxes that touch a tile larger than
    /// `max_bytes`.
    pub fn read_box<R: ReadAt + ?Sized>(
        &self,
        src: &R,
        ds: &Dataset,
        start: &[u64],
        extent: &[u64],
        max_bytes: u64,
    ) -> Result<Vec<u8>> {
        let rec = &ds.record;
        let n = rec.ndim();
        if start.len() != n || extent.len() != n {
            return Err(FormatError::invalid("read", "box", format!("rank differs from {n}")));
        }
        for d in 0..n {
            if start[d].checked_add(extent[d]).is_none_or(|e| e > rec.shape[d]) {
                return Err(FormatError::invalid(
                    "read",
                    "box",
                    format!("axis {d} exceeds extent {}", rec.shape[d]),
                ));
            }
        }
        let size = rec.dtype.size() as u64;
        let bytes = extent
            .iter()
            .try_fold(size, |a, &e| a.checked_mul(e))
            .filter(|&b| b <= max_bytes)
            .ok_or_else(|| FormatError::invalid("read", "box", format!("exceeds the {max_bytes}-byte limit")))?;
        // Allocated fallibly: a few bytes of zstd can claim the whole `max_bytes`.
        let mut out = Vec::new();
        out.try_reserve_exact(bytes as usize)
            .map_err(|e| FormatError::invalid("read", "box", format!("{bytes} bytes cannot be allocated: {e}")))?;
        out.resize(bytes as usize, 0u8);
        if bytes == 0 {
            return Ok(out);
        }
        // Chunk range per axis that intersects the box.
        let lo: Vec<u64> = (0..n).map(|d| start[d] / rec.chunk_shape[d]).collect();
        let hi: Vec<u64> = (0..n)
            .map(|d| (start[d] + extent[d] - 1) / rec.chunk_shape[d])
            .collect();
        let counts: Vec<usize> = (0..n).map(|d| (hi[d] - lo[d] + 1) as usize).collect();
        let mut ci = vec![0usize; n];
        loop {
            let c: Vec<u64> = (0..n).map(|d| lo[d] + ci[d] as u64).collect();
            let linear = rec.linear_chunk_id(&c);
            let tile = self.read_chunk(src, ds, linear, max_bytes)?;
            let (tstart, textent) = rec.tile_box(&c);
            // Intersection of the tile with the box, in global coordinates.
            let istart: Vec<u64> = (0..n).map(|d| tstart[d].max(start[d])).collect();
            let iext: Vec<u64> = (0..n)
                .map(|d| (tstart[d] + textent[d]).min(start[d] + extent[d]) - istart[d])
                .collect();
            let in_tile: Vec<u64> = (0..n).map(|d| istart[d] - tstart[d]).collect();
            let in_box: Vec<u64> = (0..n).map(|d| istart[d] - start[d]).collect();
            // The same sub-box walked in the tile and in the output: runs pair up.
            let (src_ranges, dst_ranges) = (box_ranges(&in_tile, &iext), box_ranges(&in_box, &iext));
            for (s, d) in Runs::new(&textent, &src_ranges).zip(Runs::new(extent, &dst_ranges)) {
                let (s, d, l) = (
                    (s.offset * size) as usize,
                    (d.offset * size) as usize,
                    (s.len * size) as usize,
                );
                out[d..d + l].copy_from_slice(&tile[s..s + l]);
            }
            if !odometer_next(&mut ci, &counts) {
                return Ok(out);
            }
        }
    }

    /// Read all of `ds` (refusing more than `max_bytes`).
    pub fn read_all<R: ReadAt + ?Sized>(&self, src: &R, ds: &Dataset, max_bytes: u64) -> Result<Vec<u8>> {
        let zeros = vec![0u64; ds.ndim()];
        self.read_box(src, ds, &zeros, &ds.record.shape, max_bytes)
    }
}
