//! CF conventions: one missing-value rule on every read path (scan, fold, zone-map
//! pruning, remote, Ballista's codec), packed integers, CF time, attributes as field
//! metadata — and a corpus written by xarray (netCDF4, zarr) and converted by upstream's
//! `tet convert`, whose query answers must equal xarray's.

use crate::common::{Val, ctx, rows, tempdir};
use crate::servers;
use datafusion::prelude::SessionContext;
use datafusion_tet::format::{DType, DatasetSpec, TetWriter};
use datafusion_tet::plan::AXIS_KEY;
use std::path::Path;

/// One file of the fill-value matrix: values, attributes, and which values the CF rule
/// keeps (written here independently of the crate's rule).
struct FillCase {
    name: &'static str,
    dtype: DType,
    values: Vec<f64>,
    attrs: Vec<(&'static str, &'static str)>,
    nan_is_null: bool,
    /// Whether a stored value is a valid (non-NULL) cell.
    valid: fn(f64) -> bool,
    /// The unpacked value of a stored one.
    unpack: fn(f64) -> f64,
    /// A `WHERE v > threshold` for zone-map pruning.
    threshold: f64,
}

fn same(x: f64) -> f64 {
    x
}

fn cases() -> Vec<FillCase> {
    let nan = f64::NAN;
    vec![
        FillCase {
            name: "f32 NaN fill",
            dtype: DType::F32,
            values: vec![1.0, nan, 3.0, nan, 7.0, 8.0],
            attrs: vec![("_FillValue", "NaN")],
            nan_is_null: false,
            valid: |x| !x.is_nan(),
            unpack: same,
            threshold: 2.0,
        },
        FillCase {
            name: "f32 NaN without fill, tet.nan_is_null",
            dtype: DType::F32,
            values: vec![1.0, nan, 3.0, nan, 7.0, 8.0],
            attrs: vec![],
            nan_is_null: true,
            valid: |x| !x.is_nan(),
            unpack: same,
            threshold: 2.0,
        },
        FillCase {
            name: "f32 NaN without fill (NaN is a value)",
            dtype: DType::F32,
            values: vec![1.0, nan, 3.0, nan, 7.0, 8.0],
            attrs: vec![],
            nan_is_null: false,
            valid: |_| true,
            unpack: same,
            threshold: 7.5,
        },
        FillCase {
            name: "f64 fill 0 and signed zeros",
            dtype: DType::F64,
            values: vec![-0.0, 0.0, 1.0, 2.0, -0.0, 5.0],
            attrs: vec![("_FillValue", "0")],
            nan_is_null: false,
            valid: |x| x != 0.0,
            unpack: same,
            threshold: 1.5,
        },
        FillCase {
            name: "f64 fill -0.0",
            dtype: DType::F64,
            values: vec![0.0, -0.0, 5.0, 6.0],
            attrs: vec![("_FillValue", "-0.0")],
            nan_is_null: false,
            valid: |x| x != 0.0,
            unpack: same,
            threshold: 5.5,
        },
        FillCase {
            name: "i16 fill written -9999.0",
            dtype: DType::I16,
            values: vec![-9999.0, 5.0, 7.0, -9999.0, 9.0, 1.0],
            attrs: vec![("_FillValue", "-9999.0")],
            nan_is_null: false,
            valid: |x| x != -9999.0,
            unpack: same,
            threshold: 6.0,
        },
        FillCase {
            name: "u8 fill out of range (ignored)",
            dtype: DType::U8,
            values: vec![255.0, 1.0, 2.0, 0.0],
            attrs: vec![("_FillValue", "-1")],
            nan_is_null: false,
            valid: |_| true,
            unpack: same,
            threshold: 1.0,
        },
        FillCase {
            name: "i32 missing_value list and _FillValue",
            dtype: DType::I32,
            values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            attrs: vec![("missing_value", "[2, 4]"), ("_FillValue", "6")],
            nan_is_null: false,
            valid: |x| ![2.0, 4.0, 6.0].contains(&x),
            unpack: same,
            threshold: 2.0,
        },
        FillCase {
            name: "i16 packed",
            dtype: DType::I16,
            values: vec![100.0, -1.0, 300.0, 7.0, -1.0, -50.0],
            attrs: vec![("scale_factor", "0.5"), ("add_offset", "10"), ("missing_value", "-1")],
            nan_is_null: false,
            valid: |x| x != -1.0,
            unpack: |x| x * 0.5 + 10.0,
            threshold: 50.0,
        },
        FillCase {
            name: "u16 packed with a negative scale",
            dtype: DType::U16,
            values: vec![100.0, 0.0, 300.0, 7.0, 65535.0, 50.0],
            attrs: vec![("scale_factor", "-2"), ("add_offset", "1000"), ("_FillValue", "65535")],
            nan_is_null: false,
            valid: |x| x != 65535.0,
            unpack: |x| x * -2.0 + 1000.0,
            threshold: 850.0,
        },
    ]
}

