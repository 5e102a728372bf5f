//! [`TetWriter`]: writes layout v1 files that upstream `tet verify` accepts.
//!
//! Layout written: superblock, dataset directory, chunk index, then every chunk payload in
//! dataset order and row-major chunk order (each aligned to its element size), then the
//! optional history footer. Edge tiles are clipped to the shape. Footer metadata obeys
//! upstream's v1 limits (so upstream readers accept it); metadata is spilled out of line
//! when the footer JSON would exceed 64 KiB, and zone maps (footer version 2) are written
//! on request.

use super::bytes::align8;
use super::cf::MissingValues;
use super::directory::DatasetRecord;
use super::dtype::{DType, Scalar};
use super::error::{FormatError, Result};
use super::footer::{BlobRef, DatasetMeta, FileMeta, HistoryEvent, Metadata, ZoneChunkWire, ZoneMapsWire, hex_encode};
use super::hyperslab::{Runs, box_ranges};
use super::index::{ChunkEntry, Codec, ExecutionSettings, INDEX_HEADER_LEN, INDEX_ROW_LEN, encode_header};
use super::superblock::{FLAG_HISTORY_FOOTER, SUPERBLOCK_LEN, Superblock};
use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// Upstream's inline footer JSON limit.
const FOOTER_JSON_LIMIT: usize = 65_536;
/// Upstream's metadata limits (attrs per dataset, bytes per string, labels per axis).
const MAX_ATTRS: usize = 64;
const MAX_STRING: usize = 1024;
const MAX_LABELS: usize = 64;

/// How the chunks of a dataset are stored.
#[derive(Debug, Clone, PartialEq)]
pub enum ChunkCodecs {
    /// Every chunk raw.
    Raw,
    /// Every chunk zstd-compressed at this level.
    Zstd(i32),
    /// One codec per chunk in row-major chunk order (zstd at level 3).
    PerChunk(Vec<Codec>),
}

/// One dataset to write: geometry, row-major little-endian data, codecs and metadata.
#[derive(Debug, Clone)]
pub struct DatasetSpec<'a> {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
    /// The whole array, row-major, little-endian, `product(shape) × dtype.size()` bytes.
    pub data: &'a [u8],
    pub codecs: ChunkCodecs,
    /// `dim_names`, coordinate labels and attrs for the footer.
    pub meta: DatasetMeta,
}

impl<'a> DatasetSpec<'a> {
    /// A raw-coded dataset without metadata.
    pub fn new(name: impl Into<String>, dtype: DType, shape: &[u64], chunk_shape: &[u64], data: &'a [u8]) -> Self {
        DatasetSpec {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
            chunk_shape: chunk_shape.to_vec(),
            data,
            codecs: ChunkCodecs::Raw,
            meta: DatasetMeta::default(),
        }
    }
    /// Set the chunk codecs.
    pub fn codecs(mut self, codecs: ChunkCodecs) -> Self {
        self.codecs = codecs;
        self
    }
    /// Set the axis names.
    pub fn dim_names(mut self, names: &[&str]) -> Self {
        self.meta.dim_names = Some(names.iter().map(|s| s.to_string()).collect());
        self
    }
    /// Set the coordinate labels of the axis called `dim`.
    pub fn labels(mut self, dim: &str, labels: Vec<String>) -> Self {
        self.meta
            .coords
            .get_or_insert_with(BTreeMap::new)
            .insert(dim.to_string(), super::footer::CoordLabels { labels });
        self
    }
    /// Add one attribute.
    pub fn attr(mut self, key: &str, value: &str) -> Self {
        self.meta.attrs.insert(key.into(), value.into());
        self
    }
}

/// Builder for one `.tet` file.
#[derive(Debug, Default)]
pub struct TetWriter<'a> {
    datasets: Vec<(DatasetRecord, DatasetSpec<'a>)>,
    execution: ExecutionSettings,
    history: Vec<HistoryEvent>,
    file_meta: Option<FileMeta>,
    zone_maps: bool,
}

