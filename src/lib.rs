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
//! Modules, top to bottom: [`sql`] (tables, functions, DDL) → [`exec`] (execution plans)
//! → [`plan`] (selections, chunk tasks) → [`io`] (bytes) → [`format`] (the layout).

#![deny(missing_debug_implementations)]

pub mod demo;
pub mod exec;
pub mod format;
pub mod io;
pub mod plan;
pub mod sql;

pub use sql::{TetTableFactory, TetTableOptions, TetTableProvider};

use datafusion::prelude::SessionContext;
use std::sync::Arc;

/// Register everything on `ctx`: the table functions `tet`, `tet_datasets`, `tet_chunks`,
/// the `STORED AS TET` factory and its `tet.*` table options, the aggregate pushdown rule
/// with its merge functions, the `tet.*` session options (`SET tet.aggregate_pushdown =
/// false` turns the pushdown off; `tet.coalesce_gap_bytes` & co. tune object store reads)
/// and the session's [`io::CatalogCache`] of opened object store files.
pub fn register(ctx: &SessionContext) {
    for kind in sql::MomentKind::ALL {
        ctx.register_udaf(datafusion::logical_expr::AggregateUDF::from(sql::MergeMoments::new(
            kind,
        )));
    }
    for max in [false, true] {
        ctx.register_udaf(datafusion::logical_expr::AggregateUDF::from(sql::FloatExtreme::new(
            max,
        )));
    }
    ctx.add_optimizer_rule(Arc::new(sql::TetAggregatePushdown));
    ctx.register_udtf("tet", Arc::new(sql::TetFunction));
    ctx.register_udtf("tet_datasets", Arc::new(sql::TetDatasetsFunction));
    ctx.register_udtf("tet_chunks", Arc::new(sql::TetChunksFunction));
    ctx.register_table_options_extension(TetTableOptions::default());
    let state = ctx.state_ref();
    let mut state = state.write();
    state
        .table_factories_mut()
        .insert("TET".to_string(), Arc::new(TetTableFactory));
    state
        .config_mut()
        .options_mut()
        .extensions
        .insert(sql::TetConfig::default());
    state.config_mut().set_extension(Arc::new(io::CatalogCache::default()));
}
