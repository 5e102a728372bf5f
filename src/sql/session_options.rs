//! Session options of datafusion-tet (namespace `tet`): `SET tet.aggregate_pushdown =
//! false` turns the aggregate pushdown off, `SET tet.merge_in_scan = false` leaves the
//! merge of its partitions to DataFusion, and `SET tet.join_rewrite = false` the join
//! rewrite (used to compare against DataFusion's own plan); `SET tet.nan_is_null = true` makes every NaN NULL; `tet.coalesce_gap_bytes`,
//! `tet.max_request_bytes`, `tet.fetch_concurrency` and `tet.fetch_window_bytes` tune object
//! store reads; `tet.max_tile_bytes`, `tet.max_dataset_cells` and `tet.max_axis_positions`
//! bound what a query may make of a file's claims ([`Limits`]); `tet.cache_max_bytes`
//! bounds the session's [`SourceCache`]; `tet.concat_axis`, `tet.max_files` and
//! `tet.open_concurrency` shape tables over archives.

use crate::io::{FetchOptions, SourceCache};
use crate::plan::{Limits, TableModel};
use datafusion::common::config::ConfigExtension;
use datafusion::prelude::SessionConfig;
use std::sync::Arc;

datafusion::common::extensions_options! {
    /// Session options, namespace `tet`.
    pub struct TetConfig {
        /// Replace aggregations over `.tet` scans by `TetAggregateExec`.
        pub aggregate_pushdown: bool, default = true
        /// Let `TetAggregateExec` merge its partitions itself and emit the aggregates'
        /// values in one partition when the groups fit 2^18 slots (no partial aggregate,
        /// repartition and final aggregate above it); off, DataFusion merges partial
        /// states. Ballista sessions turn it off: their partitions run apart.
        pub merge_in_scan: bool, default = true
        /// Plan inner joins of `.tet` tables on all of their axes, whose axis values are
        /// equal, as one scan of both tables' value columns.
        pub join_rewrite: bool, default = true
        /// Make every NaN value NULL (as xarray's skip-NaN reductions treat it), not only
        /// the cells a NaN `_FillValue` marks.
        pub nan_is_null: bool, default = false
        /// Object stores: chunk payloads closer than this many bytes are read by one request.
        pub coalesce_gap_bytes: u64, default = 1 << 20
        /// Object stores: coalesced requests are split above this size.
        pub max_request_bytes: u64, default = 8 << 20
        /// Object stores: range requests in flight at once, per partition.
        pub fetch_concurrency: usize, default = 8
        /// Object stores: stored bytes fetched ahead of decoding, per partition.
        pub fetch_window_bytes: u64, default = 32 << 20
        /// Largest tile held in memory, in bytes: a decoded zstd chunk or a chunk fetched
        /// from an object store (local raw chunks are read in place).
        pub max_tile_bytes: u64, default = crate::plan::DEFAULT_MAX_TILE_BYTES
        /// Most cells of one dataset a query may read (at most 2^63 - 1).
        pub max_dataset_cells: u64, default = crate::plan::DEFAULT_MAX_DATASET_CELLS
        /// Most positions of one axis evaluated one by one while planning (axis filters
        /// other than comparisons with constants, group keys, weights).
        pub max_axis_positions: u64, default = crate::plan::DEFAULT_MAX_AXIS_POSITIONS
        /// Bytes of parsed catalogs and fetched metadata the session keeps of files it
        /// opened, least recently used dropped first (0 keeps only the file in use).
        pub cache_max_bytes: u64, default = crate::io::DEFAULT_CACHE_BYTES
        /// The axis the files of an archive table are concatenated along; empty: the one
        /// axis whose coordinates differ between its files.
        pub concat_axis: String, default = String::new()
        /// Most files one table's pattern may match.
        pub max_files: u64, default = 100_000
        /// Files of an archive opened at once (their metadata read concurrently).
        pub open_concurrency: usize, default = 16
    }
}

impl ConfigExtension for TetConfig {
    const PREFIX: &'static str = "tet";
}

impl TetConfig {
    /// The fetch policy these options describe.
    pub fn fetch_options(&self) -> FetchOptions {
        FetchOptions {
            coalesce_gap: self.coalesce_gap_bytes,
            max_request: self.max_request_bytes.max(1),
            concurrency: self.fetch_concurrency.max(1),
            window: self.fetch_window_bytes.max(1),
        }
    }

    /// The limits these options set (`tet.max_*`).
    pub fn limits(&self) -> Limits {
        Limits {
            max_tile_bytes: self.max_tile_bytes,
            max_dataset_cells: self.max_dataset_cells,
            max_axis_positions: self.max_axis_positions,
        }
    }

    /// `table` as these options read it (`tet.nan_is_null`, `tet.max_*`).
    pub fn table(&self, table: &Arc<TableModel>) -> Arc<TableModel> {
        table.with_nan_is_null(self.nan_is_null).with_limits(self.limits())
    }

    /// The session's [`SourceCache`] (installed by [`crate::register`]), bounded by
    /// `tet.cache_max_bytes`.
    pub fn source_cache(config: &SessionConfig) -> Option<Arc<SourceCache>> {
        let cache = config.get_extension::<SourceCache>()?;
        cache.set_max_bytes(TetConfig::of(config).cache_max_bytes);
        Some(cache)
    }

    /// The concatenation axis `tet.concat_axis` forces, if any.
    pub fn concat_axis(&self) -> Option<&str> {
        Some(self.concat_axis.trim()).filter(|a| !a.is_empty())
    }

    /// The options of a session (defaults when `tet` is not registered).
    pub fn of(config: &SessionConfig) -> TetConfig {
        config
            .options()
            .extensions
            .get::<TetConfig>()
            .cloned()
            .unwrap_or_default()
    }
}
