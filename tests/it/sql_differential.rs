//! Differential tests of the SQL scan: random files (every dtype, ranks 1–5, edge tiles,
//! zstd, labels, fill values) queried with random axis predicates, against a brute-force
//! walk over the array written.

use crate::common::{
    Rng, Val, ctx, random_codecs, random_geometry, rows, rows_and_scan_metrics, small_values, sorted, tempdir,
};
use datafusion_tet::format::{DType, DatasetSpec, TetWriter};

/// An axis as the oracle sees it: the value at each position.
/// The oracle's test of one axis value.
pub type Keep = Box<dyn Fn(&Val) -> bool>;

pub struct OracleAxis {
    pub name: String,
    pub values: Vec<Val>,
    /// SQL literal for a value.
    literal: fn(&Val) -> String,
}

fn int_lit(v: &Val) -> String {
    match v {
        Val::Int(i) => i.to_string(),
        _ => unreachable!(),
    }
}
fn str_lit(v: &Val) -> String {
    match v {
        Val::Str(s) => format!("'{s}'"),
        _ => unreachable!(),
    }
}

pub struct Case {
    pub path: String,
    pub dtype: DType,
    shape: Vec<u64>,
    chunk: Vec<u64>,
    data: Vec<u8>,
    fill: Option<Vec<u8>>,
    pub axes: Vec<OracleAxis>,
}

impl Case {
    /// The first of 40 generated cases that `accept` takes (files written to `dir`).
    pub fn first(rng: &mut Rng, dir: &std::path::Path, accept: impl Fn(&Case) -> bool) -> Case {
        (0..40)
            .map(|k| Case::generate(rng, dir, k))
            .find(|c| accept(c))
            .expect("no generated case is of the kind wanted")
    }

    pub fn generate(rng: &mut Rng, dir: &std::path::Path, k: usize) -> Case {
        let dtype = DType::ALL[k % 10];
        let ndim = rng.range(1, 5) as usize;
        let (shape, chunk) = random_geometry(rng, ndim, 2500);
        let cells: u64 = shape.iter().product();
        let data = small_values(rng, dtype, cells as usize);
        let chunks: u64 = shape.iter().zip(&chunk).map(|(s, c)| s.div_ceil(*c)).product();
        let codecs = random_codecs(rng, chunks);
        let names: Vec<String> = (0..ndim).map(|d| format!("a{d}")).collect();
        let mut spec = DatasetSpec::new("t", dtype, &shape, &chunk, &data)
            .codecs(codecs)
            .dim_names(&names.iter().map(String::as_str).collect::<Vec<_>>());
        let mut axes = Vec::new();
        for d in 0..ndim {
            let kind = rng.below(3);
            let (values, literal): (Vec<Val>, fn(&Val) -> String) = match kind {
                1 => {
                    let labels: Vec<String> = (0..shape[d])
                        .map(|i| format!("L{}", (i * 5 + rng.below(2)) % 4))
                        .collect();
                    spec = spec.labels(&names[d], labels.clone());
                    (labels.into_iter().map(Val::Str).collect(), str_lit)
                }
                2 => {
                    let labels: Vec<i64> = (0..shape[d]).map(|i| 10 * (i as i64 / 2) - 20).collect();
                    spec = spec.labels(&names[d], labels.iter().map(|l| l.to_string()).collect());
                    (labels.into_iter().map(|l| Val::Int(l as i128)).collect(), int_lit)
                }
                _ => ((0..shape[d]).map(|i| Val::Int(i as i128)).collect(), int_lit),
            };
            axes.push(OracleAxis {
                name: names[d].clone(),
                values,
                literal,
            });
        }
        // Sometimes mark one present value as the fill value.
        let fill = (rng.below(2) == 0).then(|| {
            let size = dtype.size();
            let i = rng.below(cells) as usize;
            data[i * size..(i + 1) * size].to_vec()
        });
        if let Some(f) = &fill {
            spec = spec.attr("_FillValue", &dtype.decode(f).unwrap().to_string());
        }
        let path = dir.join(format!("case{k}.tet"));
        let mut w = TetWriter::new();
        w.dataset(spec).unwrap();
        w.zone_maps(rng.below(2) == 0);
        w.write_path(&path).unwrap();
        Case {
            path: path.display().to_string(),
            dtype,
            shape,
            chunk,
            data,
            fill,
            axes,
        }
    }

