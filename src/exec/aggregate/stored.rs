use super::task_fold::TaskFold;
use crate::exec::kernel::{
    Accumulators, Elem, Keep, Missing, fold_consecutive, fold_elementwise, fold_rows, fold_run, fold_run_sum_and_count,
};
use crate::exec::walk::{Segment, Target, Walked, walk_rows, walk_segments};
use crate::format::{elements, with_dtype};
use crate::plan::KeyRange;
use arrow::buffer::Buffer;

/// Fold the stored values of one chunk task (`tile`; without it only cells are counted)
/// into `acc`, keeping those in `range`.
pub(super) fn fold_stored(at: TaskFold, acc: &mut Accumulators, tile: Option<&Buffer>, range: Option<KeyRange>) {
    let TaskFold { table, gi, task, start } = at;
    let Some(tile) = tile else {
        let mut count = |g: usize, cells: usize| {
            acc.cells[g] += cells as u64;
            acc.n[g] += cells as u64;
        };
        walk_rows(gi, task, start, |w| match w {
            Walked::Segment(s) => match s.target {
                Target::One(g) => count(g, s.len),
                t @ Target::Each { .. } => (0..s.len).for_each(|i| count(t.group(i), 1)),
            },
            Walked::Rows(r) => r.groups().for_each(|g| count(g, r.row_len)),
        });
        return;
    };
    with_dtype!(table.dataset().dtype(), T => {
        let keep = Keep {
            missing: Missing::<T>::of(&table.value().missing),
            range,
        };
        let t = elements::<T>(tile);
        walk_rows(gi, task, start, |w| match w {
            Walked::Segment(s) => fold_segment(acc, &s, &t[s.tile_offset..s.tile_offset + s.len], &keep),
            Walked::Rows(r) => fold_rows(acc, &t, &r, &keep),
        });
    })
}

/// [`fold_stored`] of the plan's sum and count of one dataset's stored values: `sums` over every stored value of the task,
/// `counts` over those in `range`, in one walk (whole runs in one pass).
pub(super) fn fold_sum_and_count(
    at: TaskFold,
    (sums, counts): (&mut Accumulators, &mut Accumulators),
    tile: &Buffer,
    range: Option<KeyRange>,
) {
    let TaskFold { table, gi, task, start } = at;
    with_dtype!(table.dataset().dtype(), T => {
        let missing = Missing::<T>::of(&table.value().missing);
        let keep_sums = Keep {
            missing: missing.clone(),
            range: None,
        };
        let keep_counts = Keep { missing, range };
        let t = elements::<T>(tile);
        // Segments, not blocks of rows: a kernel folding a block of rows of the two (as
        // `fold_rows` folds them) measured slower (docs/performance.md).
        walk_segments(gi, task, start, None, |s| {
            let run = &t[s.tile_offset..s.tile_offset + s.len];
            match s.target {
                Target::One(g) => fold_run_sum_and_count(sums, counts, g, run, &keep_sums, &keep_counts),
                _ => {
                    fold_segment(sums, &s, run, &keep_sums);
                    fold_segment(counts, &s, run, &keep_counts);
                }
            }
        });
    })
}

/// Fold `run` (the segment's elements) into the segment's groups.
#[inline(always)]
pub(super) fn fold_segment<T: Elem>(acc: &mut Accumulators, s: &Segment, run: &[T], keep: &Keep<T>) {
    match s.target {
        Target::One(g) => fold_run(acc, g, run, keep),
        Target::Each {
            base,
            stride: 1,
            ids: &[first, ..],
            consecutive: true,
        } => fold_consecutive(acc, base + first as usize, run, keep),
        t @ Target::Each { .. } => fold_elementwise(acc, run, keep, |i| t.group(i)),
    }
}
