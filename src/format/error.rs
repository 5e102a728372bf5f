//! The one error type of the format layer.
//!
//! Every variant names the region and field it concerns and carries the values that were
//! seen, so a message alone tells a user what is wrong with which part of which file. The
//! file name itself is attached by the caller ([`FormatError::in_file`]), because the
//! parsers below only ever see bytes.

use thiserror::Error;

/// Everything that can go wrong while reading, decoding or writing a `.tet` file.
#[derive(Debug, Error)]
pub enum FormatError {
    /// The file is shorter than a region that must be present.
    #[error("{region}: need {need} bytes at offset {offset}, but the file has {file_len}")]
    Truncated {
        region: &'static str,
        offset: u64,
        need: u64,
        file_len: u64,
    },
    /// A magic number does not match.
    #[error("{region}: bad magic {found:?} at offset {offset} (expected {expected:?})")]
    BadMagic {
        region: &'static str,
        offset: u64,
        expected: String,
        found: String,
    },
    /// A version field holds a value this reader does not implement.
    #[error("{region}: unsupported {field} {value} (supported: {supported})")]
    UnsupportedVersion {
        region: &'static str,
        field: &'static str,
        value: u64,
        supported: &'static str,
    },
    /// A field holds a value outside its allowed range or inconsistent with another field.
    #[error("{region}: {field} {problem}")]
    Invalid {
        region: String,
        field: &'static str,
        problem: String,
    },
    /// Arithmetic on file-provided sizes overflowed.
    #[error("{region}: {what} overflows 64-bit arithmetic")]
    Overflow { region: String, what: String },
    /// A size the file claims is above a limit the caller set (see `TetFile::read_box`).
    #[error("{region}: {what} of {size} bytes is above the limit of {limit} bytes")]
    TooLarge {
        region: String,
        what: &'static str,
        size: u64,
        limit: u64,
    },
    /// A chunk payload failed to decode.
    #[error("chunk index row {row}: {problem}")]
    Decode { row: usize, problem: String },
    /// The history footer exists but cannot be understood.
    #[error("history footer: {0}")]
    Footer(String),
    /// A dataset name that the file does not contain.
    #[error("no dataset named {name:?}; the file has: {available}")]
    NoSuchDataset { name: String, available: String },
    /// Invalid arguments given to the writer (not a file problem).
    #[error("writer: {0}")]
    Write(String),
    /// Fetching bytes from an object store or server failed (the store's error is the source).
    #[error("{what}: {source}")]
    Fetch {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The file or object was replaced, resized or rewritten after it was opened.
    #[error("the file changed after it was opened ({detail}); re-run the query to read the new version")]
    Changed { detail: String },
    /// An operating-system I/O error.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// Any of the above, attributed to one file.
    #[error("{path}: {source}")]
    InFile {
        path: String,
        #[source]
        source: Box<FormatError>,
    },
}

impl FormatError {
    /// Attribute this error to a file (path or URL), unless it already is.
    pub fn in_file(self, path: impl Into<String>) -> Self {
        match self {
            e @ FormatError::InFile { .. } => e,
            e => FormatError::InFile {
                path: path.into(),
                source: Box::new(e),
            },
        }
    }

    pub(crate) fn invalid(region: impl Into<String>, field: &'static str, problem: impl Into<String>) -> Self {
        FormatError::Invalid {
            region: region.into(),
            field,
            problem: problem.into(),
        }
    }

    pub(crate) fn overflow(region: impl Into<String>, what: impl Into<String>) -> Self {
        FormatError::Overflow {
            region: region.into(),
            what: what.into(),
        }
    }
}

/// Result alias of the format layer.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;
