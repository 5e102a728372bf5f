//! The per-cell fold of a cell block ([`fold_cell_block`]): the same cells of a stack of
//! slices of tiles (one time step each, say) folded into slots of their own, one per cell,
//! so that each cell's state is merged into its group once per stack of slices. Folding
//! each slice straight into the groups would sweep every group's slots through the caches
//! once per slice: a map of 260 000 cells holds megabytes of them.

use super::accumulators::{Accumulators, Needs};
use super::elem::Elem;
use super::elementwise::fold_consecutive;
use super::keep::Keep;
use super::simd::multiversion;

/// Cells of one cell block of a per-cell fold: its slots (about 50 bytes each with the
/// sum, count and extremes) stay within a core's L2, and each slice gives it 32 KiB of f32
/// in one piece (the sizes tried: benches/RESULTS.md, maps per grid cell).
pub const CELL_BLOCK: usize = 8192;

/// A stretch of a cell block's cells in each slice: `len` elements from `offset` in the
/// slice, into the cell block's slots from `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub slot: usize,
    pub offset: usize,
    pub len: usize,
}

/// The statistics a cell block's slots fold for an input that needs `needs`: a variance
/// from the sums ([`fold_cell_block`] adds its second pass), no Welford step (a division
/// per element).
pub fn cell_block_needs(needs: Needs) -> Needs {
    Needs {
        moments: false,
        fsum: needs.fsum || needs.moments,
        ..needs
    }
}

/// Fold the cells `pieces` pick out of each of `slices` into `slots` (made with
/// [`cell_block_needs`] of `needs`), reset to `cells` slots of a `float` (else integer)
/// input first. Counts are settled. With `needs.moments` each slot's variance state is
/// computed in two passes (its sum, then the squared deviations from its mean) into
/// `slots.mean` and `slots.m2`, to be merged as (count, mean, M2) by Chan's formula.
pub fn fold_cell_block<T: Elem>(
    slots: &mut Accumulators,
    (needs, float, cells): (Needs, bool, usize),
    slices: &[&[T]],
    pieces: &[Piece],
    keep: &Keep<T>,
) {
    slots.reset(cells, float);
    for s in slices {
        for p in pieces {
            fold_consecutive(slots, p.slot, &s[p.offset..p.offset + p.len], keep);
        }
    }
    slots.settle();
    if needs.moments {
        let Accumulators { fsum, n, mean, m2, .. } = slots;
        mean.clear();
        mean.extend(
            fsum.iter()
                .zip(n.iter())
                .map(|(&s, &n)| if n > 0 { s / n as f64 } else { 0.0 }),
        );
        m2.clear();
        m2.resize(cells, 0.0);
        for s in slices {
            for p in pieces {
                let (at, x) = (p.slot..p.slot + p.len, &s[p.offset..p.offset + p.len]);
                squared_deviations(&mut m2[at.clone()], &mean[at], x, keep);
            }
        }
    }
}

multiversion! {
    /// Add `(x[i] - mean[i])²` to `m2[i]` for each `x[i]` that `keep` takes.
    fn squared_deviations[T](m2: &mut [f64], mean: &[f64], x: &[T], keep: &Keep<T>) where [T: Elem] = squared_deviations_body;
}

/// The body of [`squared_deviations`], compiled into each of its copies.
#[inline(always)]
fn squared_deviations_body<T: Elem>(m2: &mut [f64], mean: &[f64], x: &[T], keep: &Keep<T>) {
    let each = m2.iter_mut().zip(mean).zip(x);
    if keep.takes_all() {
        each.for_each(|((m, &mu), &v)| {
            let d = v.f() - mu;
            *m += d * d;
        });
    } else {
        each.for_each(|((m, &mu), &v)| {
            let d = if keep.test(v) { v.f() - mu } else { 0.0 };
            *m += d * d;
        });
    }
}