impl<'a> TetWriter<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a dataset; its geometry, data length and metadata are checked here.
    pub fn dataset(&mut self, spec: DatasetSpec<'a>) -> Result<&mut Self> {
        let region = format!("dataset {:?}", spec.name);
        if spec.name.is_empty() || spec.name.len() > MAX_STRING {
            return Err(FormatError::Write(format!("{region}: name must be 1..=1024 bytes")));
        }
        if self.datasets.iter().any(|(r, _)| r.name == spec.name) {
            return Err(FormatError::Write(format!("{region}: name already used")));
        }
        let rec = DatasetRecord::new(
            &region,
            spec.name.clone(),
            spec.dtype,
            spec.shape.clone(),
            spec.chunk_shape.clone(),
        )
        .map_err(|e| FormatError::Write(e.to_string()))?;
        let want = rec.cell_count * spec.dtype.size() as u64;
        if spec.data.len() as u64 != want {
            return Err(FormatError::Write(format!(
                "{region}: data has {} bytes, shape {:?} of {} needs {want}",
                spec.data.len(),
                spec.shape,
                spec.dtype
            )));
        }
        if let ChunkCodecs::PerChunk(c) = &spec.codecs
            && c.len() as u64 != rec.chunk_count
        {
            return Err(FormatError::Write(format!(
                "{region}: {} per-chunk codecs for {} chunks",
                c.len(),
                rec.chunk_count
            )));
        }
        check_meta(&region, &rec, &spec.meta)?;
        self.datasets.push((rec, spec));
        Ok(self)
    }

    /// Execution settings for the `TIDX` header.
    pub fn execution(&mut self, settings: ExecutionSettings) -> &mut Self {
        self.execution = settings;
        self
    }

    /// Append a history row to the footer.
    pub fn history(&mut self, event: HistoryEvent) -> &mut Self {
        self.history.push(event);
        self
    }

    /// File-level metadata for the footer.
    pub fn file_meta(&mut self, meta: FileMeta) -> &mut Self {
        self.file_meta = Some(meta);
        self
    }

    /// Write per-chunk zone maps (min/max/null count) in a version-2 footer.
    pub fn zone_maps(&mut self, on: bool) -> &mut Self {
        self.zone_maps = on;
        self
    }

    /// Write the file at `path` (created or truncated).
    pub fn write_path(&self, path: impl AsRef<Path>) -> Result<()> {
        let f = std::fs::File::create(path.as_ref())?;
        let mut w = std::io::BufWriter::new(f);
        self.write(&mut w)?;
        w.flush()?;
        Ok(())
    }

    /// The file as bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut c = std::io::Cursor::new(Vec::new());
        self.write(&mut c)?;
        Ok(c.into_inner())
    }

    /// Write the file to `w`, which must be positioned at its start.
    pub fn write<W: Write + Seek>(&self, w: &mut W) -> Result<()> {
        let mut blob = Vec::new();
        for (rec, _) in &self.datasets {
            blob.extend_from_slice(&rec.encode());
        }
        let entry_count: u64 = self.datasets.iter().map(|(r, _)| r.chunk_count).sum();
        let (index_offset, index_len) = if self.datasets.is_empty() {
            (SUPERBLOCK_LEN, 0)
        } else {
            let off = align8(40 + blob.len() as u64).unwrap_or(0);
            (off, INDEX_HEADER_LEN + entry_count * INDEX_ROW_LEN)
        };
        let header_len = index_offset + index_len;
        // Reserve the header; it is rewritten once the payload offsets are known.
        write_zeros(w, header_len)?;
        let mut pos = header_len;
        let mut entries = Vec::with_capacity(entry_count as usize);
        let mut zones = Vec::new();
        let mut tile = Vec::new();
        for (id, (rec, spec)) in self.datasets.iter().enumerate() {
            let size = rec.dtype.size() as u64;
            // Zone statistics leave out the cells the reader treats as NULL.
            let missing = if self.zone_maps {
                super::cf::missing_values_of(&rec.name, rec.dtype, &spec.meta.attrs, false)?
            } else {
                MissingValues::default()
            };
            let is_missing = missing.matcher(rec.dtype);
            for linear in 0..rec.chunk_count {
                let coords = rec.chunk_coords(linear);
                let (start, extent) = rec.tile_box(&coords);
                tile.clear();
                for (o, n) in Runs::new(&rec.shape, &box_ranges(&start, &extent)).merged() {
                    let (a, b) = ((o * size) as usize, ((o + n) * size) as usize);
                    tile.extend_from_slice(&spec.data[a..b]);
                }
                let codec = match &spec.codecs {
                    ChunkCodecs::Raw => (Codec::Raw, 0),
                    ChunkCodecs::Zstd(level) => (Codec::Zstd, *level),
                    ChunkCodecs::PerChunk(c) => (c[linear as usize], 3),
                };
                let compressed;
                let stored: &[u8] = match codec.0 {
                    Codec::Raw => &tile,
                    Codec::Zstd => {
                        compressed = super::codec::zstd_compress(&tile, codec.1)?;
                        &compressed
                    }
                };
                let aligned = pos.div_ceil(size) * size;
                write_zeros(w, aligned - pos)?;
                w.write_all(stored)?;
                let mut c8 = [0u64; 8];
                c8[..coords.len()].copy_from_slice(&coords);
                entries.push(ChunkEntry {
                    dataset_id: id as u64,
                    coords: c8,
                    payload_offset: aligned,
                    raw_byte_len: tile.len() as u64,
                    stored_byte_len: stored.len() as u64,
                    codec: codec.0,
                });
                pos = aligned + stored.len() as u64;
                if self.zone_maps {
                    zones.push(zone_stat(id as u64, &coords, rec.dtype, &tile, &is_missing));
                }
            }
        }
        let footer = self.footer_wanted();
        if footer {
            self.write_footer(w, pos, zones)?;
        }
        w.seek(SeekFrom::Start(0))?;
        let sb = Superblock {
            layout_version: 1,
            dataset_count: self.datasets.len() as u32,
            flags: if footer { FLAG_HISTORY_FOOTER } else { 0 },
            chunk_index_offset: index_offset,
            chunk_index_length: index_len,
        };
        w.write_all(&sb.encode())?;
        if !self.datasets.is_empty() {
            w.write_all(&(blob.len() as u64).to_le_bytes())?;
            w.write_all(&blob)?;
            write_zeros(w, index_offset - 40 - blob.len() as u64)?;
            w.write_all(&encode_header(entry_count, self.execution))?;
            for e in &entries {
                w.write_all(&e.encode())?;
            }
        }
        w.seek(SeekFrom::End(0))?;
        Ok(())
    }

    fn footer_wanted(&self) -> bool {
        self.zone_maps
            || !self.history.is_empty()
            || self.file_meta.is_some()
            || self.datasets.iter().any(|(_, s)| s.meta != DatasetMeta::default())
    }

    fn write_footer<W: Write>(&self, w: &mut W, mut pos: u64, zones: Vec<ZoneChunkWire>) -> Result<()> {
        let metadata = Metadata {
            file: self.file_meta.clone(),
            datasets: self
                .datasets
                .iter()
                .filter(|(_, s)| s.meta != DatasetMeta::default())
                .map(|(r, s)| (r.name.clone(), s.meta.clone()))
                .collect(),
        };
        let has_meta = metadata != Metadata::default();
        let mut json = serde_json::Map::new();
        json.insert("history".into(), to_json(&self.history)?);
        let mut version = 1u32;
        if self.zone_maps {
            version = 2;
            let doc = ZoneMapsWire {
                version: 1,
                generation: 0,
                packed_sha256: String::new(),
                chunks: zones,
            };
            let bytes = serde_json::to_vec(&doc).map_err(|e| FormatError::Write(e.to_string()))?;
            w.write_all(&bytes)?;
            json.insert(
                "zone_maps_ref".into(),
                to_json(&BlobRef {
                    offset: pos,
                    len: bytes.len() as u64,
                })?,
            );
            pos += bytes.len() as u64;
        }
        if has_meta {
            json.insert("metadata".into(), to_json(&metadata)?);
        }
        let mut body = serde_json::to_vec(&json).map_err(|e| FormatError::Write(e.to_string()))?;
        if body.len() > FOOTER_JSON_LIMIT && has_meta {
            // Spill the metadata out of line, directly before the footer JSON.
            let meta = serde_json::to_vec(&metadata).map_err(|e| FormatError::Write(e.to_string()))?;
            w.write_all(&meta)?;
            json.remove("metadata");
            json.insert(
                "metadata_ref".into(),
                to_json(&BlobRef {
                    offset: pos,
                    len: meta.len() as u64,
                })?,
            );
            body = serde_json::to_vec(&json).map_err(|e| FormatError::Write(e.to_string()))?;
        }
        if body.len() > FOOTER_JSON_LIMIT {
            return Err(FormatError::Write(format!(
                "footer JSON is {} bytes even without metadata (limit {FOOTER_JSON_LIMIT}): too much history",
                body.len()
            )));
        }
        w.write_all(&body)?;
        w.write_all(&(body.len() as u64).to_le_bytes())?;
        w.write_all(&version.to_le_bytes())?;
        w.write_all(b"THST")?;
        Ok(())
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| FormatError::Write(e.to_string()))
}

