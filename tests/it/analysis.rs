//! Differential tests of the analysis fold: group keys that are expressions of one axis,
//! affine and other expressions of `v`, weights from axes, value conditions in `WHERE`
//! and `FILTER` — on random files each answer equals DataFusion's own plan (pushdown
//! off), and `TetAggregateExec` is in the plan exactly when the rule should fire.

use crate::agg_differential::{compare, no_pushdown, plan_text};
use crate::common::{Rng, Val, assert_same, ctx, ctx_with, rows, tempdir};
use crate::sql_differential::Case;
use datafusion_tet::format::{DType, DatasetSpec, TetWriter};
use std::sync::Arc;

fn pick<'a>(rng: &mut Rng, xs: &[&'a str]) -> &'a str {
    xs[rng.below(xs.len() as u64) as usize]
}

fn is_text(case: &Case, d: usize) -> bool {
    matches!(case.axes[d].values[0], Val::Str(_))
}

/// A random expression of axis `d` (`{a}` is the axis name).
fn key_expr(case: &Case, rng: &mut Rng, d: usize) -> String {
    let e = if is_text(case, d) {
        pick(
            rng,
            &[
                "substr({a}, 2)",
                "{a} = 'L1'",
                "CASE WHEN {a} < 'L2' THEN 1 END",
                "length({a}) + 1",
            ],
        )
    } else {
        pick(
            rng,
            &[
                "{a} % 3",
                "floor({a} / 4.0)",
                "{a} > 1",
                "CASE WHEN {a} < 2 THEN 'lo' ELSE 'hi' END",
                "abs({a} - 3)",
            ],
        )
    };
    e.replace("{a}", &case.axes[d].name)
}

/// A random numeric axis of `case`, if any.
fn numeric_axis(case: &Case, rng: &mut Rng) -> Option<String> {
    let ds: Vec<usize> = (0..case.axes.len()).filter(|&d| !is_text(case, d)).collect();
    (!ds.is_empty()).then(|| case.axes[ds[rng.below(ds.len() as u64) as usize]].name.clone())
}

/// A random aggregate input: `v`, affine maps of it (exact in binary), other expressions
/// of it, weights from a numeric axis.
fn input(case: &Case, rng: &mut Rng) -> String {
    let axis = numeric_axis(case, rng);
    let mut xs = vec![
        "v",
        "v * 2.5 + 1",
        "(v - 3) / 2.0",
        "-CAST(v AS DOUBLE)",
        "CAST(v AS DOUBLE) * 0.5",
        "abs(v)",
        "CASE WHEN v > 0 THEN v ELSE 0 END",
        "sqrt(abs(CAST(v AS DOUBLE)))",
        "sqrt(abs(v))",
        "v * v - v / 3.0",
        "CAST(v AS REAL) % 7",
        "-(v * 2.0) / (abs(v) + 1.0)",
    ];
    if axis.is_some() {
        xs.extend([
            "CAST(v AS DOUBLE) * ({w} + 1)",
            "CAST({w} AS DOUBLE) * 0.25",
            "v * 0.5 + {w}",
            "CAST(v AS DOUBLE) * cos(radians({w}))",
            "cos(radians({w})) * ((v - 1.5) * 2.0)",
            "CASE WHEN {w} > 0 THEN 1.0 END * CAST(v AS DOUBLE)",
        ]);
    }
    let e = pick(rng, &xs);
    e.replace("{w}", axis.as_deref().unwrap_or("0"))
}

/// A random condition on `v` (alone, or with an axis).
fn value_condition(case: &Case, rng: &mut Rng) -> String {
    let axis = numeric_axis(case, rng);
    let mut xs = vec![
        "v > 0",
        "v >= -3",
        "v < 10.5",
        "v BETWEEN -20 AND 20",
        "v = 1",
        "v IS NOT NULL",
        "v > 0 AND v <= 30",
        "v <> 2",
        "abs(v) < 25",
        "v IS NULL",
    ];
    if axis.is_some() {
        xs.extend(["v > {w}", "v > 0 OR {w} = 1"]);
    }
    pick(rng, &xs).replace("{w}", axis.as_deref().unwrap_or("0"))
}