    /// A random predicate on axis `d`: SQL text and the oracle's test.
    pub fn predicate(&self, rng: &mut Rng, d: usize) -> (String, Keep) {
        let ax = &self.axes[d];
        let pick = |rng: &mut Rng| ax.values[rng.below(ax.values.len() as u64) as usize].clone();
        let (a, b) = (pick(rng), pick(rng));
        let (lo, hi) = if a <= b {
            (a.clone(), b.clone())
        } else {
            (b.clone(), a.clone())
        };
        let lit = ax.literal;
        let n = &ax.name;
        match rng.below(6) {
            0 => (format!("{n} = {}", lit(&a)), Box::new(move |v| *v == a)),
            1 => (
                format!("{n} BETWEEN {} AND {}", lit(&lo), lit(&hi)),
                Box::new(move |v| *v >= lo && *v <= hi),
            ),
            2 => (
                format!("{n} IN ({}, {})", lit(&a), lit(&b)),
                Box::new(move |v| *v == a || *v == b),
            ),
            3 => (format!("NOT ({n} >= {})", lit(&a)), Box::new(move |v| *v < a)),
            4 => (
                format!("({n} < {} OR {n} > {})", lit(&lo), lit(&hi)),
                Box::new(move |v| *v < lo || *v > hi),
            ),
            _ => (format!("{n} <> {}", lit(&a)), Box::new(move |v| *v != a)),
        }
    }

