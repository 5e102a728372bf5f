use super::task_fold::TaskFold;
use crate::exec::kernel::{Accumulators, Elem, Keep, Missing, fold_dot, fold_scaled, fold_weighted_run};
use crate::exec::walk::{AxisValues, GroupIndex, Target, walk_segments};
use crate::format::{elements, with_dtype};
use crate::plan::{Affine, ChunkTask, KeyRange};
use arrow::buffer::Buffer;
use datafusion::common::{Result, internal_err};

/// A weighted input's weights: per position of `axis`, times the stored values mapped by
/// `value` (`None`: the weights alone).
#[derive(Clone, Copy)]
pub(super) struct Weights<'a> {
    pub(super) axis: usize,
    pub(super) values: &'a AxisValues,
    pub(super) value: Option<Affine>,
    /// Products in f32 ([`Weighted::f32_product`](crate::plan::Weighted)).
    pub(super) f32_product: bool,
}

/// Fold a weighted input over one chunk task: per segment, one weight times the sum of
/// its kept values (the weight's axis is an outer one) or a dot product (the innermost).
pub(super) fn fold_weighted(
    at: TaskFold,
    acc: &mut Accumulators,
    tile: Option<&Buffer>,
    w: Weights,
    range: Option<KeyRange>,
) -> Result<()> {
    let TaskFold { table, gi, task, start } = at;
    let inner = w.axis == task.tile_extent.len() - 1;
    let (values, valid) = (&w.values.values, &w.values.valid);
    let reads_values = w.value.is_some() || range.is_some();
    let Some(tile) = tile.filter(|_| reads_values) else {
        // Neither the weight nor a condition reads the values: every cell is kept.
        if reads_values {
            return internal_err!("TetAggregateExec: a weighted input of v without its tile");
        }
        walk_segments(gi, task, start, Some(w.axis), |s| {
            let p = (s.pos - w.values.first) as usize;
            if let (Target::One(g), false) = (s.target, inner) {
                acc.cells[g] += s.len as u64;
                if valid[p] {
                    acc.n[g] += s.len as u64;
                    if acc.needs.fsum {
                        acc.fsum[g] += values[p] * s.len as f64;
                    }
                }
                return;
            }
            for i in 0..s.len {
                let p = p + if inner { i } else { 0 };
                let g = s.target.group(i);
                acc.cells[g] += 1;
                if valid[p] {
                    acc.n[g] += 1;
                    if acc.needs.fsum {
                        acc.fsum[g] += values[p];
                    }
                }
            }
        });
        return Ok(());
    };
    with_dtype!(table.dataset().dtype(), T => {
        // A NULL value matters only where the weight multiplies it or a condition reads it.
        let missing = if w.value.is_some() || range.is_some() {
            Missing::<T>::of(&table.value().missing)
        } else {
            Missing::default()
        };
        let keep = Keep { missing, range };
        let t = elements::<T>(tile);
        // One product per case, so the loops over elements do not branch on it.
        let walk = WeightedWalk { gi, task, start, w, inner };
        match (w.value, w.f32_product) {
            (None, _) => walk.fold(acc, &t, &keep, |_: T, w_| w_),
            (Some(_), true) => walk.fold(acc, &t, &keep, |x: T, w_| (x.f32() * (w_ as f32)) as f64),
            (Some(m), false) => walk.fold(acc, &t, &keep, move |x: T, w_| m.apply(x.f()) * w_),
        }
    });
    Ok(())
}

/// The segments of one chunk task a weighted input folds, split at each position of the
/// weight's axis.
#[derive(Clone, Copy)]
pub(super) struct WeightedWalk<'a> {
    pub(super) gi: &'a GroupIndex,
    pub(super) task: &'a ChunkTask,
    pub(super) start: &'a [u64],
    pub(super) w: Weights<'a>,
    /// The weight's axis is the innermost one.
    pub(super) inner: bool,
}

impl WeightedWalk<'_> {
    /// Fold the tile's elements `t`: `product(x, weight)` per kept element with a weight.
    pub(super) fn fold<T: Elem>(
        self,
        acc: &mut Accumulators,
        t: &[T],
        keep: &Keep<T>,
        product: impl Fn(T, f64) -> f64 + Copy,
    ) {
        let (w, inner) = (self.w, self.inner);
        let (values, valid) = (&w.values.values, &w.values.valid);
        let weight = |p: usize| valid[p].then_some(values[p]);
        walk_segments(self.gi, self.task, self.start, Some(w.axis), |s| {
            let run = &t[s.tile_offset..s.tile_offset + s.len];
            let p = (s.pos - w.values.first) as usize;
            match (s.target, inner) {
                (Target::One(g), false) if !w.f32_product => fold_weighted_run(acc, g, run, keep, w.value, weight(p)),
                (Target::One(g), false) => match (w.value, weight(p)) {
                    // One weight for the run (the product is the stored value's in f32).
                    (Some(_), Some(wp)) => fold_scaled(acc, g, run, keep, wp),
                    (_, wp) => fold_dot(acc, g, run, keep, product, move |_| wp),
                },
                (Target::One(g), true) => fold_dot(acc, g, run, keep, product, |i| weight(p + i)),
                (t @ Target::Each { .. }, _) => {
                    for (i, x) in run.iter().enumerate() {
                        let g = t.group(i);
                        let q = if inner { p + i } else { p };
                        fold_dot(acc, g, std::slice::from_ref(x), keep, product, |_| weight(q));
                    }
                }
            }
        });
    }
}
