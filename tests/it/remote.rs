//! Remote files through object stores, against real servers on loopback: moto (S3 API)
//! and nginx (HTTP Range), plus a deliberately faulty HTTP server for broken connections.
//! Results must equal the local path; byte accounting is checked by a counting wrapper
//! around the store (independent of our own metrics).

use crate::common::{Rng, Val, ctx, rows, rows_and_plan, sorted, tempdir, tet_metric};
use crate::faulty_http;
use crate::servers::{self, Server};
use crate::sql_differential::{Case, check_case};
use async_trait::async_trait;
use datafusion::prelude::SessionContext;
use datafusion_tet::format::{ChunkCodecs, DType, DatasetSpec, TetWriter};
use futures::stream::BoxStream;
use object_store::aws::AmazonS3Builder;
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjPath;
use object_store::{
    BackoffConfig, ClientOptions, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, RetryConfig,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use url::Url;

/// Short retries, so a test of a failing server ends quickly.
pub(crate) fn retry() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(100),
            base: 2.0,
        },
        max_retries: 2,
        retry_timeout: Duration::from_secs(10),
    }
}

fn s3_with_keys(server: &Server, bucket: &str, key: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(&server.endpoint)
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id(key)
            .with_secret_access_key("secret")
            .with_retry(retry())
            .build()
            .unwrap(),
    )
}

fn s3(server: &Server, bucket: &str) -> Arc<dyn ObjectStore> {
    s3_with_keys(server, bucket, "test")
}

pub(crate) fn http(endpoint: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        HttpBuilder::new()
            .with_url(endpoint)
            .with_client_options(ClientOptions::new().with_allow_http(true))
            .with_retry(retry())
            .build()
            .unwrap(),
    )
}

/// A bucket of its own on moto, with `files` uploaded; returns a counting store over it.
async fn bucket(server: &Server, name: &str, files: &[(&str, Vec<u8>)]) -> Arc<Counting> {
    servers::create_bucket(server, name);
    let store = s3(server, name);
    for (key, bytes) in files {
        store
            .put(&ObjPath::from(*key), PutPayload::from(bytes.clone()))
            .await
            .unwrap();
    }
    Arc::new(Counting::new(store))
}

pub(crate) fn register(ctx: &SessionContext, url: &str, store: Arc<dyn ObjectStore>) {
    ctx.register_object_store(&Url::parse(url).unwrap(), store);
}

/// Counts GET/HEAD requests and the bytes each asked for.
#[derive(Debug)]
pub(crate) struct Counting {
    inner: Arc<dyn ObjectStore>,
    requests: AtomicU64,
    heads: AtomicU64,
    bytes: AtomicU64,
}

impl Counting {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Counting {
            inner,
            requests: AtomicU64::new(0),
            heads: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }
    /// (GET requests, HEAD requests, bytes asked for) so far.
    pub(crate) fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.requests.load(Ordering::SeqCst),
            self.heads.load(Ordering::SeqCst),
            self.bytes.load(Ordering::SeqCst),
        )
    }
}

impl std::fmt::Display for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put_opts(
        &self,
        location: &ObjPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &ObjPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &ObjPath, options: GetOptions) -> object_store::Result<GetResult> {
        let head = options.head;
        let res = self.inner.get_opts(location, options).await?;
        self.requests.fetch_add(1, Ordering::SeqCst);
        if head {
            self.heads.fetch_add(1, Ordering::SeqCst);
        } else {
            self.bytes.fetch_add(res.range.end - res.range.start, Ordering::SeqCst);
        }
        Ok(res)
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjPath>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&ObjPath>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&ObjPath>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &ObjPath, to: &ObjPath, options: CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// `temp[time=100, lat=20, lon=30]` f32, one time step per chunk, values = linear index.
fn hundred_chunks(zstd: bool) -> Vec<u8> {
    let data: Vec<u8> = (0..100 * 20 * 30).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("temp", DType::F32, &[100, 20, 30], &[1, 20, 30], &data)
            .dim_names(&["time", "lat", "lon"])
            .codecs(if zstd { ChunkCodecs::Zstd(3) } else { ChunkCodecs::Raw }),
    )
    .unwrap();
    let mut out = std::io::Cursor::new(Vec::new());
    w.write(&mut out).unwrap();
    out.into_inner()
}

