//! The dataset directory: `dataset_blob_len` then `dataset_count` variable-length records.

use super::bytes::{Le, align8};
use super::dtype::DType;
use super::error::{FormatError, Result};

/// Maximum rank a dataset may have.
pub const MAX_NDIM: usize = 8;
/// Fixed part of a record (name_len, dtype, ndim, reserved).
const RECORD_HEAD: usize = 16;
/// Smallest possible record: head, empty name, rank 1 shape and chunk_shape.
const MIN_RECORD: u64 = RECORD_HEAD as u64 + 16;

/// One dataset record as stored on disk, with its derived chunk-grid geometry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetRecord {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
    /// Chunks per axis: `ceil(shape[d] / chunk_shape[d])`.
    pub grid: Vec<u64>,
    /// Product of `grid` (fits in u64, checked).
    pub chunk_count: u64,
    /// Product of `shape` (fits in u64, checked).
    pub cell_count: u64,
}

impl DatasetRecord {
    /// Build a record, checking every geometric invariant the reader relies on.
    pub fn new(
        region: &str,
        name: String,
        dtype: DType,
        shape: Vec<u64>,
        chunk_shape: Vec<u64>,
    ) -> Result<DatasetRecord> {
        let ndim = shape.len();
        if ndim == 0 || ndim > MAX_NDIM {
            return Err(FormatError::invalid(
                region,
                "ndim",
                format!("is {ndim} (allowed 1..=8)"),
            ));
        }
        if chunk_shape.len() != ndim {
            return Err(FormatError::invalid(
                region,
                "chunk_shape",
                format!("has {} entries for ndim {ndim}", chunk_shape.len()),
            ));
        }
        let mut grid = Vec::with_capacity(ndim);
        for (d, (&s, &c)) in shape.iter().zip(&chunk_shape).enumerate() {
            if c == 0 {
                return Err(FormatError::invalid(
                    region,
                    "chunk_shape",
                    format!("[{d}] is 0 (every chunk extent must be at least 1)"),
                ));
            }
            grid.push(s.div_ceil(c));
        }
        let product = |v: &[u64], what: &str| -> Result<u64> {
            v.iter()
                .try_fold(1u64, |acc, &x| acc.checked_mul(x))
                .ok_or_else(|| FormatError::overflow(region, format!("product of {what} {v:?}")))
        };
        let cell_count = product(&shape, "shape")?;
        let chunk_count = product(&grid, "chunk grid")?;
        // The largest tile must be addressable in bytes.
        let tile = product(&chunk_shape, "chunk_shape")?;
        tile.checked_mul(dtype.size() as u64)
            .ok_or_else(|| FormatError::overflow(region, format!("chunk_shape {chunk_shape:?} × element size")))?;
        cell_count
            .checked_mul(dtype.size() as u64)
            .ok_or_else(|| FormatError::overflow(region, format!("shape {shape:?} × element size")))?;
        Ok(DatasetRecord {
            name,
            dtype,
            shape,
            chunk_shape,
            grid,
            chunk_count,
            cell_count,
        })
    }

    /// Rank.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Start and (clipped) extent of the chunk at grid coordinates `coords`, per axis.
    /// The caller guarantees `coords` lies in the grid.
    pub fn tile_box(&self, coords: &[u64]) -> (Vec<u64>, Vec<u64>) {
        let mut start = Vec::with_capacity(self.ndim());
        let mut extent = Vec::with_capacity(self.ndim());
        for ((&c, &chunk), &shape) in coords.iter().zip(&self.chunk_shape).zip(&self.shape) {
            let s = c * chunk;
            start.push(s);
            extent.push(chunk.min(shape - s));
        }
        (start, extent)
    }

    /// Number of cells of the (clipped) chunk at `coords`.
    pub fn tile_cells(&self, coords: &[u64]) -> u64 {
        self.tile_box(coords).1.iter().product()
    }

    /// Row-major linear id of a chunk from its grid coordinates.
    pub fn linear_chunk_id(&self, coords: &[u64]) -> u64 {
        coords.iter().zip(&self.grid).fold(0u64, |acc, (&c, &g)| acc * g + c)
    }

    /// Grid coordinates of a chunk from its row-major linear id.
    pub fn chunk_coords(&self, mut linear: u64) -> Vec<u64> {
        let mut out = vec![0u64; self.ndim()];
        for d in (0..self.ndim()).rev() {
            let g = self.grid[d].max(1);
            out[d] = linear % g;
            linear /= g;
        }
        out
    }

    /// Encode this record to its wire form (with padding).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(self.name.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.dtype.tag().to_le_bytes());
        out.extend_from_slice(&(self.ndim() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(self.name.as_bytes());
        while out.len() % 8 != 0 {
            out.push(0);
        }
        for v in self.shape.iter().chain(&self.chunk_shape) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }
}

/// Parse exactly `count` records filling `blob` (which starts at file offset `base`).
pub fn parse_directory(blob: &[u8], base: u64, count: u32) -> Result<Vec<DatasetRecord>> {
    // Bound the allocation by what the blob could possibly hold.
    if count as u64 > blob.len() as u64 / MIN_RECORD {
        return Err(FormatError::invalid(
            "superblock",
            "dataset_count",
            format!(
                "is {count}, but the {}-byte dataset directory can hold at most {} records",
                blob.len(),
                blob.len() as u64 / MIN_RECORD
            ),
        ));
    }
    let mut r = Le::new(blob, base, "dataset directory");
    let mut out: Vec<DatasetRecord> = Vec::with_capacity(count as usize);
    // Names seen so far (one lookup per record, not a scan of the earlier ones).
    let mut names = std::collections::HashSet::with_capacity(count as usize);
    for i in 0..count {
        let region = format!("dataset record {i} (offset {})", r.offset());
        let start = r.pos();
        let name_len = r.u32()? as usize;
        let tag = r.u32()?;
        let ndim = r.u32()? as usize;
        let _reserved = r.u32()?;
        if name_len > r.remaining() {
            return Err(FormatError::invalid(
                region,
                "name_len",
                format!("{name_len} exceeds the {} bytes left in the directory", r.remaining()),
            ));
        }
        let name = std::str::from_utf8(r.take(name_len)?)
            .map_err(|e| FormatError::invalid(region.clone(), "name", format!("is not UTF-8: {e}")))?
            .to_owned();
        let dtype = DType::from_tag(tag)
            .ok_or_else(|| FormatError::invalid(region.clone(), "dtype", format!("tag {tag} is not one of 1..=10")))?;
        if ndim == 0 || ndim > MAX_NDIM {
            return Err(FormatError::invalid(
                region,
                "ndim",
                format!("is {ndim} (allowed 1..=8)"),
            ));
        }
        let consumed = (r.pos() - start) as u64;
        let pad = align8(consumed).unwrap_or(consumed) - consumed;
        r.take(pad as usize)?;
        let mut shape = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            shape.push(r.u64()?);
        }
        let mut chunk_shape = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            chunk_shape.push(r.u64()?);
        }
        if !names.insert(name.clone()) {
            return Err(FormatError::invalid(
                region,
                "name",
                format!("{name:?} is used by an earlier record"),
            ));
        }
        out.push(DatasetRecord::new(&region, name, dtype, shape, chunk_shape)?);
    }
    if r.remaining() != 0 {
        return Err(FormatError::invalid(
            "dataset directory",
            "dataset_blob_len",
            format!("is {} but the {count} records end after {} bytes", blob.len(), r.pos()),
        ));
    }
    Ok(out)
}
