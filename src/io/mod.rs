//! Where a file's bytes come from, and opening a file into a shareable [`TetSource`].
//!
//! Owns: resolving a user-given location (path or `file://` URL) to bytes, memory-mapping
//! local files, and handing out payload spans as `bytes::Bytes` (zero-copy over the mmap).
//! Must not parse the format itself (that is `format`) nor know about queries.

mod local;

pub use local::LocalFile;

use crate::format::{FormatError, ReadAt, TetFile};
use bytes::Bytes;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// An opened, validated `.tet` file: its location, its bytes and its parsed catalog.
pub struct TetSource {
    /// The location as the user wrote it (for messages).
    pub location: String,
    /// The absolute path or URL the bytes come from.
    pub resolved: String,
    bytes: LocalFile,
    /// The validated catalog.
    pub catalog: Arc<TetFile>,
}

impl fmt::Debug for TetSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TetSource")
            .field("location", &self.location)
            .field("file_len", &self.catalog.file_len)
            .finish()
    }
}

impl TetSource {
    /// Open and validate the file at `location` (a path, relative to the current
    /// directory, or a `file://` URL).
    pub fn open(location: &str) -> Result<Arc<TetSource>, FormatError> {
        let path = local_path(location).map_err(|e| e.in_file(location))?;
        let resolved = path.display().to_string();
        let bytes = LocalFile::open(&path).map_err(|e| e.in_file(location))?;
        let catalog = TetFile::open(&bytes).map_err(|e| e.in_file(location))?;
        Ok(Arc::new(TetSource {
            location: location.to_owned(),
            resolved,
            bytes,
            catalog: Arc::new(catalog),
        }))
    }

    /// The stored bytes `offset .. offset + len` (zero-copy for local files).
    pub fn span(&self, offset: u64, len: u64) -> Result<Bytes, FormatError> {
        self.bytes.span(offset, len).map_err(|e| e.in_file(&self.location))
    }
}

impl ReadAt for TetSource {
    fn len(&self) -> u64 {
        self.bytes.len()
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, FormatError> {
        self.bytes.read_at(offset, len)
    }
}

/// Resolve a local location to an absolute path.
fn local_path(location: &str) -> Result<std::path::PathBuf, FormatError> {
    let raw = location.strip_prefix("file://").unwrap_or(location);
    if let Some((scheme, _)) = raw.split_once("://") {
        return Err(FormatError::invalid(
            "location",
            "scheme",
            format!("{scheme}:// is not supported: give a local path or a file:// URL"),
        ));
    }
    if raw.is_empty() {
        return Err(FormatError::invalid("location", "path", "is empty"));
    }
    Ok(std::path::absolute(raw)?)
}
