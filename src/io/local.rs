//! Local files: memory-mapped once, payload spans handed out as zero-copy `Bytes`.

use crate::format::{FormatError, ReadAt};
use bytes::Bytes;
use std::borrow::Cow;
use std::path::Path;

/// A read-only memory map of a local file, shared through `Bytes`.
#[derive(Debug, Clone)]
pub struct LocalFile {
    bytes: Bytes,
    /// The identity of the file when it was mapped.
    pin: LocalPin,
}

/// What identifies one version of a local file: its length, modification time and (on
/// Unix) device and inode. A file replaced or rewritten between queries differs in one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPin {
    len: u64,
    modified: Option<std::time::SystemTime>,
    inode: Option<(u64, u64)>,
}

impl LocalPin {
    /// The modification time in nanoseconds since 1970, when the platform reports one.
    pub fn modified_ns(&self) -> Option<i64> {
        let t = self.modified?.duration_since(std::time::UNIX_EPOCH).ok()?;
        i64::try_from(t.as_nanos()).ok()
    }

    /// The pin of the file at `path` now.
    pub fn of_path(path: &Path) -> Result<LocalPin, FormatError> {
        Ok(Self::of(&std::fs::metadata(path)?))
    }

    fn of(m: &std::fs::Metadata) -> LocalPin {
        #[cfg(unix)]
        let inode = {
            use std::os::unix::fs::MetadataExt;
            Some((m.dev(), m.ino()))
        };
        #[cfg(not(unix))]
        let inode = None;
        LocalPin {
            len: m.len(),
            modified: m.modified().ok(),
            inode,
        }
    }
}

impl LocalFile {
    /// Map the file at `path`.
    pub fn open(path: &Path) -> Result<LocalFile, FormatError> {
        let file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        let pin = LocalPin::of(&meta);
        if meta.len() == 0 {
            return Ok(LocalFile {
                bytes: Bytes::new(),
                pin,
            });
        }
        // SAFETY: the map is read-only. `.tet` files are immutable once written (spec
        // §Concurrency); a file truncated by another process while mapped is outside the
        // supported model, as for every mmap reader.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(LocalFile {
            bytes: Bytes::from_owner(map),
            pin,
        })
    }

    /// The identity of the file when it was mapped.
    pub fn pin(&self) -> &LocalPin {
        &self.pin
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