    /// Oracle rows (axis values then v) of the cells passing `keep`, and the chunks hit.
    pub fn oracle(&self, keep: &[Option<Keep>]) -> (Vec<Vec<Val>>, usize) {
        let n = self.shape.len();
        let size = self.dtype.size();
        let cells: u64 = self.shape.iter().product();
        let mut out = Vec::new();
        let mut chunks = std::collections::HashSet::new();
        for lin in 0..cells {
            let mut idx = vec![0u64; n];
            let mut rem = lin;
            for d in (0..n).rev() {
                idx[d] = rem % self.shape[d];
                rem /= self.shape[d];
            }
            let vals: Vec<Val> = (0..n).map(|d| self.axes[d].values[idx[d] as usize].clone()).collect();
            if !vals.iter().zip(keep).all(|(v, k)| k.as_ref().is_none_or(|f| f(v))) {
                continue;
            }
            chunks.insert(idx.iter().zip(&self.chunk).map(|(i, c)| i / c).collect::<Vec<_>>());
            let b = &self.data[lin as usize * size..(lin as usize + 1) * size];
            let v = if self.fill.as_deref() == Some(b) {
                Val::Null
            } else {
                Val::from_scalar(self.dtype.decode(b).unwrap())
            };
            let mut row = vals;
            row.push(v);
            out.push(row);
        }
        (out, chunks.len())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn random_slices_equal_brute_force() {
    let dir = tempdir();
    let ctx = ctx();
    let mut rng = Rng(2024);
    for k in 0..30 {
        let case = Case::generate(&mut rng, dir.path(), k);
        let from = format!("tet('{}', 't')", case.path);
        check_case(&ctx, &case, &from, &mut rng, k, true).await;
    }
}

/// `SELECT *` and four random slices of `case`, read through `from`, against the oracle:
/// rows, chunks read (when `chunk_metrics`; a distributed session's local plan has no
/// scan metrics), and count/sum/min/max over the slice.
pub async fn check_case(
    ctx: &datafusion::prelude::SessionContext,
    case: &Case,
    from: &str,
    rng: &mut Rng,
    k: usize,
    chunk_metrics: bool,
) {
    {
        let cols: Vec<String> = case.axes.iter().map(|a| a.name.clone()).collect();
        // SELECT * equals the whole array.
        let (all, _) = case.oracle(&case.axes.iter().map(|_| None).collect::<Vec<_>>());
        let got = rows(ctx, &format!("SELECT * FROM {from}")).await;
        assert_eq!(sorted(got), sorted(all), "case {k} ({}) SELECT *", case.dtype);
        for q in 0..4 {
            let mut preds = Vec::new();
            let mut keep: Vec<Option<Keep>> = Vec::new();
            for d in 0..case.axes.len() {
                if rng.below(2) == 0 {
                    let (sql, f) = case.predicate(rng, d);
                    preds.push(sql);
                    keep.push(Some(f));
                } else {
                    keep.push(None);
                }
            }
            let where_ = if preds.is_empty() {
                String::new()
            } else {
                format!(" WHERE {}", preds.join(" AND "))
            };
            let (want, want_chunks) = case.oracle(&keep);
            let sql = format!("SELECT {}, v FROM {from}{where_}", cols.join(", "));
            if chunk_metrics {
                let (got, metrics) = rows_and_scan_metrics(ctx, &sql).await;
                assert_eq!(sorted(got), sorted(want.clone()), "case {k} query {q}: {sql}");
                assert_eq!(
                    metrics.get("chunks_read").copied().unwrap_or(0),
                    want_chunks,
                    "chunks read by {sql}"
                );
            } else {
                let got = rows(ctx, &sql).await;
                assert_eq!(sorted(got), sorted(want.clone()), "case {k} query {q}: {sql}");
            }
            // Aggregates over the same selection.
            let agg = format!("SELECT count(*), count(v), sum(CAST(v AS DOUBLE)), min(v), max(v) FROM {from}{where_}");
            let got = rows(ctx, &agg).await;
            let vals: Vec<&Val> = want
                .iter()
                .map(|r| r.last().unwrap())
                .filter(|v| **v != Val::Null)
                .collect();
            let sum: f64 = vals.iter().map(|v| v.as_f64()).sum();
            let min = vals.iter().cloned().fold(None, |m: Option<&Val>, v| {
                Some(match m {
                    Some(m) if m <= v => m,
                    _ => v,
                })
            });
            let max = vals.iter().cloned().fold(None, |m: Option<&Val>, v| {
                Some(match m {
                    Some(m) if m >= v => m,
                    _ => v,
                })
            });
            let r = &got[0];
            assert_eq!(r[0], Val::Int(want.len() as i128), "{agg}");
            assert_eq!(r[1], Val::Int(vals.len() as i128), "{agg}");
            if vals.is_empty() {
                assert_eq!((&r[2], &r[3], &r[4]), (&Val::Null, &Val::Null, &Val::Null), "{agg}");
            } else {
                assert_eq!(r[2], Val::Float(sum), "{agg}");
                assert_eq!((&r[3], &r[4]), (min.unwrap(), max.unwrap()), "{agg}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn point_query_on_a_100_chunk_file_reads_one_chunk() {
    let dir = tempdir();
    let path = dir.path().join("hundred.tet");
    let data: Vec<u8> = (0..100 * 20 * 30).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("temp", DType::F32, &[100, 20, 30], &[1, 20, 30], &data).dim_names(&["time", "lat", "lon"]),
    )
    .unwrap();
    w.write_path(&path).unwrap();
    let ctx = ctx();
    let sql = format!(
        "SELECT sum(v), count(*) FROM tet('{}', 'temp') WHERE time = 42",
        path.display()
    );
    let (got, m) = rows_and_scan_metrics(&ctx, &sql).await;
    let want: f64 = (42 * 600..43 * 600).map(|i| i as f64).sum();
    assert_eq!(got, vec![vec![Val::Float(want), Val::Int(600)]]);
    assert_eq!(m["chunks_read"], 1);
    assert_eq!(m["chunks_total"], 100);
    assert_eq!(m["bytes_read"], 600 * 4);
    // An axis-only query never touches payloads.
    let (got, m) = rows_and_scan_metrics(
        &ctx,
        &format!("SELECT max(lat) FROM tet('{}', 'temp') WHERE lon > 3", path.display()),
    )
    .await;
    assert_eq!(got, vec![vec![Val::Int(19)]]);
    assert_eq!(m.get("chunks_read").copied().unwrap_or(0), 0);
    // Limit stops early.
    let (got, m) = rows_and_scan_metrics(
        &ctx,
        &format!("SELECT v FROM tet('{}', 'temp') LIMIT 5", path.display()),
    )
    .await;
    assert_eq!(got.len(), 5);
    assert!(m["chunks_read"] <= 2, "{m:?}");
}
