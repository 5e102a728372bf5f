//! Session options of datafusion-tet: `SET tet.aggregate_pushdown = false` turns the
//! aggregate pushdown off (used to compare against DataFusion's own plan).

use datafusion::common::config::ConfigExtension;

datafusion::common::extensions_options! {
    /// Session options, namespace `tet`.
    pub struct TetConfig {
        /// Replace aggregations over `.tet` scans by `TetAggregateExec`.
        pub aggregate_pushdown: bool, default = true
    }
}

impl ConfigExtension for TetConfig {
    const PREFIX: &'static str = "tet";
}