fn le_bytes(dtype: DType, values: &[f64]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&x| match dtype {
            DType::F32 => (x as f32).to_le_bytes().to_vec(),
            DType::F64 => x.to_le_bytes().to_vec(),
            DType::I16 => (x as i16).to_le_bytes().to_vec(),
            DType::I32 => (x as i32).to_le_bytes().to_vec(),
            DType::U8 => vec![x as u8],
            DType::U16 => (x as u16).to_le_bytes().to_vec(),
            other => panic!("no test values for {other:?}"),
        })
        .collect()
}

impl FillCase {
    fn write(&self, path: &Path) {
        let data = le_bytes(self.dtype, &self.values);
        let n = self.values.len() as u64;
        let mut spec = DatasetSpec::new("d", self.dtype, &[n], &[2], &data);
        for (k, v) in &self.attrs {
            spec = spec.attr(k, v);
        }
        let mut w = TetWriter::new();
        w.zone_maps(true);
        w.dataset(spec).unwrap();
        w.write_path(path).unwrap();
    }

    /// count(*), count(v), sum(v), min(v), max(v) as DataFusion computes them over the
    /// cells the rule keeps (NaN sorts above every number; sums propagate it).
    fn expected(&self, threshold: Option<f64>) -> Vec<Option<f64>> {
        let kept: Vec<f64> = self
            .values
            .iter()
            .copied()
            .filter(|&x| (self.valid)(x))
            .map(self.unpack)
            .filter(|&x| threshold.is_none_or(|t| x > t || x.is_nan()))
            .collect();
        let rows = match threshold {
            None => self.values.len(),
            Some(_) => kept.len(),
        };
        let non_nan = kept.iter().copied().filter(|x| !x.is_nan());
        let (min, max) = (non_nan.clone().reduce(f64::min), non_nan.reduce(f64::max));
        let any_nan = kept.iter().any(|x| x.is_nan());
        let or_nan = |m: Option<f64>| if m.is_none() && any_nan { Some(f64::NAN) } else { m };
        vec![
            Some(rows as f64),
            Some(kept.len() as f64),
            (!kept.is_empty()).then(|| kept.iter().sum()),
            or_nan(min),
            if any_nan { Some(f64::NAN) } else { max },
        ]
    }
}

fn numbers(rows: Vec<Vec<Val>>) -> Vec<Option<f64>> {
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0]
        .iter()
        .map(|v| match v {
            Val::Null => None,
            v => Some(v.as_f64()),
        })
        .collect()
}

