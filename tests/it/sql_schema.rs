//! The table schema (axis names and values from coordinate variables and labels), batch
//! sizes, DDL in a plain SessionContext, and statistics-only answers.

use crate::common::{Val, ctx, rows, rows_and_scan_metrics, tempdir};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tet::format::{DType, DatasetSpec, TetWriter};

fn write(dir: &std::path::Path) -> String {
    let v: Vec<u8> = (0..12).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let y: Vec<u8> = [10.5f64, 20.5, 30.5].iter().flat_map(|x| x.to_le_bytes()).collect();
    let x: Vec<u8> = [-1i32, 0, 1, 2].iter().flat_map(|x| x.to_le_bytes()).collect();
    let data = [v.clone(), v].concat();
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("temp", DType::F32, &[2, 3, 4], &[1, 2, 3], &data)
            .dim_names(&["time", "y", "x"])
            .labels("time", vec!["2024-03-01".into(), "2024-03-02T12:00:00".into()]),
    )
    .unwrap();
    w.dataset(DatasetSpec::new("y", DType::F64, &[3], &[3], &y).dim_names(&["y"]))
        .unwrap();
    w.dataset(DatasetSpec::new("x", DType::I32, &[4], &[4], &x).dim_names(&["x"]))
        .unwrap();
    let path = dir.join("cf.tet");
    w.write_path(&path).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn coordinate_variables_and_typed_labels_become_axis_values() {
    let dir = tempdir();
    let p = write(dir.path());
    let ctx = ctx();
    let df = ctx.sql(&format!("SELECT * FROM tet('{p}', 'temp')")).await.unwrap();
    let schema = df.schema().as_arrow().clone();
    let types: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| format!("{}:{}", f.name(), f.data_type()))
        .collect();
    assert_eq!(types, ["time:Timestamp(ns)", "y:Float64", "x:Int32", "v:Float32"]);
    let got = rows(&ctx, &format!("SELECT y, x, v FROM tet('{p}', 'temp') WHERE y > 15 AND x = 2 AND time = TIMESTAMP '2024-03-02T12:00:00' ORDER BY y")).await;
    assert_eq!(
        got,
        vec![
            vec![Val::Float(20.5), Val::Int(2), Val::Float(7.0)],
            vec![Val::Float(30.5), Val::Int(2), Val::Float(11.0)]
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn batches_respect_batch_size() {
    let dir = tempdir();
    let p = write(dir.path());
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_batch_size(5));
    datafusion_tet::register(&ctx);
    let batches = ctx
        .sql(&format!("SELECT * FROM tet('{p}', 'temp')"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert!(batches.iter().all(|b| b.num_rows() <= 5));
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 24);
}

#[tokio::test(flavor = "multi_thread")]
async fn stored_as_tet_in_a_plain_session() {
    let dir = tempdir();
    let p = write(dir.path());
    let ctx = ctx();
    for (name, opt) in [("a", "'tet.dataset' 'temp'"), ("b", "'dataset' 'temp'")] {
        ctx.sql(&format!(
            "CREATE EXTERNAL TABLE {name} STORED AS TET LOCATION '{p}' OPTIONS ({opt})"
        ))
        .await
        .unwrap();
        assert_eq!(
            rows(&ctx, &format!("SELECT count(*) FROM {name}")).await,
            vec![vec![Val::Int(24)]]
        );
    }
    let e = ctx
        .sql(&format!("CREATE EXTERNAL TABLE c STORED AS TET LOCATION '{p}'"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("temp, y, x"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn count_and_axis_bounds_need_no_payload() {
    let dir = tempdir();
    let p = write(dir.path());
    let ctx = ctx();
    for (q, want) in [
        (
            format!("SELECT count(*) FROM tet('{p}', 'temp')"),
            vec![vec![Val::Int(24)]],
        ),
        (
            format!("SELECT min(x), max(y) FROM tet('{p}', 'temp')"),
            vec![vec![Val::Int(-1), Val::Float(30.5)]],
        ),
        (
            format!("SELECT count(*) FROM tet('{p}', 'temp') WHERE x > 0"),
            vec![vec![Val::Int(12)]],
        ),
    ] {
        let (got, m) = rows_and_scan_metrics(&ctx, &q).await;
        assert_eq!(got, want, "{q}");
        assert_eq!(m.get("chunks_read").copied().unwrap_or(0), 0, "{q}: {m:?}");
    }
    let (got, m) = rows_and_scan_metrics(
        &ctx,
        &format!("SELECT x, count(*) FROM tet('{p}', 'temp') GROUP BY x ORDER BY x"),
    )
    .await;
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|r| r[1] == Val::Int(6)));
    assert_eq!(m.get("chunks_read").copied().unwrap_or(0), 0, "{m:?}");
}

/// A local file opened by a session is reused by the next query (one `stat`, no new map
/// or parse) while its length, modification time and inode hold; a file replaced at the
/// same path is reopened, so the next query sees the new data.
#[tokio::test(flavor = "multi_thread")]
async fn local_files_are_reused_until_replaced() {
    use datafusion_tet::io::{SourceCache, TetSource};
    use std::sync::Arc;
    let dir = tempdir();
    let write_at = |path: &std::path::Path, k: f32| {
        let v: Vec<u8> = (0..6).flat_map(|i| (i as f32 * k).to_le_bytes()).collect();
        let mut w = TetWriter::new();
        w.dataset(DatasetSpec::new("a", DType::F32, &[6], &[6], &v)).unwrap();
        // Written beside, then renamed over: a new inode, as tools replace files.
        let tmp = path.with_extension("tmp");
        w.write_path(&tmp).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    };
    let path = dir.path().join("replaced.tet");
    write_at(&path, 1.0);
    let p = path.display().to_string();
    let cache = SourceCache::default();
    let runtime = datafusion::execution::runtime_env::RuntimeEnv::default();
    let first = TetSource::open_in(&runtime, Some(&cache), &p).await.unwrap();
    let again = TetSource::open_in(&runtime, Some(&cache), &p).await.unwrap();
    assert!(Arc::ptr_eq(&first, &again), "the second open reuses the first");
    write_at(&path, 2.0);
    let after = TetSource::open_in(&runtime, Some(&cache), &p).await.unwrap();
    assert!(!Arc::ptr_eq(&first, &after), "a replaced file is reopened");
    // Through SQL in one session: the answer follows the file.
    let c = ctx();
    let q = format!("SELECT sum(v) FROM tet('{p}')");
    assert_eq!(rows(&c, &q).await, vec![vec![Val::Float(30.0)]]);
    write_at(&path, 3.0);
    assert_eq!(rows(&c, &q).await, vec![vec![Val::Float(45.0)]]);
    // The version a plan carries to another process (Ballista) pins the modification
    // time too: a file of the same length written later does not pass for it.
    let planned = TetSource::open(&p).unwrap().version();
    write_at(&path, 4.0);
    let f = std::fs::File::options().append(true).open(&path).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    let reopened = TetSource::open(&p).unwrap();
    assert_eq!(reopened.version().len, planned.len);
    let e = reopened.check_version(&planned).unwrap_err().to_string();
    assert!(e.contains("changed") && e.contains("modified at"), "{e}");

    // The session's cache is bounded by `tet.cache_max_bytes`: lowered to 0 it keeps only
    // the file of the latest open.
    let other = dir.path().join("other.tet");
    write_at(&other, 1.0);
    let q2 = format!("SELECT sum(v) FROM tet('{}')", other.display());
    assert_eq!(rows(&c, &q2).await, vec![vec![Val::Float(15.0)]]);
    let session_cache = |c: &SessionContext| c.state().config().get_extension::<SourceCache>().unwrap();
    assert_eq!(session_cache(&c).len(), 2);
    c.sql("SET tet.cache_max_bytes = 0")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(rows(&c, &q).await.len(), 1);
    assert_eq!(session_cache(&c).len(), 1);
    assert_eq!(session_cache(&c).max_bytes(), 0);
    assert_eq!(rows(&c, &q2).await, vec![vec![Val::Float(15.0)]]);
    assert_eq!(session_cache(&c).len(), 1);
    reopened.check_version(&reopened.version()).unwrap();
}