/// A random analysis over `from`: expression and axis keys, one to three aggregates of
/// random inputs (some with `FILTER`), axis predicates and a value condition.
fn random_analysis(case: &Case, rng: &mut Rng, from: &str) -> String {
    let n = case.axes.len();
    let mut keys = Vec::new();
    for d in 0..n {
        match rng.below(3) {
            0 => keys.push(case.axes[d].name.clone()),
            1 => keys.push(key_expr(case, rng, d)),
            _ => {}
        }
    }
    let funcs = ["count", "sum", "avg", "min", "max", "var_pop", "stddev", "count(*)"];
    let mut aggs = vec![format!("sum({})", input(case, rng))];
    for _ in 0..rng.below(3) {
        let f = pick(rng, &funcs);
        let mut a = if f == "count(*)" {
            f.to_string()
        } else {
            format!("{f}({})", input(case, rng))
        };
        match rng.below(3) {
            0 => a = format!("{a} FILTER (WHERE {})", value_condition(case, rng)),
            1 => {
                let d = rng.below(n as u64) as usize;
                a = format!("{a} FILTER (WHERE {})", case.predicate(rng, d).0)
            }
            _ => {}
        }
        aggs.push(a);
    }
    let mut preds = Vec::new();
    for d in 0..n {
        if rng.below(4) == 0 {
            preds.push(case.predicate(rng, d).0);
        }
    }
    if rng.below(2) == 0 {
        preds.push(value_condition(case, rng));
    }
    let where_ = if preds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", preds.join(" AND "))
    };
    let select: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("{k} AS k{i}"))
        .chain(aggs)
        .collect();
    let group_by = if keys.is_empty() {
        String::new()
    } else {
        format!(" GROUP BY {}", keys.join(", "))
    };
    format!("SELECT {} FROM {from}{where_}{group_by}", select.join(", "))
}

#[tokio::test(flavor = "multi_thread")]
async fn random_analyses_equal_datafusion() {
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let mut rng = Rng(1313);
    let (mut compared, mut folded) = (0, 0);
    for k in 0..30 {
        let case = Case::generate(&mut rng, dir.path(), k);
        let from = format!("tet('{}', 't')", case.path);
        for _ in 0..8 {
            let sql = random_analysis(&case, &mut rng, &from);
            if compare(&on, &off, &sql, None).await {
                compared += 1;
                folded += plan_text(&on, &sql).await.unwrap().contains("TetAggregateExec") as usize;
            }
        }
    }
    // Most queries are valid SQL (not all: `abs` of an unsigned type), and most fold (not
    // all: inputs of an axis other than weights of sums, means and counts do not, nor
    // inputs DataFusion types as Decimal128, such as a CASE over UInt64).
    assert!(compared > 180, "only {compared} of 240 compared");
    assert!(folded * 2 > compared, "only {folded} of {compared} folded");
}

