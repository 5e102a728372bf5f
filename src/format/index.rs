//! The chunk index: a 32-byte `TIDX` header (with the file's execution settings) followed
//! by fixed 104-byte rows, one per stored chunk.

use super::bytes::Le;
use super::directory::{DatasetRecord, MAX_NDIM};
use super::error::{FormatError, Result};

/// Header length in bytes.
pub const INDEX_HEADER_LEN: u64 = 32;
/// Row length in bytes.
pub const INDEX_ROW_LEN: u64 = 104;
const MAGIC: &[u8; 4] = b"TIDX";

/// Payload codec of one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Codec 0: the stored bytes are the tile.
    Raw,
    /// Codec 1: one zstd frame that decodes to exactly `raw_byte_len` bytes.
    Zstd,
}

impl Codec {
    /// The wire tag.
    pub fn tag(self) -> u32 {
        match self {
            Codec::Raw => 0,
            Codec::Zstd => 1,
        }
    }
    /// Name for display (`raw`, `zstd`).
    pub fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Zstd => "zstd",
        }
    }
}

/// Execution settings carried in the `TIDX` header (memory budget hints for upstream's engine).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecutionSettings {
    /// Basis points of host RAM (10000 = 100%); 0 = engine default.
    pub memory_budget_percent_bps: u16,
    /// Fixed byte cap; 0 = use the percentage.
    pub memory_budget_bytes: u32,
}

/// One chunk index row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkEntry {
    pub dataset_id: u64,
    /// Grid coordinates; slots past the dataset's rank are 0.
    pub coords: [u64; MAX_NDIM],
    pub payload_offset: u64,
    pub raw_byte_len: u64,
    pub stored_byte_len: u64,
    pub codec: Codec,
}

impl ChunkEntry {
    /// End of the stored span (checked at parse time not to overflow).
    pub fn payload_end(&self) -> u64 {
        self.payload_offset.saturating_add(self.stored_byte_len)
    }

    /// Encode to the 104-byte wire form.
    pub fn encode(&self) -> [u8; 104] {
        let mut out = [0u8; 104];
        out[0..8].copy_from_slice(&self.dataset_id.to_le_bytes());
        for (i, c) in self.coords.iter().enumerate() {
            out[8 + 8 * i..16 + 8 * i].copy_from_slice(&c.to_le_bytes());
        }
        out[72..80].copy_from_slice(&self.payload_offset.to_le_bytes());
        out[80..88].copy_from_slice(&self.raw_byte_len.to_le_bytes());
        out[88..96].copy_from_slice(&self.stored_byte_len.to_le_bytes());
        out[96..100].copy_from_slice(&self.codec.tag().to_le_bytes());
        out
    }
}

/// Encode the `TIDX` header.
pub fn encode_header(entry_count: u64, exec: ExecutionSettings) -> [u8; 32] {
    let mut out = [0u8; 32];
    out[0..4].copy_from_slice(MAGIC);
    out[4..8].copy_from_slice(&1u32.to_le_bytes());
    out[8..16].copy_from_slice(&entry_count.to_le_bytes());
    out[16..18].copy_from_slice(&exec.memory_budget_percent_bps.to_le_bytes());
    out[20..24].copy_from_slice(&exec.memory_budget_bytes.to_le_bytes());
    out
}

/// Parse the index region (`bytes` = exactly `chunk_index_length` bytes at `offset`).
/// Rows are decoded but not yet checked against datasets: see [`validate_rows`].
pub fn parse_index(bytes: &[u8], offset: u64) -> Result<(ExecutionSettings, Vec<ChunkEntry>)> {
    let mut r = Le::new(bytes, offset, "chunk index");
    let magic = r.take(4)?;
    if magic != MAGIC {
        return Err(FormatError::BadMagic {
            region: "chunk index",
            offset,
            expected: "TIDX".into(),
            found: String::from_utf8_lossy(magic).into_owned(),
        });
    }
    let version = r.u32()?;
    if version != 1 {
        return Err(FormatError::UnsupportedVersion {
            region: "chunk index",
            field: "index_version",
            value: version as u64,
            supported: "1",
        });
    }
    let entry_count = r.u64()?;
    let exec = ExecutionSettings {
        memory_budget_percent_bps: r.u16()?,
        memory_budget_bytes: {
            let _reserved = r.u16()?;
            r.u32()?
        },
    };
    let _reserved = r.u64()?;
    let expected = entry_count
        .checked_mul(INDEX_ROW_LEN)
        .and_then(|v| v.checked_add(INDEX_HEADER_LEN));
    if expected != Some(bytes.len() as u64) {
        return Err(FormatError::invalid(
            "chunk index",
            "entry_count",
            format!(
                "is {entry_count}, so the index should be 32 + {entry_count} × 104 bytes, but chunk_index_length is {}",
                bytes.len()
            ),
        ));
    }
    let mut rows = Vec::with_capacity(entry_count as usize);
    for i in 0..entry_count {
        let dataset_id = r.u64()?;
        let mut coords = [0u64; MAX_NDIM];
        for c in &mut coords {
            *c = r.u64()?;
        }
        let payload_offset = r.u64()?;
        let raw_byte_len = r.u64()?;
        let stored_byte_len = r.u64()?;
        let tag = r.u32()?;
        let _reserved = r.u32()?;
        let codec = match tag {
            0 => Codec::Raw,
            1 => Codec::Zstd,
            t => {
                return Err(FormatError::invalid(
                    format!("chunk index row {i}"),
                    "codec",
                    format!("{t} is unknown (0 = raw, 1 = zstd)"),
                ));
            }
        };
        rows.push(ChunkEntry {
            dataset_id,
            coords,
            payload_offset,
            raw_byte_len,
            stored_byte_len,
            codec,
        });
    }
    Ok((exec, rows))
}

