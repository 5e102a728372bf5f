//! Runs folded whole into one group each: a run ([`fold_run`]) or a block of rows of a
//! tile ([`fold_rows`], one group per row).

use super::accumulators::Accumulators;
use super::elem::{Elem, fmax, fmin};
use super::keep::Keep;
use super::rows::Rows;
use super::run_stats::{RunStats, run_m2, run_stats};
use super::simd::multiversion;

// AVX-512: LLVM packs the eight minimum and eight maximum lanes of f32 runs into one
// 512-bit register, moving halves in and out per step (perf annotate: kunpckbw,
// vinsertf64x4, vextractf64x4), and folds with min/max ran slower than the AVX2 copy.
multiversion! {
    up_to_avx2;
    /// Fold a whole run into group `g`. Cells are the run's length, or with a range the
    /// elements in it (a comparison is never true of a NULL).
    pub fn fold_run[T](acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>) where [T: Elem] = run_into;
}

/// The body of [`fold_run`], inlined into each kernel that folds runs.
#[inline(always)]
pub(super) fn run_into<T: Elem>(acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>) {
    let st = run_stats(run, keep, acc.needs);
    add_run(acc, g, run, keep, st)
}

// As `fold_run`: its loops.
multiversion! {
    up_to_avx2;
    /// Fold the block of `rows` in `tile`, each row into its group as [`fold_run`] folds a
    /// run, in one call (a call per row of 720 values cost its dispatch and the walk's step
    /// per row).
    pub fn fold_rows[T](acc: &mut Accumulators, tile: &[T], rows: &Rows, keep: &Keep<T>) where [T: Elem] = fold_rows_body;
}

/// The body of [`fold_rows`], compiled into each of its copies.
#[inline(always)]
fn fold_rows_body<T>(acc: &mut Accumulators, tile: &[T], rows: &Rows, keep: &Keep<T>)
where
    T: Elem,
{
    if f32_rows(acc, tile, rows, keep) {
        return;
    }
    // Inlined, as every closure of a kernel must be: a closure is compiled for the
    // baseline unless inlined into the copy (not inlined, this fold of rows ran in
    // SSE2, and `GROUP BY lat` ran much slower).
    rows.each(
        tile,
        #[inline(always)]
        |g, row| run_into(acc, g, row, keep),
    );
}

/// [`fold_rows`] of f32 rows of a multiple of 16 values when only their sums are needed
/// and nothing is missing or ranged, on an x86-64 copy: each row's total from
/// [`simd::f32_row_totals`](super::simd::f32_row_totals), bit-identical to the row's
/// [`fold_run`]. False (nothing folded) where that does not apply.
#[inline(always)]
pub(super) fn f32_rows<T: Elem>(acc: &mut Accumulators, tile: &[T], rows: &Rows, keep: &Keep<T>) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use super::simd::{Isa, current, f32_row_totals};
        let len = rows.row_len;
        if !(acc.needs.sum_only() && keep.takes_all())
            || len == 0
            || !len.is_multiple_of(16)
            || current() == Isa::Portable
        {
            return false;
        }
        let Some(x) = T::as_f32(&tile[rows.tile_offset..rows.tile_offset + rows.len()]) else {
            return false;
        };
        const BATCH: usize = 64;
        let mut totals = [0f64; BATCH];
        for (ids, cells) in rows.ids.chunks(BATCH).zip(x.chunks(BATCH * len)) {
            let totals = &mut totals[..ids.len()];
            // SAFETY: `current` names a level above the portable one only when the CPU
            // has AVX2, so AVX.
            if !unsafe { f32_row_totals(cells, len, totals) } {
                // Not reached: `cells` holds `ids.len()` whole rows of a multiple of 16.
                for (&id, row) in ids.iter().zip(cells.chunks_exact(len)) {
                    run_into(acc, rows.base + id as usize * rows.stride, row, &Keep::default());
                }
                continue;
            }
            for (&id, &total) in ids.iter().zip(totals.iter()) {
                let g = rows.base + id as usize * rows.stride;
                acc.cells[g] += len as u64;
                acc.n[g] += len as u64;
                acc.fsum[g] += total;
            }
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (acc, tile, rows, keep);
        false
    }
}

/// Add the statistics `st` of `run` (kept by `keep`) to group `g`. Cells are the run's
/// length, or with a range the elements in it (a comparison is never true of a NULL).
#[inline(always)]
pub(super) fn add_run<T: Elem>(acc: &mut Accumulators, g: usize, run: &[T], keep: &Keep<T>, st: RunStats<T>) {
    let needs = acc.needs;
    acc.cells[g] += keep.cells(run.len(), || st.n);
    acc.n[g] += st.n;
    if needs.fsum {
        acc.fsum[g] += st.fsum;
    }
    if needs.isum {
        acc.isum[g] = acc.isum[g].wrapping_add(st.isum);
    }
    if needs.min_max && st.n > 0 {
        if T::FLOAT {
            // fmin/fmax ignore the NaN the slots start with.
            if st.n > st.nans {
                acc.fmin[g] = fmin(acc.fmin[g], st.min.f());
                acc.fmax[g] = fmax(acc.fmax[g], st.max.f());
            }
            acc.nan[g] |= st.nan_signs;
        } else {
            acc.imin[g] = acc.imin[g].min(st.min.wide());
            acc.imax[g] = acc.imax[g].max(st.max.wide());
        }
    }
    if needs.moments && st.n > 0 {
        let mean = st.fsum / st.n as f64;
        let m2 = run_m2(run, keep, mean);
        acc.merge_moments(g, st.n, mean, m2);
    }
}