#[tokio::test(flavor = "multi_thread")]
async fn analysis_shapes_around_the_fold() {
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let mut rng = Rng(77);
    let case = Case::first(&mut rng, dir.path(), |c| {
        c.axes.len() >= 3 && c.dtype.is_float() && (0..3).all(|d| !is_text(c, d))
    });
    let f = format!("tet('{}', 't')", case.path);
    let (a0, a1, a2) = (&case.axes[0].name, &case.axes[1].name, &case.axes[2].name);
    let inner = &case.axes[case.axes.len() - 1].name;
    let fire = [
        // Keys of one axis, HAVING, ORDER BY, LIMIT, CTEs and subqueries around the fold.
        format!(
            "SELECT {a0} % 2 AS p, sum(v) AS s FROM {f} GROUP BY {a0} % 2 HAVING count(*) > 1 ORDER BY s DESC, p LIMIT 1"
        ),
        format!(
            "WITH g AS (SELECT floor({a1} / 2.0) AS b, avg(v * 1.8 + 32) AS m FROM {f} GROUP BY 1) SELECT * FROM g WHERE m > 0"
        ),
        format!("SELECT {a2} > 0 AS east, {a0}, max(v), min(v) FROM {f} WHERE v > 0 GROUP BY {a2} > 0, {a0}"),
        format!("SELECT count(*) FILTER (WHERE v > 1), count(*) FILTER (WHERE {a1} = 0), count(*) FROM {f}"),
        format!(
            "SELECT {a0}, sum(v * v), stddev(sqrt(abs(CAST(v AS DOUBLE)))) FROM {f} WHERE abs(v) < 20 GROUP BY {a0}"
        ),
        format!(
            "SELECT * FROM (SELECT {a1} % 2 AS k, var_pop(v) AS s FROM {f} WHERE v BETWEEN -10 AND 10 GROUP BY 1) WHERE s IS NOT NULL"
        ),
        // A bare count(*) with a value condition folds (no statistics answer it).
        format!("SELECT count(*) FROM {f} WHERE v > 3"),
        // Weights from an axis: an outer one (one weight per run), the innermost (a dot
        // product), grouped by the innermost axis (per element), NULL weights, counts,
        // with value conditions and an affine map of v.
        format!("SELECT sum(CAST(v AS DOUBLE) * cos(radians({a1}))) / sum(cos(radians({a1}))) FROM {f}"),
        format!(
            "SELECT {a0}, sum(v * cos(radians({inner}))) / sum(cos(radians({inner}))) FROM {f} WHERE v > 0 GROUP BY {a0}"
        ),
        format!(
            "SELECT {inner}, avg((v - 1.5) * 2.0 * ({a0} + 1)), count(v * CASE WHEN {a0} > 1 THEN 1.0 END) FROM {f} GROUP BY {inner}"
        ),
        format!(
            "SELECT {a1} % 3 AS b, sum(CAST(v AS DOUBLE) * {inner}) FILTER (WHERE v < 5), sum(CAST({inner} AS DOUBLE)) FROM {f} WHERE {a0} > 0 GROUP BY 1"
        ),
    ];
    for q in &fire {
        assert!(compare(&on, &off, q, Some(true)).await, "{q}");
    }
    let keep = [
        format!("SELECT count(DISTINCT v) FROM {f}"),
        // A key of two axes, or of the value: not one axis.
        format!("SELECT {a0} + {a1}, sum(v) FROM {f} GROUP BY {a0} + {a1}"),
        format!("SELECT v > 0, count(*) FROM {f} GROUP BY v > 0"),
        // An axis in other inputs (gathered per cell they would be slower than the row
        // plan): extremes of weighted values, sums not of a product.
        format!("SELECT max(CAST(v AS DOUBLE) * cos(radians({a1}))) FROM {f}"),
        format!("SELECT sum(v + {a1}) FROM {f}"),
    ];
    for q in &keep {
        assert!(compare(&on, &off, q, Some(false)).await, "{q}");
    }
    // An order statistic folds where its input compiles: f32 and f64, not f16.
    let median = format!("SELECT median(v) FROM {f}");
    let folds = case.dtype != datafusion_tet::format::DType::F16;
    assert!(compare(&on, &off, &median, Some(folds)).await, "{median}");
    // A square root of a negative value fails as DataFusion's does, unless a condition
    // keeps such values from being evaluated.
    let roots = format!("SELECT sum(sqrt(v - 1000000000.0)) FROM {f}");
    let err = on.sql(&roots).await.unwrap().collect().await.unwrap_err().to_string();
    assert!(err.contains("square root of a negative"), "{err}");
    assert!(off.sql(&roots).await.unwrap().collect().await.is_err());
    let q = format!("SELECT {a0}, sum(sqrt(v)), max(sqrt(v)) FROM {f} WHERE v >= 0 GROUP BY {a0}");
    assert!(compare(&on, &off, &q, Some(true)).await, "{q}");
    // Volatile inputs and filters stay with DataFusion (their answers differ per run).
    for q in [
        format!("SELECT sum(v) FILTER (WHERE random() > 2) FROM {f}"),
        format!("SELECT sum(v + random()) FROM {f}"),
        format!("SELECT {a0}, count(*) FROM {f} WHERE v > random() GROUP BY {a0}"),
    ] {
        let plan = plan_text(&on, &q).await.unwrap();
        assert!(!plan.contains("TetAggregateExec"), "{q}\n{plan}");
    }
}

