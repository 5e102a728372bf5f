//! The SQL surface: [`TetTableProvider`], the table functions, `STORED AS TET`, the
//! aggregate pushdown and join rewrite rules, the `tet.*` session options and
//! [`register`](crate::register).
//!
//! Owns: mapping tables, filters, projections, limits and aggregations onto `plan` and
//! `exec`. May import every layer below; must not parse bytes (that is `format`) nor
//! walk payloads (that is `exec`).

mod agg_pushdown;
mod factory;
mod functions;
mod join_rewrite;
mod merge;
mod session_options;
mod table;

pub use agg_pushdown::{TetAggregatePushdown, TetAggregateTable};
pub use factory::{TetTableFactory, TetTableOptions};
pub use functions::{MetadataKind, TetChunksFunction, TetDatasetsFunction, TetFunction, TetMetadataTable};
pub use join_rewrite::TetJoinRewrite;
pub use merge::{FloatExtreme, MergeMoments, MomentKind, merge_functions};
pub use session_options::TetConfig;
#[cfg(feature = "ballista")]
pub(crate) use table::block_on;
pub use table::{TetTableProvider, open_source, open_source_with};