fn write_zeros<W: Write>(w: &mut W, mut n: u64) -> Result<()> {
    let zeros = [0u8; 4096];
    while n > 0 {
        let k = n.min(zeros.len() as u64) as usize;
        w.write_all(&zeros[..k])?;
        n -= k as u64;
    }
    Ok(())
}

fn check_meta(region: &str, rec: &DatasetRecord, meta: &DatasetMeta) -> Result<()> {
    let err = |m: String| Err(FormatError::Write(format!("{region}: {m}")));
    if meta.attrs.len() > MAX_ATTRS {
        return err(format!("{} attrs (at most {MAX_ATTRS})", meta.attrs.len()));
    }
    if meta
        .attrs
        .iter()
        .any(|(k, v)| k.len() > MAX_STRING || v.len() > MAX_STRING)
    {
        return err(format!("an attr key or value exceeds {MAX_STRING} bytes"));
    }
    let dims: Vec<String> = match &meta.dim_names {
        Some(d) => {
            if d.len() != rec.ndim() {
                return err(format!("{} dim_names for rank {}", d.len(), rec.ndim()));
            }
            for (i, n) in d.iter().enumerate() {
                if n.is_empty() || n.len() > MAX_STRING || d[..i].contains(n) {
                    return err(format!("dim_names[{i}] {n:?} is empty, too long or repeated"));
                }
            }
            d.clone()
        }
        None => (0..rec.ndim()).map(|d| format!("dim_{d}")).collect(),
    };
    for (axis, c) in meta.coords.iter().flatten() {
        let Some(d) = dims.iter().position(|n| n == axis) else {
            return err(format!("coords for unknown axis {axis:?} (axes {dims:?})"));
        };
        if c.labels.len() as u64 != rec.shape[d] {
            return err(format!(
                "{} labels for axis {axis:?} of extent {}",
                c.labels.len(),
                rec.shape[d]
            ));
        }
        if c.labels.len() > MAX_LABELS || c.labels.iter().any(|l| l.len() > MAX_STRING) {
            return err(format!(
                "axis {axis:?}: more than {MAX_LABELS} labels or a label over {MAX_STRING} bytes (upstream's inline limit; store long coordinates as a 1-D dataset named like the axis)"
            ));
        }
    }
    Ok(())
}