/// Comparisons of floats are DataFusion's: IEEE totalOrder, where NaN sorts beyond the
/// infinities on the side of its sign, with -0 equal to +0; NULLs never pass.
#[tokio::test(flavor = "multi_thread")]
async fn value_conditions_follow_arrows_float_order() {
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let neg_nan = f64::from_bits(f64::NAN.to_bits() | (1 << 63));
    let specials = [
        f64::NAN,
        neg_nan,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        -7.0,
    ];
    for (dtype, fill) in [(DType::F64, None), (DType::F32, Some("-7")), (DType::F16, Some("NaN"))] {
        let vals: Vec<f64> = (0..64).map(|i| specials[(i * 7) % specials.len()]).collect();
        let bytes: Vec<u8> = match dtype {
            DType::F64 => vals.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DType::F32 => vals.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect(),
            _ => vals
                .iter()
                .flat_map(|v| half::f16::from_f64(*v).to_le_bytes())
                .collect(),
        };
        let path = dir.path().join(format!("special_{dtype:?}.tet"));
        let mut spec = DatasetSpec::new("t", dtype, &[8, 8], &[3, 5], &bytes).dim_names(&["y", "x"]);
        if let Some(f) = fill {
            spec = spec.attr("_FillValue", f);
        }
        let mut w = TetWriter::new();
        w.dataset(spec).unwrap();
        w.zone_maps(true);
        w.write_path(&path).unwrap();
        let f = format!("tet('{}')", path.display());
        for cond in [
            "v > 0",
            "v >= 0",
            "v = 0",
            "v < 0",
            "v <= -0.0",
            "v > 1e308",
            "v < -1e308",
            "v BETWEEN -1 AND 1",
            "v = 'NaN'",
            "v >= 'NaN'",
            "v IS NOT NULL",
        ] {
            // DataFusion's grouped min/max of floats depend on the order rows arrive in
            // when NaN is among them (`partial_cmp` is None: the newer value wins), so
            // extremes are compared without groups, where both follow Arrow's order.
            let q = format!("SELECT y, count(*), count(v), sum(v) FROM {f} WHERE {cond} GROUP BY y");
            compare(&on, &off, &q, Some(true)).await;
            let q = format!("SELECT count(*), min(v), max(v), var_pop(v) FROM {f} WHERE {cond}");
            compare(&on, &off, &q, Some(true)).await;
            let q = format!(
                "SELECT x % 3 AS k, count(*) FILTER (WHERE {cond}), avg(v) FILTER (WHERE {cond}) FROM {f} GROUP BY 1"
            );
            compare(&on, &off, &q, Some(true)).await;
        }
    }
}

