//! The built `tet-sql` binary, run as a user would.

use crate::common::{tempdir, upstream_fixtures};
use datafusion_tet::format::{DType, DatasetSpec, TetWriter};
use std::process::Command;

fn tet_sql(args: &[&str], cwd: &std::path::Path) -> (bool, String, String) {
    tet_sql_env(args, cwd, &[], &[])
}

/// Run tet-sql in `cwd` with the variables `set` added to, and `remove` taken from, the
/// environment: (success, stdout, stderr).
pub fn tet_sql_env(
    args: &[&str],
    cwd: &std::path::Path,
    set: &[(&str, &str)],
    remove: &[&str],
) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tet-sql"));
    cmd.args(args).current_dir(cwd);
    for k in remove {
        cmd.env_remove(k);
    }
    cmd.envs(set.iter().copied());
    let out = cmd.output().expect("run tet-sql");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sample(dir: &std::path::Path) {
    let data: Vec<u8> = (1..=6).flat_map(|v| (v as f32).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("temp", DType::F32, &[2, 3], &[2, 2], &data)
            .dim_names(&["row", "col"])
            .labels("col", vec!["east".into(), "east".into(), "west".into()]),
    )
    .unwrap();
    w.write_path(dir.join("w.tet")).unwrap();
}

#[test]
fn queries_with_relative_paths_and_output_formats() {
    let dir = tempdir();
    sample(dir.path());
    let (ok, out, err) = tet_sql(
        &[
            "-q",
            "--format",
            "csv",
            "-c",
            "SELECT col, sum(v) AS s FROM tet('w.tet', 'temp') GROUP BY col ORDER BY col",
        ],
        dir.path(),
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "col,s\neast,12.0\nwest,9.0");
    let (ok, out, _) = tet_sql(
        &["-q", "--format", "json", "-c", "SELECT count(*) AS n FROM tet('w.tet')"],
        dir.path(),
    );
    assert!(ok);
    assert_eq!(out.trim(), r#"[{"n":6}]"#);
}

#[test]
fn create_external_table_stored_as_tet() {
    let dir = tempdir();
    sample(dir.path());
    let (ok, out, err) = tet_sql(
        &[
            "-q",
            "--format",
            "csv",
            "-c",
            "CREATE EXTERNAL TABLE t STORED AS TET LOCATION 'w.tet' OPTIONS ('tet.dataset' 'temp')",
            "-c",
            "SELECT max(v) AS m FROM t WHERE row = 1",
        ],
        dir.path(),
    );
    assert!(ok, "{out}{err}");
    assert!(out.contains("m\n6.0"), "{out}");
    let (ok, out, err) = tet_sql(
        &[
            "-q",
            "-c",
            "CREATE EXTERNAL TABLE t STORED AS TET LOCATION 'w.tet' OPTIONS ('tet.colour' 'x')",
        ],
        dir.path(),
    );
    assert!(!ok);
    assert!((out.clone() + &err).contains("tet.colour"), "{out}{err}");
}

#[test]
fn explain_analyze_shows_scan_metrics() {
    let dir = tempdir();
    sample(dir.path());
    let scan = "EXPLAIN ANALYZE SELECT v FROM tet('w.tet') WHERE row = 0";
    let (ok, out, err) = tet_sql(&["-q", "-c", scan], dir.path());
    assert!(ok, "{err}");
    for m in [
        "TetScanExec",
        "chunks_total=2",
        "chunks_read=2",
        "bytes_read=",
        "rows_emitted=3",
        "decode_time",
    ] {
        assert!(out.contains(m), "missing {m} in {out}");
    }
    let agg = "EXPLAIN ANALYZE SELECT col, sum(v) FROM tet('w.tet') WHERE row = 0 GROUP BY col";
    let (ok, out, err) = tet_sql(&["-q", "-c", agg], dir.path());
    assert!(ok, "{err}");
    for m in [
        "TetAggregateExec",
        "group_by=[col]",
        "chunks_total=2",
        "chunks_read=2",
        "fold_time",
    ] {
        assert!(out.contains(m), "missing {m} in {out}");
    }
}

#[test]
fn damaged_files_exit_nonzero_with_a_clear_message() {
    let Some(fx) = upstream_fixtures() else { return };
    let mut names = vec!["plan.tet".to_string()];
    for e in std::fs::read_dir(fx.join("reject")).unwrap() {
        names.push(format!("reject/{}", e.unwrap().file_name().to_string_lossy()));
    }
    for n in names {
        let path = fx.join(&n).display().to_string();
        let (ok, out, err) = tet_sql(&["-q", "-c", &format!("SELECT sum(v) FROM tet('{path}')")], &fx);
        let all = out + &err;
        assert!(!ok, "{n}: exit 0: {all}");
        assert!(all.contains(&path) && !all.contains("panicked"), "{n}: {all}");
    }
    let (ok, out, _) = tet_sql(&["-q", "-c", "SELECT * FROM tet('missing.tet')"], &fx);
    assert!(
        !ok && out.contains("missing.tet") && out.contains("No such file"),
        "{out}"
    );
}

/// `tet-sql` against moto: the store built from the environment for `tet('s3://…')`, and
/// the one datafusion-cli builds from `CREATE EXTERNAL TABLE … OPTIONS ('aws.…')`.
#[tokio::test(flavor = "multi_thread")]
async fn s3_urls_from_the_environment_and_from_ddl_options() {
    use object_store::{ObjectStoreExt, PutPayload};
    let Some(moto) = crate::servers::moto() else { return };
    let dir = tempdir();
    sample(dir.path());
    crate::servers::create_bucket(moto, "cli");
    let store = crate::servers::moto_bucket(moto, "cli");
    let bytes = std::fs::read(dir.path().join("w.tet")).unwrap();
    store
        .put(&object_store::path::Path::from("dir/w.tet"), PutPayload::from(bytes))
        .await
        .unwrap();
    let aws = crate::servers::moto_env(moto);
    let unset = [
        "AWS_ENDPOINT",
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_REGION",
    ];
    let run = |args: &[&str], env: bool| tet_sql_env(args, dir.path(), if env { &aws } else { &[] }, &unset);
    let q = "SELECT col, sum(v) AS s FROM tet('s3://cli/dir/w.tet', 'temp') GROUP BY col ORDER BY col";
    let (ok, out, err) = run(&["-q", "--format", "csv", "-c", q], true);
    assert!(ok, "{out}{err}");
    assert_eq!(out.trim(), "col,s\neast,12.0\nwest,9.0", "{err}");
    let ddl = format!(
        "CREATE EXTERNAL TABLE w STORED AS TET LOCATION 's3://cli/dir/w.tet' OPTIONS ('tet.dataset' 'temp', \
         'aws.endpoint' '{}', 'aws.allow_http' 'true', 'aws.region' 'us-east-1', \
         'aws.access_key_id' 'test', 'aws.secret_access_key' 'test')",
        moto.endpoint
    );
    let (ok, out, err) = run(
        &[
            "-q",
            "--format",
            "csv",
            "-c",
            &ddl,
            "-c",
            "SELECT count(*) AS n, max(v) AS m FROM w",
        ],
        false,
    );
    assert!(ok, "{out}{err}");
    assert!(out.trim().ends_with("n,m\n6,6.0"), "{out}{err}");
}

#[test]
fn memory_limit_refuses_a_fold_that_needs_more() {
    // 2048 × 2048 groups of avg(v): the fold's dense accumulators (≈ 24 bytes per group
    // and partition) do not fit in 64 MiB, and are reserved in the memory pool before
    // they are allocated: DataFusion's "resources exhausted", the process alive.
    let dir = tempdir();
    let n = 2048u64;
    let data: Vec<u8> = (0..n * n).flat_map(|i| ((i % 1009) as f32).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("v", DType::F32, &[n, n], &[512, 512], &data))
        .unwrap();
    w.write_path(dir.path().join("g.tet")).unwrap();
    let sql = "SELECT count(*) AS groups, max(a) AS top FROM \
               (SELECT dim_0, dim_1, avg(v) AS a FROM tet('g.tet') GROUP BY dim_0, dim_1)";
    let (ok, out, err) = tet_sql(&["-q", "--format", "csv", "-m", "64m", "-c", sql], dir.path());
    assert!(!ok, "{out}{err}");
    let message = format!("{out}{err}");
    assert!(
        message.contains("Resources exhausted") && message.contains("TetAggregateExec"),
        "{message}"
    );
    let (ok, out, err) = tet_sql(&["-q", "--format", "csv", "-m", "2g", "-c", sql], dir.path());
    assert!(ok, "{out}{err}");
    assert_eq!(out.trim(), format!("groups,top\n{},1008.0", n * n));
}