fn zone_stat(
    dataset_id: u64,
    coords: &[u64],
    dtype: DType,
    tile: &[u8],
    is_missing: &dyn Fn(Scalar) -> bool,
) -> ZoneChunkWire {
    let size = dtype.size();
    let mut nulls = 0u64;
    let mut min: Option<(Scalar, usize)> = None;
    let mut max: Option<(Scalar, usize)> = None;
    for (i, b) in tile.chunks_exact(size).enumerate() {
        let Ok(v) = dtype.decode(b) else { continue };
        let is_nan = matches!(v, Scalar::F64(x) if x.is_nan());
        if is_nan || is_missing(v) {
            nulls += 1;
            continue;
        }
        let less = |a: Scalar, b: Scalar| match (a, b) {
            (Scalar::F64(a), Scalar::F64(b)) => a < b,
            (Scalar::I64(a), Scalar::I64(b)) => a < b,
            (Scalar::U64(a), Scalar::U64(b)) => a < b,
            _ => false,
        };
        if min.is_none_or(|(m, _)| less(v, m)) {
            min = Some((v, i));
        }
        if max.is_none_or(|(m, _)| less(m, v)) {
            max = Some((v, i));
        }
    }
    let hex = |o: Option<(Scalar, usize)>| o.map(|(_, i)| hex_encode(&tile[i * size..(i + 1) * size]));
    ZoneChunkWire {
        dataset_id,
        chunk_index: coords.to_vec(),
        element_count: (tile.len() / size) as u64,
        null_count: nulls,
        min_le: hex(min),
        max_le: hex(max),
    }
}
