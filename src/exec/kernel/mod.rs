//! The kernels: fold runs of payload elements into dense per-group accumulators. A leaf
//! of `exec`: it knows element types, runs and groups' slots, not tasks, tiles or plans.
//!
//! A chunk's selected cells are walked as contiguous runs along the innermost axis
//! ([`Runs`](crate::format::hyperslab::Runs)). When the innermost axis is reduced, a whole
//! run folds into one group ([`fold_run`], or a block of rows at once: [`fold_rows`]);
//! when it is grouped, element `i` of the run folds into a group of its own position
//! ([`fold_elementwise`], or as vector passes when the groups are consecutive:
//! [`fold_consecutive`]). Which elements count is a [`Keep`]: not missing, and within a
//! [`KeyRange`](crate::plan::KeyRange) when a comparison on `v` filters them. Loops keep
//! independent lanes (`lanes`) so the compiler vectorizes them without reassociating
//! floats; sums of floats accumulate in f64, integer sums wrap in 64 bits as DataFusion's
//! do, and variance states merge as (count, mean, M2) with Chan's formula (`moments`).
//!
//! The rooms, from the bottom: [`simd`] (instruction sets, prefetch, the copy macro),
//! `elem` (element types, the order of floats), `keep` (what counts), `lanes` (lane
//! widths, totals and the block driver), `moments` (statistics states), `accumulators`
//! (per-group slots), `wide` (sixteen-lane sums), then the kernels by shape: `run_stats`
//! and `runs` (whole runs), `sum_and_count` (two folds of one run), `elementwise`,
//! `weighted`, `cell_block` (the same cells of many slices: a per-cell map), and
//! `order_stats` (groups' values gathered, and the ranks of medians and percentiles), and
//! `sketch` (groups' values counted in buckets, for approximate percentiles).

mod accumulators;
mod cell_block;
mod elem;
mod elementwise;
mod keep;
mod lanes;
mod moments;
mod order_stats;
mod rows;
mod run_stats;
mod runs;
pub mod simd;
mod sketch;
mod sum_and_count;
mod weighted;
mod wide;

pub use accumulators::{Accumulators, Needs};
pub use cell_block::{CELL_BLOCK, Piece, cell_block_needs, fold_cell_block};
pub use elem::{Elem, NAN_NEGATIVE, NAN_POSITIVE, fmax, fmin};
pub use elementwise::{fold_consecutive, fold_elementwise, fold_value};
pub use keep::{Keep, Missing, cells_counted};
pub use moments::{CoMoment, Moments};
pub use order_stats::{GroupValues, OrderStat, Ordered, Statistic, order_stat};
pub use rows::Rows;
pub use runs::{fold_rows, fold_run};
pub use sketch::{GroupSketches, MAX_BUCKETS, SKETCH_BITS, Sketch, Sketched};
pub use sum_and_count::fold_run_sum_and_count;
pub use weighted::{fold_dot, fold_scaled, fold_weighted_run};
pub use wide::{masked_sum, ones, zip_sum};

#[cfg(test)]
mod tests;
