//! Opening a `.tet` file: every region parsed and cross-checked before any payload access.
//!
//! [`TetFile::open`] reads through a [`ReadAt`], so the same code validates a local mmap
//! and a remote object whose head and tail were fetched by range. It asks for: the
//! superblock, the directory length and blob, the chunk index, and (when the footer flag
//! is set) the tail, the footer JSON and any spills — never a payload.

use super::bytes::{ReadAt, align8, read_region};
use super::directory::{DatasetRecord, parse_directory};
use super::dtype::{DType, Scalar};
use super::error::{FormatError, Result};
use super::footer::{
    self, BlobRef, DatasetMeta, FileMeta, FooterJson, HistoryEvent, Metadata, TAIL_LEN, ZoneMapsWire, ZoneStat,
};
use super::index::{ChunkEntry, ExecutionSettings, INDEX_HEADER_LEN, parse_index, validate_rows};
use super::superblock::{SUPERBLOCK_LEN, Superblock};

/// One parsed, validated `.tet` file: every region but the payloads.
#[derive(Debug, Clone)]
pub struct TetFile {
    pub file_len: u64,
    pub superblock: Superblock,
    /// Execution settings from the `TIDX` header (defaults when the file is empty).
    pub execution: ExecutionSettings,
    /// Chunk index rows in file order.
    pub chunks: Vec<ChunkEntry>,
    pub datasets: Vec<Dataset>,
    pub footer: Option<Footer>,
    /// Byte range chunk payloads must lie in.
    pub payload_region: (u64, u64),
}

/// The parsed history footer.
#[derive(Debug, Clone, Default)]
pub struct Footer {
    pub history_version: u32,
    pub history: Vec<HistoryEvent>,
    pub file: Option<FileMeta>,
    /// True when the metadata was stored out of line (`metadata_ref`).
    pub metadata_spilled: bool,
    /// True when the footer carries zone maps (attached to each [`Dataset`]).
    pub has_zone_maps: bool,
    /// The secondary-index spill, when present (its contents are not interpreted).
    pub secondary_index: Option<BlobRef>,
}

/// One dataset with its geometry, footer metadata, chunk lookup and optional zone maps.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Position in the directory (`dataset_id` of its chunk rows).
    pub id: usize,
    pub record: DatasetRecord,
    pub meta: DatasetMeta,
    /// Chunk index row of each chunk, in row-major chunk order.
    pub chunk_rows: Vec<u32>,
    /// Zone statistics per chunk (row-major chunk order) when the file has zone maps.
    pub zones: Option<Vec<Option<ZoneStat>>>,
}

impl Dataset {
    pub fn name(&self) -> &str {
        &self.record.name
    }
    pub fn dtype(&self) -> DType {
        self.record.dtype
    }
    pub fn shape(&self) -> &[u64] {
        &self.record.shape
    }
    pub fn ndim(&self) -> usize {
        self.record.ndim()
    }
    /// Axis names: footer `dim_names`, else `dim_0`, `dim_1`, ...
    pub fn dim_names(&self) -> Vec<String> {
        match &self.meta.dim_names {
            Some(n) => n.clone(),
            None => (0..self.ndim()).map(|d| format!("dim_{d}")).collect(),
        }
    }
    /// Footer coordinate labels of axis `d`, if any.
    pub fn labels(&self, d: usize) -> Option<&[String]> {
        let name = self.dim_names().get(d)?.clone();
        self.meta.coords.as_ref()?.get(&name).map(|c| c.labels.as_slice())
    }
}

