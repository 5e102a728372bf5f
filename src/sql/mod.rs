//! The SQL surface: [`TetTableProvider`], the table functions, `STORED AS TET`, and
//! [`register`](crate::register).
//!
//! Owns: mapping tables, filters, projections and limits onto `plan` and `exec`. Must not
//! parse bytes (that is `format`) nor walk payloads (that is `exec`).

pub mod axes;
mod factory;
mod functions;
mod pruning;
mod table;

pub use factory::{TetTableFactory, TetTableOptions};
pub use functions::{TetChunksFunction, TetDatasetsFunction, TetFunction};
pub use table::{TetTableProvider, VALUE_COLUMN};