/// Tiles larger than a slab (16 Ki cells) with several inputs over stored values are
/// walked slab by slab, every input per slab (a sum and a ranged count as one pair):
/// same answers as DataFusion's plan, with uneven edge tiles, a fill value, NaNs, weights
/// and grouped axes of every kind.
#[tokio::test(flavor = "multi_thread")]
async fn several_inputs_over_large_tiles() {
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let shape = [5u64, 70, 300];
    let n = shape.iter().product::<u64>() as usize;
    let mut rng = Rng(4242);
    let vals: Vec<f32> = (0..n)
        .map(|i| {
            if i % 97 == 0 {
                -999.0
            } else {
                (rng.below(4000) as f32) / 100.0 - 20.0
            }
        })
        .collect();
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let path = dir.path().join("large_tiles.tet");
    let spec = DatasetSpec::new("t", DType::F32, &shape, &[2, 64, 300], &bytes)
        .dim_names(&["time", "lat", "lon"])
        .attr("_FillValue", "-999.0");
    let mut w = TetWriter::new();
    w.dataset(spec).unwrap();
    w.write_path(&path).unwrap();
    let f = format!("tet('{}', 't')", path.display());
    for q in [
        format!("SELECT count(*) FILTER (WHERE v > 5), avg(v), max(v) FROM {f}"),
        format!("SELECT lat % 7 AS b, count(*) FILTER (WHERE v > 5), avg(v), sum(sqrt(abs(v))) FROM {f} GROUP BY 1"),
        format!(
            "SELECT time, sum(v * cos(radians(lat))) / sum(cos(radians(lat))), count(v), min(v) FROM {f} WHERE lat BETWEEN 3 AND 66 GROUP BY time"
        ),
        format!(
            "SELECT lon % 5 AS k, avg(v - 273.15), sum(v * lon) , var_pop(v) FILTER (WHERE v < 0) FROM {f} GROUP BY 1"
        ),
    ] {
        assert!(compare(&on, &off, &q, Some(true)).await, "{q}");
    }
    // A sum and a count within a range fold as one pair, in one pass over whole runs:
    // under a fill value, and over NaNs that are values (`v > 5` holds of positive NaNs);
    // and inputs beside others that read no values.
    let nans: Vec<u8> = vals
        .iter()
        .enumerate()
        .flat_map(|(i, &v)| match (v, i % 3) {
            (-999.0, 0) => (-f32::NAN).to_le_bytes(),
            (-999.0, _) => f32::NAN.to_le_bytes(),
            _ => v.to_le_bytes(),
        })
        .collect();
    let with_nans = dir.path().join("large_tiles_nan.tet");
    let spec = DatasetSpec::new("t", DType::F32, &shape, &[2, 64, 300], &nans).dim_names(&["time", "lat", "lon"]);
    let mut w = TetWriter::new();
    w.dataset(spec).unwrap();
    w.write_path(&with_nans).unwrap();
    let g = format!("tet('{}', 't')", with_nans.display());
    for from in [&f, &g] {
        for q in [
            format!("SELECT count(*) FILTER (WHERE v > 5), avg(v) FROM {from}"),
            format!("SELECT lat, sum(v), count(v) FILTER (WHERE v BETWEEN -3 AND 7.5) FROM {from} GROUP BY lat"),
            format!(
                "SELECT lon % 4 AS k, count(*) FILTER (WHERE v <= 0), avg(v) FROM {from} WHERE time > 0 GROUP BY 1"
            ),
            // Inputs that read no values (weights alone; every cell counted where nothing
            // is missing) leave the one that does to walk whole tasks.
            format!("SELECT sum(v * cos(radians(lat))) / sum(cos(radians(lat))) FROM {from}"),
            format!("SELECT lat % 3 AS b, avg(sqrt(abs(v))) FROM {from} GROUP BY 1"),
        ] {
            assert!(compare(&on, &off, &q, Some(true)).await, "{q}");
        }
    }
}

