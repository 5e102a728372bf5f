//! The SQL surface: [`TetTableProvider`], the table functions, `STORED AS TET`, and
//! [`register`](crate::register).
//!
//! Owns: mapping tables, filters, projections and limits onto `plan` and `exec`. Must not
//! parse bytes (that is `format`) nor walk payloads (that is `exec`).

mod agg_pushdown;
pub mod axes;
mod factory;
mod functions;
mod merge_m2;
mod pruning;
mod session_options;
mod table;

#[cfg(feature = "ballista")]
pub(crate) use agg_pushdown::check_plan;
pub use agg_pushdown::{TetAggregatePushdown, TetPartialAggregate};
pub use factory::{TetTableFactory, TetTableOptions};
pub use functions::{CatalogKind, TetCatalogTable, TetChunksFunction, TetDatasetsFunction, TetFunction};
pub use merge_m2::{FloatExtreme, MergeMoments, MomentKind, merge_functions};
pub use session_options::TetConfig;
pub use table::{TetTableProvider, VALUE_COLUMN, open_source, open_source_with};
#[cfg(feature = "ballista")]
pub(crate) use table::{block_on, to_df};
