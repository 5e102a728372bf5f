//! [`Limits`]: how much a query may make of what a file claims, checked before anything
//! is allocated or walked from the claim.
//!
//! A few hundred bytes of file can claim a tile of 2^40 cells (a zstd frame need not say
//! how much it yields) or an axis of 2^62 positions. Work that is proportional to the
//! query's answer needs no limit; the three things below are proportional to a claim, so
//! each has a documented default that a session option (`tet.max_tile_bytes`,
//! `tet.max_dataset_cells`, `tet.max_axis_positions`) can raise.

use datafusion::common::Result;
use datafusion::error::DataFusionError;

/// Default of [`Limits::max_tile_bytes`]: 1 GiB.
pub const DEFAULT_MAX_TILE_BYTES: u64 = 1 << 30;
/// Default of [`Limits::max_dataset_cells`]: 2^44 (16 Ti cells, 64 TiB of f32).
pub const DEFAULT_MAX_DATASET_CELLS: u64 = 1 << 44;
/// Default of [`Limits::max_axis_positions`]: 2^26 (67 M positions).
pub const DEFAULT_MAX_AXIS_POSITIONS: u64 = 1 << 26;

/// The most cells a table can have at all: row counts are SQL `BIGINT`s.
pub const MAX_TABLE_CELLS: u64 = i64::MAX as u64;

/// Bounds on what a query may make of a file's claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one tile held in memory: a decoded zstd chunk, or the stored bytes of a
    /// chunk fetched from an object store. (Raw chunks of a local file are read in place
    /// from the mapping and are not limited.)
    pub max_tile_bytes: u64,
    /// Cells of one dataset a query may read (at most [`MAX_TABLE_CELLS`]).
    pub max_dataset_cells: u64,
    /// Positions of one axis that may be evaluated one by one while planning: an axis
    /// filter that is not a comparison with constants, a group key, a weight. Filters of
    /// position axes made of comparisons with constants are resolved on intervals and
    /// need no such work.
    pub max_axis_positions: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_tile_bytes: DEFAULT_MAX_TILE_BYTES,
            max_dataset_cells: DEFAULT_MAX_DATASET_CELLS,
            max_axis_positions: DEFAULT_MAX_AXIS_POSITIONS,
        }
    }
}

/// `Ok` when `size` is within `limit`; otherwise DataFusion's "resources exhausted" error,
/// naming the file, what was claimed (`what`, made only then), the limit and the option
/// that raises it.
fn within(location: &str, what: impl FnOnce() -> String, size: u64, limit: u64, option: &str) -> Result<()> {
    if size <= limit {
        return Ok(());
    }
    Err(DataFusionError::ResourcesExhausted(format!(
        "{location}: {} is {size}, above {option} = {limit}; raise it with SET {option} = <n> if this is intended",
        what()
    )))
}

impl Limits {
    /// Check a tile of `bytes` (decoded, or fetched) of dataset `dataset` against
    /// [`Limits::max_tile_bytes`].
    pub fn check_tile(&self, location: &str, dataset: &str, chunk: u64, bytes: u64) -> Result<()> {
        let what = || format!("dataset {dataset:?}: the tile of chunk {chunk} in bytes");
        within(location, what, bytes, self.max_tile_bytes, "tet.max_tile_bytes")
    }

    /// Check the tile assembled of dataset `dataset` for a task (in the first dataset's
    /// chunk `chunk`) whose cells lie in several of its chunks against
    /// [`Limits::max_tile_bytes`]: it is held in memory like a decoded tile.
    pub fn check_assembled(&self, location: &str, dataset: &str, chunk: u64, bytes: u64) -> Result<()> {
        let what = || {
            format!(
                "dataset {dataset:?}: the tile assembled from its chunks for chunk {chunk} of the table's first dataset, in bytes"
            )
        };
        within(location, what, bytes, self.max_tile_bytes, "tet.max_tile_bytes")
    }

    /// Check the cell count of dataset `dataset` against [`Limits::max_dataset_cells`].
    pub fn check_cells(&self, location: &str, dataset: &str, shape: &[u64], cells: u64) -> Result<()> {
        let what = || format!("dataset {dataset:?}: the cell count of shape {shape:?}");
        let limit = self.max_dataset_cells.min(MAX_TABLE_CELLS);
        within(location, what, cells, limit, "tet.max_dataset_cells")
    }

    /// Check that `positions` positions of axis `axis` may be evaluated one by one for
    /// `why` (e.g. "the group key") against [`Limits::max_axis_positions`].
    pub fn check_axis(&self, location: &str, axis: &str, why: &str, positions: u64) -> Result<()> {
        let what = || format!("{why} over axis {axis:?} evaluates each position; the positions to evaluate");
        within(
            location,
            what,
            positions,
            self.max_axis_positions,
            "tet.max_axis_positions",
        )
    }
}
