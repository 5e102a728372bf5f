//! Local files: memory-mapped once, payload spans handed out as zero-copy `Bytes`.
//! Only regular files are opened; a map that another process truncates is survived
//! ([`Mapped`]) and reported by [`LocalFile::check_intact`].

use super::mapped::Mapped;
use crate::format::{FormatError, ReadAt};
use bytes::Bytes;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A read-only memory map of a local file, shared through `Bytes`.
#[derive(Debug, Clone)]
pub struct LocalFile {
    bytes: Bytes,
    /// The map behind `bytes` (`None` for an empty file), to ask whether a read faulted.
    map: Option<Arc<Mapped>>,
    /// The identity of the file when it was mapped.
    pin: LocalPin,
    /// The absolute path it was opened at.
    path: PathBuf,
}

/// A shared map as the owner of `Bytes`.
struct SharedMap(Arc<Mapped>);

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
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
    /// Map the regular file at `path`. Anything else (a FIFO, a device, a directory) is
    /// refused without being opened for reading: opening a FIFO blocks until a writer
    /// comes, and a device has no length to map.
    pub fn open(path: &Path) -> Result<LocalFile, FormatError> {
        refuse_special(&std::fs::metadata(path)?)?;
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        // Should the path become a FIFO between the look and the open, the open still
        // returns at once; the type is checked again on what was opened.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
        let file = options.open(path)?;
        let meta = file.metadata()?;
        refuse_special(&meta)?;
        let pin = LocalPin::of(&meta);
        if meta.len() == 0 {
            return Ok(LocalFile {
                bytes: Bytes::new(),
                map: None,
                pin,
                path: path.to_owned(),
            });
        }
        let map = Arc::new(Mapped::map(&file)?);
        Ok(LocalFile {
            bytes: Bytes::from_owner(SharedMap(map.clone())),
            map: Some(map),
            pin,
            path: path.to_owned(),
        })
    }

    /// `Ok` while the bytes read so far are the file's: no read past the end of a file
    /// truncated under the map (see [`Mapped`]), and the file at the path, if it is
    /// still the inode mapped, has the length and modification time it had when mapped.
    /// A file replaced by another (renamed over, or removed) leaves the map on the old
    /// one, whose bytes stay whole. `check_path` adds that look at the path (one `stat`).
    pub fn check_intact(&self, check_path: bool) -> Result<(), FormatError> {
        if self.map.as_ref().is_some_and(|m| m.faulted()) {
            return Err(FormatError::Changed {
                detail: "it was truncated while being read (its bytes past the new end are gone)".into(),
            });
        }
        if !check_path {
            return Ok(());
        }
        let Ok(now) = std::fs::metadata(&self.path).map(|m| LocalPin::of(&m)) else {
            return Ok(());
        };
        if now.inode == self.pin.inode && now != self.pin {
            return Err(FormatError::Changed {
                detail: format!(
                    "it was rewritten in place while being read (length {} then {})",
                    self.pin.len, now.len
                ),
            });
        }
        Ok(())
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

/// An error for anything but a regular file, naming what it is.
fn refuse_special(meta: &std::fs::Metadata) -> Result<(), FormatError> {
    let t = meta.file_type();
    if t.is_file() {
        return Ok(());
    }
    let what = if t.is_dir() { "a directory" } else { special_kind(&t) };
    Err(FormatError::invalid(
        "location",
        "file type",
        format!("is {what}, not a regular file"),
    ))
}

#[cfg(unix)]
fn special_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: &std::fs::FileType) -> &'static str {
    "a special file"
}