impl TetFile {
    /// Parse and validate every structural region of the file behind `src`.
    pub fn open<R: ReadAt + ?Sized>(src: &R) -> Result<TetFile> {
        let file_len = src.len();
        let sb_bytes = read_region(src, "superblock", 0, SUPERBLOCK_LEN)?;
        let sb = Superblock::parse(&sb_bytes, file_len)?;

        let mut records = Vec::new();
        let mut execution = ExecutionSettings::default();
        let mut rows = Vec::new();
        let mut index_end = SUPERBLOCK_LEN;
        if sb.dataset_count > 0 {
            let len_bytes = read_region(src, "dataset directory", 32, 8)?;
            let blob_len = u64::from_le_bytes(len_bytes[..8].try_into().unwrap_or([0; 8]));
            let blob_end = 40u64.checked_add(blob_len).filter(|&e| e <= file_len).ok_or_else(|| {
                FormatError::invalid(
                    "dataset directory",
                    "dataset_blob_len",
                    format!("{blob_len} runs past the end of the {file_len}-byte file"),
                )
            })?;
            let blob = read_region(src, "dataset directory", 40, blob_len)?;
            records = parse_directory(&blob, 40, sb.dataset_count)?;
            let expect = align8(blob_end).unwrap_or(blob_end);
            if sb.chunk_index_offset != expect {
                return Err(FormatError::invalid(
                    "superblock",
                    "chunk_index_offset",
                    format!(
                        "is {} but must be align8(40 + dataset_blob_len) = {expect}",
                        sb.chunk_index_offset
                    ),
                ));
            }
            if sb.chunk_index_length < INDEX_HEADER_LEN {
                return Err(FormatError::invalid(
                    "superblock",
                    "chunk_index_length",
                    format!("is {} (the TIDX header alone is 32)", sb.chunk_index_length),
                ));
            }
            let index = read_region(src, "chunk index", sb.chunk_index_offset, sb.chunk_index_length)?;
            (execution, rows) = parse_index(&index, sb.chunk_index_offset)?;
            index_end = sb.chunk_index_offset + sb.chunk_index_length;
        }

        let mut payload_end = file_len;
        let mut footer = None;
        let mut metadata = Metadata::default();
        let mut zone_doc: Option<ZoneMapsWire> = None;
        if sb.has_footer() {
            if file_len < index_end + TAIL_LEN {
                return Err(FormatError::Footer(format!(
                    "superblock flags declare a history footer, but the file ends at {file_len}, before room for the 16-byte tail after the chunk index (ends {index_end})"
                )));
            }
            let tail_bytes = read_region(src, "history footer", file_len - TAIL_LEN, TAIL_LEN)?;
            let tail = footer::parse_tail(&tail_bytes, file_len)?;
            let json_start = file_len - TAIL_LEN - tail.json_len;
            if json_start < index_end {
                return Err(FormatError::Footer(format!(
                    "history_json_len {} places the footer JSON at {json_start}, inside the chunk index (ends {index_end})",
                    tail.json_len
                )));
            }
            let json = read_region(src, "history footer", json_start, tail.json_len)?;
            let mut fj = FooterJson::parse(&json)?;
            let spills = fj.spills(tail.version);
            payload_end = footer::spill_bounds(&spills, json_start)?;
            if payload_end < index_end {
                return Err(FormatError::Footer(format!(
                    "spills start at {payload_end}, inside the chunk index (ends {index_end})"
                )));
            }
            let read_json = |r: BlobRef, what: &str| -> Result<Vec<u8>> {
                read_region(src, "history footer", r.offset, r.len)
                    .map(|b| b.into_owned())
                    .map_err(|e| FormatError::Footer(format!("{what}: {e}")))
            };
            let metadata_spilled = fj.metadata_ref.is_some();
            if let Some(r) = fj.metadata_ref {
                let bytes = read_json(r, "metadata_ref")?;
                metadata = serde_json::from_slice(&bytes)
                    .map_err(|e| FormatError::Footer(format!("metadata spill at {} does not parse: {e}", r.offset)))?;
            } else if let Some(m) = fj.take_inline_metadata() {
                metadata = m;
            }
            if tail.version >= 2
                && let Some(r) = fj.zone_maps_ref
            {
                let bytes = read_json(r, "zone_maps_ref")?;
                zone_doc = Some(
                    serde_json::from_slice(&bytes)
                        .map_err(|e| FormatError::Footer(format!("zone maps at {} do not parse: {e}", r.offset)))?,
                );
            }
            footer = Some(Footer {
                history_version: tail.version,
                history: fj.history(),
                file: metadata.file.clone(),
                metadata_spilled,
                has_zone_maps: zone_doc.is_some(),
                secondary_index: if tail.version >= 2 {
                    fj.secondary_index_ref
                } else {
                    None
                },
            });
        }

        let tables = validate_rows(&rows, &records, index_end, payload_end)?;
        let mut datasets: Vec<Dataset> = records
            .into_iter()
            .zip(tables)
            .enumerate()
            .map(|(id, (record, chunk_rows))| Dataset {
                id,
                record,
                meta: DatasetMeta::default(),
                chunk_rows,
                zones: None,
            })
            .collect();
        attach_metadata(&mut datasets, metadata)?;
        if let Some(doc) = zone_doc {
            attach_zone_maps(&mut datasets, doc)?;
        }
        Ok(TetFile {
            file_len,
            superblock: sb,
            execution,
            chunks: rows,
            datasets,
            footer,
            payload_region: (index_end, payload_end),
        })
    }

