//! The optional history footer (`flags & 1`): `THST` tail, the footer JSON (history rows and
//! metadata), and in `history_version` 2 the spilled zone maps and secondary index.
//!
//! The suffix of such a file is, in order: zone-map spill, secondary-index spill, metadata
//! spill (each optional), the footer JSON, then the 16-byte tail
//! (`history_json_len` u64, `history_version` u32, `THST`). Chunk payloads must end before
//! the first of these.

use super::error::{FormatError, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Length of the fixed footer tail.
pub const TAIL_LEN: u64 = 16;
const MAGIC: &[u8; 4] = b"THST";

/// The decoded 16-byte tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    pub json_len: u64,
    pub version: u32,
}

/// Parse the last 16 bytes of a file that declares a footer.
pub fn parse_tail(tail: &[u8], file_len: u64) -> Result<Tail> {
    if tail.len() as u64 != TAIL_LEN {
        return Err(FormatError::Footer(format!(
            "the file ({file_len} bytes) is too short for the 16-byte footer tail"
        )));
    }
    if &tail[12..16] != MAGIC {
        return Err(FormatError::Footer(format!(
            "superblock flags declare a history footer, but the file does not end with THST (last 4 bytes {:?}); the footer is missing or damaged",
            String::from_utf8_lossy(&tail[12..16])
        )));
    }
    let json_len = u64::from_le_bytes(tail[0..8].try_into().unwrap_or([0; 8]));
    let version = u32::from_le_bytes(tail[8..12].try_into().unwrap_or([0; 4]));
    if version != 1 && version != 2 {
        return Err(FormatError::UnsupportedVersion {
            region: "history footer",
            field: "history_version",
            value: version as u64,
            supported: "1, 2",
        });
    }
    if json_len.checked_add(TAIL_LEN).is_none_or(|n| n > file_len) {
        return Err(FormatError::Footer(format!(
            "history_json_len {json_len} exceeds the file length {file_len}"
        )));
    }
    Ok(Tail { json_len, version })
}

/// A byte range of the file referenced from the footer JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlobRef {
    pub offset: u64,
    pub len: u64,
}

/// One row of the footer `history`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    pub op: String,
    pub source: String,
    pub at: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum HistoryWire {
    Legacy([String; 3]),
    Event(HistoryEvent),
}

/// Inline coordinate labels of one axis.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordLabels {
    pub labels: Vec<String>,
}

/// Footer metadata of one dataset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attrs: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim_names: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coords: Option<BTreeMap<String, CoordLabels>>,
}

/// File-level metadata (tool, versions, creation time).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

/// The footer `metadata` object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileMeta>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub datasets: BTreeMap<String, DatasetMeta>,
}

/// Footer JSON as found on disk (before spills are resolved).
#[derive(Deserialize)]
pub(crate) struct FooterJson {
    #[serde(default)]
    history: Vec<HistoryWire>,
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(default)]
    pub(crate) metadata_ref: Option<BlobRef>,
    #[serde(default)]
    pub(crate) zone_maps_ref: Option<BlobRef>,
    #[serde(default)]
    pub(crate) secondary_index_ref: Option<BlobRef>,
}

impl FooterJson {
    pub(crate) fn parse(json: &[u8]) -> Result<FooterJson> {
        let f: FooterJson = serde_json::from_slice(json)
            .map_err(|e| FormatError::Footer(format!("footer JSON does not parse: {e}")))?;
        if f.metadata.is_some() && f.metadata_ref.is_some() {
            return Err(FormatError::Footer(
                "footer JSON has both inline metadata and metadata_ref".into(),
            ));
        }
        Ok(f)
    }

    pub(crate) fn history(&mut self) -> Vec<HistoryEvent> {
        std::mem::take(&mut self.history)
            .into_iter()
            .map(|h| match h {
                HistoryWire::Event(e) => e,
                HistoryWire::Legacy([op, source, at]) => HistoryEvent {
                    op,
                    source,
                    at,
                    ..Default::default()
                },
            })
            .collect()
    }

    pub(crate) fn take_inline_metadata(&mut self) -> Option<Metadata> {
        self.metadata.take()
    }

    /// The spills this footer version uses, in on-disk order, with their field names.
    pub(crate) fn spills(&self, version: u32) -> Vec<(&'static str, BlobRef)> {
        let mut out = Vec::new();
        if version >= 2 {
            if let Some(r) = self.zone_maps_ref {
                out.push(("zone_maps_ref", r));
            }
            if let Some(r) = self.secondary_index_ref {
                out.push(("secondary_index_ref", r));
            }
        }
        if let Some(r) = self.metadata_ref {
            out.push(("metadata_ref", r));
        }
        out
    }
}

/// Given the spills (in order) and where the footer JSON starts, compute where payloads
/// must end, checking that the spills exactly tile `payload_end .. json_start` in order.
pub(crate) fn spill_bounds(spills: &[(&'static str, BlobRef)], json_start: u64) -> Result<u64> {
    let total = spills
        .iter()
        .try_fold(0u64, |acc, (_, r)| acc.checked_add(r.len))
        .ok_or_else(|| FormatError::Footer("spill lengths overflow".into()))?;
    let payload_end = json_start.checked_sub(total).ok_or_else(|| {
        FormatError::Footer(format!(
            "spills of {total} bytes do not fit before the footer JSON at {json_start}"
        ))
    })?;
    let mut at = payload_end;
    for (name, r) in spills {
        if r.offset != at {
            return Err(FormatError::Footer(format!(
                "{name} offset {} (len {}) is not where the spill order places it ({at}); spills must be zone maps, secondary index, metadata, each directly before the next",
                r.offset, r.len
            )));
        }
        at += r.len;
    }
    Ok(payload_end)
}

/// Per-chunk statistics from the zone maps.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneStat {
    pub element_count: u64,
    /// Fill-value cells and NaNs (excluded from min/max).
    pub null_count: u64,
    /// Smallest non-null element; `None` when all are null.
    pub min: Option<super::dtype::Scalar>,
    /// Largest non-null element; `None` when all are null.
    pub max: Option<super::dtype::Scalar>,
}

/// One zone-map row as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ZoneChunkWire {
    pub(crate) dataset_id: u64,
    pub(crate) chunk_index: Vec<u64>,
    pub(crate) element_count: u64,
    pub(crate) null_count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) min_le: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_le: Option<String>,
}

/// The zone-map document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ZoneMapsWire {
    pub(crate) version: u32,
    #[serde(default)]
    pub(crate) generation: u64,
    #[serde(default)]
    pub(crate) packed_sha256: String,
    pub(crate) chunks: Vec<ZoneChunkWire>,
}

/// Decode a lower-case or upper-case hex string.
pub(crate) fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 64 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Encode bytes as lower-case hex.
pub(crate) fn hex_encode(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