fn assert_numbers(got: &[Option<f64>], want: &[Option<f64>], what: &str) {
    let eq = |a: &Option<f64>, b: &Option<f64>| match (a, b) {
        (Some(x), Some(y)) => (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        (None, None) => true,
        _ => false,
    };
    assert!(
        got.len() == want.len() && got.iter().zip(want).all(|(a, b)| eq(a, b)),
        "{what}\n got {got:?}\nwant {want:?}"
    );
}

const STATS: &str = "count(*), count(v), sum(v), min(v), max(v)";

async fn session(case: &FillCase, pushdown: bool) -> SessionContext {
    let ctx = ctx();
    for set in [
        format!("SET tet.aggregate_pushdown = {pushdown}"),
        format!("SET tet.nan_is_null = {}", case.nan_is_null),
    ] {
        ctx.sql(&set).await.unwrap().collect().await.unwrap();
    }
    ctx
}

/// Every case through the fold (pushdown on), the scan (off), and zone-map pruning.
async fn check_paths(case: &FillCase, from: &str, ctx_of: impl AsyncFn(bool) -> SessionContext) {
    for pushdown in [true, false] {
        let ctx = ctx_of(pushdown).await;
        let what = format!("{} over {from}, pushdown {pushdown}", case.name);
        let got = numbers(rows(&ctx, &format!("SELECT {STATS} FROM {from}")).await);
        assert_numbers(&got, &case.expected(None), &what);
        let filtered = format!("SELECT {STATS} FROM {from} WHERE v > {}", case.threshold);
        let got = numbers(rows(&ctx, &filtered).await);
        assert_numbers(
            &got,
            &case.expected(Some(case.threshold)),
            &format!("{what}, {filtered}"),
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_missing_value_rule_holds_on_every_path() {
    let dir = tempdir();
    let nginx = servers::nginx();
    for (k, case) in cases().iter().enumerate() {
        let path = dir.path().join(format!("case{k}.tet"));
        case.write(&path);
        let local = format!("tet('{}', 'd')", path.display());
        check_paths(case, &local, async |p| session(case, p).await).await;
        // The nullability the schema declares matches what the scan produces.
        let ctx = session(case, false).await;
        let df = ctx.sql(&format!("SELECT v FROM {local}")).await.unwrap();
        let nullable = df.schema().field(0).is_nullable();
        let batches = df.collect().await.unwrap();
        assert!(
            nullable || batches.iter().all(|b| b.column(0).null_count() == 0),
            "{}",
            case.name
        );
        if let Some(nginx) = nginx {
            std::fs::create_dir_all(nginx.dir.join("www/cf")).unwrap();
            std::fs::write(
                nginx.dir.join(format!("www/cf/case{k}.tet")),
                std::fs::read(&path).unwrap(),
            )
            .unwrap();
            let remote = format!("tet('{}/cf/case{k}.tet', 'd')", nginx.endpoint);
            check_paths(case, &remote, async |p| {
                let ctx = session(case, p).await;
                crate::remote::register(&ctx, &nginx.endpoint, crate::remote::http(&nginx.endpoint));
                ctx
            })
            .await;
        }
        #[cfg(feature = "ballista")]
        ballista_round_trip(case, &local).await;
    }
}

/// The physical plan (fold and scan) encoded by our codec and decoded, as an executor
/// does, gives the same answers: the NaN option travels with the plan.
#[cfg(feature = "ballista")]
async fn ballista_round_trip(case: &FillCase, from: &str) {
    use datafusion_proto::bytes::{
        physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
    };
    use datafusion_tet::ballista::TetPhysicalExtensionCodec;
    let codec = TetPhysicalExtensionCodec::default();
    for pushdown in [true, false] {
        let ctx = session(case, pushdown).await;
        let plan = ctx
            .sql(&format!("SELECT {STATS} FROM {from}"))
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let bytes = physical_plan_to_bytes_with_extension_codec(plan, &codec).unwrap();
        // Decoded in a session that does not set the option: the plan carries it.
        let fresh = crate::common::ctx();
        let back = physical_plan_from_bytes_with_extension_codec(&bytes, &fresh.task_ctx(), &codec).unwrap();
        let got = numbers(crate::common::rows_of(
            &datafusion::physical_plan::collect(back, fresh.task_ctx())
                .await
                .unwrap(),
        ));
        assert_numbers(
            &got,
            &case.expected(None),
            &format!("{} after the codec, pushdown {pushdown}", case.name),
        );
    }
}

#[tokio::test]
async fn attributes_are_field_metadata() {
    let dir = tempdir();
    let path = dir.path().join("m.tet");
    let data = le_bytes(DType::I16, &[1.0, 2.0, 3.0, 4.0]);
    let hours: Vec<u8> = [0i32, 6].iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("t", DType::I16, &[2, 2], &[2, 2], &data)
            .dim_names(&["time", "x"])
            .attr("units", "K")
            .attr("long_name", "temperature")
            .attr("scale_factor", "0.5")
            .attr("_FillValue", "-32767"),
    )
    .unwrap();
    w.dataset(
        DatasetSpec::new("time", DType::I32, &[2], &[2], &hours)
            .attr("units", "hours since 2024-01-01T00:00:00")
            .attr("calendar", "standard")
            .attr("standard_name", "time"),
    )
    .unwrap();
    w.write_path(&path).unwrap();
    let ctx = ctx();
    let df = ctx
        .sql(&format!("SELECT * FROM tet('{}', 't')", path.display()))
        .await
        .unwrap();
    let schema = df.schema().as_arrow().clone();
    let v = schema.field_with_name("v").unwrap();
    assert_eq!(v.data_type(), &arrow::datatypes::DataType::Float64);
    assert_eq!(v.metadata().get("units").map(String::as_str), Some("K"));
    assert_eq!(v.metadata().get("long_name").map(String::as_str), Some("temperature"));
    let time = schema.field_with_name("time").unwrap();
    assert!(matches!(time.data_type(), arrow::datatypes::DataType::Timestamp(_, _)));
    assert_eq!(time.metadata().get("standard_name").map(String::as_str), Some("time"));
    // Axis columns carry their position (Python's to_xarray pivots on it); values do not.
    let axis_of = |name: &str| schema.field_with_name(name).unwrap().metadata().get(AXIS_KEY).cloned();
    assert_eq!(
        (axis_of("time"), axis_of("x"), axis_of("v")),
        (Some("0".into()), Some("1".into()), None)
    );
    // What was applied to the stored values is encoding, not a description of the
    // column (xarray's `encoding`): unpacked values have no scale, NULLs no fill value,
    // timestamps no `units since` nor calendar.
    for (field, applied) in [(v, ["scale_factor", "_FillValue"]), (time, ["units", "calendar"])] {
        for key in applied {
            assert!(
                !field.metadata().contains_key(key),
                "{key} on {}: {:?}",
                field.name(),
                field.metadata()
            );
        }
    }
    // The stored attributes stay visible in tet_datasets.
    let attrs = rows(
        &ctx,
        &format!(
            "SELECT name, attrs FROM tet_datasets('{}') ORDER BY name",
            path.display()
        ),
    )
    .await;
    let text = format!("{attrs:?}");
    assert!(text.contains("scale_factor") && text.contains("hours since"), "{text}");
    // The batches carry the same schema.
    let batches = df.collect().await.unwrap();
    assert_eq!(
        batches[0].schema().field_with_name("v").unwrap().metadata(),
        v.metadata()
    );
    let got = rows(
        &ctx,
        &format!(
            "SELECT CAST(time AS VARCHAR), sum(v) FROM tet('{}', 't') WHERE time >= TIMESTAMP '2024-01-01T06:00:00' GROUP BY time",
            path.display()
        ),
    )
    .await;
    assert_eq!(got, vec![vec![Val::Str("2024-01-01T06:00:00".into()), Val::Float(3.5)]]);
    // The filter on the decoded time axis is an Exact pushdown: no FilterExec remains.
    let plan = rows(
        &ctx,
        &format!(
            "EXPLAIN SELECT v FROM tet('{}', 't') WHERE time >= TIMESTAMP '2024-01-01T06:00:00'",
            path.display()
        ),
    )
    .await;
    let text = format!("{plan:?}");
    assert!(text.contains("TetScanExec") && !text.contains("FilterExec"), "{text}");
}

/// Two monthly files whose times count from their own month: a hand-written `UNION ALL`
/// of them under an aggregate plans (DataFusion's logical union intersects field
/// metadata and its physical union merges it, so fields that differed failed with
/// "Physical input schema should be the same as the one converted from logical input
/// schema"), and gives the sums of the two files.
#[tokio::test]
async fn a_union_of_files_with_their_own_reference_dates_aggregates() {
    let dir = tempdir();
    let mut paths = Vec::new();
    for (month, base) in [(1, 0.0), (2, 10.0)] {
        let path = dir.path().join(format!("m{month}.tet"));
        let data = le_bytes(DType::I16, &[base + 1.0, base + 2.0, base + 3.0, base + 4.0]);
        let hours: Vec<u8> = [0i32, 6].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut w = TetWriter::new();
        w.dataset(
            DatasetSpec::new("t", DType::I16, &[2, 2], &[2, 2], &data)
                .dim_names(&["time", "x"])
                .attr("scale_factor", if month == 1 { "0.5" } else { "0.25" })
                .attr("units", "K"),
        )
        .unwrap();
        w.dataset(
            DatasetSpec::new("time", DType::I32, &[2], &[2], &hours)
                .attr("units", format!("hours since 2024-0{month}-01T00:00:00").as_str()),
        )
        .unwrap();
        w.write_path(&path).unwrap();
        paths.push(path);
    }
    let got = rows(
        &ctx(),
        &format!(
            "SELECT CAST(date_trunc('month', time) AS VARCHAR) AS m, sum(v) FROM (\
             SELECT time, v FROM tet('{}', 't') UNION ALL SELECT time, v FROM tet('{}', 't')) \
             GROUP BY 1 ORDER BY 1",
            paths[0].display(),
            paths[1].display()
        ),
    )
    .await;
    assert_eq!(
        got,
        vec![
            vec![Val::Str("2024-01-01T00:00:00".into()), Val::Float(5.0)],
            vec![Val::Str("2024-02-01T00:00:00".into()), Val::Float(12.5)],
        ]
    );
}

#[tokio::test]
async fn bad_cf_attributes_are_errors_naming_the_dataset_and_attribute() {
    let dir = tempdir();
    let data = le_bytes(DType::I16, &[1.0, 2.0]);
    let hours: Vec<u8> = [0i32, 6].iter().flat_map(|v| v.to_le_bytes()).collect();
    for (k, (ds_attrs, time_attrs, want)) in [
        (vec![("_FillValue", "missing")], vec![], "_FillValue"),
        (vec![("scale_factor", "big")], vec![], "scale_factor"),
        (vec![], vec![("units", "hours since the war")], "units"),
        (
            vec![],
            vec![("units", "days since 2000-01-01"), ("calendar", "mayan")],
            "calendar",
        ),
        (vec![], vec![("units", "days since 300000-01-01")], "lies outside"),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("bad{k}.tet"));
        let mut spec = DatasetSpec::new("d", DType::I16, &[2], &[2], &data).dim_names(&["time"]);
        for (a, v) in ds_attrs {
            spec = spec.attr(a, v);
        }
        let mut time = DatasetSpec::new("time", DType::I32, &[2], &[2], &hours);
        for (a, v) in time_attrs {
            time = time.attr(a, v);
        }
        let mut w = TetWriter::new();
        w.dataset(spec).unwrap().dataset(time).unwrap();
        w.write_path(&path).unwrap();
        let err = match ctx()
            .sql(&format!("SELECT * FROM tet('{}', 'd')", path.display()))
            .await
        {
            Ok(df) => df.collect().await.unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(want) && err.contains("bad"), "case {k}: {err}");
    }
}

// --- the corpus written by xarray and converted by upstream -----------------------------

/// Upstream's `tet` CLI (built with its NetCDF importer): `TET_BIN`, the copy `.ci/run`
/// installs, or `tet` on the PATH.
#[cfg(feature = "cli")] // the corpus test runs tet-sql
fn upstream_tet() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    if let Some(p) = std::env::var_os("TET_BIN") {
        return Some(p.into());
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let cache = std::env::var_os("XDG_CACHE_HOME").map_or(home.join(".cache"), PathBuf::from);
    let ci = cache.join("tet-ci/tetration/bin/tet");
    if ci.exists() {
        return Some(ci);
    }
    std::process::Command::new("tet")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| "tet".into())
}

/// Build the corpus in a fresh directory: (directory, xarray's answers).
#[cfg(feature = "cli")] // the corpus test runs tet-sql
fn corpus() -> Option<(tempfile::TempDir, serde_json::Value)> {
    corpus_script("corpus.py", "the CF corpus")
}

/// Run `tests/cf/<script> DIR TET_BIN` in a fresh directory: (directory, the
/// `answers.json` xarray's answers it wrote), or None (with a NOTICE) where python,
/// xarray or upstream's CLI is missing outside CI.
#[cfg(feature = "cli")]
fn corpus_script(script: &str, what: &str) -> Option<(tempfile::TempDir, serde_json::Value)> {
    let skip = |why: String| {
        assert!(
            !servers::required(),
            "{what} cannot be built, and CI requires it: {why}"
        );
        eprintln!("NOTICE: skipping the test of {what}: {why}");
        None
    };
    let Some(tet) = upstream_tet() else {
        return skip("upstream's tet CLI is not installed (see .ci/run)".into());
    };
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let dir = tempdir();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cf").join(script);
    let out = match std::process::Command::new(&python)
        .arg(&path)
        .arg(dir.path())
        .arg(&tet)
        .output()
    {
        Ok(o) => o,
        Err(e) => return skip(format!("{python}: {e}")),
    };
    if !out.status.success() {
        return skip(format!("{script} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let answers = serde_json::from_slice(&std::fs::read(dir.path().join("answers.json")).unwrap()).unwrap();
    Some((dir, answers))
}

#[cfg(feature = "cli")] // the corpus test runs tet-sql
fn f64s(v: &serde_json::Value) -> Vec<Option<f64>> {
    v.as_array().unwrap().iter().map(serde_json::Value::as_f64).collect()
}

/// Relative tolerance for comparing with xarray: float32 data reduced in float32 there.
#[cfg(feature = "cli")] // the corpus test runs tet-sql
fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= 2e-6 * a.abs().max(b.abs()).max(1.0)
}

#[cfg(feature = "cli")] // the corpus test runs tet-sql
fn assert_near(got: &[Option<f64>], want: &[Option<f64>], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}\n got {got:?}\nwant {want:?}");
    for (g, w) in got.iter().zip(want) {
        let ok = match (g, w) {
            (Some(g), Some(w)) => near(*g, *w),
            (None, None) => true,
            _ => false,
        };
        assert!(ok, "{what}\n got {got:?}\nwant {want:?}");
    }
}

/// Run each query through the `tet-sql` binary in `dir`, after the `setup` statements:
/// one CSV table (rows without the header) per query.
#[cfg(feature = "cli")]
fn tet_sql_csv(dir: &Path, setup: &[&str], queries: &[&str]) -> Vec<Vec<Vec<String>>> {
    queries
        .iter()
        .map(|q| {
            let mut args = vec!["-q", "--format", "csv"];
            for s in setup.iter().chain([q]) {
                args.extend(["-c", s]);
            }
            let (ok, out, err) = crate::cli::tet_sql_env(&args, dir, &[], &[]);
            assert!(ok, "{q}: {err}");
            out.lines()
                .filter(|l| !l.trim().is_empty())
                .skip(1)
                .map(|l| l.split(',').map(str::to_owned).collect())
                .collect()
        })
        .collect()
}

#[cfg(feature = "cli")]
#[test]
fn converted_netcdf_and_zarr_answer_as_xarray_does() {
    use datafusion_tet::plan::cf_time::CfTime;
    use std::collections::BTreeMap;
    let Some((dir, answers)) = corpus() else { return };
    let dir = dir.path();
    let era5 = &answers["era5"];
    let col =
        |t: &Vec<Vec<String>>, c: usize| -> Vec<Option<f64>> { t.iter().map(|r| r[c].parse::<f64>().ok()).collect() };
    for pushdown in ["true", "false"] {
        let set = format!("SET tet.aggregate_pushdown = {pushdown}");
        let setup = [set.as_str()];
        let q = |sql: &str| sql.to_owned();
        let t = tet_sql_csv(
            dir,
            &setup,
            &[
                &q("SELECT time FROM tet('era5.tet', 't2m') ORDER BY time LIMIT 1"),
                &q(
                    "SELECT latitude, avg(v), count(v) FROM tet('era5.tet', 't2m') GROUP BY latitude ORDER BY latitude DESC",
                ),
                &q("SELECT time, avg(v) FROM tet('era5.tet', 'sst') GROUP BY time ORDER BY time"),
                &q(
                    "SELECT count(v) FROM tet('era5.tet', 't2m') WHERE time >= TIMESTAMP '2024-01-01T12:00:00' AND time < TIMESTAMP '2024-01-02T06:00:00'",
                ),
                &q("SELECT date_trunc('day', time) AS d, avg(v) FROM tet('era5.tet', 't2m') GROUP BY d ORDER BY d"),
                &q("SELECT extract(hour FROM time) AS h, avg(v) FROM tet('era5.tet', 't2m') GROUP BY h ORDER BY h"),
            ],
        );
        let what = format!("pushdown {pushdown}");
        assert_eq!(t[0][0][0], era5["time0"].as_str().unwrap(), "{what}");
        assert_near(&col(&t[1], 0), &f64s(&era5["lat"]), &what);
        assert_near(&col(&t[1], 1), &f64s(&era5["zonal_t2m"]), &what);
        let counts: Vec<Option<f64>> = era5["zonal_count"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64())
            .collect();
        assert_eq!(col(&t[1], 2), counts, "{what}");
        assert_near(&col(&t[2], 1), &f64s(&era5["per_time_sst"]), &what);
        assert_eq!(t[3][0][0], era5["range_count"].to_string(), "{what}");
        assert_near(&col(&t[4], 1), &f64s(&era5["daily_t2m"]), &what);
        assert_near(&col(&t[5], 1), &f64s(&era5["hourly_clim_t2m"]), &what);

        let packed = &answers["packed"];
        let t = tet_sql_csv(
            dir,
            &setup,
            &[
                &q("SELECT avg(v), min(v), max(v), count(v), stddev_pop(v), sum(v) FROM tet('packed.tet', 't')"),
                &q("SELECT dim_0, avg(v) FROM tet('packed.tet', 't') GROUP BY dim_0 ORDER BY dim_0"),
                &q("SELECT count(*) FROM tet('packed.tet', 't') WHERE v > 260"),
            ],
        );
        let want: Vec<Option<f64>> = ["mean", "min", "max", "count", "std", "sum"]
            .iter()
            .map(|k| packed[*k].as_f64())
            .collect();
        assert_near(
            &col(&t[0], 0)
                .into_iter()
                .chain((1..6).flat_map(|c| col(&t[0], c)))
                .collect::<Vec<_>>(),
            &want,
            &what,
        );
        assert_near(&col(&t[1], 1), &f64s(&packed["per_step_mean"]), &what);
        assert_eq!(t[2][0][0], packed["above"].to_string(), "{what}");
    }
    // Calendars: the arithmetic equals cftime's for every date, and the axis as tet-sql
    // shows it equals cftime's dates where Timestamp(ns) can hold them (1677-2262).
    for (name, c) in answers["calendars"].as_object().unwrap() {
        let dates: Vec<&str> = c["dates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap())
            .collect();
        let attrs = BTreeMap::from([
            ("units".to_owned(), c["units"].as_str().unwrap().to_owned()),
            ("calendar".to_owned(), c["calendar"].as_str().unwrap().to_owned()),
        ]);
        let t = CfTime::from_attrs(&attrs).unwrap().unwrap();
        let ours: Vec<String> = f64s(&c["values"])
            .iter()
            .map(|x| t.at(x.unwrap()).unwrap().iso())
            .collect();
        assert_eq!(ours, dates, "{name}: {attrs:?}");
        if dates.iter().any(|d| !("1678".."2262").contains(&&d[..4])) {
            continue;
        }
        let file = c["file"].as_str().unwrap();
        let shown = tet_sql_csv(dir, &[], &[&format!("SELECT time FROM tet('{file}', 'x') ORDER BY v")]);
        let shown: Vec<&str> = shown[0].iter().map(|r| r[0].as_str()).collect();
        assert_eq!(shown, dates, "{name} through tet-sql");
    }
}

// --- an archive of monthly files, against xarray's open_mfdataset -----------------------

/// Build the monthly archive of `tests/cf/archive.py` in a fresh directory: (directory,
/// xarray's answers).
#[cfg(feature = "cli")] // shares the corpus helpers
fn monthly_archive() -> Option<(tempfile::TempDir, serde_json::Value)> {
    corpus_script("archive.py", "the monthly archive")
}

/// Equal within 1e-9 relative: xarray's reductions here are in float64, as SQL's.
#[cfg(feature = "cli")]
fn assert_close(got: &[Option<f64>], want: &[Option<f64>], what: &str) {
    let ok = got.len() == want.len()
        && got.iter().zip(want).all(|(g, w)| match (g, w) {
            (Some(g), Some(w)) => (g - w).abs() <= 1e-9 * g.abs().max(w.abs()).max(1.0),
            (None, None) => true,
            _ => false,
        });
    assert!(ok, "{what}\n got {got:?}\nwant {want:?}");
}

/// Column `c` of `rows` as numbers (NULL as None).
#[cfg(feature = "cli")]
fn column(rows: &[Vec<Val>], c: usize) -> Vec<Option<f64>> {
    rows.iter()
        .map(|r| match &r[c] {
            Val::Null => None,
            v => Some(v.as_f64()),
        })
        .collect()
}

/// Column `c` of `rows` as strings.
#[cfg(feature = "cli")]
fn strings(rows: &[Vec<Val>], c: usize) -> Vec<String> {
    rows.iter()
        .map(|r| match &r[c] {
            Val::Str(s) => s.clone(),
            v => panic!("not a string: {v:?}"),
        })
        .collect()
}

/// Three monthly NetCDF files (January and February count hours from their own first day
/// as int32, March days as float64; `t2m` with NaN holes, `sst` with a -9999 fill) and
/// three Zarr stores of `msl` packed as int16, converted by upstream's `tet convert`:
/// every answer of `tet('<dir>/*.tet', ...)` equals what xarray's
/// `open_mfdataset(..., combine='by_coords')` computes, through the fold and the scan.
/// So does an archive whose files store `msl` each their own way (two packings, float32).
/// Archives that xarray refuses to combine (overlapping months, a latitude grid that
/// differs in one file) are refused with errors naming the files.
#[cfg(feature = "cli")] // shares the corpus helpers
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_of_monthly_netcdf_answers_as_xarray_does() {
    let Some((dir, answers)) = monthly_archive() else {
        return;
    };
    let dir = dir.path().display().to_string();
    let a = &answers["archive"];
    eprintln!("xarray {} via {}", a["xarray"], a["opened_with"]);
    let both = format!("tet('{dir}/tet/*.tet', 't2m', 'sst')");
    let t2m = format!("tet('{dir}/tet/*.tet', 't2m')");
    let sst = format!("tet('{dir}/tet/', 'sst')"); // the folder form
    let msl = format!("tet('{dir}/tet_msl/*.tet', 'msl')");
    let num = |v: &serde_json::Value| Some(v.as_f64().unwrap());
    let texts = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    let (start, stop) = (&a["boundary"]["start"], &a["boundary"]["stop"]);
    let boundary = format!(
        "time >= TIMESTAMP '{}' AND time <= TIMESTAMP '{}'",
        start.as_str().unwrap(),
        stop.as_str().unwrap()
    );
    for settings in [
        &["tet.aggregate_pushdown = true"][..],
        &["tet.aggregate_pushdown = false"],
        &["tet.aggregate_pushdown = true", "tet.concat_axis = 'time'"],
    ] {
        let ctx = crate::common::ctx_with(settings).await;
        let what = |q: &str| format!("{settings:?}: {q}");
        let ask = async |q: String| (rows(&ctx, &q).await, what(&q));

        // The time axis: every step of the three files once, in order, each a full grid.
        let (got, w) = ask(format!(
            "SELECT CAST(time AS VARCHAR) AS t, count(*) FROM {t2m} GROUP BY time ORDER BY time"
        ))
        .await;
        assert_eq!(strings(&got, 0), texts(&a["times"]), "{w}");
        let plane = (a["cells"].as_u64().unwrap() / got.len() as u64) as f64;
        assert!(column(&got, 1).iter().all(|c| *c == Some(plane)), "{w}");

        // Counts and means of both variables of one table.
        let (got, w) = ask(format!(
            "SELECT count(*), count(t2m), count(sst), avg(t2m), avg(sst) FROM {both}"
        ))
        .await;
        let want = [
            num(&a["cells"]),
            num(&a["count"]["t2m"]),
            num(&a["count"]["sst"]),
            num(&a["mean"]["t2m"]),
            num(&a["mean"]["sst"]),
        ];
        assert_close(&(0..5).flat_map(|c| column(&got, c)).collect::<Vec<_>>(), &want, &w);

        // Zonal mean over the whole archive.
        let (got, w) = ask(format!(
            "SELECT latitude, avg(v), count(v) FROM {t2m} GROUP BY latitude ORDER BY latitude DESC"
        ))
        .await;
        assert_close(&column(&got, 0), &f64s(&a["lat"]), &w);
        assert_close(&column(&got, 1), &f64s(&a["zonal_t2m"]), &w);
        assert_close(&column(&got, 2), &f64s(&a["zonal_count"]), &w);

        // The mean of every time step, and of a few across the month boundaries.
        let (got, w) = ask(format!("SELECT time, avg(v) FROM {sst} GROUP BY time ORDER BY time")).await;
        assert_close(&column(&got, 1), &f64s(&a["per_time_sst"]), &w);
        let at = texts(&a["at_times"]["times"]);
        let list: Vec<String> = at.iter().map(|t| format!("TIMESTAMP '{t}'")).collect();
        let (got, w) = ask(format!(
            "SELECT CAST(time AS VARCHAR) AS t, avg(v), count(v) FROM {t2m} WHERE time IN ({}) GROUP BY time ORDER BY time",
            list.join(", ")
        ))
        .await;
        assert_eq!(strings(&got, 0), at, "{w}");
        assert_close(&column(&got, 1), &f64s(&a["at_times"]["t2m"]), &w);
        assert_close(&column(&got, 2), &f64s(&a["at_times"]["count"]), &w);

        // Daily resample, months, hours of the day.
        let (got, w) = ask(format!(
            "SELECT CAST(date_trunc('day', time) AS VARCHAR) AS d, avg(v) FROM {t2m} GROUP BY d ORDER BY d"
        ))
        .await;
        assert_eq!(strings(&got, 0), texts(&a["daily_days"]), "{w}");
        assert_close(&column(&got, 1), &f64s(&a["daily_t2m"]), &w);
        let (got, w) = ask(format!(
            "SELECT extract(month FROM time) AS m, avg(v), count(v) FROM {t2m} GROUP BY m ORDER BY m"
        ))
        .await;
        assert_close(&column(&got, 0), &[Some(1.0), Some(2.0), Some(3.0)], &w);
        assert_close(&column(&got, 1), &f64s(&a["monthly_t2m"]), &w);
        assert_close(&column(&got, 2), &f64s(&a["monthly_count"]), &w);
        let (got, w) = ask(format!(
            "SELECT extract(hour FROM time) AS h, avg(v) FROM {t2m} GROUP BY h ORDER BY h"
        ))
        .await;
        assert_close(&column(&got, 1), &f64s(&a["hourly_clim_t2m"]), &w);

        // A slice across the January/February boundary (both ends included, as xarray's).
        let (got, w) = ask(format!(
            "SELECT DISTINCT CAST(time AS VARCHAR) AS t FROM {both} WHERE {boundary} ORDER BY t"
        ))
        .await;
        assert_eq!(strings(&got, 0), texts(&a["boundary"]["times"]), "{w}");
        let (got, w) = ask(format!(
            "SELECT count(t2m), avg(t2m), avg(sst) FROM {both} WHERE {boundary}"
        ))
        .await;
        let b = &a["boundary"];
        let want = [num(&b["count"]), num(&b["mean"]), num(&b["sst_mean"])];
        assert_close(&(0..3).flat_map(|c| column(&got, c)).collect::<Vec<_>>(), &want, &w);

        // Arithmetic between the variables of one table.
        let (got, w) = ask(format!("SELECT avg(t2m - sst), count(t2m - sst) FROM {both}")).await;
        assert_close(
            &(0..2).flat_map(|c| column(&got, c)).collect::<Vec<_>>(),
            &[num(&a["diff_mean"]), num(&a["diff_count"])],
            &w,
        );

        // The packed variable, decoded per file.
        let m = &a["msl"];
        let (got, w) = ask(format!(
            "SELECT avg(v), min(v), max(v), stddev_pop(v), count(v), sum(v) FROM {msl}"
        ))
        .await;
        let want: Vec<Option<f64>> = ["mean", "min", "max", "std", "count", "sum"]
            .iter()
            .map(|k| num(&m[*k]))
            .collect();
        assert_close(&(0..6).flat_map(|c| column(&got, c)).collect::<Vec<_>>(), &want, &w);
        let (got, w) = ask(format!(
            "SELECT extract(month FROM time) AS m, avg(v) FROM {msl} GROUP BY m ORDER BY m"
        ))
        .await;
        assert_close(&column(&got, 1), &f64s(&m["monthly_mean"]), &w);
        let (got, w) = ask(format!("SELECT avg(v) FROM {msl} WHERE {boundary}")).await;
        assert_close(&column(&got, 0), &[num(&m["boundary_mean"])], &w);

        // msl stored each file its own way (two packings, float32): each decoded by its own.
        let x = &answers["mixed_msl"];
        let mixed = format!("tet('{dir}/{}/*.tet', 'msl')", x["files"].as_str().unwrap());
        let (got, w) = ask(format!(
            "SELECT avg(v), min(v), max(v), stddev_pop(v), count(v), sum(v) FROM {mixed}"
        ))
        .await;
        let want: Vec<Option<f64>> = ["mean", "min", "max", "std", "count", "sum"]
            .iter()
            .map(|k| num(&x[*k]))
            .collect();
        assert_close(&(0..6).flat_map(|c| column(&got, c)).collect::<Vec<_>>(), &want, &w);
        let (got, w) = ask(format!(
            "SELECT extract(month FROM time) AS m, avg(v), count(v) FROM {mixed} GROUP BY m ORDER BY m"
        ))
        .await;
        assert_close(&column(&got, 1), &f64s(&x["monthly_mean"]), &w);
        assert_close(&column(&got, 2), &f64s(&x["monthly_count"]), &w);
        // With the pushdown on, those answers came from the fold: one per storage class,
        // the three files stored three ways.
        let folds = match settings.contains(&"tet.aggregate_pushdown = false") {
            true => 0,
            false => 3,
        };
        let plan = format!("{:?}", rows(&ctx, &format!("EXPLAIN SELECT avg(v) FROM {mixed}")).await);
        assert_eq!(plan.matches("TetAggregateExec").count(), folds, "{w}: {plan}");
    }

    // Archives that do not combine: refused, naming the files, never answered in part;
    // with the axis forced, a grid that differs is named with its first differing position.
    let plain = ctx();
    let forced = crate::common::ctx_with(&["tet.concat_axis = 'time'"]).await;
    for (name, bad) in answers["bad"].as_object().unwrap() {
        let xarray = &bad["xarray_raises"];
        assert!(!xarray.is_null(), "{name}: xarray combines it");
        eprintln!("{name}: xarray: {xarray}");
        let sql = format!(
            "SELECT count(*) FROM tet('{dir}/{}/*.tet', '{}')",
            bad["files"].as_str().unwrap(),
            bad["dataset"].as_str().unwrap()
        );
        for (ctx, axis) in [(&plain, "found"), (&forced, "forced")] {
            let err = match ctx.sql(&sql).await {
                Ok(df) => match df.collect().await {
                    Ok(b) => panic!("{name}: {sql} answered {:?}", crate::common::rows_of(&b)),
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            };
            eprintln!("{name}: ours, axis {axis}: {err}");
            for file in texts(&bad["names"]) {
                assert!(err.contains(&file), "{name}: {file} not named in: {err}");
            }
            let says: &[&str] = match (name.as_str(), axis) {
                ("overlap", _) => &["overlap", "time"],
                ("lat_grid", "found") => &["latitude"],
                ("lat_grid", _) => &["latitude", "position 0", "89.5"],
                (other, _) => panic!("no expectation for the bad archive {other}"),
            };
            for s in says {
                assert!(err.contains(s), "{name}, axis {axis}: {s:?} not in: {err}");
            }
        }
    }
}
