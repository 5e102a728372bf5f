//! Memory: what a query allocates is bounded and accounted for. Evaluated aggregate inputs
//! and filters hold one slab of a task's cells at a time, not arrays of the whole task;
//! decoded tiles and bytes fetched from object stores are reserved in the session's
//! memory pool, so a limit makes a query fail with "resources exhausted" naming the file
//! rather than exceed it. Answers equal DataFusion's own plan
//! (`SET tet.aggregate_pushdown = false`).

use crate::common::{Val, assert_same, rows, tempdir};
use crate::largest_allocation;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::displayable;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tet::format::{ChunkCodecs, DType, DatasetSpec, TetWriter};
use object_store::memory::InMemory;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::sync::Arc;

/// A session of `partitions` target partitions with everything registered, its memory
/// pool limited to `limit` bytes when given, and each of `settings` applied by `SET`.
async fn session(limit: Option<usize>, partitions: usize, settings: &[&str]) -> SessionContext {
    let mut rt = RuntimeEnvBuilder::new();
    if let Some(limit) = limit {
        rt = rt.with_memory_limit(limit, 1.0);
    }
    let config = SessionConfig::new().with_target_partitions(partitions);
    let ctx = SessionContext::new_with_config_rt(config, rt.build_arc().unwrap());
    datafusion_tet::register(&ctx);
    for s in settings {
        ctx.sql(&format!("SET {s}")).await.unwrap().collect().await.unwrap();
    }
    ctx
}

/// The physical plan of `sql`, as text.
async fn plan_of(ctx: &SessionContext, sql: &str) -> String {
    let plan = ctx.sql(sql).await.unwrap().create_physical_plan().await.unwrap();
    displayable(plan.as_ref()).indent(true).to_string()
}

/// The error `sql` fails with (panics when it answers).
async fn error_of(ctx: &SessionContext, sql: &str) -> String {
    match async { ctx.sql(sql).await?.collect().await }.await {
        Ok(b) => panic!("{sql} should fail, answered {} batches", b.len()),
        Err(e) => e.to_string(),
    }
}

/// f32 `v[y, x]` of `shape`, chunked by `chunk`, values in [0, 100) with a few repeats.
fn f32_file(shape: [u64; 2], chunk: [u64; 2], codecs: ChunkCodecs) -> Vec<u8> {
    let n = shape[0] * shape[1];
    let data: Vec<u8> = (0..n)
        .flat_map(|i| ((i * 7 % 1000) as f32 / 10.0).to_le_bytes())
        .collect();
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("v", DType::F32, &shape, &chunk, &data)
            .dim_names(&["y", "x"])
            .codecs(codecs),
    )
    .unwrap();
    let mut out = std::io::Cursor::new(Vec::new());
    w.write(&mut out).unwrap();
    out.into_inner()
}

#[test]
fn evaluated_inputs_allocate_one_slab_at_a_time() {
    // One raw tile of 2048 × 2048 f32 (16 MiB, mapped, not copied): an array of the whole
    // task is 16-32 MiB; one of a slab (16 Ki cells) 128 KiB.
    let dir = tempdir();
    let path = dir.path().join("one_tile.tet");
    std::fs::write(&path, f32_file([2048, 2048], [2048, 2048], ChunkCodecs::Raw)).unwrap();
    let from = format!("tet('{}')", path.display());
    const BOUND: usize = 4 << 20;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for q in [
        "SELECT sum(CAST(v AS BIGINT) % 3) AS s FROM {t}",
        "SELECT avg(floor(v)) AS a, max(v * 2 - 1) AS m FROM {t}",
        "SELECT count(*) AS n, sum(v) AS s FROM {t} WHERE v + 1 > 50.5",
        "SELECT y, count(*) FILTER (WHERE v > x) AS n, sum(floor(v)) AS s FROM {t} GROUP BY y",
        "SELECT x % 7 AS k, corr(floor(v), x) AS c FROM {t} WHERE v + 1 > 20.5 GROUP BY x % 7",
    ] {
        let sql = q.replace("{t}", &from);
        let (on, off) = rt.block_on(async {
            (
                session(None, 1, &[]).await,
                session(None, 1, &["tet.aggregate_pushdown = false"]).await,
            )
        });
        let plan = rt.block_on(plan_of(&on, &sql));
        assert!(plan.contains("TetAggregateExec"), "{sql}: not pushed down\n{plan}");
        // One partition on a current-thread runtime: every allocation of the query is on
        // this thread, where the counting allocator sees it.
        let (got, largest) = largest_allocation(|| rt.block_on(rows(&on, &sql)));
        assert_same(got, rt.block_on(rows(&off, &sql)), &sql);
        assert!(
            largest < BOUND,
            "{sql}: an allocation of {largest} bytes (bound {BOUND}): the task's cells at once"
        );
    }
}