async fn error_of(ctx: &SessionContext, sql: &str) -> String {
    let r = async { ctx.sql(sql).await?.collect().await }.await;
    match r {
        Ok(_) => panic!("{sql} should fail"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn differential_queries_on_s3_and_http_equal_the_oracle() {
    let (Some(moto), Some(nginx)) = (servers::moto(), servers::nginx()) else {
        return;
    };
    let dir = tempdir();
    let mut rng = Rng(77);
    let cases: Vec<Case> = (0..10).map(|k| Case::generate(&mut rng, dir.path(), k)).collect();
    let files: Vec<(String, Vec<u8>)> = cases
        .iter()
        .enumerate()
        .map(|(k, c)| (format!("diff/case{k}.tet"), std::fs::read(&c.path).unwrap()))
        .collect();
    let named: Vec<(&str, Vec<u8>)> = files.iter().map(|(k, b)| (k.as_str(), b.clone())).collect();
    let store = bucket(moto, "diff", &named).await;
    std::fs::create_dir_all(nginx.dir.join("www/diff")).unwrap();
    for (k, b) in &files {
        std::fs::write(nginx.dir.join("www").join(k), b).unwrap();
    }
    let ctx = ctx();
    register(&ctx, "s3://diff", store);
    register(&ctx, &nginx.endpoint, http(&nginx.endpoint));
    for (k, case) in cases.iter().enumerate() {
        let mut r1 = Rng(1000 + k as u64);
        check_case(
            &ctx,
            case,
            &format!("tet('s3://diff/diff/case{k}.tet', 't')"),
            &mut r1,
            k,
            true,
        )
        .await;
        let mut r2 = Rng(1000 + k as u64);
        check_case(
            &ctx,
            case,
            &format!("tet('{}/diff/case{k}.tet', 't')", nginx.endpoint),
            &mut r2,
            k,
            true,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn aggregate_pushdown_and_ddl_on_s3_equal_local() {
    let Some(moto) = servers::moto() else { return };
    let dir = tempdir();
    let bytes = hundred_chunks(true);
    let local = dir.path().join("h.tet");
    std::fs::write(&local, &bytes).unwrap();
    let store = bucket(moto, "agg", &[("h.tet", bytes.clone())]).await;
    let ctx = ctx();
    register(&ctx, "s3://agg", store);
    ctx.sql("CREATE EXTERNAL TABLE remote STORED AS TET LOCATION 's3://agg/h.tet' OPTIONS ('tet.dataset' 'temp')")
        .await
        .unwrap();
    let local_from = format!("tet('{}', 'temp')", local.display());
    for q in [
        "SELECT lat, avg(v), min(v), max(v), count(*) FROM {} WHERE time BETWEEN 10 AND 60 GROUP BY lat ORDER BY lat",
        "SELECT time, stddev(v), var_pop(v), sum(v) FROM {} WHERE lon < 7 GROUP BY time ORDER BY time",
        "SELECT count(v), sum(CAST(v AS DOUBLE)) FROM {}",
    ] {
        let want = rows(&ctx, &q.replace("{}", &local_from)).await;
        for from in ["remote", "tet('s3://agg/h.tet', 'temp')"] {
            let sql = q.replace("{}", from);
            let (got, plan) = rows_and_plan(&ctx, &sql).await;
            assert_eq!(got, want, "{sql}");
            let text = datafusion::physical_plan::displayable(plan.as_ref())
                .indent(true)
                .to_string();
            assert!(
                text.contains("TetAggregateExec"),
                "{sql}: aggregate not pushed down:\n{text}"
            );
            assert!(
                tet_metric(&plan, "requests").unwrap_or(0) > 0,
                "{sql}: no requests counted"
            );
        }
    }
    // EXPLAIN ANALYZE shows the object store metrics.
    let (explain, _) = rows_and_plan(&ctx, "EXPLAIN ANALYZE SELECT avg(v) FROM remote WHERE time = 3").await;
    let text = format!("{explain:?}");
    assert!(text.contains("requests=1") && text.contains("bytes_fetched="), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn point_query_fetches_little_more_than_its_chunk_and_full_scans_each_byte_once() {
    let Some(moto) = servers::moto() else { return };
    let bytes = hundred_chunks(false);
    let store = bucket(moto, "bytes", &[("h.tet", bytes.clone())]).await;
    let catalog = datafusion_tet::format::TetFile::open(bytes.as_slice()).unwrap();
    let ds = &catalog.datasets[0];
    let entries: Vec<_> = (0..100).map(|t| catalog.chunk(ds, t).1.clone()).collect();
    let chunk42 = entries[42].stored_byte_len;
    let stored_total: u64 = entries.iter().map(|e| e.stored_byte_len).sum();
    let index_len = catalog.superblock.chunk_index_length;
    let ctx = ctx();
    register(&ctx, "s3://bytes", store.clone());

    let (got, plan) = rows_and_plan(
        &ctx,
        "SELECT sum(v), count(*) FROM tet('s3://bytes/h.tet', 'temp') WHERE time = 42",
    )
    .await;
    let want: f64 = (42 * 600..43 * 600).map(|i| i as f64).sum();
    assert_eq!(got, vec![vec![Val::Float(want), Val::Int(600)]]);
    let (requests, heads, fetched) = store.snapshot();
    assert!(
        fetched <= chunk42 + 2 * 64 * 1024 + index_len,
        "point query fetched {fetched} bytes (chunk {chunk42}, index {index_len})"
    );
    assert_eq!(heads, 0);
    assert!(requests <= 3, "open + one chunk took {requests} requests");
    assert_eq!(tet_metric(&plan, "requests").unwrap_or(0), 1);
    assert_eq!(tet_metric(&plan, "bytes_fetched").unwrap_or(0) as u64, chunk42);

    // The catalog is cached: the next query costs one HEAD plus its chunks.
    let before = store.snapshot();
    let sql = "SELECT avg(v) FROM tet('s3://bytes/h.tet', 'temp')";
    ctx.sql("SET tet.coalesce_gap_bytes = 0").await.unwrap();
    ctx.sql("SET tet.max_request_bytes = 1").await.unwrap();
    let (_, plan) = rows_and_plan(&ctx, sql).await;
    let after = store.snapshot();
    assert_eq!(after.1 - before.1, 1, "one HEAD revalidates the cached catalog");
    assert_eq!(after.2 - before.2, stored_total, "every payload byte exactly once");
    assert_eq!(tet_metric(&plan, "bytes_fetched").unwrap_or(0) as u64, stored_total);
    assert_eq!(tet_metric(&plan, "requests").unwrap_or(0), 100);
    // With coalescing the same bytes arrive in a few requests (one per window/partition).
    ctx.sql("SET tet.coalesce_gap_bytes = 1048576").await.unwrap();
    ctx.sql("SET tet.max_request_bytes = 8388608").await.unwrap();
    let (got, plan) = rows_and_plan(&ctx, sql).await;
    assert_eq!(
        got,
        vec![vec![Val::Float((0..60000).map(|i| i as f64).sum::<f64>() / 60000.0)]]
    );
    let payload_span = entries
        .iter()
        .map(|e| e.payload_offset + e.stored_byte_len)
        .max()
        .unwrap()
        - entries.iter().map(|e| e.payload_offset).min().unwrap();
    let fetched = tet_metric(&plan, "bytes_fetched").unwrap_or(0) as u64;
    assert!(
        (stored_total..=payload_span).contains(&fetched),
        "{fetched} not in {stored_total}..={payload_span}"
    );
    assert!(
        tet_metric(&plan, "requests").unwrap_or(0) <= 4,
        "coalesced into {} requests",
        tet_metric(&plan, "requests").unwrap_or(0)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_over_two_objects_coalesces_the_reads_of_each() {
    let Some(moto) = servers::moto() else { return };
    let (raw, zstd) = (hundred_chunks(false), hundred_chunks(true));
    let store = bucket(moto, "pair", &[("raw.tet", raw.clone()), ("zstd.tet", zstd.clone())]).await;
    // Per object: the payload bytes, and the span from the first to the end of the last.
    let payload = |bytes: &[u8]| -> (u64, u64) {
        let catalog = datafusion_tet::format::TetFile::open(bytes).unwrap();
        let ds = &catalog.datasets[0];
        let entries: Vec<_> = (0..100).map(|t| catalog.chunk(ds, t).1.clone()).collect();
        let stored = entries.iter().map(|e| e.stored_byte_len).sum();
        let end = entries
            .iter()
            .map(|e| e.payload_offset + e.stored_byte_len)
            .max()
            .unwrap();
        (stored, end - entries.iter().map(|e| e.payload_offset).min().unwrap())
    };
    let ((raw_stored, raw_span), (zstd_stored, zstd_span)) = (payload(&raw), payload(&zstd));
    let ctx = ctx();
    register(&ctx, "s3://pair", store.clone());
    // One variable per object, joined on every axis: one aligned scan reading the two
    // objects' chunks alternately.
    let sql = "SELECT sum(a.v - b.v), sum(b.v), count(*) FROM tet('s3://pair/raw.tet', 'temp') a \
               JOIN tet('s3://pair/zstd.tet', 'temp') b ON a.time = b.time AND a.lat = b.lat AND a.lon = b.lon";
    let (got, plan) = rows_and_plan(&ctx, sql).await;
    let total: f64 = (0..60000).map(|i| i as f64).sum();
    assert_eq!(got, vec![vec![Val::Float(0.0), Val::Float(total), Val::Int(60000)]]);
    let text = datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string();
    assert!(!text.contains("HashJoinExec"), "{text}");
    // Each object's payloads arrive in a few coalesced requests per partition (one per
    // window), not one request per chunk.
    let requests = tet_metric(&plan, "requests").unwrap_or(0);
    let partitions = ctx.state().config().target_partitions();
    assert!(requests <= 2 * partitions, "{requests} requests");
    let fetched = tet_metric(&plan, "bytes_fetched").unwrap_or(0) as u64;
    assert!(
        (raw_stored + zstd_stored..=raw_span + zstd_span).contains(&fetched),
        "{fetched} bytes fetched"
    );
    // With windows of one chunk, one request per chunk of each object.
    ctx.sql("SET tet.fetch_window_bytes = 1").await.unwrap();
    let (again, plan) = rows_and_plan(&ctx, sql).await;
    assert_eq!(again, got);
    assert_eq!(tet_metric(&plan, "requests").unwrap_or(0), 200);
    assert_eq!(
        tet_metric(&plan, "bytes_fetched").unwrap_or(0) as u64,
        raw_stored + zstd_stored
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_object_is_reopened_between_queries_and_an_error_within_one() {
    let Some(moto) = servers::moto() else { return };
    let v1 = hundred_chunks(false);
    let store = bucket(moto, "replace", &[("h.tet", v1.clone())]).await;
    let ctx = ctx();
    register(&ctx, "s3://replace", store.clone());
    let q = "SELECT max(v) FROM tet('s3://replace/h.tet', 'temp')";
    assert_eq!(rows(&ctx, q).await, vec![vec![Val::Float(59999.0)]]);
    // A new version (different size and ETag): the next query reopens it.
    let data: Vec<u8> = (0..10 * 4).flat_map(|i| (i as f32 * 2.0).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("temp", DType::F32, &[10, 4], &[5, 4], &data).dim_names(&["time", "lat"]))
        .unwrap();
    let mut v2 = std::io::Cursor::new(Vec::new());
    w.write(&mut v2).unwrap();
    let v2 = v2.into_inner();
    store.put(&ObjPath::from("h.tet"), PutPayload::from(v2)).await.unwrap();
    assert_eq!(rows(&ctx, q).await, vec![vec![Val::Float(78.0)]]);

    // Replaced after planning (the table was opened), before reading: an error, no mixing.
    ctx.sql("CREATE EXTERNAL TABLE t STORED AS TET LOCATION 's3://replace/h.tet'")
        .await
        .unwrap();
    store.put(&ObjPath::from("h.tet"), PutPayload::from(v1)).await.unwrap();
    let e = error_of(&ctx, "SELECT sum(v) FROM t").await;
    assert!(
        e.contains("s3://replace/h.tet") && e.contains("changed after it was opened"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_objects_buckets_bad_credentials_and_truncated_objects_are_clear_errors() {
    let (Some(moto), Some(auth), Some(nginx)) = (servers::moto(), servers::moto_authenticating(), servers::nginx())
    else {
        return;
    };
    let bytes = hundred_chunks(true);
    let truncated = bytes[..bytes.len() * 2 / 3].to_vec();
    let store = bucket(
        moto,
        "faults",
        &[("h.tet", bytes.clone()), ("cut.tet", truncated.clone())],
    )
    .await;
    std::fs::write(nginx.dir.join("www/cut.tet"), &truncated).unwrap();
    let ctx = ctx();
    register(&ctx, "s3://faults", store);
    register(&ctx, "s3://no-such-bucket", s3(moto, "no-such-bucket"));
    register(&ctx, "s3://locked", s3_with_keys(auth, "locked", "AKIDNOTAREALKEY"));
    register(&ctx, &nginx.endpoint, http(&nginx.endpoint));
    let cases = [
        ("s3://faults/nope.tet".to_string(), vec!["not found"]),
        (
            "s3://no-such-bucket/h.tet".to_string(),
            vec!["not found", "NoSuchBucket"],
        ),
        (
            "s3://locked/h.tet".to_string(),
            vec!["InvalidAccessKeyId", "403", "Forbidden"],
        ),
        (format!("{}/nope.tet", nginx.endpoint), vec!["not found", "404"]),
        (
            "s3://faults/cut.tet".to_string(),
            vec!["need", "past the end", "outside", "footer is missing"],
        ),
        (
            format!("{}/cut.tet", nginx.endpoint),
            vec!["need", "past the end", "outside", "footer is missing"],
        ),
        (
            "s3://unregistered-bucket-x/h.tet".to_string(),
            vec!["object store", "register"],
        ),
    ];
    for (url, expect) in cases {
        for sql in [
            format!("SELECT count(*) FROM tet('{url}', 'temp')"),
            format!("CREATE EXTERNAL TABLE t STORED AS TET LOCATION '{url}'"),
        ] {
            let e = error_of(&ctx, &sql).await;
            assert!(e.contains(&url), "{sql}: the error does not name the URL: {e}");
            assert!(
                expect.iter().any(|x| e.to_lowercase().contains(&x.to_lowercase())),
                "{sql}: expected one of {expect:?} in: {e}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_closed_mid_read_are_retried_then_reported() {
    let bytes = hundred_chunks(false);
    let server = faulty_http::serve(bytes);
    let origin = server.url.trim_end_matches("/file.tet").to_string();
    let ctx = ctx();
    register(&ctx, &origin, http(&origin));
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE f STORED AS TET LOCATION '{}'",
        server.url
    ))
    .await
    .unwrap();
    ctx.sql("SET tet.coalesce_gap_bytes = 0").await.unwrap();
    let want: f64 = (0..60000).map(|i| i as f64).sum();
    // One broken connection: object_store resumes the body and the query succeeds.
    server.truncations.store(1, Ordering::SeqCst);
    assert_eq!(
        rows(&ctx, "SELECT sum(CAST(v AS DOUBLE)) FROM f").await,
        vec![vec![Val::Float(want)]]
    );
    assert_eq!(server.truncations.load(Ordering::SeqCst), 0, "the fault was not hit");
    // Every connection broken: the query fails (after the retries) naming the URL.
    server.truncations.store(1_000_000, Ordering::SeqCst);
    let e = error_of(&ctx, "SELECT sum(CAST(v AS DOUBLE)) FROM f").await;
    assert!(e.contains(&server.url), "{e}");
}

#[test]
fn tet_on_a_current_thread_runtime_explains_what_to_do() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ctx = ctx();
        let e = error_of(&ctx, "SELECT * FROM tet('s3://bucket/x.tet')").await;
        assert!(e.contains("multi-threaded") && e.contains("STORED AS TET"), "{e}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn results_do_not_depend_on_fetch_options() {
    let Some(moto) = servers::moto() else { return };
    let bytes = hundred_chunks(true);
    let store = bucket(moto, "opts", &[("h.tet", bytes)]).await;
    let ctx = ctx();
    register(&ctx, "s3://opts", store);
    let sql = "SELECT time, lat, lon, v FROM tet('s3://opts/h.tet', 'temp') WHERE lat = 3 AND time % 7 = 1";
    let base = sorted(rows(&ctx, sql).await);
    assert_eq!(base.len(), 15 * 30);
    for (gap, max, conc, window) in [(0, 1, 1, 1), (100, 4096, 2, 3000), (1 << 20, 1 << 30, 16, 1 << 30)] {
        for (k, v) in [
            ("coalesce_gap_bytes", gap),
            ("max_request_bytes", max),
            ("fetch_concurrency", conc),
            ("fetch_window_bytes", window),
        ] {
            ctx.sql(&format!("SET tet.{k} = {v}")).await.unwrap();
        }
        let got = sorted(rows(&ctx, sql).await);
        assert_eq!(got, base, "gap {gap} max {max} concurrency {conc} window {window}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn large_indexes_and_coordinate_variables_are_fetched_on_demand() {
    let Some(moto) = servers::moto() else { return };
    // 1000 chunks: a 104 KB chunk index (more than the first read), and a coordinate
    // variable whose payload lies just past it (in neither end of the object).
    let time: Vec<u8> = (0..1000).flat_map(|i| (i as f64 * 0.5).to_le_bytes()).collect();
    let data: Vec<u8> = (0..1000 * 64).flat_map(|i| ((i % 977) as f32).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("time", DType::F64, &[1000], &[1000], &time).dim_names(&["time"]))
        .unwrap();
    w.dataset(DatasetSpec::new("temp", DType::F32, &[1000, 64], &[1, 64], &data).dim_names(&["time", "x"]))
        .unwrap();
    let mut bytes = std::io::Cursor::new(Vec::new());
    w.write(&mut bytes).unwrap();
    let bytes = bytes.into_inner();
    let catalog = datafusion_tet::format::TetFile::open(bytes.as_slice()).unwrap();
    assert!(catalog.superblock.chunk_index_length > 64 * 1024);
    let dir = tempdir();
    let local = dir.path().join("b.tet");
    std::fs::write(&local, &bytes).unwrap();
    let store = bucket(moto, "big", &[("b.tet", bytes)]).await;
    let ctx = ctx();
    register(&ctx, "s3://big", store.clone());
    ctx.sql("CREATE EXTERNAL TABLE b STORED AS TET LOCATION 's3://big/b.tet' OPTIONS ('tet.dataset' 'temp')")
        .await
        .unwrap();
    let (requests, heads, _) = store.snapshot();
    assert_eq!(heads, 0);
    // End, start, the rest of the index, the coordinate variable.
    assert!(requests <= 4, "opening took {requests} requests");
    let q = "SELECT time, avg(v), count(*) FROM {} WHERE time >= 490 GROUP BY time ORDER BY time";
    let want = rows(&ctx, &q.replace("{}", &format!("tet('{}', 'temp')", local.display()))).await;
    assert_eq!(want.len(), 20);
    assert_eq!(want[0][0], Val::Float(490.0));
    assert_eq!(rows(&ctx, &q.replace("{}", "b")).await, want);
    // The catalog functions read the same catalog remotely.
    let ds = rows(
        &ctx,
        "SELECT name, chunk_count FROM tet_datasets('s3://big/b.tet') ORDER BY name",
    )
    .await;
    assert_eq!(
        ds,
        vec![
            vec![Val::Str("temp".into()), Val::Int(1000)],
            vec![Val::Str("time".into()), Val::Int(1)]
        ]
    );
    let chunks = rows(&ctx, "SELECT count(*) FROM tet_chunks('s3://big/b.tet', 'temp')").await;
    assert_eq!(chunks, vec![vec![Val::Int(1000)]]);
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_blob_storage_through_azurite() {
    let Some(az) = servers::azurite() else { return };
    let bytes = hundred_chunks(true);
    servers::azure_upload(az, "tet", "cube/h.tet", &bytes);
    let dir = tempdir();
    let local = dir.path().join("h.tet");
    std::fs::write(&local, &bytes).unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::azure::MicrosoftAzureBuilder::new()
            .with_use_emulator(true)
            .with_container_name("tet")
            .with_retry(retry())
            .build()
            .unwrap(),
    );
    let store = Arc::new(Counting::new(store));
    let ctx = ctx();
    register(&ctx, "az://tet", store.clone());
    let local_from = format!("tet('{}', 'temp')", local.display());
    for q in [
        "SELECT lat, avg(v), max(v), count(*) FROM {} WHERE time < 30 GROUP BY lat ORDER BY lat",
        "SELECT time, lat, lon, v FROM {} WHERE time = 77 AND lon > 25 ORDER BY time, lat, lon",
    ] {
        let want = rows(&ctx, &q.replace("{}", &local_from)).await;
        assert!(!want.is_empty());
        assert_eq!(
            rows(&ctx, &q.replace("{}", "tet('az://tet/cube/h.tet', 'temp')")).await,
            want,
            "{q}"
        );
    }
    // Azure has no suffix ranges: a fresh open is HEAD, end, start.
    let ctx = crate::common::ctx();
    register(&ctx, "az://tet", store.clone());
    let before = store.snapshot();
    let (_, plan) = rows_and_plan(
        &ctx,
        "SELECT sum(v) FROM tet('az://tet/cube/h.tet', 'temp') WHERE time = 5",
    )
    .await;
    let after = store.snapshot();
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (4, 1),
        "HEAD, end, start, one chunk"
    );
    assert_eq!(tet_metric(&plan, "requests").unwrap_or(0), 1);
    let e = error_of(&ctx, "SELECT * FROM tet('az://tet/cube/missing.tet')").await;
    assert!(
        e.contains("az://tet/cube/missing.tet") && e.to_lowercase().contains("not found"),
        "{e}"
    );

    // tet-sql builds the Azure store from the environment (emulator mode).
    #[cfg(feature = "cli")]
    {
        let sql = "SELECT count(*) AS n, max(v) AS m FROM tet('az://tet/cube/h.tet', 'temp') WHERE time = 99";
        let (ok, out, err) = crate::cli::tet_sql_env(
            &["-q", "--format", "csv", "-c", sql],
            dir.path(),
            &[("AZURE_STORAGE_USE_EMULATOR", "true")],
            &[],
        );
        assert!(ok, "{out}{err}");
        assert_eq!(out.trim(), "n,m\n600,59999.0", "{err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coordinate_variable_of_many_chunks_opens_in_a_few_requests() {
    let Some(moto) = servers::moto() else { return };
    // 25 chunks of 128 KiB each (more than one parse round fetches, and more rounds than
    // a parse may take): fetched together, coalesced, before the axes are built.
    let n = 25 * 16384u64;
    let time: Vec<u8> = (0..n).flat_map(|i| (i as f64 * 0.25).to_le_bytes()).collect();
    let data: Vec<u8> = (0..n * 2).flat_map(|i| ((i % 89) as f32).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("temp", DType::F32, &[n, 2], &[16384, 2], &data).dim_names(&["time", "x"]))
        .unwrap();
    w.dataset(DatasetSpec::new("time", DType::F64, &[n], &[16384], &time).dim_names(&["time"]))
        .unwrap();
    let bytes = w.to_bytes().unwrap();
    let dir = tempdir();
    let local = dir.path().join("c.tet");
    std::fs::write(&local, &bytes).unwrap();
    let store = bucket(moto, "coords", &[("c.tet", bytes)]).await;
    let ctx = ctx();
    register(&ctx, "s3://coords", store.clone());
    ctx.sql("CREATE EXTERNAL TABLE c STORED AS TET LOCATION 's3://coords/c.tet' OPTIONS ('tet.dataset' 'temp')")
        .await
        .unwrap();
    let (requests, _, fetched) = store.snapshot();
    // End, start, then the 3.2 MiB of the coordinate variable (8 MiB requests at most).
    assert!(requests <= 6, "opening took {requests} requests");
    assert!(fetched < 4 << 20, "opening fetched {fetched} bytes");
    let q = "SELECT max(time) AS t, count(*) AS n, sum(v) AS s FROM {} WHERE time BETWEEN 1000 AND 2000.5";
    let want = rows(&ctx, &q.replace("{}", &format!("tet('{}', 'temp')", local.display()))).await;
    assert_eq!(want[0][0], Val::Float(2000.5));
    assert_eq!(rows(&ctx, &q.replace("{}", "c")).await, want);
}

/// `f32` values `i · scale` in a `[n]` dataset of raw chunks of 1000 (same size for
/// every `scale`).
fn scaled(n: u64, scale: f32) -> Vec<u8> {
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32 * scale).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("v", DType::F32, &[n], &[1000], &data))
        .unwrap();
    w.to_bytes().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_that_ignore_range_are_read_whole_when_small_and_refused_when_large() {
    // Small: read whole at open, then every read is served from that copy.
    let server = faulty_http::serve(scaled(10_000, 1.0));
    server.ignore_range.store(true, Ordering::SeqCst);
    let origin = server.url.trim_end_matches("/file.tet").to_string();
    let ctx = ctx();
    register(&ctx, &origin, http(&origin));
    let q = format!(
        "SELECT sum(CAST(v AS DOUBLE)) AS s, count(*) AS n FROM tet('{}')",
        server.url
    );
    let want = (0..10_000).map(|i| i as f64).sum::<f64>();
    assert_eq!(rows(&ctx, &q).await, vec![vec![Val::Float(want), Val::Int(10_000)]]);
    let after_open = server.requests.load(Ordering::SeqCst);
    assert_eq!(rows(&ctx, &q).await, vec![vec![Val::Float(want), Val::Int(10_000)]]);
    // A second query: one HEAD to revalidate, no reads.
    assert!(server.requests.load(Ordering::SeqCst) - after_open <= 1);
    // Large (more than 8 MiB): refused at open with a message that says why.
    let big = faulty_http::serve(scaled(3_000_000, 1.0));
    big.ignore_range.store(true, Ordering::SeqCst);
    let origin = big.url.trim_end_matches("/file.tet").to_string();
    register(&ctx, &origin, http(&origin));
    let e = error_of(&ctx, &format!("SELECT count(*) FROM tet('{}')", big.url)).await;
    assert!(e.contains("ignores Range") && e.contains(&big.url), "{e}");
    assert!(big.requests.load(Ordering::SeqCst) <= 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_etags_a_same_size_replacement_is_found_by_its_modification_time() {
    let server = faulty_http::serve(scaled(20_000, 1.0));
    server.no_etag.store(true, Ordering::SeqCst);
    replacements_are_read_between_queries_and_refused_within_a_table(&server).await;
}

/// Over `server` (serving `scaled(20_000, 1.0)`): the sum is read; a same-size replacement
/// with other values and a later Last-Modified is read by the next query; a table opened
/// before a replacement fails its next query as changed, naming the URL (its range
/// requests are conditional on the version it saw).
async fn replacements_are_read_between_queries_and_refused_within_a_table(server: &faulty_http::Faulty) {
    let origin = server.url.trim_end_matches("/file.tet").to_string();
    let ctx = ctx();
    register(&ctx, &origin, http(&origin));
    let q = format!("SELECT sum(CAST(v AS DOUBLE)) FROM tet('{}')", server.url);
    let sum = |scale: f64| (0..20_000).map(|i| i as f64 * scale).sum::<f64>();
    assert_eq!(rows(&ctx, &q).await, vec![vec![Val::Float(sum(1.0))]]);
    let replacement = scaled(20_000, 2.0);
    assert_eq!(replacement.len(), scaled(20_000, 1.0).len());
    server.replace(replacement, "Mon, 30 Nov 2026 00:00:00 GMT");
    assert_eq!(rows(&ctx, &q).await, vec![vec![Val::Float(sum(2.0))]]);
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE f STORED AS TET LOCATION '{}'",
        server.url
    ))
    .await
    .unwrap();
    server.replace(scaled(20_000, 3.0), "Tue, 01 Dec 2026 00:00:00 GMT");
    let e = error_of(&ctx, "SELECT sum(CAST(v AS DOUBLE)) FROM f").await;
    assert!(
        e.contains("changed after it was opened") && e.contains(&server.url),
        "{e}"
    );
}

/// Write `bytes` to `path` (under a server's document root) by renaming a file written
/// beside it, modified `age` seconds ago.
fn publish(path: &std::path::Path, bytes: &[u8], age: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_extension("part");
    std::fs::write(&tmp, bytes).unwrap();
    let when = std::time::SystemTime::now() - Duration::from_secs(age);
    std::fs::File::options()
        .append(true)
        .open(&tmp)
        .unwrap()
        .set_modified(when)
        .unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn real_servers_without_etags_or_range_behave_as_documented() {
    let (Some(nginx), Some(python)) = (servers::nginx(), servers::python_http()) else {
        return;
    };
    // nginx with `etag off`: the version is the Last-Modified time.
    let name = format!("noetag/{}.tet", std::process::id());
    let url = format!("{}/{name}", nginx.endpoint);
    let path = nginx.dir.join("www").join(&name);
    publish(&path, &scaled(20_000, 1.0), 100);
    let probe = head_headers(&url);
    assert!(!probe.contains("etag:") && probe.contains("last-modified:"), "{probe}");
    let ctx = ctx();
    register(&ctx, &nginx.endpoint, http(&nginx.endpoint));
    let q = format!("SELECT sum(CAST(v AS DOUBLE)) FROM tet('{url}')");
    let sum = |scale: f64| (0..20_000).map(|i| i as f64 * scale).sum::<f64>();
    assert_eq!(rows(&ctx, &q).await, vec![vec![Val::Float(sum(1.0))]]);
    publish(&path, &scaled(20_000, 2.0), 50);
    assert_eq!(rows(&ctx, &q).await, vec![vec![Val::Float(sum(2.0))]]);
    ctx.sql(&format!("CREATE EXTERNAL TABLE f STORED AS TET LOCATION '{url}'"))
        .await
        .unwrap();
    publish(&path, &scaled(20_000, 3.0), 10);
    let e = error_of(&ctx, "SELECT sum(CAST(v AS DOUBLE)) FROM f").await;
    assert!(e.contains("changed after it was opened") && e.contains(&url), "{e}");

    // Python's http.server answers every GET with the whole file: small files are read
    // whole once, large ones refused.
    let www = python.dir.join("www");
    let (small, big) = (
        format!("{}-small.tet", std::process::id()),
        format!("{}-big.tet", std::process::id()),
    );
    publish(&www.join(&small), &scaled(10_000, 1.0), 10);
    publish(&www.join(&big), &scaled(3_000_000, 1.0), 10);
    register(&ctx, &python.endpoint, http(&python.endpoint));
    let q = format!(
        "SELECT sum(CAST(v AS DOUBLE)), count(*) FROM tet('{}/{small}')",
        python.endpoint
    );
    let want = (0..10_000).map(|i| i as f64).sum::<f64>();
    assert_eq!(rows(&ctx, &q).await, vec![vec![Val::Float(want), Val::Int(10_000)]]);
    let big_url = format!("{}/{big}", python.endpoint);
    let e = error_of(&ctx, &format!("SELECT count(*) FROM tet('{big_url}')")).await;
    assert!(e.contains("ignores Range") && e.contains(&big_url), "{e}");
}

/// The response headers of a HEAD request to `url` (lower-cased), over a plain socket.
fn head_headers(url: &str) -> String {
    use std::io::{Read, Write};
    let u = Url::parse(url).unwrap();
    let mut s = std::net::TcpStream::connect((u.host_str().unwrap(), u.port().unwrap())).unwrap();
    write!(
        s,
        "HEAD {} HTTP/1.0\r\nHost: {}\r\n\r\n",
        u.path(),
        u.host_str().unwrap()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.to_ascii_lowercase()
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_with_weak_etags_are_read_and_their_replacements_found() {
    // A weak ETag never matches `If-Match`: sent there, every read would fail as a change.
    let server = faulty_http::serve(scaled(20_000, 1.0));
    server.weak_etag.store(true, Ordering::SeqCst);
    replacements_are_read_between_queries_and_refused_within_a_table(&server).await;
}

#[test]
fn a_server_that_sends_more_than_asked_is_cut_off_at_the_bound() {
    // HEAD says 40 kB; every GET answers 200 with a Content-Length of 6 GiB and keeps
    // sending. Opening reads at most what it asked for, and fails naming the server.
    let server = faulty_http::serve(scaled(10_000, 1.0));
    server.claimed_len.store(6 << 30, Ordering::SeqCst);
    let origin = server.url.trim_end_matches("/file.tet").to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ctx = ctx();
    register(&ctx, &origin, http(&origin));
    let state = ctx.state();
    let (result, largest) = crate::largest_allocation(|| {
        rt.block_on(datafusion_tet::io::TetSource::open_in(
            state.runtime_env(),
            None,
            &server.url,
        ))
    });
    let e = result.unwrap_err().to_string();
    assert!(e.contains(&server.url) && e.contains("asked for"), "{e}");
    assert!(largest < 16 << 20, "largest allocation {largest} bytes");
}
