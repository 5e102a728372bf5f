//! A task's cells as Arrow arrays: its value and axis columns (`columns`), and
//! DataFusion's own physical expressions evaluated over them ([`TileExprs`]).

mod columns;
mod exprs;

pub use columns::{axis_positions, selected_bytes, value_array};
pub use exprs::{TileExprs, compile};
