//! Tables of several datasets (`tet(path, 'a', 'b', ...)`, `tet.datasets`): random files
//! whose datasets share a shape but not their chunk grids, dtypes, codecs or fill values,
//! read whole, sliced and value-filtered, against a brute-force walk over the arrays
//! written; and the errors of datasets that do not fit together.

use crate::common::{
    Rng, Val, ctx, random_codecs, random_geometry, rows, rows_and_scan_metrics, small_values, sorted, tempdir,
};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tet::format::{DType, DatasetSpec, TetWriter};
use std::collections::HashSet;

/// One dataset as written.
struct Var {
    name: String,
    dtype: DType,
    chunk: Vec<u64>,
    data: Vec<u8>,
    fill: Option<Vec<u8>>,
}

impl Var {
    /// The value of cell `lin` as the table shows it.
    fn value(&self, lin: usize) -> Val {
        let size = self.dtype.size();
        let b = &self.data[lin * size..(lin + 1) * size];
        if self.fill.as_deref() == Some(b) {
            Val::Null
        } else {
            Val::from_scalar(self.dtype.decode(b).unwrap())
        }
    }
}

/// A file of 2–3 datasets of one shape and the same random axis labels.
pub struct MultiCase {
    pub path: String,
    shape: Vec<u64>,
    pub axes: Vec<(String, Vec<Val>)>,
    vars: Vec<Var>,
    /// The same datasets written one per file (each with the same axes).
    pub files: Vec<String>,
}

impl MultiCase {
    pub fn generate(rng: &mut Rng, dir: &std::path::Path, k: usize) -> MultiCase {
        Self::generate_typed(rng, dir, k, None)
    }

    /// [`generate`](Self::generate) with every dataset of `dtype` when given.
    pub fn generate_typed(rng: &mut Rng, dir: &std::path::Path, k: usize, dtype: Option<DType>) -> MultiCase {
        let ndim = rng.range(1, 5) as usize;
        let (shape, _) = random_geometry(rng, ndim, 2500);
        let cells: u64 = shape.iter().product();
        let names: Vec<String> = (0..ndim).map(|d| format!("a{d}")).collect();
        let dims: Vec<&str> = names.iter().map(String::as_str).collect();
        let nvars = rng.range(2, 3) as usize;
        let vars: Vec<Var> = (0..nvars)
            .map(|i| {
                let dtype = dtype.unwrap_or_else(|| DType::ALL[rng.below(10) as usize]);
                let chunk: Vec<u64> = shape.iter().map(|&s| rng.range(1, s + 1)).collect();
                let data = small_values(rng, dtype, cells as usize);
                let fill = (rng.below(2) == 0).then(|| {
                    let (size, at) = (dtype.size(), rng.below(cells) as usize);
                    data[at * size..(at + 1) * size].to_vec()
                });
                Var {
                    name: format!("d{i}"),
                    dtype,
                    chunk,
                    data,
                    fill,
                }
            })
            .collect();
        let mut w = TetWriter::new();
        let zone_maps = rng.below(3) > 0;
        let mut files = Vec::new();
        let mut axes = Vec::new();
        let mut labelled: Vec<bool> = Vec::new();
        for (i, var) in vars.iter().enumerate() {
            let chunks: u64 = shape.iter().zip(&var.chunk).map(|(s, c)| s.div_ceil(*c)).product();
            let codecs = random_codecs(rng, chunks);
            let mut spec = DatasetSpec::new(&var.name, var.dtype, &shape, &var.chunk, &var.data)
                .codecs(codecs)
                .dim_names(&dims);
            if let Some(f) = &var.fill {
                spec = spec.attr("_FillValue", &var.dtype.decode(f).unwrap().to_string());
            }
            // The same axes for every dataset: labels on some, positions on the others.
            if i == 0 {
                labelled = (0..ndim).map(|_| rng.below(2) == 0).collect();
            }
            for (d, name) in names.iter().enumerate() {
                let values: Vec<Val> = if labelled[d] {
                    let labels: Vec<i64> = (0..shape[d] as i64).map(|p| 100 - 3 * p).collect();
                    spec = spec.labels(name, labels.iter().map(i64::to_string).collect());
                    labels.into_iter().map(|l| Val::Int(l as i128)).collect()
                } else {
                    (0..shape[d]).map(|p| Val::Int(p as i128)).collect()
                };
                if i == 0 {
                    axes.push((name.clone(), values));
                }
            }
            let mut own = TetWriter::new();
            own.dataset(spec.clone()).unwrap();
            own.zone_maps(zone_maps);
            let file = dir.join(format!("multi{k}_{}.tet", var.name));
            own.write_path(&file).unwrap();
            files.push(file.display().to_string());
            w.dataset(spec).unwrap();
        }
        w.zone_maps(zone_maps);
        let path = dir.join(format!("multi{k}.tet"));
        w.write_path(&path).unwrap();
        MultiCase {
            path: path.display().to_string(),
            shape,
            axes,
            vars,
            files,
        }
    }