/// A zstd file of eight 1 MiB tiles (`v[8 × 512, 512]`, one row band per chunk).
fn zstd_tiles() -> Vec<u8> {
    f32_file([8 * 512, 512], [512, 512], ChunkCodecs::Zstd(1))
}

const QUERIES: &[&str] = &[
    "SELECT sum(v) AS s, count(*) AS n FROM {t}",
    "SELECT x % 4 AS k, avg(v) AS a, max(v) AS m FROM {t} GROUP BY x % 4",
    "SELECT sum(CAST(v AS BIGINT) % 3) AS s FROM {t} WHERE y > 100",
];

/// Each query of [`QUERIES`] over `from` under a pool of 900 KiB (room for the fold's
/// accumulators and one slab of evaluated inputs, not for a tile) fails on a 1 MiB tile
/// (with the pushdown, in TetAggregateExec, and without, in TetScanExec) with "resources
/// exhausted" naming `file`; under 64 MiB it answers as DataFusion does, and every
/// reservation is returned when the query ends.
async fn tiles_are_bounded_by_the_pool(from: &str, file: &str, register: impl Fn(&SessionContext)) {
    for q in QUERIES {
        let sql = q.replace("{t}", from);
        for (settings, node) in [
            (&[][..], "TetAggregateExec"),
            (&["tet.aggregate_pushdown = false"][..], "TetScanExec"),
        ] {
            // One partition: with two, one partition's slab of evaluated inputs can take
            // the pool before the other's tile asks, and the error names the slab.
            let small = session(Some(900 << 10), 1, settings).await;
            register(&small);
            let plan = plan_of(&small, &sql).await;
            assert!(plan.contains(node), "{sql}: no {node}\n{plan}");
            let e = error_of(&small, &sql).await;
            assert!(
                e.contains("Resources exhausted") && e.contains(file) && e.contains("chunk"),
                "{sql} ({node}): {e}"
            );
        }
        let on = session(Some(64 << 20), 2, &[]).await;
        let off = session(Some(64 << 20), 2, &["tet.aggregate_pushdown = false"]).await;
        register(&on);
        register(&off);
        let want: Vec<Vec<Val>> = rows(&off, &sql).await;
        assert_same(rows(&on, &sql).await, want, &sql);
        for ctx in [&on, &off] {
            assert_eq!(
                ctx.runtime_env().memory_pool.reserved(),
                0,
                "{sql}: memory left reserved"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoded_tiles_are_reserved_in_the_memory_pool() {
    let dir = tempdir();
    let path = dir.path().join("zstd_tiles.tet");
    std::fs::write(&path, zstd_tiles()).unwrap();
    let from = format!("tet('{}')", path.display());
    tiles_are_bounded_by_the_pool(&from, "zstd_tiles.tet", |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetched_payloads_are_reserved_in_the_memory_pool() {
    // Raw chunks of an object store are fetched bytes (not a mapping); zstd ones are
    // fetched, then decoded.
    let store = Arc::new(InMemory::new());
    let raw = f32_file([8 * 512, 512], [512, 512], ChunkCodecs::Raw);
    for (name, bytes) in [("raw.tet", raw), ("zstd.tet", zstd_tiles())] {
        store.put(&ObjPath::from(name), PutPayload::from(bytes)).await.unwrap();
    }
    let register = |ctx: &SessionContext| {
        let url = url::Url::parse("s3://memory").unwrap();
        ctx.register_object_store(&url, store.clone() as Arc<dyn ObjectStore>);
    };
    for name in ["raw.tet", "zstd.tet"] {
        let from = format!("tet('s3://memory/{name}')");
        tiles_are_bounded_by_the_pool(&from, name, register).await;
    }
}
