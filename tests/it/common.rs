//! Shared test helpers: deterministic random arrays, temp files, the shared fixtures.

use datafusion_tet::format::{ChunkCodecs, Codec, DType};
use half::f16;
use std::path::PathBuf;

/// A small deterministic PRNG (SplitMix64), so failures reproduce from a seed.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn range(&mut self, lo: u64, hi_inclusive: u64) -> u64 {
        lo + self.below(hi_inclusive - lo + 1)
    }
}

/// `n` random little-endian values of `dtype`; floats are small integers or halves so
/// sums are exact, integers span their type's range.
pub fn random_values(rng: &mut Rng, dtype: DType, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size());
    for _ in 0..n {
        let r = rng.next();
        let small = (r % 2001) as f64 / 2.0 - 500.0;
        match dtype {
            DType::F32 => out.extend_from_slice(&(small as f32).to_le_bytes()),
            DType::F64 => out.extend_from_slice(&small.to_le_bytes()),
            DType::F16 => out.extend_from_slice(&f16::from_f64(small / 4.0).to_le_bytes()),
            DType::I32 => out.extend_from_slice(&(r as i32).to_le_bytes()),
            DType::I64 => out.extend_from_slice(&(r as i64).to_le_bytes()),
            DType::I16 => out.extend_from_slice(&(r as i16).to_le_bytes()),
            DType::U8 => out.push(r as u8),
            DType::U16 => out.extend_from_slice(&(r as u16).to_le_bytes()),
            DType::U32 => out.extend_from_slice(&(r as u32).to_le_bytes()),
            DType::U64 => out.extend_from_slice(&r.to_le_bytes()),
        }
    }
    out
}

/// A random shape of rank `ndim` with at most `max_cells` cells, and a chunk shape that
/// usually leaves clipped edge tiles.
pub fn random_geometry(rng: &mut Rng, ndim: usize, max_cells: u64) -> (Vec<u64>, Vec<u64>) {
    loop {
        let shape: Vec<u64> = (0..ndim).map(|_| rng.range(1, 9)).collect();
        if shape.iter().product::<u64>() > max_cells {
            continue;
        }
        let chunk: Vec<u64> = shape.iter().map(|&s| rng.range(1, s + 1)).collect();
        return (shape, chunk);
    }
}

/// Raw or zstd, at random, for each of `chunks` chunks.
pub fn random_codecs(rng: &mut Rng, chunks: u64) -> ChunkCodecs {
    ChunkCodecs::PerChunk(
        (0..chunks)
            .map(|_| if rng.below(2) == 0 { Codec::Raw } else { Codec::Zstd })
            .collect(),
    )
}

/// The upstream fixtures folder, or `None` with a printed notice.
pub fn upstream_fixtures() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/upstream");
    if p.join("README.md").exists() {
        Some(p)
    } else {
        eprintln!("NOTICE: ../shared/fixtures/upstream is absent; skipping the upstream-fixture test");
        None
    }
}

/// A fresh temp dir for one test.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Values in moderate ranges (sums cannot overflow any SQL result type).
pub fn small_values(rng: &mut Rng, dtype: DType, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size());
    for _ in 0..n {
        let r = rng.next();
        let i = (r % 200) as i64 - 100;
        let u = r % 200;
        let f = i as f64 / 2.0;
        match dtype {
            DType::F32 => out.extend_from_slice(&(f as f32).to_le_bytes()),
            DType::F64 => out.extend_from_slice(&f.to_le_bytes()),
            DType::F16 => out.extend_from_slice(&f16::from_f64(f).to_le_bytes()),
            DType::I32 => out.extend_from_slice(&(i as i32).to_le_bytes()),
            DType::I64 => out.extend_from_slice(&i.to_le_bytes()),
            DType::I16 => out.extend_from_slice(&(i as i16).to_le_bytes()),
            DType::U8 => out.push(u as u8),
            DType::U16 => out.extend_from_slice(&(u as u16).to_le_bytes()),
            DType::U32 => out.extend_from_slice(&(u as u32).to_le_bytes()),
            DType::U64 => out.extend_from_slice(&u.to_le_bytes()),
        }
    }
    out
}

/// A comparable cell value taken from Arrow or from the brute-force oracle.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
pub enum Val {
    Null,
    Int(i128),
    Float(f64),
    Str(String),
}

impl Val {
    pub fn from_scalar(s: datafusion_tet::format::Scalar) -> Val {
        use datafusion_tet::format::Scalar;
        match s {
            Scalar::F64(v) => Val::Float(v),
            Scalar::I64(v) => Val::Int(v as i128),
            Scalar::U64(v) => Val::Int(v as i128),
        }
    }
    pub fn as_f64(&self) -> f64 {
        match self {
            Val::Int(v) => *v as f64,
            Val::Float(v) => *v,
            _ => f64::NAN,
        }
    }
}