    /// The dataset called `name`, or an error listing those that exist.
    pub fn dataset(&self, name: &str) -> Result<&Dataset> {
        self.datasets
            .iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| FormatError::NoSuchDataset {
                name: name.to_owned(),
                available: self.dataset_list(),
            })
    }

    /// Comma-separated dataset names, for messages.
    pub fn dataset_list(&self) -> String {
        if self.datasets.is_empty() {
            return "(no datasets)".into();
        }
        self.datasets.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
    }

    /// Chunk index row of chunk `linear` of dataset `ds`.
    pub fn chunk(&self, ds: &Dataset, linear: u64) -> (usize, &ChunkEntry) {
        let row = ds.chunk_rows[linear as usize] as usize;
        (row, &self.chunks[row])
    }
}

fn attach_metadata(datasets: &mut [Dataset], metadata: Metadata) -> Result<()> {
    for (name, meta) in metadata.datasets {
        let ds = datasets.iter_mut().find(|d| d.record.name == name).ok_or_else(|| {
            FormatError::Footer(format!(
                "metadata.datasets has an entry for {name:?}, which is not a dataset of this file"
            ))
        })?;
        let region = |f: &str| format!("metadata.datasets.{name}.{f}");
        if let Some(dims) = &meta.dim_names {
            if dims.len() != ds.record.ndim() {
                return Err(FormatError::Footer(format!(
                    "{} has {} names for a rank-{} dataset",
                    region("dim_names"),
                    dims.len(),
                    ds.record.ndim()
                )));
            }
            for (i, n) in dims.iter().enumerate() {
                if n.is_empty() || dims[..i].contains(n) {
                    return Err(FormatError::Footer(format!(
                        "{} entry {i} ({n:?}) is empty or repeated",
                        region("dim_names")
                    )));
                }
            }
        }
        ds.meta = meta;
        let dims = ds.dim_names();
        if let Some(coords) = &ds.meta.coords {
            for (axis, c) in coords {
                // Upstream's converter also stores a 1-D variable's own values under the
                // variable's name (`coords.x` of `x(time)`): entries that name no axis are
                // not axis labels and are left unused.
                let Some(d) = dims.iter().position(|n| n == axis) else {
                    continue;
                };
                if c.labels.len() as u64 != ds.record.shape[d] {
                    return Err(FormatError::Footer(format!(
                        "{}.{axis}.labels has {} labels for an axis of extent {}",
                        region("coords"),
                        c.labels.len(),
                        ds.record.shape[d]
                    )));
                }
            }
        }
    }
    Ok(())
}

fn attach_zone_maps(datasets: &mut [Dataset], doc: ZoneMapsWire) -> Result<()> {
    if doc.version != 1 {
        return Err(FormatError::Footer(format!(
            "zone maps version {} is not supported (1)",
            doc.version
        )));
    }
    for (i, z) in doc.chunks.into_iter().enumerate() {
        let bad = |p: String| FormatError::Footer(format!("zone maps chunk {i}: {p}"));
        let ds = usize::try_from(z.dataset_id)
            .ok()
            .and_then(|d| datasets.get_mut(d))
            .ok_or_else(|| bad(format!("dataset_id {} is out of range", z.dataset_id)))?;
        let rec = &ds.record;
        if z.chunk_index.len() != rec.ndim() || z.chunk_index.iter().zip(&rec.grid).any(|(c, g)| c >= g) {
            return Err(bad(format!(
                "chunk_index {:?} is not in the chunk grid {:?}",
                z.chunk_index, rec.grid
            )));
        }
        let cells = rec.tile_cells(&z.chunk_index);
        if z.element_count != cells || z.null_count > cells {
            return Err(bad(format!(
                "element_count {} / null_count {} do not fit a tile of {cells} cells",
                z.element_count, z.null_count
            )));
        }
        let decode = |hex: &Option<String>, field: &str| -> Result<Option<Scalar>> {
            match hex {
                None => Ok(None),
                Some(h) => footer::hex_decode(h)
                    .and_then(|b| rec.dtype.decode(&b).ok())
                    .map(Some)
                    .ok_or_else(|| bad(format!("{field} {h:?} is not a {} in little-endian hex", rec.dtype))),
            }
        };
        let stat = ZoneStat {
            element_count: z.element_count,
            null_count: z.null_count,
            min: decode(&z.min_le, "min_le")?,
            max: decode(&z.max_le, "max_le")?,
        };
        let linear = rec.linear_chunk_id(&z.chunk_index) as usize;
        let chunk_count = ds.chunk_rows.len();
        let zones = ds.zones.get_or_insert_with(|| vec![None; chunk_count]);
        zones[linear] = Some(stat);
    }
    Ok(())
}
