//! The SQL surface: [`TetTableProvider`], the table functions, `STORED AS TET`, the
//! aggregate pushdown and join rewrite rules, the `tet.*` session options and
//! [`register`](crate::register).
//!
//! Owns: mapping tables, filters, projections, limits and aggregations onto `plan` and
//! `exec`. May import every layer below; must not parse bytes (that is `format`) nor
//! walk payloads (that is `exec`).

mod agg_pushdown;
mod aggregate_table;
mod archive;
mod factory;
mod files_table;
mod foldable;
mod functions;
mod join_rewrite;
mod merge;
mod session_options;
mod table;

pub use agg_pushdown::TetAggregatePushdown;
pub use aggregate_table::TetAggregateTable;
#[cfg(feature = "ballista")]
pub(crate) use archive::block_on;
pub use archive::{open_source, open_source_with, open_table};
pub use factory::{TetTableFactory, TetTableOptions};
pub use files_table::TetFilesFunction;
pub use functions::{MetadataKind, TetChunksFunction, TetDatasetsFunction, TetFunction, TetMetadataTable};
pub use join_rewrite::TetJoinRewrite;
pub use merge::{FloatExtreme, MergeMoments, MomentKind, merge_functions};
pub use session_options::TetConfig;
pub use table::TetTableProvider;
