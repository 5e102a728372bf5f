//! Arithmetic expressions of value columns compiled to loops over blocks of a task's
//! cells: the non-affine inputs analysts write (`sqrt(abs(v))`, `v * v`,
//! `(v - c) / (v + d)`, and over several datasets `t2m - sst`, `u * u + v * v`),
//! evaluated without building Arrow arrays per tile.
//!
//! Only operations whose results are exactly DataFusion's for the same types compile:
//! IEEE arithmetic (`+ - * / %`) and negation of f32 or f64, `abs`, `sqrt` (with
//! DataFusion's error for a negative input), casts between f32 and f64, and value
//! columns read as their own float type or cast to one. Anything else is evaluated by
//! DataFusion's own expressions (`tile::TileExprs`).
//!
//! A program reads its columns through [`Cells`]: a tile's stored values of one dataset,
//! or the aligned cells of several ([`AlignedCells`]). The rooms: `steps` (the compiled
//! form), `compile`, `run`, `lane` (what programs read and compute in), `aligned`.

mod aligned;
mod compile;
mod lane;
mod run;
mod steps;

pub use aligned::AlignedCells;
pub use compile::weighted_program;
pub use lane::{BLOCK, Cells, Lane, Scratch, convert};
pub use steps::{Program, Ty};
