//! Keys of the value folded (`GROUP BY floor(v)`, `GROUP BY lat, floor((v - 270) / 2)`):
//! on random files with NaNs of both signs, fill values (the NULL key), keys of -0.0,
//! packing and keys far apart, each answer equals DataFusion's own plan (pushdown off),
//! with the fold in the plan; a session merging partial states leaves them to DataFusion.

use crate::agg_differential::{merged_by_datafusion, no_pushdown, plan_text};
use crate::common::{Rng, Val, close, ctx, rows, tempdir};
use crate::order_stats::{FILES, write};
use datafusion::prelude::SessionContext;
use std::cmp::Ordering;

/// A total order of rows: NULL first, floats by `total_cmp` (so the groups of NaNs of
/// either sign, which DataFusion keeps apart, sort apart).
fn total(a: &[Val], b: &[Val]) -> Ordering {
    let rank = |v: &Val| match v {
        Val::Null => 0,
        Val::Int(_) => 1,
        Val::Float(_) => 2,
        Val::Str(_) => 3,
    };
    for (x, y) in a.iter().zip(b) {
        let o = match (x, y) {
            (Val::Float(x), Val::Float(y)) => x.total_cmp(y),
            (Val::Int(x), Val::Int(y)) => x.cmp(y),
            (Val::Str(x), Val::Str(y)) => x.cmp(y),
            _ => rank(x).cmp(&rank(y)),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// `sql`'s rows in `on` equal those in `off` (keys exactly, statistics within 1e-9);
/// `on`'s plan holds the fold when `folded` says it must (`None`: either). The keys are
/// the first `keys` columns.
async fn same(on: &SessionContext, off: &SessionContext, sql: &str, keys: usize, folded: Option<bool>) {
    let plan = plan_text(on, sql).await.unwrap_or_else(|| panic!("{sql}: no plan"));
    if let Some(folded) = folded {
        assert_eq!(plan.contains("TetAggregateExec"), folded, "{sql}\n{plan}");
    }
    let (mut got, mut want) = (rows(on, sql).await, rows(off, sql).await);
    got.sort_by(|a, b| total(&a[..keys], &b[..keys]));
    want.sort_by(|a, b| total(&a[..keys], &b[..keys]));
    assert_eq!(got.len(), want.len(), "{sql}");
    for (g, w) in got.iter().zip(&want) {
        let keys_equal = g[..keys].iter().zip(&w[..keys]).all(|(a, b)| match (a, b) {
            (Val::Float(x), Val::Float(y)) => x.to_bits() == y.to_bits(),
            (a, b) => a == b,
        });
        assert!(
            keys_equal && g.iter().zip(w).all(|(a, b)| close(a, b)),
            "{sql}\n got {g:?}\nwant {w:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn value_keys_equal_datafusion() {
    let dir = tempdir();
    let (on, off, states) = (ctx(), no_pushdown().await, merged_by_datafusion().await);
    let mut rng = Rng(6003);
    // Kinds of `order_stats::write`: f32 about 280 with NaNs and fills, int16 packed
    // with fills, int32, f64 far apart (keys in a hash of their bits).
    for (k, (kind, shape, chunk)) in FILES.into_iter().enumerate() {
        let path = dir.path().join(format!("keys{k}.tet"));
        write(&path, kind, shape, chunk, &mut rng);
        let f = format!("tet('{}', 't')", path.display());
        for (q, keys) in [
            (format!("SELECT floor(v) AS bin, count(*) FROM {f} GROUP BY bin"), 1),
            (
                format!(
                    "SELECT lat, floor((v - 270) / 2) AS b, count(*), count(v), sum(v), avg(v), min(v), max(v), \
                     var_pop(v), stddev(v) FROM {f} GROUP BY lat, b"
                ),
                2,
            ),
            // ceil of v - 280 in (-1, 0) is -0.0: one group with 0.0, as DataFusion has it.
            (
                format!(
                    "SELECT ceil(v - 280) AS k, floor(lat / 4) AS band, count(*), max(v) FROM {f} \
                     WHERE time < 7 GROUP BY k, band"
                ),
                2,
            ),
            (
                format!("SELECT trunc(v / 3) AS k, max(v), count(v) FROM {f} WHERE v > 275 GROUP BY k"),
                1,
            ),
            (format!("SELECT v AS k, count(*) FROM {f} WHERE lon > 2 GROUP BY v"), 1),
            (
                format!("SELECT ceil(v * 1.8 - 459.67) AS k, time, count(*), avg(v) FROM {f} GROUP BY k, time"),
                2,
            ),
            (
                format!(
                    "SELECT time, lat, lon, floor(v / 10) AS k, count(*), sum(v) FROM {f} \
                     WHERE time < 3 GROUP BY time, lat, lon, k"
                ),
                4,
            ),
        ] {
            // Comparisons of packed values are not ranges of stored ones: DataFusion's own
            // plan runs those. An integer v folds where its key is of v cast to Float64,
            // not of integer arithmetic (`(v - 270) / 2` divides integers).
            let folds = match kind {
                2 => None,
                1 => Some(!q.contains("WHERE v")),
                _ => Some(true),
            };
            same(&on, &off, &q, keys, folds).await;
            same(&states, &off, &q, keys, Some(false)).await;
        }
    }
}
