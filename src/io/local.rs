//! Local files: memory-mapped once, payload spans handed out as zero-copy `Bytes`.

use crate::format::{FormatError, ReadAt};
use bytes::Bytes;
use std::borrow::Cow;
use std::path::Path;

/// A read-only memory map of a local file, shared through `Bytes`.
#[derive(Debug, Clone)]
pub struct LocalFile {
    bytes: Bytes,
}

impl LocalFile {
    /// Map the file at `path`.
    pub fn open(path: &Path) -> Result<LocalFile, FormatError> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        if len == 0 {
            return Ok(LocalFile { bytes: Bytes::new() });
        }
        // SAFETY: the map is read-only. `.tet` files are immutable once written (spec
        // §Concurrency); a file truncated by another process while mapped is outside the
        // supported model, as for every mmap reader.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(LocalFile {
            bytes: Bytes::from_owner(map),
        })
    }

    /// Bytes `offset .. offset + len`, sharing the mapping.
    pub fn span(&self, offset: u64, len: u64) -> Result<Bytes, FormatError> {
        let end = offset.checked_add(len).filter(|&e| e <= self.bytes.len() as u64);
        match end {
            Some(end) => Ok(self.bytes.slice(offset as usize..end as usize)),
            None => Err(FormatError::Truncated {
                region: "chunk payload",
                offset,
                need: len,
                file_len: self.bytes.len() as u64,
            }),
        }
    }
}

impl ReadAt for LocalFile {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, FormatError> {
        self.bytes.as_ref().read_at(offset, len)
    }
}
