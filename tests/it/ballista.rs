//! Ballista (feature `ballista`): plan codec round trips and damaged plans, the
//! differential query set on an in-process cluster, and a cluster of real processes
//! (`tet-ballista-scheduler` + two `tet-ballista-executor`s) on loopback, including a
//! killed executor and files in an S3-compatible store.

use crate::agg_differential::{compare, no_pushdown, random_aggregate};
use crate::common::{Rng, Val, assert_same, ctx, ctx_with, rows, rows_of, tempdir};
use crate::servers;
use crate::sql_differential::{Case, check_case};
use datafusion::physical_plan::{ExecutionPlan, displayable};
use datafusion::prelude::SessionContext;
use datafusion_proto::bytes::{
    logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use datafusion_proto::physical_plan::{DefaultPhysicalProtoConverter, PhysicalExtensionCodec};
use datafusion_tet::ballista::{
    MAGIC, TetLogicalExtensionCodec, TetNode, TetPhysicalExtensionCodec, WIRE_VERSION, decode_node, node,
};
use datafusion_tet::exec::ChunkFeed;
use datafusion_tet::format::{ChunkCodecs, Codec, DType, DatasetSpec, TetWriter};
use prost::Message;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A cube of `f64` with `n_time × 24 × 36` cells in `4 × 12 × 12` chunks (6 per 4 time
/// steps), string labels on `lat`, integer labels on `time` (up to 64 steps), zone maps,
/// raw and zstd chunks alternating.
fn cube(path: &Path, n_time: u64) {
    let (nt, ny, nx) = (n_time, 24u64, 36u64);
    let data = cube_values(nt);
    let chunks = nt.div_ceil(4) * 2 * 3;
    let codecs = ChunkCodecs::PerChunk(
        (0..chunks)
            .map(|i| if i % 2 == 0 { Codec::Raw } else { Codec::Zstd })
            .collect(),
    );
    let mut spec = DatasetSpec::new("temp", DType::F64, &[nt, ny, nx], &[4, 12, 12], &data)
        .codecs(codecs)
        .dim_names(&["time", "lat", "lon"])
        .labels("lat", (0..ny).map(|i| format!("N{:02}", i % 12)).collect());
    // Footer labels are limited to 64 per axis.
    if nt <= 64 {
        spec = spec.labels("time", (0..nt).map(|i| (1000 + 6 * i).to_string()).collect());
    }
    let mut w = TetWriter::new();
    w.dataset(spec).unwrap();
    w.zone_maps(true);
    w.write_path(path).unwrap();
}

/// The values of [`cube`] of `nt` time steps, little-endian f64 in row-major order.
fn cube_values(nt: u64) -> Vec<u8> {
    let mut rng = Rng(9);
    (0..nt * 24 * 36)
        .flat_map(|_| ((rng.below(20_000) as f64) / 8.0 - 1000.0).to_le_bytes())
        .collect()
}

/// Queries over `cube` (`{f}` is the table): slices, labels, every pushed aggregate,
/// shapes around the aggregate.
const CUBE_QUERIES: &[&str] = &[
    "SELECT * FROM {f} WHERE time BETWEEN 1030 AND 1100 AND lon < 5",
    "SELECT time, lat, lon, v FROM {f} WHERE lat = 'N03' AND v > 0",
    "SELECT count(*), count(v), sum(v), min(v), max(v) FROM {f} WHERE lon IN (1, 30)",
    "SELECT lat, avg(v), var_pop(v), stddev(v) FROM {f} GROUP BY lat",
    "SELECT time, lat, count(*), sum(v), var(v), stddev_pop(v), var_samp(v), stddev_samp(v) FROM {f} WHERE lon >= 12 GROUP BY time, lat",
    "SELECT lon, min(v), max(CAST(v AS DOUBLE)) FROM {f} WHERE time <> 1006 GROUP BY lon ORDER BY lon LIMIT 7",
    "SELECT lat, avg(v) AS a FROM {f} GROUP BY lat HAVING avg(v) > -1000 ORDER BY a DESC",
    "SELECT count(*) FROM (SELECT lat, lon FROM {f} WHERE time = 1012) AS s",
    // Analysis shapes: expression keys, affine and other inputs, weights, value filters.
    "SELECT time % 4 AS h, avg(v * 1.8 + 32), max(v) FILTER (WHERE v > 0) FROM {f} WHERE v BETWEEN -500 AND 500 GROUP BY time % 4",
    "SELECT lon > 10 AS e, sum(v * 0.5 - 3) / count(v) FROM {f} WHERE abs(v) > 3 AND v > lon GROUP BY 1",
    "SELECT substr(lat, 2) AS b, count(*) FILTER (WHERE lat <> 'N01'), stddev(sqrt(abs(v))) FROM {f} GROUP BY 1",
    "SELECT lat, sum(v * cos(radians(lon))) / sum(cos(radians(lon))) FROM {f} WHERE v > 0 GROUP BY lat",
];

fn q(sql: &str, from: &str) -> String {
    sql.replace("{f}", from)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The bytes every node of ours starts with: the magic and the encoded wire version.
fn tag() -> Vec<u8> {
    let mut tag = MAGIC.to_vec();
    TetNode {
        version: WIRE_VERSION,
        kind: None,
    }
    .encode(&mut tag)
    .unwrap();
    tag
}

/// Our bytes for `kind`.
fn encoded(version: u32, kind: Option<node::Kind>) -> Vec<u8> {
    let mut buf = MAGIC.to_vec();
    TetNode { version, kind }.encode(&mut buf).unwrap();
    buf
}

fn plan_text(p: &Arc<dyn ExecutionPlan>) -> String {
    displayable(p.as_ref()).indent(true).to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn codecs_round_trip_logical_and_physical_plans() {
    let dir = tempdir();
    let path = dir.path().join("cube.tet");
    cube(&path, 64);
    let from = format!("tet('{}', 'temp')", path.display());
    // The pushdown's scan of values (a local session's default), and of partial states.
    let (values, states) = (ctx(), ctx_with(&["tet.merge_in_scan = false"]).await);
    let (lcodec, pcodec) = (
        TetLogicalExtensionCodec::default(),
        TetPhysicalExtensionCodec::default(),
    );
    let runs = CUBE_QUERIES.iter().flat_map(|sql| [(&values, sql), (&states, sql)]);
    for (ctx, sql) in runs {
        let task = ctx.task_ctx();
        let sql = q(sql, &from);
        let df = ctx.sql(&sql).await.unwrap();
        let want = rows_of(&df.clone().collect().await.unwrap());

        let logical = df.clone().into_optimized_plan().unwrap();
        let bytes = logical_plan_to_bytes_with_extension_codec(&logical, &lcodec).unwrap();
        assert!(
            contains(&bytes, &tag()),
            "our table is not in the logical plan of {sql}"
        );
        let back = logical_plan_from_bytes_with_extension_codec(&bytes, &task, &lcodec).unwrap();
        assert_eq!(
            back.display_indent().to_string(),
            logical.display_indent().to_string(),
            "{sql}"
        );
        let got = rows_of(&ctx.execute_logical_plan(back).await.unwrap().collect().await.unwrap());
        assert_same(got, want.clone(), &sql);

        let physical = df.create_physical_plan().await.unwrap();
        let bytes = physical_plan_to_bytes_with_extension_codec(physical.clone(), &pcodec).unwrap();
        // (A bare count(*) is answered from statistics, without our nodes.)
        let ours = plan_text(&physical).contains("Tet");
        assert_eq!(contains(&bytes, &tag()), ours, "our node in the physical plan of {sql}");
        let back = physical_plan_from_bytes_with_extension_codec(&bytes, &task, &pcodec).unwrap();
        assert_eq!(plan_text(&back), plan_text(&physical), "{sql}");
        let got = rows_of(&datafusion::physical_plan::collect(back, task.clone()).await.unwrap());
        assert_same(got, want, &sql);
    }
    // The pushdown's plans travel too: the aggregate table and TetAggregateExec.
    let task = values.task_ctx();
    let plan = physical(&values, &q(CUBE_QUERIES[3], &from)).await;
    assert!(plan_text(&plan).contains("TetAggregateExec"));
    let bytes = physical_plan_to_bytes_with_extension_codec(plan, &pcodec).unwrap();
    let back = physical_plan_from_bytes_with_extension_codec(&bytes, &task, &pcodec).unwrap();
    assert!(plan_text(&back).contains("TetAggregateExec"));
}

#[tokio::test(flavor = "multi_thread")]
async fn crossed_grids_round_trip_as_task_ids() {
    // `a` chunked by 3 rows, `b` (zstd) by 4 columns: every task spreads over chunks of
    // `b`. A decoded plan makes each task it names from its id, and answers the same as
    // the plan encoded and as DataFusion's own aggregate.
    let dir = tempdir();
    let path = dir.path().join("crossed.tet");
    let (t, x) = (40u64, 30u64);
    let a: Vec<u8> = (0..t * x).flat_map(|i| ((i % 17) as f32).to_le_bytes()).collect();
    let b: Vec<u8> = (0..t * x).flat_map(|i| ((i % 5) as f32 - 2.0).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    let spec =
        |name, chunk: &[u64], data| DatasetSpec::new(name, DType::F32, &[t, x], chunk, data).dim_names(&["time", "x"]);
    w.dataset(spec("a", &[3, x], &a)).unwrap();
    w.dataset(spec("b", &[t, 4], &b).codecs(ChunkCodecs::Zstd(1))).unwrap();
    w.write_path(&path).unwrap();
    let from = format!("tet('{}', 'a', 'b')", path.display());
    let pcodec = TetPhysicalExtensionCodec::default();
    let (values, states, oracle) = (
        ctx(),
        ctx_with(&["tet.merge_in_scan = false"]).await,
        no_pushdown().await,
    );
    let queries = [
        "SELECT * FROM {f} WHERE time BETWEEN 5 AND 31",
        "SELECT sum(a * b), count(*) FILTER (WHERE b > 0) FROM {f}",
        "SELECT x, avg(a - b), max(b) FROM {f} WHERE x <> 7 AND a > 2 GROUP BY x",
    ];
    for (ctx, sql) in queries.iter().flat_map(|sql| [(&values, sql), (&states, sql)]) {
        let (sql, task) = (q(sql, &from), ctx.task_ctx());
        let df = ctx.sql(&sql).await.unwrap();
        let want = rows_of(&df.clone().collect().await.unwrap());
        assert_same(want.clone(), rows(&oracle, &sql).await, &sql);
        let physical = df.create_physical_plan().await.unwrap();
        let bytes = physical_plan_to_bytes_with_extension_codec(physical.clone(), &pcodec).unwrap();
        assert!(contains(&bytes, &tag()), "our node in the physical plan of {sql}");
        let back = physical_plan_from_bytes_with_extension_codec(&bytes, &task, &pcodec).unwrap();
        assert_eq!(plan_text(&back), plan_text(&physical), "{sql}");
        let got = rows_of(&datafusion::physical_plan::collect(back, task).await.unwrap());
        assert_same(got, want, &sql);
    }
}

/// The cube at `whole` (of [`cube`], 64 time steps) as 3 files of 20, 24 and 20 time
/// steps in `parts`, each with its own chunk grid (integer time labels, so the files
/// order by them), written from the whole file's values. With `fill_in_middle`, the
/// middle file declares a fill value none of its elements has: the same values, stored
/// by another rule, so the archive folds in two storage classes.
fn split_cube(parts: &Path, fill_in_middle: bool) {
    std::fs::create_dir_all(parts).unwrap();
    let data = cube_values(64);
    let plane = 24 * 36 * 8;
    let mut start = 0u64;
    for (i, n) in [20u64, 24, 20].into_iter().enumerate() {
        let part = &data[(start * plane) as usize..((start + n) * plane) as usize];
        let mut w = TetWriter::new();
        let mut spec = DatasetSpec::new("temp", DType::F64, &[n, 24, 36], &[3 + i as u64, 12, 9], part)
            .dim_names(&["time", "lat", "lon"])
            .labels("time", (start..start + n).map(|t| (1000 + 6 * t).to_string()).collect())
            .labels("lat", (0..24).map(|i| format!("N{:02}", i % 12)).collect())
            .codecs(ChunkCodecs::Zstd(1));
        if fill_in_middle && i == 1 {
            spec = spec.attr("_FillValue", "-1e300");
        }
        w.dataset(spec).unwrap();
        w.write_path(parts.join(format!("p{i}.tet"))).unwrap();
        start += n;
    }
}

/// A table over an archive travels with its files: the cube split into files along time
/// (each with its own chunk grid) round-trips through the codecs, as a scan and as a
/// fold, answering as the one file does; a file replaced after planning is refused.
#[tokio::test(flavor = "multi_thread")]
async fn archives_round_trip_with_their_files() {
    let dir = tempdir();
    let whole = dir.path().join("cube.tet");
    cube(&whole, 64);
    let parts = dir.path().join("parts");
    split_cube(&parts, false);
    let mixed = dir.path().join("mixed");
    split_cube(&mixed, true);
    let (from, whole_from) = (
        format!("tet('{}/*.tet', 'temp')", parts.display()),
        format!("tet('{}', 'temp')", whole.display()),
    );
    let mixed_from = format!("tet('{}/*.tet', 'temp')", mixed.display());
    let pcodec = TetPhysicalExtensionCodec::default();
    let (values_ctx, states) = (ctx(), ctx_with(&["tet.merge_in_scan = false"]).await);
    let cases = CUBE_QUERIES.iter().flat_map(|sql| {
        [
            (&values_ctx, sql, &from),
            (&states, sql, &from),
            (&values_ctx, sql, &mixed_from),
        ]
    });
    for (ctx, sql, from) in cases {
        let task = ctx.task_ctx();
        let want = rows(ctx, &q(sql, &whole_from)).await;
        let sql = q(sql, from);
        // Encoded before it runs: a plan that ran carries its TopK's dynamic filter
        // (DataFusion 55 serializes `filter=[lon@0 < 6]` into the SortExec), which a
        // decoded copy then applies from the start.
        let ran = physical(ctx, &sql).await;
        let physical = physical(ctx, &sql).await;
        assert_same(
            rows_of(&datafusion::physical_plan::collect(ran, task.clone()).await.unwrap()),
            want.clone(),
            &sql,
        );
        let bytes = physical_plan_to_bytes_with_extension_codec(physical.clone(), &pcodec).unwrap();
        if !plan_text(&physical).contains("Tet") {
            continue;
        }
        assert!(plan_text(&physical).contains("files="), "{}", plan_text(&physical));
        let back = physical_plan_from_bytes_with_extension_codec(&bytes, &task, &pcodec).unwrap();
        assert_eq!(plan_text(&back), plan_text(&physical), "{sql}");
        let got = rows_of(&datafusion::physical_plan::collect(back, task).await.unwrap());
        assert_same(got, want, &sql);
    }
    // A file rewritten after planning: the decoded plan is refused, naming it.
    let sql = q(CUBE_QUERIES[3], &from);
    let physical = physical(&values_ctx, &sql).await;
    let bytes = physical_plan_to_bytes_with_extension_codec(physical, &pcodec).unwrap();
    let p1 = parts.join("p1.tet");
    let old = std::fs::read(&p1).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let mut changed = old.clone();
    changed.extend_from_slice(&[0; 8]);
    std::fs::write(&p1, &changed).unwrap();
    let err = physical_plan_from_bytes_with_extension_codec(&bytes, &values_ctx.task_ctx(), &pcodec)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("p1.tet"), "{err}");
}

async fn physical(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
    ctx.sql(sql).await.unwrap().create_physical_plan().await.unwrap()
}

/// What our codec writes for our scan or aggregate node in `plan`.
fn our_node(pcodec: &TetPhysicalExtensionCodec, plan: Arc<dyn ExecutionPlan>) -> Vec<u8> {
    fn find(p: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        if p.name().starts_with("Tet") {
            return p;
        }
        find(Arc::clone(p.children()[0]))
    }
    let mut buf = Vec::new();
    pcodec
        .try_encode(find(plan), &mut buf, &DefaultPhysicalProtoConverter {})
        .unwrap();
    buf
}

#[tokio::test(flavor = "multi_thread")]
async fn damaged_or_stale_plans_are_clear_errors() {
    let dir = tempdir();
    let path = dir.path().join("cube.tet");
    cube(&path, 64);
    let from = format!("tet('{}', 'temp')", path.display());
    let ctx = ctx();
    let task = ctx.task_ctx();
    let pcodec = TetPhysicalExtensionCodec::default();
    let feed = [ChunkFeed::ids_input(&[]).unwrap()];
    let decode = |buf: &[u8]| {
        pcodec
            .try_decode(buf, &feed, &task, &DefaultPhysicalProtoConverter {})
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let good = our_node(
        &pcodec,
        physical(&ctx, &format!("SELECT v FROM {from} WHERE time < 1024")).await,
    );
    assert!(good.starts_with(&tag()));
    decode(&good).unwrap();
    let Some(node::Kind::Scan(scan)) = decode_node(&good).unwrap() else {
        panic!("not a scan node")
    };
    let with = |edit: &dyn Fn(&mut datafusion_tet::ballista::ScanNode)| {
        let mut n = scan.clone();
        edit(&mut n);
        encoded(WIRE_VERSION, Some(node::Kind::Scan(n)))
    };
    let expect = |buf: Vec<u8>, words: &[&str]| {
        let e = decode(&buf).expect_err("a damaged plan decoded");
        for w in words {
            assert!(e.contains(w), "{e:?} lacks {w:?}");
        }
    };
    let newer = format!("wire version {}", WIRE_VERSION + 1);
    expect(
        encoded(WIRE_VERSION + 1, Some(node::Kind::Scan(scan.clone()))),
        &[newer.as_str()],
    );
    expect(encoded(WIRE_VERSION, None), &["unknown kind"]);
    expect(good[..good.len() - 3].to_vec(), &["decoding a tet plan node"]);
    expect(
        with(&|n| n.access.as_mut().unwrap().chunks.insert(0, 95)),
        &["cube.tet", "chunk 95"],
    );
    expect(
        with(&|n| n.access.as_mut().unwrap().selection[0].bounds = vec![0, 65]),
        &["axis time", "extent 64"],
    );
    expect(with(&|n| n.projection.insert(0, 7)), &["projects columns"]);
    expect(
        with(&|n| n.file.as_mut().unwrap().dataset = "pressure".into()),
        &["pressure"],
    );
    expect(
        with(&|n| n.file.as_mut().unwrap().location.push_str(".missing")),
        &["cube.tet.missing"],
    );
    // Another process of the same build on a changed file: refused, not misread.
    cube(&path, 60);
    expect(good.clone(), &["cube.tet", "changed"]);
    // Written again with the same bytes: the same length, a later modification time, so
    // still not the version planned; a new plan reads it.
    cube(&path, 64);
    expect(good.clone(), &["cube.tet", "changed"]);
    let good = our_node(
        &pcodec,
        physical(&ctx, &format!("SELECT v FROM {from} WHERE time < 1024")).await,
    );
    decode(&good).unwrap();
    // Our node's child must be the chunk-id feed.
    let e = pcodec
        .try_decode(&good, &[], &task, &DefaultPhysicalProtoConverter {})
        .expect_err("decoded without its child");
    assert!(e.to_string().contains("expected 1"), "{e}");

    // A pushed aggregate naming a function or type we do not compute.
    let good = our_node(
        &pcodec,
        physical(&ctx, &format!("SELECT lat, avg(v) FROM {from} GROUP BY lat")).await,
    );
    decode(&good).unwrap();
    let Some(node::Kind::Aggregate(agg)) = decode_node(&good).unwrap() else {
        panic!("not an aggregate node")
    };
    let utf8 = datafusion_proto::protobuf::ArrowType::try_from(&arrow::datatypes::DataType::Utf8).unwrap();
    use datafusion_tet::ballista::AggregationNode;
    type Edit = Box<dyn Fn(&mut AggregationNode)>;
    let edits: [(Edit, &str); 3] = [
        (
            Box::new(|a: &mut AggregationNode| a.aggs[0].func = "median".into()),
            "median",
        ),
        (
            Box::new(move |a: &mut AggregationNode| a.aggs[0].input_type = Some(utf8.clone())),
            "Utf8",
        ),
        (
            Box::new(|a: &mut AggregationNode| {
                let k = a.groups[0].clone();
                a.groups = vec![k.clone(), k];
            }),
            "repeated",
        ),
    ];
    for (edit, word) in edits {
        let mut n = agg.clone();
        edit(n.aggregation.as_mut().unwrap());
        expect(encoded(WIRE_VERSION, Some(node::Kind::Aggregate(n))), &[word]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn in_process_cluster_equals_local_execution() {
    let dir = tempdir();
    use ballista::prelude::{SessionConfigExt, SessionContextExt};
    use datafusion_tet::ballista::{session_config, session_state};
    // Eight task slots: the cases below run concurrently.
    let config = session_config().with_ballista_standalone_parallelism(8);
    let cluster = SessionContext::standalone_with_state(session_state(config).unwrap())
        .await
        .unwrap();
    let (local, oracle) = (ctx(), no_pushdown().await);
    // Ballista's in-process scheduler hands out work by polling, so each job takes a
    // fraction of a second: the cases run concurrently, each with its own generator.
    let cases = (0..8).map(|k| {
        let (cluster, oracle, dir) = (&cluster, &oracle, dir.path());
        async move {
            let mut rng = Rng(555 + k as u64);
            let case = Case::generate(&mut rng, dir, k);
            let from = format!("tet('{}', 't')", case.path);
            // Slices against the brute-force oracle.
            check_case(cluster, &case, &from, &mut rng, k, false).await;
            // Grouped aggregates against DataFusion's own (non-pushed) plan.
            let mut compared = 0;
            for _ in 0..4 {
                let sql = random_aggregate(&case, &mut rng, &from);
                compared += compare(cluster, oracle, &sql, None).await as usize;
            }
            compared
        }
    });
    let compared: usize = futures::future::join_all(cases).await.into_iter().sum();
    // Most random queries are valid SQL (some compare a text label with a number).
    assert!(compared >= 20, "only {compared} of 32 aggregates compared");
    let path = dir.path().join("cube.tet");
    cube(&path, 64);
    let from = format!("tet('{}', 'temp')", path.display());
    let cube_queries = CUBE_QUERIES.iter().map(|sql| {
        let (cluster, local, sql) = (&cluster, &local, q(sql, &from));
        async move { assert_same(rows(cluster, &sql).await, rows(local, &sql).await, &sql) }
    });
    futures::future::join_all(cube_queries).await;
    let explain = distributed_plan(&cluster, &q(CUBE_QUERIES[3], &from)).await;
    assert!(explain.contains("TetAggregateExec"), "{explain}");
    // An archive's tasks spread over the cluster like one file's.
    let parts = dir.path().join("parts");
    split_cube(&parts, false);
    let archive = format!("tet('{}/', 'temp')", parts.display());
    let archive_queries = CUBE_QUERIES.iter().map(|sql| {
        let (cluster, local, want, got) = (&cluster, &local, q(sql, &from), q(sql, &archive));
        async move { assert_same(rows(cluster, &got).await, rows(local, &want).await, &got) }
    });
    futures::future::join_all(archive_queries).await;
}

/// The `distributed_plan` row of `EXPLAIN sql` (Ballista's stages).
async fn distributed_plan(ctx: &SessionContext, sql: &str) -> String {
    let rows = rows(ctx, &format!("EXPLAIN {sql}")).await;
    rows.iter()
        .find(|r| r[0] == Val::Str("distributed_plan".into()))
        .map(|r| format!("{:?}", r[1]))
        .unwrap_or_else(|| panic!("no distributed_plan in {rows:?}"))
}

/// A child process killed when dropped (and, through `PR_SET_PDEATHSIG`, when the
/// thread that started it ends).
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn start(bin: &str, args: &[String], env: &[(&str, &str)], log: PathBuf) -> Proc {
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .stdin(Stdio::null());
        servers::die_with_thread(&mut cmd);
        Proc {
            child: cmd.spawn().unwrap_or_else(|e| panic!("starting {bin}: {e}")),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Lines of the log containing `needle`.
    fn count(&self, needle: &str) -> usize {
        BufReader::new(std::fs::File::open(&self.log).unwrap())
            .lines()
            .map_while(Result::ok)
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Wait until `ok`; an error with the log when the process exits first.
    fn wait_until(&mut self, what: &str, ok: impl Fn(&Proc) -> bool) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if ok(self) {
                return Ok(());
            }
            self.running(what)?;
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{what}: not within 60 s; log:\n{}", self.log());
    }

    /// An error with the log when the process has exited.
    fn running(&mut self, what: &str) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!(
                "{what}: the process exited ({status}); its log:\n{}",
                self.log()
            )),
            _ => Ok(()),
        }
    }
}

/// A process started by `start` on `N` ports found free, once `up` says it serves. A port
/// found free can be taken before the process binds it (by another test's server, or as
/// the local port of an outgoing connection); the process then exits with "Address already
/// in use", and it is started again on other ports.
fn start_on_free_ports<const N: usize>(
    what: &str,
    start: impl Fn([u16; N]) -> Proc,
    up: impl Fn(&Proc, [u16; N]) -> bool,
) -> (Proc, [u16; N]) {
    const ATTEMPTS: usize = 5;
    for _ in 0..ATTEMPTS {
        let ports = [(); N].map(|_| servers::free_port().unwrap());
        let mut p = start(ports);
        let started = p.wait_until(what, |p| up(p, ports)).and_then(|()| {
            // A port someone else holds answers `up` too: the process must still run.
            std::thread::sleep(Duration::from_millis(300));
            p.running(what)
        });
        match started {
            Ok(()) => return (p, ports),
            Err(log) if log.contains("Address already in use") => continue,
            Err(log) => panic!("{log}"),
        }
    }
    panic!("{what}: its ports were taken before it bound them, {ATTEMPTS} times");
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The log line an executor writes for each task it runs (push scheduling).
const TASK_LINE: &str = "Execute task";

/// One scheduler and `n` executors (one task slot each) on loopback.
struct Cluster {
    url: String,
    /// Stops with the cluster.
    _scheduler: Proc,
    executors: Vec<Proc>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start(n: usize, env: &[(&str, &str)]) -> Cluster {
        Cluster::start_with(n, env, &[], &[])
    }

    /// With `scheduler_args` and `executor_args` added to the command lines.
    fn start_with(n: usize, env: &[(&str, &str)], scheduler_args: &[String], executor_args: &[String]) -> Cluster {
        let dir = tempdir();
        let start_scheduler = |[port]: [u16; 1]| {
            Proc::start(
                env!("CARGO_BIN_EXE_tet-ballista-scheduler"),
                &[
                    "--bind-host",
                    "127.0.0.1",
                    "--bind-port",
                    &port.to_string(),
                    // Notice a lost executor within seconds rather than minutes.
                    "--executor-timeout-seconds",
                    "6",
                    "--expire-dead-executor-interval-seconds",
                    "1",
                ]
                .map(String::from)
                .into_iter()
                .chain(scheduler_args.iter().cloned())
                .collect::<Vec<_>>(),
                env,
                dir.path().join("scheduler.log"),
            )
        };
        let (scheduler, [port]) = start_on_free_ports("scheduler listening", start_scheduler, |_, [port]| {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        let executors = (0..n)
            .map(|i| {
                let work = dir.path().join(format!("work{i}"));
                std::fs::create_dir_all(&work).unwrap();
                let start_executor = |ports: [u16; 3]| {
                    let [p, g, h] = ports.map(|p| p.to_string());
                    let mut args: Vec<String> = [
                        "--scheduler-host",
                        "127.0.0.1",
                        "--scheduler-port",
                        &port.to_string(),
                        "--bind-host",
                        "127.0.0.1",
                        "--bind-port",
                        &p,
                        "--bind-grpc-port",
                        &g,
                        "--bind-health-port",
                        &h,
                        "--work-dir",
                        &work.display().to_string(),
                        "--concurrent-tasks",
                        "1",
                        "--executor-heartbeat-interval-seconds",
                        "1",
                    ]
                    .map(String::from)
                    .into();
                    args.extend_from_slice(executor_args);
                    Proc::start(
                        env!("CARGO_BIN_EXE_tet-ballista-executor"),
                        &args,
                        env,
                        dir.path().join(format!("executor{i}.log")),
                    )
                };
                let registered = |e: &Proc, _| e.count("registration succeed") > 0;
                start_on_free_ports("executor registered", start_executor, registered).0
            })
            .collect();
        Cluster {
            url: format!("df://127.0.0.1:{port}"),
            _scheduler: scheduler,
            executors,
            _dir: dir,
        }
    }

    /// A client session; queries are split into 8 partitions so both executors get tasks.
    async fn client(&self) -> SessionContext {
        let ctx = datafusion_tet::ballista::session(&self.url).await.unwrap();
        ctx.sql("SET datafusion.execution.target_partitions = 8")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        ctx
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_of_processes_equals_local_execution() {
    let cluster = Cluster::start(2, &[]);
    let dir = tempdir();
    let path = dir.path().join("cube.tet");
    cube(&path, 64); // 96 chunks
    let from = format!("tet('{}', 'temp')", path.display());
    let (client, local) = (cluster.client().await, ctx());
    for sql in CUBE_QUERIES {
        let sql = q(sql, &from);
        assert_same(rows(&client, &sql).await, rows(&local, &sql).await, &sql);
    }
    let mut rng = Rng(31);
    for k in 0..3 {
        let case = Case::generate(&mut rng, dir.path(), k);
        let from = format!("tet('{}', 't')", case.path);
        check_case(&client, &case, &from, &mut rng, k, false).await;
    }
    // DDL on the client, run by the cluster.
    let ddl = format!(
        "CREATE EXTERNAL TABLE cube STORED AS TET LOCATION '{}' OPTIONS ('tet.dataset' 'temp')",
        path.display()
    );
    client.sql(&ddl).await.unwrap().collect().await.unwrap();
    let sql = "SELECT lat, sum(v) FROM cube WHERE time < 1100 GROUP BY lat";
    let local_sql = sql.replace("cube", &from);
    assert_same(rows(&client, sql).await, rows(&local, &local_sql).await, sql);

    // The catalog functions travel too (recomputed by the scheduler from the file).
    let catalog = format!(
        "SELECT d.name, d.chunk_count, count(*) AS rows FROM tet_datasets('{p}') AS d \
         JOIN tet_chunks('{p}', 'temp') AS c ON c.dataset = d.name GROUP BY d.name, d.chunk_count",
        p = path.display()
    );
    let got = rows(&client, &catalog).await;
    assert_eq!(got, rows(&local, &catalog).await);
    assert_eq!(got, vec![vec![Val::Str("temp".into()), Val::Int(96), Val::Int(96)]]);

    // The pushdown runs in the executors' stages.
    let explain = distributed_plan(&client, &q(CUBE_QUERIES[3], &from)).await;
    assert!(explain.contains("TetAggregateExec"), "{explain}");

    // An archive: its file list travels to the executors, each reads the files of its
    // tasks. Its middle file stores the values by another rule: one fold per storage class.
    let parts = dir.path().join("parts");
    split_cube(&parts, true);
    let archive = format!("tet('{}/', 'temp')", parts.display());
    for sql in CUBE_QUERIES {
        let (want, got) = (q(sql, &from), q(sql, &archive));
        assert_same(rows(&client, &got).await, rows(&local, &want).await, &got);
    }
    let explain = distributed_plan(&client, &q(CUBE_QUERIES[3], &archive)).await;
    assert_eq!(explain.matches("TetAggregateExec").count(), 2, "{explain}");

    // Tables of several datasets (chunk grids that differ), and joins on every axis
    // planned as one of them, in the executors' stages.
    for k in 0..3 {
        let case = crate::multi::MultiCase::generate(&mut rng, dir.path(), 10 + k);
        let names = case.names();
        let axes: Vec<&str> = case.axes.iter().map(|a| a.0.as_str()).collect();
        let key = axes[0];
        let on: Vec<String> = axes.iter().map(|a| format!("t.{a} = s.{a}")).collect();
        let join = format!(
            "tet('{p}', '{}') t JOIN tet('{p}', '{}') s ON {}",
            names[0],
            names[1],
            on.join(" AND "),
            p = case.path
        );
        let (x, y) = (
            format!("CAST({} AS DOUBLE)", names[0]),
            format!("CAST({} AS DOUBLE)", names[1]),
        );
        for sql in [
            format!("SELECT * FROM {}", case.from()),
            format!(
                "SELECT {key}, avg({x} - {y}), corr({x}, {y}), count(*) FROM {} GROUP BY {key}",
                case.from()
            ),
            format!("SELECT t.{key}, max(t.v), sum(CAST(s.v AS DOUBLE)) FROM {join} GROUP BY t.{key}"),
        ] {
            assert_same(rows(&client, &sql).await, rows(&local, &sql).await, &sql);
        }
        let explain = distributed_plan(
            &client,
            &format!("SELECT t.{key}, max(t.v), sum(CAST(s.v AS DOUBLE)) FROM {join} GROUP BY t.{key}"),
        )
        .await;
        assert!(
            explain.contains("TetAggregateExec") && !explain.contains("HashJoinExec"),
            "{explain}"
        );
    }
    // Both executors ran tasks.
    for (i, e) in cluster.executors.iter().enumerate() {
        assert!(
            e.count(TASK_LINE) > 0,
            "executor {i} ran no task; its log:\n{}",
            e.log()
        );
    }

    // tet-sql as the client.
    let (ok, out, err) = crate::cli::tet_sql_env(
        &[
            "-q",
            "--format",
            "csv",
            "--ballista",
            &cluster.url,
            "-c",
            &format!("SELECT lat, count(*) AS n FROM {from} WHERE lat IN ('N01', 'N02') GROUP BY lat ORDER BY lat"),
            "-c",
            &format!("EXPLAIN SELECT lat, max(v) FROM {from} GROUP BY lat"),
        ],
        dir.path(),
        &[],
        &[],
    );
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("lat,n\nN01,4608\nN02,4608\n"), "{out}{err}");
    assert!(
        out.contains("distributed_plan") && out.contains("TetAggregateExec"),
        "{out}"
    );
}

/// The message of an executor refusing a location.
const NOT_ALLOWED: &str = "outside the locations this process allows";

/// The error of running `sql` on `client`, if any.
async fn error_of(client: &SessionContext, sql: &str) -> Option<String> {
    match client.sql(sql).await {
        Ok(df) => df.collect().await.err(),
        Err(e) => Some(e),
    }
    .map(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn executors_open_only_the_locations_they_allow() {
    let dir = tempdir();
    let (shared, private) = (dir.path().join("shared"), dir.path().join("private"));
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::create_dir_all(&private).unwrap();
    let (ok, secret) = (shared.join("cube.tet"), private.join("cube.tet"));
    cube(&ok, 8);
    std::fs::copy(&ok, &secret).unwrap();
    // A link under the allowed root to the file outside it.
    let link = shared.join("link.tet");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let allow = ["--tet-allow-location".to_owned(), shared.display().to_string()];
    // Only the executor is restricted: it refuses the tasks (Ballista then fails the job
    // as "rejected"; the reason is in the executor's log).
    let cluster = Cluster::start_with(1, &[], &[], &allow);
    let (client, local) = (cluster.client().await, ctx());
    let sql = |p: &Path| {
        format!(
            "SELECT lat, sum(v), count(*) FROM tet('{}', 'temp') GROUP BY lat",
            p.display()
        )
    };
    assert_same(rows(&client, &sql(&ok)).await, rows(&local, &sql(&ok)).await, "allowed");
    for p in [&secret, &link] {
        let scan = format!("SELECT * FROM tet('{}', 'temp') LIMIT 3", p.display());
        for q in [sql(p), scan] {
            let e = error_of(&client, &q)
                .await
                .unwrap_or_else(|| panic!("{q} ran on an executor that does not allow it"));
            assert!(e.contains("rejected by executor"), "{q}: {e}");
        }
        let log = cluster.executors[0].log();
        assert!(
            log.contains(NOT_ALLOWED) && log.contains(&p.display().to_string()),
            "{log}"
        );
    }
    // A root that is not a directory stops the executor at start with a message.
    let out = Command::new(env!("CARGO_BIN_EXE_tet-ballista-executor"))
        .args(["--tet-allow-location", &ok.display().to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() && text.contains("tet-allow-location") && text.contains("not a directory"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_executor_fails_or_recovers_the_job_in_bounded_time() {
    let mut cluster = Cluster::start(2, &[]);
    let dir = tempdir();
    let path = dir.path().join("big.tet");
    cube(&path, 4096); // 6144 chunks, 28 MiB
    let from = format!("tet('{}', 'temp')", path.display());
    let sql = format!("SELECT lat, lon, avg(v), stddev(v), count(*) FROM {from} WHERE v > -990 GROUP BY lat, lon");
    let (client, local) = (cluster.client().await, ctx());
    let want = rows(&local, &sql).await;
    let victim = cluster.executors.pop().unwrap();
    let before = victim.count(TASK_LINE);
    let job = {
        let (client, sql) = (client.clone(), sql.clone());
        tokio::spawn(async move {
            let df = client.sql(&sql).await?;
            df.collect().await
        })
    };
    // Kill the second executor as soon as it runs a task of this job.
    let deadline = Instant::now() + Duration::from_secs(60);
    while victim.count(TASK_LINE) == before && !job.is_finished() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let killed_mid_job = !job.is_finished();
    drop(victim);
    let outcome = tokio::time::timeout(Duration::from_secs(120), job)
        .await
        .expect("the job hung after an executor was killed")
        .unwrap();
    match outcome {
        Ok(batches) => {
            assert_same(rows_of(&batches), want.clone(), &sql);
            println!("job with a killed executor completed with the right rows");
        }
        Err(e) => {
            let e = e.to_string();
            println!("job with a killed executor failed: {e}");
            assert!(e.to_lowercase().contains("executor") || e.contains("task"), "{e}");
        }
    }
    println!("executor killed while the job ran: {killed_mid_job}");
    // The cluster goes on with the remaining executor.
    let again = tokio::time::timeout(Duration::from_secs(120), rows(&client, &sql))
        .await
        .expect("a query after the executor loss hung");
    assert_same(again, want, &sql);
}

#[tokio::test(flavor = "multi_thread")]
async fn executors_read_files_from_an_s3_compatible_store() {
    use object_store::{ObjectStoreExt, PutPayload};
    let Some(moto) = servers::moto() else { return };
    servers::create_bucket(moto, "cluster");
    let dir = tempdir();
    let path = dir.path().join("cube.tet");
    cube(&path, 64);
    let store = crate::servers::moto_bucket(moto, "cluster");
    let bytes = bytes::Bytes::from(std::fs::read(&path).unwrap());
    // The second copy lies outside the prefix the executors allow.
    for name in ["cubes/cube.tet", "private/cube.tet"] {
        let payload = PutPayload::from(bytes.clone());
        store.put(&object_store::path::Path::from(name), payload).await.unwrap();
    }
    let env = crate::servers::moto_env(moto);
    let allow = ["--tet-allow-location".to_owned(), "s3://cluster/cubes/".to_owned()];
    // Scheduler and executors restricted: the scheduler refuses while planning, with the
    // reason in the client's error.
    let cluster = Cluster::start_with(2, &env, &allow, &allow);
    let client = cluster.client().await;
    // The client plans too, so it needs the store as well.
    client.register_object_store(&url::Url::parse("s3://cluster").unwrap(), Arc::new(store));
    let local = ctx();
    let remote_from = "tet('s3://cluster/cubes/cube.tet', 'temp')";
    let local_from = format!("tet('{}', 'temp')", path.display());
    for sql in CUBE_QUERIES {
        let (r, l) = (q(sql, remote_from), q(sql, &local_from));
        assert_same(rows(&client, &r).await, rows(&local, &l).await, &r);
    }
    for (i, e) in cluster.executors.iter().enumerate() {
        assert!(
            e.count(TASK_LINE) > 0,
            "executor {i} ran no task; its log:\n{}",
            e.log()
        );
    }
    let private = "SELECT count(*), sum(v) FROM tet('s3://cluster/private/cube.tet', 'temp')";
    let e = error_of(&client, private)
        .await
        .expect("an executor read outside its allowed prefix");
    assert!(
        e.contains(NOT_ALLOWED) && e.contains("s3://cluster/private/cube.tet"),
        "{e}"
    );
}
