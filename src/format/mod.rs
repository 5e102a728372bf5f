//! The `.tet` layout v1 format layer: pure, synchronous, no DataFusion.
//!
//! It owns the on-disk layout (`../shared/spec/layout_v1.md`): parsing from byte slices
//! through [`ReadAt`] with every length checked before use, chunk decoding, and writing.
//! It must not know where bytes come from (that is `io`) nor anything about queries.
//!
//! ```
//! use datafusion_tet::format::{DType, DatasetSpec, TetFile, TetWriter};
//! let data: Vec<u8> = (1..=6).flat_map(|v: i32| (v as f32).to_le_bytes()).collect();
//! let mut w = TetWriter::new();
//! w.dataset(DatasetSpec::new("t", DType::F32, &[2, 3], &[2, 2], &data).dim_names(&["row", "col"]))?;
//! let bytes = w.to_bytes()?;
//! let file = TetFile::open(bytes.as_slice())?;
//! let t = file.dataset("t")?;
//! assert_eq!(t.record.grid, vec![1, 2]);
//! assert_eq!(t.dim_names(), vec!["row", "col"]);
//! # Ok::<(), datafusion_tet::format::FormatError>(())
//! ```

pub mod bytes;
pub mod cf;
pub mod codec;
pub mod directory;
pub mod dtype;
pub mod error;
pub mod file;
pub mod footer;
pub mod hyperslab;
pub mod index;
mod read;
pub mod superblock;
pub mod writer;

pub use bytes::ReadAt;
pub use cf::{MissingValues, Packing};
pub use directory::DatasetRecord;
pub(crate) use dtype::with_dtype;
pub use dtype::{DType, Element, Scalar, elements};
pub use error::{FormatError, Result};
pub use file::{Dataset, Footer, TetFile};
pub use footer::{CoordLabels, DatasetMeta, FileMeta, HistoryEvent, ZoneStat};
pub use index::{ChunkEntry, Codec, ExecutionSettings};
pub use writer::{ChunkCodecs, DatasetSpec, TetWriter};