/// Check every row against the datasets and the payload region
/// `payload_start .. payload_end`, and return, per dataset, the row number of each chunk in
/// row-major chunk order. Every chunk of every grid must have exactly one row.
pub fn validate_rows(
    rows: &[ChunkEntry],
    datasets: &[DatasetRecord],
    payload_start: u64,
    payload_end: u64,
) -> Result<Vec<Vec<u32>>> {
    if rows.len() > u32::MAX as usize {
        return Err(FormatError::invalid("chunk index", "entry_count", "exceeds 2^32 rows"));
    }
    let mut per_dataset = vec![0u64; datasets.len()];
    for (i, row) in rows.iter().enumerate() {
        let region = || format!("chunk index row {i}");
        let ds = usize::try_from(row.dataset_id)
            .ok()
            .and_then(|d| datasets.get(d))
            .ok_or_else(|| {
                FormatError::invalid(
                    region(),
                    "dataset_id",
                    format!(
                        "{} is out of range (the file has {} datasets)",
                        row.dataset_id,
                        datasets.len()
                    ),
                )
            })?;
        for d in 0..MAX_NDIM {
            let c = row.coords[d];
            if d < ds.ndim() {
                if c >= ds.grid[d] {
                    return Err(FormatError::invalid(
                        region(),
                        "chunk_index",
                        format!(
                            "coordinate {c} on axis {d} is outside the chunk grid {:?} of dataset {:?}",
                            ds.grid, ds.name
                        ),
                    ));
                }
            } else if c != 0 {
                return Err(FormatError::invalid(
                    region(),
                    "chunk_index",
                    format!("slot {d} is {c} but dataset {:?} has rank {}", ds.name, ds.ndim()),
                ));
            }
        }
        let expected_raw = ds.tile_cells(&row.coords[..ds.ndim()]) * ds.dtype.size() as u64;
        if row.raw_byte_len != expected_raw {
            return Err(FormatError::invalid(
                region(),
                "raw_byte_len",
                format!(
                    "is {} but the clipped tile at {:?} of dataset {:?} holds {expected_raw} bytes",
                    row.raw_byte_len,
                    &row.coords[..ds.ndim()],
                    ds.name
                ),
            ));
        }
        if row.codec == Codec::Raw && row.stored_byte_len != row.raw_byte_len {
            return Err(FormatError::invalid(
                region(),
                "stored_byte_len",
                format!(
                    "is {} but raw codec requires it to equal raw_byte_len {}",
                    row.stored_byte_len, row.raw_byte_len
                ),
            ));
        }
        let end = row.payload_offset.checked_add(row.stored_byte_len).ok_or_else(|| {
            FormatError::overflow(
                region(),
                format!(
                    "payload_offset {} + stored_byte_len {}",
                    row.payload_offset, row.stored_byte_len
                ),
            )
        })?;
        if row.payload_offset < payload_start || end > payload_end {
            return Err(FormatError::invalid(
                region(),
                "payload",
                format!(
                    "{}..{end} is outside the payload region {payload_start}..{payload_end}",
                    row.payload_offset
                ),
            ));
        }
        per_dataset[row.dataset_id as usize] += 1;
    }
    for (ds, &n) in datasets.iter().zip(&per_dataset) {
        if n != ds.chunk_count {
            return Err(FormatError::invalid(
                "chunk index",
                "rows",
                format!(
                    "dataset {:?} has {n} rows but its chunk grid {:?} has {} chunks",
                    ds.name, ds.grid, ds.chunk_count
                ),
            ));
        }
    }
    // Sizes are now bounded by the number of rows: build the lookup tables.
    let mut tables: Vec<Vec<u32>> = datasets
        .iter()
        .map(|d| vec![u32::MAX; d.chunk_count as usize])
        .collect();
    for (i, row) in rows.iter().enumerate() {
        let ds = &datasets[row.dataset_id as usize];
        let slot = &mut tables[row.dataset_id as usize][ds.linear_chunk_id(&row.coords[..ds.ndim()]) as usize];
        if *slot != u32::MAX {
            return Err(FormatError::invalid(
                format!("chunk index row {i}"),
                "chunk_index",
                format!(
                    "{:?} of dataset {:?} is also stored by row {}",
                    &row.coords[..ds.ndim()],
                    ds.name,
                    *slot
                ),
            ));
        }
        *slot = i as u32;
    }
    // No two payload spans may overlap.
    let mut order: Vec<u32> = (0..rows.len() as u32).collect();
    order.sort_by_key(|&i| (rows[i as usize].payload_offset, rows[i as usize].stored_byte_len));
    for w in order.windows(2) {
        let (a, b) = (&rows[w[0] as usize], &rows[w[1] as usize]);
        if b.payload_offset < a.payload_end() || (a.payload_offset == b.payload_offset) {
            return Err(FormatError::invalid(
                format!("chunk index row {}", w[1]),
                "payload_offset",
                format!(
                    "span {}..{} overlaps row {}'s span {}..{}",
                    b.payload_offset,
                    b.payload_end(),
                    w[0],
                    a.payload_offset,
                    a.payload_end()
                ),
            ));
        }
    }
    Ok(tables)
}
