//! # datafusion-tet
//!
//! SQL over `.tet` chunked n-dimensional array files with Apache DataFusion.
//!
//! A dataset is a table: one column per axis (named by the file's `dim_names`, holding
//! coordinate values where the file has them) and the value column `v`. Axis predicates
//! are resolved to index ranges so only the chunks they touch are read.
//!
//! ```no_run
//! # async fn demo() -> datafusion::error::Result<()> {
//! use datafusion::prelude::SessionContext;
//! let ctx = SessionContext::new();
//! datafusion_tet::register(&ctx);
//! ctx.sql("SELECT lat, avg(v) FROM tet('weather.tet', 'temp') GROUP BY lat").await?.show().await?;
//! # Ok(()) }
//! ```
//!
//! Layers, each importing only those below it (checked by a test; see
//! `docs/architecture.md`): [`format`](mod@format) (the layout, no DataFusion) ← [`io`] (where bytes
//! come from) ← [`plan`] (the table model and access plans) ← [`exec`] (execution plans and
//! kernels) ← [`sql`] (tables, functions, DDL, the pushdown rule) ← `ballista` (plan
//! serialization, cluster set-up) and the binaries.

#![deny(missing_debug_implementations)]

#[cfg(feature = "ballista")]
pub mod ballista;
pub mod exec;
pub mod format;
pub mod io;
pub mod plan;
pub mod sql;

pub use sql::{TetTableFactory, TetTableOptions, TetTableProvider};

use datafusion::execution::SessionState;
use datafusion::execution::registry::FunctionRegistry;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::SessionContext;
use std::sync::Arc;

/// Register everything on `ctx`: the table functions `tet`, `tet_datasets`, `tet_chunks`,
/// the `STORED AS TET` factory and its `tet.*` table options, the aggregate pushdown rule
/// with its merge functions, the `tet.*` session options (`SET tet.aggregate_pushdown =
/// false` turns the pushdown off; `tet.coalesce_gap_bytes` & co. tune object store reads)
/// and the session's [`io::SourceCache`] of opened files.
pub fn register(ctx: &SessionContext) {
    ctx.add_optimizer_rule(Arc::new(sql::TetJoinRewrite));
    ctx.add_optimizer_rule(Arc::new(sql::TetAggregatePushdown));
    install(&mut ctx.state_ref().write());
}

/// [`register`] for a [`SessionState`] (e.g. one a Ballista scheduler or executor builds
/// from its session configuration): the same functions, factory, options and rule.
pub fn register_state(state: SessionState) -> SessionState {
    let mut state = SessionStateBuilder::new_from_existing(state)
        .with_optimizer_rule(Arc::new(sql::TetJoinRewrite))
        .with_optimizer_rule(Arc::new(sql::TetAggregatePushdown))
        .build();
    install(&mut state);
    state
}

/// Everything of [`register`] but the optimizer rule.
fn install(state: &mut SessionState) {
    for f in sql::merge_functions() {
        // Replacing an earlier registration of the same function is fine.
        let _ = state.register_udaf(Arc::new(f));
    }
    state.register_udtf("tet", Arc::new(sql::TetFunction));
    state.register_udtf("tet_datasets", Arc::new(sql::TetDatasetsFunction));
    state.register_udtf("tet_chunks", Arc::new(sql::TetChunksFunction));
    state.register_udtf("tet_files", Arc::new(sql::TetFilesFunction));
    state.register_table_options_extension(TetTableOptions::default());
    state
        .table_factories_mut()
        .insert("TET".to_string(), Arc::new(TetTableFactory));
    with_tet_options(state.config_mut());
    keep_partial_aggregation(state.config_mut());
    if state.config().get_extension::<io::SourceCache>().is_none() {
        state.config_mut().set_extension(Arc::new(io::SourceCache::default()));
    }
}

/// DataFusion's default ratio of groups to rows above which a partial aggregate stops
/// aggregating and passes rows on as states.
const SKIP_PARTIAL_RATIO_DEFAULT: f64 = 0.8;

/// Turn off DataFusion's skip of partial aggregation, unless the session chose its own
/// ratio: DataFusion 55.2's grouped `percentile_cont` panics when it is skipped (its
/// `convert_to_state` asserts one argument and is given two), and many groups (a
/// percentile per grid cell) are what trigger the skip. Our fold does not use it; a row
/// plan of many groups keeps its partial aggregate, at some cost.
fn keep_partial_aggregation(config: &mut datafusion::prelude::SessionConfig) {
    let execution = &mut config.options_mut().execution;
    if execution.skip_partial_aggregation_probe_ratio_threshold == SKIP_PARTIAL_RATIO_DEFAULT {
        execution.skip_partial_aggregation_probe_ratio_threshold = 1.0;
    }
}

/// Add the `tet.*` session options to `config` unless it has them.
pub(crate) fn with_tet_options(config: &mut datafusion::prelude::SessionConfig) {
    let options = config.options_mut();
    if options.extensions.get::<sql::TetConfig>().is_none() {
        options.extensions.insert(sql::TetConfig::default());
    }
}
