//! Exact order statistics folded (`median`, `percentile_cont`): on random files with NaNs
//! of both signs, fill values, ties, packing and integer values, under every kind of group
//! key, `WHERE` and `FILTER`, each answer equals DataFusion's own plan (pushdown off) bit
//! for bit, with the fold in the plan; a session merging partial states leaves them to
//! DataFusion.

use crate::agg_differential::{merged_by_datafusion, no_pushdown, plan_text};
use crate::common::{Rng, Val, ctx, rows, sorted, tempdir};
use datafusion::prelude::SessionContext;
use datafusion_tet::format::{DType, DatasetSpec, TetWriter};
use std::path::Path;

/// Values equal bit for bit (any NaN equals any NaN: DataFusion's interpolation of a NaN
/// may give another NaN's bits).
fn exact(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Float(x), Val::Float(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        (a, b) => a == b,
    }
}

/// `sql`'s rows in `on` equal those in `off` exactly; `on`'s plan holds the fold when
/// `folded`.
async fn same_exactly(on: &SessionContext, off: &SessionContext, sql: &str, folded: bool) {
    let plan = plan_text(on, sql).await.unwrap_or_else(|| panic!("{sql}: no plan"));
    assert_eq!(plan.contains("TetAggregateExec"), folded, "{sql}\n{plan}");
    let (got, want) = (sorted(rows(on, sql).await), sorted(rows(off, sql).await));
    assert_eq!(got.len(), want.len(), "{sql}");
    for (g, w) in got.iter().zip(&want) {
        assert!(
            g.iter().zip(w).all(|(a, b)| exact(a, b)),
            "{sql}\n got {g:?}\nwant {w:?}"
        );
    }
}

/// The stored values of a `(time, lat, lon)` cube of `n` cells: `kind` 0 is f32 with few
/// distinct values (ties), NaNs of both signs and the fill value -999; 1 is int16 packed
/// with a fill value; 2 is int32 (median coerces it to Float64); 3 is f64.
pub(crate) fn values(kind: u8, n: usize, rng: &mut Rng) -> (DType, Vec<u8>) {
    let mut bytes = Vec::new();
    for _ in 0..n {
        let r = rng.below(100);
        match kind {
            0 => {
                let x: f32 = match r {
                    0..3 => f32::NAN,
                    3..5 => -f32::NAN,
                    5..9 => -999.0,
                    9..40 => 280.0 + rng.below(8) as f32 * 0.25,
                    _ => 280.0 + (rng.below(2_000_000) as f32 - 1_000_000.0) / 50_000.0,
                };
                bytes.extend_from_slice(&x.to_le_bytes());
            }
            1 => {
                let x: i16 = if r < 5 { -32768 } else { rng.below(300) as i16 - 150 };
                bytes.extend_from_slice(&x.to_le_bytes());
            }
            2 => bytes.extend_from_slice(&(rng.below(1000) as i32 - 400).to_le_bytes()),
            _ => bytes.extend_from_slice(&((rng.below(1 << 30) as f64 - 5e8) / 3.0).to_le_bytes()),
        }
    }
    let dtype = [DType::F32, DType::I16, DType::I32, DType::F64][kind as usize];
    (dtype, bytes)
}

pub(crate) fn write(path: &Path, kind: u8, shape: [u64; 3], chunk: [u64; 3], rng: &mut Rng) {
    let n = shape.iter().product::<u64>() as usize;
    let (dtype, bytes) = values(kind, n, rng);
    let mut spec = DatasetSpec::new("t", dtype, &shape, &chunk, &bytes).dim_names(&["time", "lat", "lon"]);
    spec = match kind {
        0 => spec.attr("_FillValue", "-999.0"),
        1 => spec
            .attr("_FillValue", "-32768")
            .attr("scale_factor", "0.5")
            .attr("add_offset", "280.0"),
        _ => spec,
    };
    let mut w = TetWriter::new();
    w.dataset(spec).unwrap();
    w.write_path(path).unwrap();
}