/// Time buckets of a CF time axis fold: `date_trunc`, `extract`, `date_bin`.
#[tokio::test(flavor = "multi_thread")]
async fn time_buckets_of_a_cf_time_axis() {
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let (nt, ny) = (24 * 40, 5u64);
    let time: Vec<u8> = (0..nt as i64).flat_map(|h| (h * 6).to_le_bytes()).collect();
    let data: Vec<u8> = (0..nt * ny)
        .flat_map(|i| (((i * 37) % 101) as f32 - 50.0).to_le_bytes())
        .collect();
    let path = dir.path().join("cf_time.tet");
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("time", DType::I64, &[nt], &[100], &time)
            .dim_names(&["time"])
            .attr("units", "hours since 2000-01-01 00:00:00")
            .attr("calendar", "standard"),
    )
    .unwrap();
    w.dataset(DatasetSpec::new("t2m", DType::F32, &[nt, ny], &[64, 5], &data).dim_names(&["time", "lat"]))
        .unwrap();
    w.write_path(&path).unwrap();
    let f = format!("tet('{}', 't2m')", path.display());
    for q in [
        format!("SELECT date_trunc('month', time) AS m, avg(v) FROM {f} GROUP BY 1"),
        format!("SELECT extract(hour FROM time) AS h, lat, max(v), count(*) FROM {f} GROUP BY 1, lat"),
        format!(
            "SELECT date_bin(INTERVAL '7 days', time, TIMESTAMP '2000-01-01') AS w, sum(v) FILTER (WHERE v > 0) FROM {f} GROUP BY 1"
        ),
        format!(
            "SELECT extract(month FROM time) AS mo, extract(year FROM time) AS y, var_pop(v) FROM {f} WHERE time >= '2000-02-01' GROUP BY 1, 2"
        ),
    ] {
        assert!(compare(&on, &off, &q, Some(true)).await, "{q}");
    }
}

/// The README's analyses (`sql/analyses.sql`) on the demo file: every one folds and
/// answers as DataFusion's own plan does (tet-sql writes the demo file).
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread")]
async fn readme_analyses_fold_and_equal_datafusion() {
    let dir = tempdir();
    let path = dir.path().join("weather.tet").display().to_string();
    let (on, off) = (ctx(), no_pushdown().await);
    // The demo file is written by tet-sql's `tet_demo_file`.
    let (ok, _, err) = crate::cli::tet_sql_env(
        &["-q", "-c", &format!("SELECT * FROM tet_demo_file('{path}')")],
        dir.path(),
        &[],
        &[],
    );
    assert!(ok, "{err}");
    let script = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/sql/analyses.sql")).unwrap();
    let mut n = 0;
    for statement in script.split(';') {
        let sql: Vec<&str> = statement
            .lines()
            .filter(|l| !l.trim_start().starts_with("--") && !l.trim().is_empty())
            .collect();
        if sql.is_empty() {
            continue;
        }
        let sql = sql.join("\n").replace("data/weather.tet", &path);
        assert!(compare(&on, &off, &sql, Some(true)).await, "{sql}");
        n += 1;
    }
    assert!(n >= 9, "only {n} statements in sql/analyses.sql");
}

/// A memory pool that counts what `TetAggregateExec` partitions reserve.
#[derive(Debug, Default)]
struct FoldBytes {
    inner: datafusion::execution::memory_pool::UnboundedMemoryPool,
    fold: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Display for FoldBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FoldBytes")
    }
}

