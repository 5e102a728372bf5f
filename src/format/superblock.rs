//! The 32-byte superblock at offset 0.

use super::bytes::Le;
use super::error::{FormatError, Result};

/// Length of the superblock in bytes.
pub const SUPERBLOCK_LEN: u64 = 32;
/// `flags` bit: a history footer (`THST`) ends the file.
pub const FLAG_HISTORY_FOOTER: u32 = 1;
const MAGIC: &[u8; 4] = b"TETR";

/// The parsed superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    pub layout_version: u32,
    pub dataset_count: u32,
    pub flags: u32,
    pub chunk_index_offset: u64,
    pub chunk_index_length: u64,
}

impl Superblock {
    /// True when `flags` declares a history footer.
    pub fn has_footer(&self) -> bool {
        self.flags & FLAG_HISTORY_FOOTER != 0
    }

    /// Parse and check the superblock from the first 32 bytes of a file of `file_len` bytes.
    pub fn parse(bytes: &[u8], file_len: u64) -> Result<Superblock> {
        let mut r = Le::new(bytes, 0, "superblock");
        let magic = r.take(4)?;
        if magic != MAGIC {
            return Err(FormatError::BadMagic {
                region: "superblock",
                offset: 0,
                expected: "TETR".into(),
                found: String::from_utf8_lossy(magic).into_owned(),
            });
        }
        let sb = Superblock {
            layout_version: r.u32()?,
            dataset_count: r.u32()?,
            flags: r.u32()?,
            chunk_index_offset: r.u64()?,
            chunk_index_length: r.u64()?,
        };
        // Every record takes at least 32 bytes: refuse absurd counts before anything else.
        if sb.dataset_count as u64 * 32 > file_len.saturating_sub(40) {
            return Err(FormatError::invalid(
                "superblock",
                "dataset_count",
                format!("{} cannot fit in a file of {file_len} bytes", sb.dataset_count),
            ));
        }
        if sb.layout_version != 1 {
            return Err(FormatError::UnsupportedVersion {
                region: "superblock",
                field: "layout_version",
                value: sb.layout_version as u64,
                supported: "1",
            });
        }
        if sb.flags & !FLAG_HISTORY_FOOTER != 0 {
            return Err(FormatError::invalid(
                "superblock",
                "flags",
                format!("0x{:x} has bits other than the history-footer bit 0x1", sb.flags),
            ));
        }
        match sb.chunk_index_offset.checked_add(sb.chunk_index_length) {
            Some(end) if end <= file_len => {}
            Some(end) => {
                return Err(FormatError::invalid(
                    "superblock",
                    "chunk_index_offset + chunk_index_length",
                    format!(
                        "= {} + {} = {end} exceeds file length {file_len}",
                        sb.chunk_index_offset, sb.chunk_index_length
                    ),
                ));
            }
            None => {
                return Err(FormatError::overflow(
                    "superblock",
                    format!(
                        "chunk_index_offset {} + chunk_index_length {}",
                        sb.chunk_index_offset, sb.chunk_index_length
                    ),
                ));
            }
        }
        if sb.dataset_count == 0 && (sb.chunk_index_offset != SUPERBLOCK_LEN || sb.chunk_index_length != 0) {
            return Err(FormatError::invalid(
                "superblock",
                "chunk_index_offset/chunk_index_length",
                format!(
                    "are {}/{} for an empty file (dataset_count 0 requires 32/0)",
                    sb.chunk_index_offset, sb.chunk_index_length
                ),
            ));
        }
        Ok(sb)
    }

    /// Encode to the 32-byte wire form.
    pub fn encode(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        out[0..4].copy_from_slice(MAGIC);
        out[4..8].copy_from_slice(&self.layout_version.to_le_bytes());
        out[8..12].copy_from_slice(&self.dataset_count.to_le_bytes());
        out[12..16].copy_from_slice(&self.flags.to_le_bytes());
        out[16..24].copy_from_slice(&self.chunk_index_offset.to_le_bytes());
        out[24..32].copy_from_slice(&self.chunk_index_length.to_le_bytes());
        out
    }
}