/// The files the differential tests write: kind of [`values`], shape and chunk shape
/// (chunks whole, cut along every axis, one chunk).
pub(crate) const FILES: [(u8, [u64; 3], [u64; 3]); 5] = [
    (0, [37, 12, 20], [5, 12, 20]),
    (0, [9, 30, 41], [2, 7, 41]),
    (1, [21, 10, 13], [4, 3, 13]),
    (2, [17, 8, 9], [17, 8, 9]),
    (3, [25, 6, 11], [3, 6, 5]),
];

#[tokio::test(flavor = "multi_thread")]
async fn order_statistics_equal_datafusion() {
    let dir = tempdir();
    let (on, off, states) = (ctx(), no_pushdown().await, merged_by_datafusion().await);
    let mut rng = Rng(5910);
    for (k, (kind, shape, chunk)) in FILES.into_iter().enumerate() {
        let path = dir.path().join(format!("order{k}.tet"));
        write(&path, kind, shape, chunk, &mut rng);
        let f = format!("tet('{}', 't')", path.display());
        for q in [
            format!("SELECT lat, median(v) FROM {f} GROUP BY lat"),
            format!("SELECT lat, lon, percentile_cont(0.9) WITHIN GROUP (ORDER BY v) FROM {f} GROUP BY lat, lon"),
            format!(
                "SELECT time, percentile_cont(0.1) WITHIN GROUP (ORDER BY v DESC), percentile_cont(v, 0.25), \
                 median(v), count(*) FROM {f} GROUP BY time"
            ),
            format!(
                "SELECT median(v), percentile_cont(0.75) WITHIN GROUP (ORDER BY v), \
                 percentile_cont(0.333) WITHIN GROUP (ORDER BY v) FROM {f}"
            ),
            format!(
                "SELECT floor(lat / 4) AS band, median(v) FILTER (WHERE v > 280), \
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FILTER (WHERE v < 281), count(v) \
                 FROM {f} WHERE time < 7 AND lon > 2 GROUP BY band"
            ),
            format!("SELECT lon, median(v) FROM {f} WHERE v BETWEEN 279.5 AND 280.5 GROUP BY lon"),
            format!("SELECT time, lat, lon, median(v) FROM {f} WHERE time < 2 GROUP BY time, lat, lon"),
            format!(
                "SELECT lat, median(v * 2 + 1), percentile_cont(0.6) WITHIN GROUP (ORDER BY abs(v - 280)) FROM {f} GROUP BY lat"
            ),
            format!(
                "SELECT lat, percentile_cont(0.95) WITHIN GROUP (ORDER BY v) FROM {f} WHERE lat = 1 OR lat = 3 GROUP BY lat"
            ),
        ] {
            // Arithmetic of integers does not compile, and comparisons of packed values are
            // not ranges of stored ones: DataFusion's own plan runs those.
            let folds =
                !(kind == 2 && q.contains("v * 2")) && !(kind == 1 && (q.contains("FILTER") || q.contains("WHERE v")));
            same_exactly(&on, &off, &q, folds).await;
            same_exactly(&states, &off, &q, false).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn order_statistics_of_two_datasets_equal_datafusion() {
    // Two value columns of one grid: an order statistic of an expression of both, kept
    // by a range of one, gathered from the aligned cells.
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let mut rng = Rng(5911);
    let shape = [13u64, 9, 16];
    let n = shape.iter().product::<u64>() as usize;
    let (_, a) = values(0, n, &mut rng);
    let (_, b) = values(3, n, &mut rng);
    let path = dir.path().join("two.tet");
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("a", DType::F32, &shape, &[4, 9, 16], &a)
            .dim_names(&["time", "lat", "lon"])
            .attr("_FillValue", "-999.0"),
    )
    .unwrap();
    w.dataset(DatasetSpec::new("b", DType::F64, &shape, &[13, 3, 8], &b).dim_names(&["time", "lat", "lon"]))
        .unwrap();
    w.write_path(&path).unwrap();
    let f = format!("tet('{}', 'a', 'b')", path.display());
    for q in [
        format!("SELECT lat, median(b), percentile_cont(0.2) WITHIN GROUP (ORDER BY a) FROM {f} GROUP BY lat"),
        format!("SELECT lon, median(a * 2 - b) FROM {f} WHERE a > 280 GROUP BY lon"),
    ] {
        same_exactly(&on, &off, &q, true).await;
    }
}