    /// The cells as rows (axis values, then the values of `vars`) where `keep` holds, and
    /// the distinct (dataset, chunk) pairs holding them.
    fn oracle(&self, vars: &[usize], keep: &dyn Fn(&[Val], &[Val]) -> bool) -> (Vec<Vec<Val>>, usize) {
        let n = self.shape.len();
        let cells: u64 = self.shape.iter().product();
        let mut out = Vec::new();
        let mut chunks = HashSet::new();
        for lin in 0..cells {
            let mut idx = vec![0u64; n];
            let mut rem = lin;
            for d in (0..n).rev() {
                idx[d] = rem % self.shape[d];
                rem /= self.shape[d];
            }
            let axes: Vec<Val> = (0..n).map(|d| self.axes[d].1[idx[d] as usize].clone()).collect();
            let values: Vec<Val> = self.vars.iter().map(|v| v.value(lin as usize)).collect();
            if !keep(&axes, &values) {
                continue;
            }
            for &i in vars {
                let c: Vec<u64> = idx.iter().zip(&self.vars[i].chunk).map(|(p, c)| p / c).collect();
                chunks.insert((i, c));
            }
            let mut row = axes;
            row.extend(vars.iter().map(|&i| values[i].clone()));
            out.push(row);
        }
        (out, chunks.len())
    }

    pub fn names(&self) -> Vec<String> {
        self.vars.iter().map(|v| v.name.clone()).collect()
    }

    pub fn from(&self) -> String {
        let quoted: Vec<String> = self.names().iter().map(|n| format!("'{n}'")).collect();
        format!("tet('{}', {})", self.path, quoted.join(", "))
    }

    /// A random slice of axis `d`: SQL and its test.
    fn slice(&self, rng: &mut Rng, d: usize) -> (String, Val, Val) {
        let values = &self.axes[d].1;
        let a = values[rng.below(values.len() as u64) as usize].clone();
        let b = values[rng.below(values.len() as u64) as usize].clone();
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let lit = |v: &Val| match v {
            Val::Int(i) => i.to_string(),
            _ => unreachable!(),
        };
        (
            format!("{} BETWEEN {} AND {}", self.axes[d].0, lit(&lo), lit(&hi)),
            lo,
            hi,
        )
    }
}

fn session(partitions: usize) -> SessionContext {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(partitions));
    datafusion_tet::register(&ctx);
    ctx
}