/// Every value of an Arrow column as [`Val`].
pub fn column_values(a: &dyn arrow::array::Array) -> Vec<Val> {
    use arrow::array::AsArray;
    use arrow::datatypes::*;
    (0..a.len())
        .map(|i| {
            if a.is_null(i) {
                return Val::Null;
            }
            match a.data_type() {
                DataType::Float16 => Val::Float(a.as_primitive::<Float16Type>().value(i).to_f64()),
                DataType::Float32 => Val::Float(a.as_primitive::<Float32Type>().value(i) as f64),
                DataType::Float64 => Val::Float(a.as_primitive::<Float64Type>().value(i)),
                DataType::Int16 => Val::Int(a.as_primitive::<Int16Type>().value(i) as i128),
                DataType::Int32 => Val::Int(a.as_primitive::<Int32Type>().value(i) as i128),
                DataType::Int64 => Val::Int(a.as_primitive::<Int64Type>().value(i) as i128),
                DataType::UInt8 => Val::Int(a.as_primitive::<UInt8Type>().value(i) as i128),
                DataType::UInt16 => Val::Int(a.as_primitive::<UInt16Type>().value(i) as i128),
                DataType::UInt32 => Val::Int(a.as_primitive::<UInt32Type>().value(i) as i128),
                DataType::UInt64 => Val::Int(a.as_primitive::<UInt64Type>().value(i) as i128),
                DataType::Decimal128(_, s) => {
                    let v = a.as_primitive::<Decimal128Type>().value(i);
                    if *s == 0 {
                        Val::Int(v)
                    } else {
                        Val::Float(v as f64 / 10f64.powi(*s as i32))
                    }
                }
                DataType::Utf8 => Val::Str(a.as_string::<i32>().value(i).to_string()),
                DataType::Boolean => Val::Int(a.as_boolean().value(i) as i128),
                DataType::Utf8View => Val::Str(a.as_string_view().value(i).to_string()),
                DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                    Val::Int(a.as_primitive::<TimestampNanosecondType>().value(i) as i128)
                }
                other => panic!("unexpected type {other}"),
            }
        })
        .collect()
}

/// The rows of `batches`.
pub fn rows_of(batches: &[arrow::array::RecordBatch]) -> Vec<Vec<Val>> {
    let mut out = Vec::new();
    for b in batches {
        let cols: Vec<Vec<Val>> = b.columns().iter().map(|c| column_values(c.as_ref())).collect();
        for r in 0..b.num_rows() {
            out.push(cols.iter().map(|c| c[r].clone()).collect());
        }
    }
    out
}

/// Run `sql` and return its rows.
pub async fn rows(ctx: &datafusion::prelude::SessionContext, sql: &str) -> Vec<Vec<Val>> {
    rows_and_plan(ctx, sql).await.0
}

/// Run `sql` and return its rows with the executed plan (which holds the metrics).
pub async fn rows_and_plan(
    ctx: &datafusion::prelude::SessionContext,
    sql: &str,
) -> (
    Vec<Vec<Val>>,
    std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .create_physical_plan()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let batches = datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    (rows_of(&batches), plan)
}

/// Metric `name` summed over every TetScanExec and TetAggregateExec of `plan`.
pub fn tet_metric(plan: &std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>, name: &str) -> Option<usize> {
    let own = if plan.name() == "TetScanExec" || plan.name() == "TetAggregateExec" {
        plan.metrics().and_then(|m| m.sum_by_name(name)).map(|v| v.as_usize())
    } else {
        None
    };
    plan.children()
        .into_iter()
        .filter_map(|c| tet_metric(c, name))
        .chain(own)
        .reduce(|a, b| a + b)
}

/// Run `sql` and return its rows and the summed metrics of every TetScanExec and
/// TetAggregateExec in its plan.
pub async fn rows_and_scan_metrics(
    ctx: &datafusion::prelude::SessionContext,
    sql: &str,
) -> (Vec<Vec<Val>>, std::collections::HashMap<String, usize>) {
    let (rows, plan) = rows_and_plan(ctx, sql).await;
    let names = [
        "chunks_total",
        "chunks_read",
        "chunks_pruned_by_zone",
        "bytes_read",
        "rows_emitted",
    ];
    let metrics = names
        .into_iter()
        .filter_map(|n| tet_metric(&plan, n).map(|v| (n.to_string(), v)))
        .collect();
    (rows, metrics)
}

/// A session with everything registered.
pub fn ctx() -> datafusion::prelude::SessionContext {
    let ctx = datafusion::prelude::SessionContext::new();
    datafusion_tet::register(&ctx);
    ctx
}

/// A session as [`ctx`] makes it, with each of `settings` (`"tet.merge_in_scan = false"`)
/// applied by `SET`.
pub async fn ctx_with(settings: &[&str]) -> datafusion::prelude::SessionContext {
    let c = ctx();
    for s in settings {
        c.sql(&format!("SET {s}")).await.unwrap().collect().await.unwrap();
    }
    c
}

/// Sort rows by a total order (for multiset comparison).
pub fn sorted(mut rows: Vec<Vec<Val>>) -> Vec<Vec<Val>> {
    rows.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    rows
}

/// Equal, floats within 1e-9 relative (NaN equals NaN).
pub fn close(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Float(x), Val::Float(y)) => {
            (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-300)
        }
        _ => a == b,
    }
}

/// `got` equals `want` as multisets of rows, values compared by [`close`].
pub fn assert_same(got: Vec<Vec<Val>>, want: Vec<Vec<Val>>, what: &str) {
    let (got, want) = (sorted(got), sorted(want));
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(&want) {
        assert!(
            g.iter().zip(w).all(|(a, b)| close(a, b)),
            "{what}\n got {g:?}\nwant {w:?}"
        );
    }
}