impl datafusion::execution::memory_pool::MemoryPool for FoldBytes {
    fn name(&self) -> &str {
        "FoldBytes"
    }
    fn grow(&self, r: &datafusion::execution::memory_pool::MemoryReservation, additional: usize) {
        self.inner.grow(r, additional)
    }
    fn shrink(&self, r: &datafusion::execution::memory_pool::MemoryReservation, shrink: usize) {
        self.inner.shrink(r, shrink)
    }
    fn try_grow(
        &self,
        r: &datafusion::execution::memory_pool::MemoryReservation,
        additional: usize,
    ) -> datafusion::common::Result<()> {
        if r.consumer().name().starts_with("TetAggregateExec") {
            self.fold.fetch_add(additional, std::sync::atomic::Ordering::Relaxed);
        }
        self.inner.try_grow(r, additional)
    }
    fn reserved(&self) -> usize {
        self.inner.reserved()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn partitions_of_a_fold_over_many_groups_hold_their_own_groups() {
    // 1024 × 512 cells in 64 × 64 chunks: 2^19 groups by (y, x), above the split threshold.
    let (ny, nx) = (1024u64, 512u64);
    let mut rng = Rng(77);
    let data: Vec<u8> = (0..ny * nx)
        .flat_map(|_| (rng.below(1000) as f32 / 4.0).to_le_bytes())
        .collect();
    let dir = tempdir();
    let path = dir.path().join("grid.tet");
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("v", DType::F32, &[ny, nx], &[64, 64], &data).dim_names(&["y", "x"]))
        .unwrap();
    w.write_path(&path).unwrap();
    assert!(ny * nx > datafusion_tet::plan::SPLIT_GROUPS_ABOVE);
    let from = format!("tet('{}')", path.display());
    let queries = [
        format!("SELECT y, x, sum(v), count(*), max(v) FROM {from} GROUP BY y, x"),
        format!("SELECT x, y, avg(v) FROM {from} WHERE y BETWEEN 100 AND 1000 AND x <> 7 GROUP BY x, y"),
        format!("SELECT y, x % 500 AS k, min(v) FROM {from} GROUP BY y, x % 500"),
    ];
    let reserved = |partitions: usize| async move {
        let pool = Arc::new(FoldBytes::default());
        let runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
            .with_memory_pool(pool.clone())
            .build_arc()
            .unwrap();
        let config = datafusion::prelude::SessionConfig::new().with_target_partitions(partitions);
        let ctx = datafusion::prelude::SessionContext::new_with_config_rt(config, runtime);
        datafusion_tet::register(&ctx);
        (ctx, pool)
    };
    let off = no_pushdown().await;
    for sql in &queries {
        let (one, one_pool) = reserved(1).await;
        let (two, two_pool) = reserved(2).await;
        assert!(
            plan_text(&two, sql).await.unwrap().contains("TetAggregateExec"),
            "{sql}"
        );
        // One run each (the pools count every run).
        let (got_one, got_two) = (rows(&one, sql).await, rows(&two, sql).await);
        let want = rows(&off, sql).await;
        assert_same(got_one, want.clone(), sql);
        assert_same(got_two, want, sql);
        let (b1, b2) = (
            one_pool.fold.load(std::sync::atomic::Ordering::Relaxed),
            two_pool.fold.load(std::sync::atomic::Ordering::Relaxed),
        );
        // Two partitions split along y hold each half of the groups (plus each its own
        // per-position ids); every group twice would be 2 × b1.
        assert!(
            b1 > 0 && b2 * 4 < b1 * 5,
            "{sql}: one partition reserved {b1} bytes, two {b2}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_fold_yields_to_the_runtime() {
    use futures::StreamExt;
    // 2048 chunks of 64 cells: one partition folds them all.
    let data: Vec<u8> = (0..2048u32 * 64)
        .flat_map(|i| ((i % 97) as f32).to_le_bytes())
        .collect();
    let dir = tempdir();
    let path = dir.path().join("many.tet");
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("v", DType::F32, &[2048 * 64], &[64], &data))
        .unwrap();
    w.write_path(&path).unwrap();
    let c = ctx_with(&["datafusion.execution.target_partitions = 1"]).await;
    let sql = format!("SELECT sum(v) FROM tet('{}')", path.display());
    let plan = c.sql(&sql).await.unwrap().create_physical_plan().await.unwrap();
    fn fold(
        p: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    ) -> Option<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        if p.name() == "TetAggregateExec" {
            return Some(p.clone());
        }
        p.children().into_iter().find_map(fold)
    }
    let node = fold(&plan).expect("the sum is folded");
    let mut stream = node.execute(0, c.task_ctx()).unwrap();
    // Poll by hand in a task of its own: each Pending is the fold handing the thread back
    // (a cancelled query is dropped at such a point).
    let (pending, rows) = tokio::spawn(async move {
        let (mut pending, mut rows) = (0, 0);
        loop {
            match futures::poll!(stream.next()) {
                std::task::Poll::Pending => {
                    pending += 1;
                    tokio::task::yield_now().await;
                }
                std::task::Poll::Ready(Some(b)) => rows += b.unwrap().num_rows(),
                std::task::Poll::Ready(None) => break (pending, rows),
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(rows, 1);
    assert!(pending >= 4, "the fold of 2048 chunks yielded {pending} times");
}