/// SQL literal of a value of `dtype`.
fn literal(v: &Val) -> String {
    match v {
        Val::Int(i) => i.to_string(),
        Val::Float(f) => format!("{f:?}"),
        other => panic!("no literal for {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tables_of_several_datasets_equal_brute_force() {
    let dir = tempdir();
    let (one, three) = (session(1), session(3));
    let mut rng = Rng(1414);
    for k in 0..24 {
        let case = MultiCase::generate(&mut rng, dir.path(), k);
        let from = case.from();
        let names = case.names();
        let axes: Vec<String> = case.axes.iter().map(|a| a.0.clone()).collect();
        let all_vars: Vec<usize> = (0..names.len()).collect();
        let what = |q: &str| {
            let grids: Vec<String> = case.vars.iter().map(|v| format!("{} {:?}", v.dtype, v.chunk)).collect();
            format!("case {k} shape {:?} [{}]: {q}", case.shape, grids.join(", "))
        };
        // Every cell, every column, in one partition and in three.
        let (want, want_chunks) = case.oracle(&all_vars, &|_, _| true);
        let sql = format!("SELECT * FROM {from}");
        let (got, metrics) = rows_and_scan_metrics(&one, &sql).await;
        assert_eq!(sorted(got), sorted(want.clone()), "{}", what(&sql));
        // Each chunk of each dataset is read once, however the grids cut each other.
        assert_eq!(metrics["chunks_read"], want_chunks, "{}", what(&sql));
        assert_eq!(sorted(rows(&three, &sql).await), sorted(want), "{}", what(&sql));
        // Slices of the axes, with the value columns in another order.
        for _ in 0..3 {
            let d = rng.below(axes.len() as u64) as usize;
            let (pred, lo, hi) = case.slice(&mut rng, d);
            let order: Vec<usize> = all_vars.iter().rev().copied().collect();
            let cols: Vec<String> = order.iter().map(|&i| names[i].clone()).collect();
            let (want, want_chunks) = case.oracle(&order, &|a, _| a[d] >= lo && a[d] <= hi);
            let sql = format!(
                "SELECT {}, {} FROM {from} WHERE {pred}",
                axes.join(", "),
                cols.join(", ")
            );
            let (got, metrics) = rows_and_scan_metrics(&one, &sql).await;
            assert_eq!(sorted(got), sorted(want.clone()), "{}", what(&sql));
            assert_eq!(metrics["chunks_read"], want_chunks, "{}", what(&sql));
            assert_eq!(sorted(rows(&three, &sql).await), sorted(want), "{}", what(&sql));
        }
        // One value column alone reads only its own dataset's chunks.
        let last = names.len() - 1;
        let (want, want_chunks) = case.oracle(&[last], &|_, _| true);
        let sql = format!("SELECT {}, {} FROM {from}", axes.join(", "), names[last]);
        let (got, metrics) = rows_and_scan_metrics(&one, &sql).await;
        assert_eq!(sorted(got), sorted(want), "{}", what(&sql));
        assert_eq!(metrics["chunks_read"], want_chunks, "{}", what(&sql));
        // A filter of one value column (pruned by that dataset's zone maps), of two.
        let pivot = case.vars[1].value(rng.below(case.shape.iter().product()) as usize);
        if pivot != Val::Null {
            let sql = format!(
                "SELECT {}, {}, {} FROM {from} WHERE {} >= {}",
                axes.join(", "),
                names[0],
                names[1],
                names[1],
                literal(&pivot)
            );
            let (want, _) = case.oracle(&[0, 1], &|_, v| v[1] != Val::Null && v[1] >= pivot);
            assert_eq!(sorted(rows(&three, &sql).await), sorted(want), "{}", what(&sql));
        }
        let sql = format!(
            "SELECT count(*), count({a}), count({b}), sum(CAST({a} AS DOUBLE) - CAST({b} AS DOUBLE)) FROM {from} \
             WHERE {a} IS NOT NULL AND {b} IS NOT NULL",
            a = names[0],
            b = names[1]
        );
        let (both, _) = case.oracle(&[0, 1], &|_, v| v[0] != Val::Null && v[1] != Val::Null);
        let diff: f64 = both
            .iter()
            .map(|r| r[axes.len()].as_f64() - r[axes.len() + 1].as_f64())
            .sum();
        let n = Val::Int(both.len() as i128);
        let sum = if both.is_empty() { Val::Null } else { Val::Float(diff) };
        assert_eq!(
            rows(&three, &sql).await,
            vec![vec![n.clone(), n.clone(), n, sum]],
            "{}",
            what(&sql)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stored_as_tet_takes_several_datasets() {
    let dir = tempdir();
    let mut rng = Rng(77);
    let case = MultiCase::generate(&mut rng, dir.path(), 0);
    let ctx = ctx();
    let names = case.names().join(",");
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE m STORED AS TET LOCATION '{}' OPTIONS ('tet.datasets' '{names}')",
        case.path
    ))
    .await
    .unwrap();
    let all: Vec<usize> = (0..case.vars.len()).collect();
    let (want, _) = case.oracle(&all, &|_, _| true);
    assert_eq!(sorted(rows(&ctx, "SELECT * FROM m").await), sorted(want));
    let schema = ctx.table("m").await.unwrap().schema().clone();
    let fields: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let mut expect: Vec<String> = case.axes.iter().map(|a| a.0.clone()).collect();
    expect.extend(case.names());
    assert_eq!(fields, expect);
    // EXPLAIN names the datasets.
    let plan = rows(&ctx, "EXPLAIN SELECT * FROM m").await;
    let text = format!("{plan:?}");
    assert!(
        text.contains(&format!("datasets=[{}]", case.names().join(", "))),
        "{text}"
    );
    let err = ctx
        .sql(&format!(
            "CREATE EXTERNAL TABLE bad STORED AS TET LOCATION '{}' OPTIONS ('tet.datasets' 'd0,,d1')",
            case.path
        ))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("empty dataset"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn datasets_that_do_not_fit_together_are_refused() {
    let dir = tempdir();
    let path = dir.path().join("mixed.tet");
    let f32s = |n: usize| -> Vec<u8> { (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect() };
    let (a, b, c, d) = (f32s(12), f32s(12), f32s(12), f32s(4));
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("t2m", DType::F32, &[3, 4], &[2, 2], &a).dim_names(&["lat", "lon"]))
        .unwrap();
    w.dataset(DatasetSpec::new("sst", DType::F32, &[3, 4], &[3, 1], &b).dim_names(&["lat", "lon"]))
        .unwrap();
    w.dataset(DatasetSpec::new("wide", DType::F32, &[4, 3], &[2, 2], &c).dim_names(&["lat", "lon"]))
        .unwrap();
    w.dataset(DatasetSpec::new("other", DType::F32, &[3, 4], &[3, 4], &c).dim_names(&["y", "x"]))
        .unwrap();
    w.dataset(DatasetSpec::new("lon", DType::F32, &[4], &[4], &d).dim_names(&["lon"]))
        .unwrap();
    w.write_path(&path).unwrap();
    let p = path.display();
    let ctx = ctx();
    let err = |sql: String| {
        let ctx = ctx.clone();
        async move {
            match ctx.sql(&sql).await {
                Ok(df) => df.collect().await.map(|_| ()).unwrap_err().to_string(),
                Err(e) => e.to_string(),
            }
        }
    };
    // The two that fit, on grids that differ.
    let got = rows(
        &ctx,
        &format!("SELECT sum(t2m - sst), count(*) FROM tet('{p}', 't2m', 'sst')"),
    )
    .await;
    assert_eq!(got, vec![vec![Val::Float(0.0), Val::Int(12)]]);
    let e = err(format!("SELECT * FROM tet('{p}', 't2m', 'wide')")).await;
    assert!(
        e.contains("\"wide\" has shape [4, 3]") && e.contains("share their shape"),
        "{e}"
    );
    let e = err(format!("SELECT * FROM tet('{p}', 't2m', 'other')")).await;
    assert!(
        e.contains("dimensions [\"y\", \"x\"]") && e.contains("dimension names"),
        "{e}"
    );
    let e = err(format!("SELECT * FROM tet('{p}', 't2m', 't2m')")).await;
    assert!(e.contains("named twice"), "{e}");
    let e = err(format!("SELECT * FROM tet('{p}', 't2m', 'rain')")).await;
    assert!(e.contains("rain"), "{e}");
    // A coordinate variable's own name is its axis column's.
    let e = err(format!("SELECT * FROM tet('{p}', 'lon', 't2m')")).await;
    assert!(e.contains("shape"), "{e}");
    assert!(e.contains(&p.to_string()), "{e}");
}

/// Rows of `sql` with `setting` (e.g. `tet.join_rewrite`) on and off, and the plan's text.
async fn on_and_off(ctx: &SessionContext, setting: &str, sql: &str) -> (Vec<Vec<Val>>, Vec<Vec<Val>>, String) {
    ctx.sql(&format!("SET {setting} = true")).await.unwrap();
    let on = rows(ctx, sql).await;
    let plan = format!("{:?}", rows(ctx, &format!("EXPLAIN {sql}")).await);
    ctx.sql(&format!("SET {setting} = false")).await.unwrap();
    let off = rows(ctx, sql).await;
    ctx.sql(&format!("SET {setting} = true")).await.unwrap();
    (on, off, plan)
}

#[tokio::test(flavor = "multi_thread")]
async fn folds_over_several_datasets_equal_datafusions_aggregate() {
    let dir = tempdir();
    let ctx = session(3);
    let mut rng = Rng(3131);
    for k in 0..12 {
        let case = MultiCase::generate(&mut rng, dir.path(), k);
        let from = case.from();
        let names = case.names();
        let (a, b) = (&names[0], &names[1]);
        let d = rng.below(case.axes.len() as u64) as usize;
        let key = &case.axes[d].0;
        let x = format!("CAST({a} AS DOUBLE)");
        let y = format!("CAST({b} AS DOUBLE)");
        let sliced = rng.below(case.axes.len() as u64) as usize;
        // A weight: a Float64 expression of a random axis.
        let w = format!(
            "CAST({} AS DOUBLE)",
            case.axes[rng.below(case.axes.len() as u64) as usize].0
        );
        let (pred, _, _) = case.slice(&mut rng, sliced);
        for sql in [
            format!(
                "SELECT {key}, count(*), count({a}), avg({x} - {y}), max(greatest({x}, {y})), min({x} * 2.0 + {y}) \
                 FROM {from} GROUP BY {key}"
            ),
            format!("SELECT sum({x} * {y}), var_samp({x} - {y}), count({b}) FROM {from} WHERE {pred}"),
            format!("SELECT {key}, sum({y}) FILTER (WHERE {x} > 0) FROM {from} WHERE {y} < 10 GROUP BY {key}"),
            format!(
                "SELECT {key}, corr({x}, {y}), covar_pop({x}, {y}), covar_samp({a}, {b}), \
                 covar_samp({x} * 2.0, {y}) FILTER (WHERE {y} > 0) FROM {from} GROUP BY {key}"
            ),
            format!("SELECT corr({x}, {y}), covar_pop({y}, {x} - {y}) FROM {from} WHERE {pred}"),
            format!(
                "SELECT {key}, regr_slope({x}, {y}), regr_intercept({y}, {x}), regr_r2({x}, {y}), \
                 regr_avgx({x}, {y}), regr_avgy({x}, {y}), regr_sxx({x}, {y}), regr_syy({x}, {y}), \
                 regr_sxy({y}, {x} * 2.0) FROM {from} GROUP BY {key}"
            ),
            // Weighted by an axis: products in f64 and, all in Float32, in f32.
            format!(
                "SELECT {key}, sum({x} * {y} * cos(radians({w}))), avg(({x} - {y}) * ({w} + 1.0)), \
                 count({x} * {w}) FROM {from} GROUP BY {key}"
            ),
            format!(
                "SELECT sum(CAST({a} AS FLOAT) * CAST({b} AS FLOAT) * CAST({w} AS FLOAT)), \
                 avg(CAST({w} AS FLOAT) * (CAST({a} AS FLOAT) - CAST({b} AS FLOAT))) FROM {from} WHERE {pred}"
            ),
            format!(
                "SELECT {key}, sum(sqrt(abs(CAST(v AS DOUBLE))) * {w}) FROM tet('{p}', '{b}') GROUP BY {key}",
                p = case.path
            ),
            // Functions of two inputs over one dataset's table, too.
            format!(
                "SELECT {key}, corr(v, CAST({last} AS DOUBLE)), covar_samp(v * 2.0, v) FROM tet('{p}', '{b}') \
                 WHERE v IS NOT NULL GROUP BY {key}",
                last = case.axes[case.axes.len() - 1].0,
                p = case.path
            ),
        ] {
            assert_folds_as_datafusion(&ctx, &sql, k).await;
        }
    }
}

/// `sql` (of random case `k`) answers as DataFusion's own aggregate (our pushdown off)
/// and is folded by `TetAggregateExec`.
async fn assert_folds_as_datafusion(ctx: &SessionContext, sql: &str, k: usize) {
    let (on, off, plan) = on_and_off(ctx, "tet.aggregate_pushdown", sql).await;
    crate::common::assert_same(on, off, &format!("case {k}: {sql}"));
    assert!(plan.contains("TetAggregateExec"), "case {k}: {sql}\n{plan}");
}

/// Float columns of their own type (no casts): the programs read them in place where a
/// block holds no missing cell, and combine two columns in one pass.
#[tokio::test(flavor = "multi_thread")]
async fn float_columns_fold_in_place_as_datafusion_does() {
    let dir = tempdir();
    let ctx = session(3);
    let mut rng = Rng(5151);
    for k in 0..8 {
        let dtype = [DType::F32, DType::F64][k % 2];
        let case = MultiCase::generate_typed(&mut rng, dir.path(), k, Some(dtype));
        let from = case.from();
        let names = case.names();
        let (a, b) = (&names[0], &names[1]);
        let key = &case.axes[rng.below(case.axes.len() as u64) as usize].0;
        let (pred, _, _) = case.slice(&mut rng, 0);
        for sql in [
            format!(
                "SELECT {key}, avg({a} - {b}), sum({b} - {a}), avg({a} + {b}), max({a} * {b}), avg({b}), \
                 count(*) FROM {from} GROUP BY {key}"
            ),
            format!("SELECT corr({a}, {b}), covar_pop({b}, {a}), avg({a}), sum({a} - {b}) FROM {from} WHERE {pred}"),
            // A product of both times a weight of the outermost axis, in f32 and in f64
            // (summed as read where the product is of the columns' own type).
            format!(
                "SELECT sum({a} * {b} * CAST({w} AS FLOAT)), sum(CAST({w} AS DOUBLE)) FROM {from}",
                w = case.axes[0].0
            ),
            format!(
                "SELECT sum({a} * {b} * CAST({w} AS DOUBLE)) FROM {from}",
                w = case.axes[0].0
            ),
        ] {
            assert_folds_as_datafusion(&ctx, &sql, k).await;
        }
    }
}

/// Filters comparing value columns with constants (`WHERE b > 10`, `FILTER (WHERE a
/// BETWEEN …)`, `IS NOT NULL`) keep the aligned cells by ranges of their stored values,
/// for the compiled inputs, the row count and the inputs evaluated beside them; a filter
/// comparing two columns is evaluated. All as DataFusion's aggregate with our pushdown off.
#[tokio::test(flavor = "multi_thread")]
async fn value_filters_over_several_datasets_fold_as_datafusion_does() {
    let dir = tempdir();
    let ctx = session(3);
    let mut rng = Rng(7171);
    for k in 0..10 {
        let dtype = [Some(DType::F32), Some(DType::F64), None][k % 3];
        let case = MultiCase::generate_typed(&mut rng, dir.path(), k, dtype);
        let from = case.from();
        let names = case.names();
        let (a, b) = (&names[0], &names[1]);
        let key = &case.axes[rng.below(case.axes.len() as u64) as usize].0;
        let w = &case.axes[rng.below(case.axes.len() as u64) as usize].0;
        // Constants among the values (small_values: -50..50 for floats, -100..100 and
        // 0..200 for integers).
        let c = rng.below(50);
        let (lo, hi) = (c, c + rng.below(40));
        let sliced = rng.below(case.axes.len() as u64) as usize;
        let (pred, _, _) = case.slice(&mut rng, sliced);
        for sql in [
            format!(
                "SELECT {key}, count(*), avg({a}), sum({a} - {b}), max({b}), count({a}) FROM {from} \
                 WHERE {b} > {c} GROUP BY {key}"
            ),
            format!(
                "SELECT count(*) FILTER (WHERE {a} >= {c}), avg({b}) FILTER (WHERE {a} BETWEEN {lo} AND {hi}), \
                 corr({a}, {b}), sum({a} * {b} * CAST({w} AS DOUBLE)) FROM {from} \
                 WHERE {b} IS NOT NULL AND {a} < {hi}"
            ),
            format!(
                "SELECT {key}, max(greatest({a}, {b})), count(*), avg({b}) FROM {from} \
                 WHERE {a} <= {c} AND {pred} GROUP BY {key}"
            ),
            format!("SELECT count(*), avg({a}), sum({b}) FILTER (WHERE {b} < {c}) FROM {from} WHERE {a} > {b}"),
        ] {
            assert_folds_as_datafusion(&ctx, &sql, k).await;
        }
    }
}

/// Filters comparing two value columns (`WHERE a > b`, `FILTER (WHERE d <= a)`) keep the
/// rows DataFusion's comparison keeps, on every pair of special values: NaNs of both signs
/// and several payloads (a signaling one among them), infinities, signed zeros,
/// subnormals, a fill value; f32 with f32, f32 with f64 and i16 with f32.
#[tokio::test(flavor = "multi_thread")]
async fn comparisons_of_two_columns_keep_rows_as_datafusion_does() {
    let dir = tempdir();
    let ctx = session(2);
    let special: Vec<f32> = [
        f32::NAN.to_bits(),
        (-f32::NAN).to_bits(),
        0x7fc0_0123,
        0x7f80_0001,
        0xff80_0001,
    ]
    .into_iter()
    .map(f32::from_bits)
    .chain([
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1.5,
        -2.5,
        1e-40,
        f32::MAX,
        7.0,
        3.0,
    ])
    .collect();
    let n = special.len() as u64;
    // Cell (i, j): a = special[i], b = special[j]; c = b as f64 (f64 NaN payloads
    // beside); d an i16 that meets a's values 3 and -2.5's neighbours.
    let (mut a, mut b, mut c, mut d) = (vec![], vec![], vec![], vec![]);
    for i in 0..n as usize {
        for j in 0..n as usize {
            a.extend(special[i].to_le_bytes());
            b.extend(special[j].to_le_bytes());
            let cj = if j == 2 {
                f64::from_bits(0x7ff8_0000_0000_0123)
            } else {
                special[j] as f64
            };
            c.extend(cj.to_le_bytes());
            d.extend((j as i16 - 4).to_le_bytes());
        }
    }
    let path = dir.path().join("special.tet");
    let mut w = TetWriter::new();
    for (name, dtype, data, chunk) in [
        ("a", DType::F32, &a, [4u64, 15]),
        ("b", DType::F32, &b, [15, 4]),
        ("c", DType::F64, &c, [7, 7]),
        ("d", DType::I16, &d, [15, 15]),
    ] {
        let mut spec = DatasetSpec::new(name, dtype, &[n, n], &chunk, data).dim_names(&["x", "y"]);
        if name == "b" {
            spec = spec.attr("_FillValue", "7.0");
        }
        w.dataset(spec).unwrap();
    }
    w.write_path(&path).unwrap();
    let from = format!("tet('{}', 'a', 'b', 'c', 'd')", path.display());
    for op in ["<", "<=", "=", "<>", ">=", ">"] {
        for sql in [
            format!("SELECT x, y, count(*) FROM {from} WHERE a {op} b GROUP BY x, y"),
            format!("SELECT x, count(*), sum(c) FROM {from} WHERE b {op} a AND a > -3 GROUP BY x"),
            format!("SELECT y, count(*) FILTER (WHERE a {op} c), count(*) FROM {from} GROUP BY y"),
            format!("SELECT x, y, count(a) FROM {from} WHERE d {op} a GROUP BY x, y"),
        ] {
            let (on, off, plan) = on_and_off(&ctx, "tet.aggregate_pushdown", &sql).await;
            assert!(!off.is_empty(), "{sql}");
            crate::common::assert_same(on, off, &sql);
            assert!(plan.contains("TetAggregateExec"), "{sql}\n{plan}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn joins_on_every_axis_are_aligned_scans() {
    let dir = tempdir();
    let ctx = session(3);
    let mut rng = Rng(4242);
    for k in 0..10 {
        let case = MultiCase::generate(&mut rng, dir.path(), k);
        let names = case.names();
        let axes: Vec<&str> = case.axes.iter().map(|a| a.0.as_str()).collect();
        let on: Vec<String> = axes.iter().map(|a| format!("t.{a} = s.{a}")).collect();
        // One file, or (odd cases) one file per dataset on the same grid.
        let (pt, ps) = match k % 2 {
            0 => (&case.path, &case.path),
            _ => (&case.files[0], &case.files[1]),
        };
        let from = format!(
            "tet('{pt}', '{}') t JOIN tet('{ps}', '{}') s ON {}",
            names[0],
            names[1],
            on.join(" AND "),
        );
        let (pred, lo, hi) = case.slice(&mut rng, 0);
        let pred_s = pred.replacen(axes[0], &format!("s.{}", axes[0]), 1);
        let cols: Vec<String> = axes.iter().map(|a| format!("t.{a}")).collect();
        // The cells side by side, against brute force, with and without the rewrite.
        let sql = format!("SELECT {}, t.v, s.v FROM {from} WHERE {pred_s}", cols.join(", "));
        let (want, _) = case.oracle(&[0, 1], &|a, _| a[0] >= lo && a[0] <= hi);
        let (on_rows, off_rows, plan) = on_and_off(&ctx, "tet.join_rewrite", &sql).await;
        assert_eq!(sorted(on_rows), sorted(want.clone()), "case {k}: {sql}\n{plan}");
        assert_eq!(sorted(off_rows), sorted(want), "case {k}: {sql}");
        assert!(
            !plan.contains("HashJoinExec") && plan.contains("datasets=["),
            "case {k}: {sql}\n{plan}"
        );
        // Aggregates of both sides fold in one pass.
        let key = axes[axes.len() - 1];
        let sql = format!(
            "SELECT t.{key}, avg(CAST(t.v AS DOUBLE) - CAST(s.v AS DOUBLE)), count(*), max(s.v) FROM {from} \
             WHERE s.v IS NOT NULL GROUP BY t.{key}"
        );
        let (on_rows, off_rows, plan) = on_and_off(&ctx, "tet.join_rewrite", &sql).await;
        crate::common::assert_same(on_rows, off_rows, &format!("case {k}: {sql}"));
        assert!(
            plan.contains("TetAggregateExec") && plan.contains("datasets=[") && !plan.contains("HashJoinExec"),
            "case {k}: {sql}\n{plan}"
        );
        // A self-join reads the dataset twice over, and equals it.
        let sql = format!(
            "SELECT count(*), sum(CAST(a.v AS DOUBLE) - CAST(b.v AS DOUBLE)) FROM tet('{p}', '{n}') a \
             JOIN tet('{p}', '{n}') b ON {}",
            axes.iter()
                .map(|x| format!("a.{x} = b.{x}"))
                .collect::<Vec<_>>()
                .join(" AND "),
            p = case.path,
            n = names[0]
        );
        let (on_rows, off_rows, _) = on_and_off(&ctx, "tet.join_rewrite", &sql).await;
        crate::common::assert_same(on_rows, off_rows, &format!("case {k}: {sql}"));
        // Joins on some axes, outer joins: DataFusion's plan.
        if axes.len() > 1 {
            let sql = format!(
                "SELECT count(*) FROM tet('{p}', '{}') t JOIN tet('{p}', '{}') s ON t.{a} = s.{a}",
                names[0],
                names[1],
                p = case.path,
                a = axes[0]
            );
            let (on_rows, off_rows, plan) = on_and_off(&ctx, "tet.join_rewrite", &sql).await;
            assert_eq!(on_rows, off_rows, "case {k}: {sql}");
            assert!(plan.contains("HashJoinExec"), "case {k}: {sql}\n{plan}");
        }
        let sql = format!("SELECT count(*) FROM {}", from.replace(" JOIN ", " LEFT JOIN "));
        let (_, _, plan) = on_and_off(&ctx, "tet.join_rewrite", &sql).await;
        assert!(
            plan.contains("HashJoinExec") || plan.contains("NestedLoop"),
            "case {k}: {sql}\n{plan}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn files_on_one_grid_join_as_one_scan() {
    let dir = tempdir();
    let ctx = session(2);
    let (t, lat, lon) = (6u64, 5u64, 8u64);
    let cells = (t * lat * lon) as usize;
    let lat_values: Vec<f64> = (0..lat).map(|i| 60.0 - 30.0 * i as f64).collect();
    let write = |file: &str, data: &[u8], dtype: DType, chunk: &[u64], lats: &[f64], attrs: &[(&str, &str)]| {
        let name = &file[..file.find('_').unwrap_or(file.len())];
        let path = dir.path().join(format!("{file}.tet"));
        let mut w = TetWriter::new();
        let mut spec = DatasetSpec::new(name, dtype, &[t, lat, lon], chunk, data).dim_names(&["time", "lat", "lon"]);
        for (k, v) in attrs {
            spec = spec.attr(k, v);
        }
        w.dataset(spec).unwrap();
        let lat_bytes: Vec<u8> = lats.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.dataset(DatasetSpec::new("lat", DType::F64, &[lat], &[lat], &lat_bytes).dim_names(&["lat"]))
            .unwrap();
        w.write_path(&path).unwrap();
        path.display().to_string()
    };
    let tas: Vec<f32> = (0..cells).map(|i| 250.0 + (i % 37) as f32).collect();
    let pr: Vec<i16> = (0..cells)
        .map(|i| if i % 11 == 0 { -1 } else { (i % 23) as i16 })
        .collect();
    let tas_b: Vec<u8> = tas.iter().flat_map(|v| v.to_le_bytes()).collect();
    let pr_b: Vec<u8> = pr.iter().flat_map(|v| v.to_le_bytes()).collect();
    let f_tas = write("tas", &tas_b, DType::F32, &[2, 5, 8], &lat_values, &[]);
    let f_pr = write(
        "pr",
        &pr_b,
        DType::I16,
        &[3, 2, 3],
        &lat_values,
        &[("_FillValue", "-1"), ("scale_factor", "0.5"), ("add_offset", "1")],
    );
    let other_lats: Vec<f64> = lat_values.iter().map(|v| v + 0.5).collect();
    let f_shifted = write("pr_shifted", &pr_b, DType::I16, &[3, 2, 3], &other_lats, &[]);
    let join = |right: &str| {
        format!(
            "FROM tet('{f_tas}', 'tas') a JOIN tet('{right}', 'pr') b ON a.time = b.time AND a.lat = b.lat AND a.lon = b.lon"
        )
    };
    // Packed, filled precipitation beside temperature, in two files on one grid.
    let sql = format!(
        "SELECT a.lat, avg(a.v), sum(b.v * cos(radians(a.lat))), count(b.v) {} GROUP BY a.lat",
        join(&f_pr)
    );
    let (on_rows, off_rows, plan) = on_and_off(&ctx, "tet.join_rewrite", &sql).await;
    crate::common::assert_same(on_rows.clone(), off_rows, &sql);
    assert!(
        !plan.contains("HashJoinExec") && plan.contains("TetAggregateExec"),
        "{plan}"
    );
    // Brute force.
    let mut want = Vec::new();
    for (la, &lat_value) in lat_values.iter().enumerate() {
        let (mut s, mut w, mut n) = (0.0f64, 0.0f64, 0i128);
        for ti in 0..t as usize {
            for lo in 0..lon as usize {
                let i = (ti * lat as usize + la) * lon as usize + lo;
                s += tas[i] as f64;
                if pr[i] != -1 {
                    w += (pr[i] as f64 * 0.5 + 1.0) * lat_value.to_radians().cos();
                    n += 1;
                }
            }
        }
        want.push(vec![
            Val::Float(lat_value),
            Val::Float(s / (t * lon) as f64),
            Val::Float(w),
            Val::Int(n),
        ]);
    }
    crate::common::assert_same(on_rows, want, &sql);
    // Axis values that differ: a hash join, as before.
    let sql = format!("SELECT count(*) {}", join(&f_shifted));
    let (on_rows, _, plan) = on_and_off(&ctx, "tet.join_rewrite", &sql).await;
    assert_eq!(on_rows, vec![vec![Val::Int(0)]]);
    assert!(plan.contains("HashJoinExec"), "{plan}");
}

#[tokio::test(flavor = "multi_thread")]
async fn partitions_read_each_compressed_chunk_once() {
    use datafusion_tet::format::ChunkCodecs;
    let dir = tempdir();
    let ctx = session(2);
    let (t, x) = (84u64, 50u64);
    let cells = (t * x) as usize;
    let a: Vec<f32> = (0..cells).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..cells).map(|i| (i % 7) as f32).collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
    let path = dir.path().join("grids.tet");
    let mut w = TetWriter::new();
    // Rows chunked by 3 in `a` and by 4 in `b`: the grids meet every 12 rows, so seven
    // stretches share no chunk. (Cut at row 42, as a split of single tasks does, the
    // chunk of `b` holding rows 40..44 would be read by both partitions.)
    let (a_bytes, b_bytes) = (bytes(&a), bytes(&b));
    for (name, data, chunk) in [("a", &a_bytes, [3u64, 50]), ("b", &b_bytes, [4, 50])] {
        w.dataset(
            DatasetSpec::new(name, DType::F32, &[t, x], &chunk, data)
                .dim_names(&["time", "x"])
                .codecs(ChunkCodecs::Zstd(1)),
        )
        .unwrap();
    }
    w.write_path(&path).unwrap();
    let from = format!("tet('{}', 'a', 'b')", path.display());
    let chunks = 28 + 21;
    // A scan: every cell once, each chunk of each dataset read once over two partitions.
    let (got, metrics) = rows_and_scan_metrics(&ctx, &format!("SELECT time, x, a, b FROM {from}")).await;
    let want: Vec<Vec<Val>> = (0..cells)
        .map(|i| {
            let (ti, xi) = (i as u64 / x, i as u64 % x);
            vec![
                Val::Int(ti as i128),
                Val::Int(xi as i128),
                Val::Float(a[i] as f64),
                Val::Float(b[i] as f64),
            ]
        })
        .collect();
    assert_eq!(sorted(got), sorted(want));
    assert_eq!(metrics["chunks_read"], chunks);
    // The fold, grouped and not.
    let (got, metrics) = rows_and_scan_metrics(&ctx, &format!("SELECT sum(a - b), count(*) FROM {from}")).await;
    let sum: f64 = (0..cells).map(|i| (a[i] - b[i]) as f64).sum();
    assert_eq!(got, vec![vec![Val::Float(sum), Val::Int(cells as i128)]]);
    assert_eq!(metrics["chunks_read"], chunks);
    let (got, metrics) = rows_and_scan_metrics(&ctx, &format!("SELECT x, max(a + b) FROM {from} GROUP BY x")).await;
    let want: Vec<Vec<Val>> = (0..x as usize)
        .map(|xi| {
            let m = (0..t as usize)
                .map(|ti| a[ti * x as usize + xi] + b[ti * x as usize + xi])
                .fold(f32::MIN, f32::max);
            vec![Val::Int(xi as i128), Val::Float(m as f64)]
        })
        .collect();
    assert_eq!(sorted(got), want);
    assert_eq!(metrics["chunks_read"], chunks);
}

/// An axis whose labels repeat joins many-to-many: `east` at positions 0 and 1 meets both
/// positions of the other side. The rewrite, which pairs positions, must leave such a join
/// to DataFusion (here 2·2 + 1 rows per row of the other axis, not 3).
#[tokio::test(flavor = "multi_thread")]
async fn a_join_on_repeated_labels_keeps_datafusions_join() {
    let dir = tempdir();
    let path = dir.path().join("repeated.tet");
    let a: Vec<u8> = (0..6u8).collect();
    let b: Vec<u8> = (10..16u8).collect();
    let mut w = TetWriter::new();
    for (name, data) in [("a", &a), ("b", &b)] {
        w.dataset(
            DatasetSpec::new(name, DType::U8, &[3, 2], &[2, 2], data)
                .dim_names(&["col", "row"])
                .labels("col", vec!["east".into(), "east".into(), "west".into()]),
        )
        .unwrap();
    }
    w.write_path(&path).unwrap();
    let p = path.display();
    let ctx = ctx();
    for sql in [
        format!(
            "SELECT t.col, t.row, t.v, s.v FROM tet('{p}', 'a') t JOIN tet('{p}', 'b') s \
             ON t.col = s.col AND t.row = s.row"
        ),
        format!(
            "SELECT count(*), sum(CAST(t.v AS BIGINT) * CAST(s.v AS BIGINT)) FROM tet('{p}', 'a') t \
             JOIN tet('{p}', 'b') s ON t.col = s.col AND t.row = s.row"
        ),
    ] {
        let (on_rows, off_rows, plan) = on_and_off(&ctx, "tet.join_rewrite", &sql).await;
        assert_eq!(sorted(on_rows.clone()), sorted(off_rows), "{sql}\n{plan}");
        assert!(plan.contains("HashJoinExec"), "{sql}\n{plan}");
        if !sql.contains("count(*)") {
            assert_eq!(on_rows.len(), 10, "{sql}: (2·2 + 1) col pairs × 2 rows");
        }
    }
}
