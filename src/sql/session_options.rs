//! Session options of datafusion-tet (namespace `tet`): `SET tet.aggregate_pushdown =
//! false` turns the aggregate pushdown off (used to compare against DataFusion's own
//! plan); `SET tet.nan_is_null = true` makes every NaN NULL; the `tet.*_bytes` / `tet.fetch_concurrency` options tune object store reads.

use crate::io::FetchOptions;
use crate::plan::TableModel;
use datafusion::common::config::ConfigExtension;
use datafusion::prelude::SessionConfig;
use std::sync::Arc;

datafusion::common::extensions_options! {
    /// Session options, namespace `tet`.
    pub struct TetConfig {
        /// Replace aggregations over `.tet` scans by `TetAggregateExec`.
        pub aggregate_pushdown: bool, default = true
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

    /// `table` as these options read it (`tet.nan_is_null`).
    pub fn table(&self, table: &Arc<TableModel>) -> Arc<TableModel> {
        table.with_nan_is_null(self.nan_is_null)
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
