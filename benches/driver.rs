//! Benchmark driver (not a test). `cargo bench --bench driver` alone writes a smaller
//! cube under `target/bench` (`TET_BENCH_TIME` time steps, default 64) and times our
//! queries through the Rust API; `benches/run.py` drives the full comparison with the
//! peers through the subcommands below (`cargo bench --bench driver -- SUBCOMMAND ...`).
//!
//! `bench write-tet RAW_F32 OUT.tet T LAT LON [zstd]`: write a raw little-endian f32 cube
//!   [T, LAT, LON] as `.tet` (dataset `temp`, one chunk per time step, raw or zstd at
//!   level 3, `lat`/`lon` CF coordinate variables, time as positions).
//! `bench write-tet2 RAW_A RAW_B OUT.tet T LAT LON`: two such cubes as datasets `a` and `b`
//!   of one file (raw chunks), their payloads one after the other.
//! `bench phases OUT.tet REPS`: where the time of each plain fold (full mean, `GROUP BY
//!   lat`, `GROUP BY time`) goes through the Rust API: `ctx.sql` (parse, logical plan),
//!   `create_physical_plan` (optimizers, our access plan) and execution, each run after
//!   writing a 64 MiB buffer so that caches are as cold as after a full pass over the
//!   cube; prints {"engine": "phase_sql" | "phase_plan" | "phase_exec", "query",
//!   "median_s", "runs"}, and the same phases of the same queries over an empty
//!   `MemTable` of the table's schema (`phase_sql_empty`, ...): DataFusion's own planning
//!   cost, for comparison with ours. On a small file (`write-tet` of a cube with tiny `LAT`/`LON`)
//!   it measures the per-query and per-chunk fixed costs alone.
//! `bench plans OUT.tet REPS`: the planning of each plain fold (`ctx.sql` and
//!   `create_physical_plan`) repeated back to back, over `t` (`plan_warm`) and over the
//!   empty `MemTable` (`plan_warm_empty`): planning with warm caches, where `phases`
//!   measures it cold (and a profiler can watch it alone).
//! `bench kernel OUT.tet REPS`: the crate's fold kernel alone (`fold_run`, the sum and
//!   count of `avg`) over every chunk of dataset `temp` read through one mmap, the chunks
//!   split in contiguous halves (one per core), on OS threads (`kernel_threads`) and on the
//!   tokio runtime's workers (`kernel_tokio`): what the fold costs without DataFusion,
//!   to set beside the native floor (`TET_FLOOR_BIN`, `floor_native_c`) of the same run.
//!   Beside them, alternating with them in each repetition: the execution of the full
//!   mean's physical plan, planned once (`engine_exec`: what the engine adds to the
//!   kernel), and `benches/floor.c`'s loop written in Rust run the kernel's way
//!   (`floor_loop_tokio`, x86-64 with AVX2; `TET_FLOOR_LOOP_AHEAD` sets its prefetch
//!   distance): what of the kernel's gap to the floor is not the kernel's code.
//!   `TET_KERNEL_MODES` (comma-separated names) restricts the modes.
//!   `TET_KERNEL_ROW=720` folds each chunk as rows of 720 values into a group per row
//!   (the kernel calls of `GROUP BY lat`). `TET_KERNEL_PASSES=N` folds every chunk N times
//!   per repetition: over a file that fits the caches, what the kernel's arithmetic allows.
//! `bench run-multi OUT.tet REPS`: time the queries over both variables ([`MULTI_QUERIES`])
//!   through the Rust API — the table of both datasets, the join of the two one-dataset
//!   tables on every axis (planned as the same scan), DataFusion's own aggregate over our
//!   scan, and (on the time slice only) DataFusion's hash join with the join rewrite off —
//!   and the native floor over both payloads (`TET_FLOOR_BIN`); JSON lines as for `run`.
//! `bench run OUT.tet DATA.parquet REPS`: time the benchmark queries through the Rust API
//!   with the pushdown, with DataFusion's own plan over our scan, and over the Parquet
//!   table, plus the floor (one pass summing every f32 of the payload); prints one JSON
//!   line per measurement: {"engine", "query", "median_s", "runs"}. With `TET_FLOOR_BIN`
//!   each run of our Rust API follows one pass of that native floor (`PairedFloor`):
//!   `floor_native_c_paired` and `ours_rust_api_per_paired_floor` (the median of the
//!   per-run ratios), and after each run another floor pass and DataFusion's planning of
//!   the same query over an empty table (`floor_plus_planning_per_paired_floor`: a provider
//!   planned as cheaply as an empty table and executed as fast as the floor; engine name
//!   `planning_bound` in `TET_BENCH_ENGINES`). With `TET_SQL_BIN` too, the same queries
//!   run in one `tet-sql` session ([`TetSqlSession`]), each after a pass of the floor:
//!   `ours_tet_sql_paired` (its `Elapsed`), `floor_native_c_paired_tet_sql` and
//!   `ours_tet_sql_per_paired_floor`.
//!   `TET_BENCH_PARTITIONS` sets DataFusion's target partitions. `TET_BENCH_QUERIES`
//!   and `TET_BENCH_ENGINES` (comma-separated names) restrict what runs. For a file of
//!   zstd chunks the floor is `benches/floor_zstd.c` (`TET_FLOOR_ZSTD_BIN`: decompress
//!   every chunk and sum it), reported as `floor_native_zstd`, with the decoded and stored
//!   bytes on a line of their own.

use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tet::format::{ChunkCodecs, Codec, DType, DatasetSpec, TetFile, TetWriter};
use std::time::Instant;

// The allocator of datafusion-cli (and so of `tet-sql`) and of DataFusion's own benchmarks;
// with glibc's malloc each query's planning took about 0.1 ms longer (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const QUERIES: &[(&str, &str)] = &[
    ("full_mean", "SELECT avg(v) FROM t"),
    ("by_lat", "SELECT lat, avg(v) FROM t GROUP BY lat"),
    ("by_time", "SELECT time, avg(v) FROM t GROUP BY time"),
    ("by_lon", "SELECT lon, avg(v) FROM t GROUP BY lon"),
    (
        "by_lat_sliced",
        "SELECT lat, avg(v) FROM t WHERE time < {SLICE} GROUP BY lat",
    ),
    // Analysis shapes (time is hourly positions here).
    ("hour_of_day", "SELECT time % 24 AS h, avg(v) FROM t GROUP BY time % 24"),
    (
        "lat_bands",
        "SELECT floor(lat / 10) AS band, avg(v), min(v), max(v) FROM t GROUP BY 1",
    ),
    (
        "area_weighted",
        "SELECT sum(v * cos(radians(lat))) / sum(cos(radians(lat))) FROM t",
    ),
    ("value_filter", "SELECT lat, count(*) FROM t WHERE v > 290 GROUP BY lat"),
    ("filter_clause", "SELECT count(*) FILTER (WHERE v > 290), avg(v) FROM t"),
    (
        "filter_clause_by_lat",
        "SELECT lat, count(*) FILTER (WHERE v > 290), avg(v) FROM t GROUP BY lat",
    ),
    ("affine", "SELECT avg(v - 273.15), max(v * 1.8 - 459.67) FROM t"),
    ("non_affine", "SELECT avg(sqrt(abs(v))) FROM t"),
    // Maps per grid cell over time (issue 59).
    ("cell_mean", "SELECT lat, lon, avg(v) FROM t GROUP BY lat, lon"),
    (
        "cell_stats",
        "SELECT lat, lon, avg(v), stddev(v), max(v) FROM t GROUP BY lat, lon",
    ),
    (
        "cell_hot",
        "SELECT lat, lon, count(*) FILTER (WHERE v > 290), min(v) FROM t GROUP BY lat, lon",
    ),
    // Exact order statistics (issue 59).
    ("median_by_lat", "SELECT lat, median(v) FROM t GROUP BY lat"),
    (
        "p90_per_cell",
        "SELECT lat, lon, percentile_cont(0.9) WITHIN GROUP (ORDER BY v) FROM t GROUP BY lat, lon",
    ),
    // Approximate percentiles, from a sketch per group (issue 59).
    (
        "approx_p90_by_lat",
        "SELECT lat, approx_percentile_cont(0.9) WITHIN GROUP (ORDER BY v) FROM t GROUP BY lat",
    ),
    // A histogram of the value per latitude band (issue 59).
    (
        "hist_by_band",
        "SELECT floor(lat / 10) AS band, floor(v) AS bin, count(*) FROM t GROUP BY band, bin",
    ),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn report(engine: &str, query: &str, times: Vec<f64>) {
    println!(
        r#"{{"engine":"{engine}","query":"{query}","median_s":{},"runs":{}}}"#,
        median(times.clone()),
        times.len()
    );
}

fn to_df(e: datafusion_tet::format::FormatError) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(e))
}

/// Run `sql` once to warm up, then `reps` times, and report the times of the latter as
/// `engine`'s for query `name`. With `floor`, each run follows one pass of the native
/// floor, reported as `floor_native_c_paired` with the median of the runs' ratios to
/// their floor passes as `{engine}_per_paired_floor` (a ratio, not seconds).
///
/// With `floor` and `bound` (the same query over an empty table of the same schema), each
/// run is followed by a second floor pass and DataFusion's planning of `bound` (`ctx.sql`
/// and `create_physical_plan`) right after it: `datafusion_planning_paired` (seconds) and
/// `floor_plus_planning_per_paired_floor`, the median of (floor + planning) / floor: what a
/// provider queried through `ctx.sql` would take if its planning cost no more than
/// DataFusion's over an empty table and its execution were the floor's one pass.
/// DataFusion plans before it executes, and after a pass over the payload its planning
/// runs with cold caches.
async fn time_sql(
    ctx: &SessionContext,
    engine: &str,
    name: &str,
    sql: &str,
    reps: usize,
    mut floor: Option<&mut PairedFloor>,
    bound: Option<&str>,
) -> datafusion::error::Result<()> {
    ctx.sql(sql).await?.collect().await?; // warm-up
    if let Some(bound) = bound {
        ctx.sql(bound).await?.create_physical_plan().await?;
    }
    let (mut times, mut floors) = (Vec::new(), Vec::new());
    let (mut plannings, mut bound_floors) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        if let Some(f) = floor.as_deref_mut() {
            floors.push(f.pass()?);
        }
        let start = Instant::now();
        let b = ctx.sql(sql).await?.collect().await?;
        times.push(start.elapsed().as_secs_f64());
        assert!(!b.is_empty());
        if let (Some(f), Some(bound)) = (floor.as_deref_mut(), bound) {
            bound_floors.push(f.pass()?);
            let start = Instant::now();
            std::hint::black_box(ctx.sql(bound).await?.create_physical_plan().await?);
            plannings.push(start.elapsed().as_secs_f64());
        }
    }
    if !floors.is_empty() {
        let ratios = times.iter().zip(&floors).map(|(t, f)| t / f).collect();
        report("floor_native_c_paired", name, floors);
        report(&format!("{engine}_per_paired_floor"), name, ratios);
    }
    if !plannings.is_empty() {
        let bounds = plannings.iter().zip(&bound_floors).map(|(p, f)| (f + p) / f).collect();
        report("floor_native_c_paired_bound", name, bound_floors);
        report("floor_plus_planning_per_paired_floor", name, bounds);
        report("datafusion_planning_paired", name, plannings);
    }
    report(engine, name, times);
    Ok(())
}

/// Register dataset `temp` of `tet` as table `t`, and an empty `MemTable` of the same
/// schema as table `empty`: DataFusion's own planning of a query over `t` is that of the
/// same query over `empty` ([`over_empty`]), for `phases` and the planning bound.
fn register_t_and_empty(ctx: &SessionContext, tet: &str) -> datafusion::error::Result<()> {
    use datafusion::catalog::TableProvider;
    let table = datafusion_tet::TetTableProvider::try_new(tet, Some("temp"))?;
    let empty = datafusion::datasource::MemTable::try_new(table.schema(), vec![vec![]])?;
    ctx.register_table("t", std::sync::Arc::new(table))?;
    ctx.register_table("empty", std::sync::Arc::new(empty))?;
    Ok(())
}

/// A session ([`session`]) with the crate registered and `tet` as table `t` beside its
/// empty twin ([`register_t_and_empty`]).
fn session_over(tet: &str) -> datafusion::error::Result<SessionContext> {
    let ctx = session();
    datafusion_tet::register(&ctx);
    register_t_and_empty(&ctx, tet)?;
    Ok(ctx)
}

/// The plain folds among [`QUERIES`]: the full mean, `GROUP BY lat` and `GROUP BY time`.
fn plain_folds() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    QUERIES
        .iter()
        .filter(|(name, _)| ["full_mean", "by_lat", "by_time"].contains(name))
}

/// A benchmark query over table `t` ([`QUERIES`]) over table `empty` instead.
fn over_empty(sql: &str) -> String {
    sql.replace(" FROM t", " FROM empty")
}

/// The phases of the plain folds over `tet` (see the module doc).
async fn phases(tet: &str, reps: usize) -> datafusion::error::Result<()> {
    // DataFusion's own planning of the same queries over an empty table of the same
    // schema: the part of `phase_sql` and `phase_plan` that is not ours.
    let ctx = session_over(tet)?;
    let mut sweep = vec![0u64; 8 << 20];
    for (name, sql) in plain_folds() {
        for (table, phases) in [
            ("t", ["phase_sql", "phase_plan", "phase_exec"]),
            ("empty", ["phase_sql_empty", "phase_plan_empty", "phase_exec_empty"]),
        ] {
            let sql = if table == "empty" {
                over_empty(sql)
            } else {
                sql.to_string()
            };
            ctx.sql(&sql).await?.collect().await?; // warm-up
            let mut times = [Vec::new(), Vec::new(), Vec::new()];
            for r in 0..reps {
                sweep.iter_mut().for_each(|x| *x = x.wrapping_add(r as u64));
                std::hint::black_box(&sweep);
                let t0 = Instant::now();
                let (state, plan) = ctx.sql(&sql).await?.into_parts();
                let t1 = Instant::now();
                let physical = state.create_physical_plan(&plan).await?;
                let t2 = Instant::now();
                let out = datafusion::physical_plan::collect(physical, ctx.task_ctx()).await?;
                let t3 = Instant::now();
                assert!(table == "empty" || !out.is_empty());
                for (i, d) in [t1 - t0, t2 - t1, t3 - t2].into_iter().enumerate() {
                    times[i].push(d.as_secs_f64());
                }
            }
            for (phase, t) in phases.into_iter().zip(times) {
                report(phase, name, t);
            }
        }
    }
    Ok(())
}

/// Plan the plain folds over `tet` (`ctx.sql` and `create_physical_plan`), over table `t`
/// and over its empty twin, `reps` times each back to back: planning with warm caches
/// (see the module doc).
async fn plans(tet: &str, reps: usize) -> datafusion::error::Result<()> {
    let ctx = session_over(tet)?;
    for (name, sql) in plain_folds() {
        for (engine, sql) in [("plan_warm", sql.to_string()), ("plan_warm_empty", over_empty(sql))] {
            let mut times = Vec::with_capacity(reps);
            for _ in 0..reps {
                let start = Instant::now();
                std::hint::black_box(ctx.sql(&sql).await?.create_physical_plan().await?);
                times.push(start.elapsed().as_secs_f64());
            }
            report(engine, name, times);
        }
    }
    Ok(())
}

/// The fold kernel alone (see the module doc).
async fn kernel(tet: &str, reps: usize) -> datafusion::error::Result<()> {
    use datafusion_tet::exec::kernel::{Accumulators, Keep, Needs, fold_run};
    let file = std::fs::File::open(tet)?;
    // SAFETY: the benchmark's file is not modified while mapped.
    let map = std::sync::Arc::new(unsafe { memmap2::Mmap::map(&file)? });
    let tf = TetFile::open(&map[..]).map_err(to_df)?;
    let ds = tf.dataset("temp").map_err(to_df)?;
    let spans: Vec<(usize, usize)> = ds
        .chunk_rows
        .iter()
        .map(|&r| {
            let e = &tf.chunks[r as usize];
            (
                e.payload_offset as usize,
                (e.payload_offset + e.stored_byte_len) as usize,
            )
        })
        .collect();
    if let Ok(bin) = std::env::var("TET_FLOOR_BIN") {
        let entries: Vec<_> = ds.chunk_rows.iter().map(|&r| &tf.chunks[r as usize]).collect();
        report(
            "floor_native_c",
            "full_mean",
            vec![native_floor(&bin, tet, &entries, reps)?],
        );
    }
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let parts: Vec<Vec<(usize, usize)>> = spans
        .chunks(spans.len().div_ceil(threads).max(1))
        .map(<[_]>::to_vec)
        .collect();
    // `TET_KERNEL_ROW`: fold each chunk as rows of that many values, row `r` of a chunk
    // into group `r` (the kernel calls of `GROUP BY lat` when it is the chunk's row length).
    let row: Option<usize> = std::env::var("TET_KERNEL_ROW")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&r| r > 0);
    // `TET_KERNEL_PASSES`: fold each part that many times per repetition (on a file that
    // fits the caches, the kernel's own speed without memory's).
    let passes: usize = std::env::var("TET_KERNEL_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let fold = move |map: &[u8], part: &[(usize, usize)]| {
        let needs = Needs {
            fsum: true,
            ..Needs::default()
        };
        let rows = row.map_or(1, |r| part.first().map_or(1, |&(a, b)| (b - a) / 4 / r.max(1)).max(1));
        let mut acc = Accumulators::new(rows, needs, true);
        for &(a, b) in part.iter().cycle().take(part.len() * passes) {
            let vals = datafusion_tet::format::elements::<f32>(&map[a..b]);
            match row {
                None => fold_run::<f32>(&mut acc, 0, &vals, &Keep::default()),
                Some(r) => {
                    for (g, run) in vals.chunks(r).enumerate() {
                        fold_run::<f32>(&mut acc, g.min(rows - 1), run, &Keep::default());
                    }
                }
            }
        }
        acc.fsum.iter().sum::<f64>()
    };
    // The full mean through the engine: its physical plan, planned once and executed
    // each repetition (execution alone, to set beside the kernel's).
    let ctx = session_over(tet)?;
    let plan = ctx.sql("SELECT avg(v) FROM t").await?.create_physical_plan().await?;
    let ahead = floor_loop_ahead();
    let modes = ["kernel_threads", "kernel_tokio", "engine_exec", "floor_loop_tokio"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut sums = [f64::NAN; 4];
    let runs = |mode: &str| chosen("TET_KERNEL_MODES", mode) && (mode != "floor_loop_tokio" || ahead.is_some());
    // The modes alternate within each repetition, so that each sees the same spells of the
    // machine's memory speed; the first repetition warms up.
    for _ in 0..reps + 1 {
        for (m, mode) in modes.iter().enumerate() {
            if !runs(mode) {
                continue;
            }
            let start = Instant::now();
            sums[m] = match *mode {
                "kernel_threads" => std::thread::scope(|s| {
                    let handles: Vec<_> = parts.iter().map(|p| s.spawn(|| fold(&map, p))).collect();
                    handles.into_iter().map(|h| h.join().unwrap_or(f64::NAN)).sum::<f64>()
                }),
                "kernel_tokio" => on_workers(&map, &parts, fold).await,
                "engine_exec" => {
                    let out = datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx()).await?;
                    let mean = out.first().map(|b| b.column(0).clone());
                    let mean = mean
                        .as_ref()
                        .and_then(|c| c.as_any().downcast_ref::<arrow::array::Float64Array>());
                    mean.map_or(f64::NAN, |c| c.value(0))
                }
                // floor_loop_tokio
                _ => {
                    let ahead = ahead.unwrap_or_default();
                    on_workers(&map, &parts, move |map: &[u8], part: &[(usize, usize)]| {
                        part.iter()
                            .map(|&(a, b)| floor_loop(&datafusion_tet::format::elements::<f32>(&map[a..b]), ahead))
                            .sum()
                    })
                    .await
                }
            };
            times[m].push(start.elapsed().as_secs_f64());
        }
    }
    eprintln!("kernel sums (threads, tokio, engine mean, floor loop) {sums:?}");
    for (mode, mut t) in modes.iter().zip(times) {
        if !t.is_empty() {
            report(mode, "full_mean", t.split_off(1));
        }
    }
    Ok(())
}

/// Run `f` over each part of `map`'s spans in a task of its own on the tokio runtime's
/// workers (as DataFusion runs partitions); the sum of their results.
async fn on_workers<F>(map: &std::sync::Arc<memmap2::Mmap>, parts: &[Vec<(usize, usize)>], f: F) -> f64
where
    F: Fn(&[u8], &[(usize, usize)]) -> f64 + Copy + Send + 'static,
{
    let handles: Vec<_> = parts
        .iter()
        .map(|p| {
            let (map, p) = (map.clone(), p.clone());
            tokio::spawn(async move { f(&map, &p) })
        })
        .collect();
    let mut sum = 0.0;
    for h in handles {
        sum += h.await.unwrap_or(f64::NAN);
    }
    sum
}

/// The prefetch distance of [`floor_loop`] (`TET_FLOOR_LOOP_AHEAD`, default 8192 bytes as
/// in `benches/floor.c`), or `None` where the CPU lacks AVX2 (the loop is x86-64 AVX2).
fn floor_loop_ahead() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return Some(
            std::env::var("TET_FLOOR_LOOP_AHEAD")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(8192),
        );
    }
    None
}

/// The loop of `benches/floor.c` in Rust: the f64 sum of `v` in four 256-bit lanes of f64
/// fed by conversions from memory, a prefetch `ahead` bytes past each 64-byte block. Not a
/// floor (the floor is the native program): it runs `kernel`'s way (per chunk, on the tokio
/// workers) to tell how much of the kernel's gap to the floor is the kernel's code.
fn floor_loop(v: &[f32], ahead: usize) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        fn avx2(v: &[f32], ahead: usize) -> f64 {
            use std::arch::x86_64::*;
            let (blocks, rest) = v.as_chunks::<16>();
            let z = _mm256_setzero_pd();
            let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
            for b in blocks {
                let p = b.as_ptr();
                _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>().wrapping_add(ahead));
                // SAFETY: `b` holds 16 f32, the four unaligned loads read them.
                unsafe {
                    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(p)));
                    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(p.add(4))));
                    a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm_loadu_ps(p.add(8))));
                    a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm_loadu_ps(p.add(12))));
                }
            }
            let mut lanes = [0f64; 4];
            // SAFETY: `lanes` holds four f64.
            unsafe {
                _mm256_storeu_pd(
                    lanes.as_mut_ptr(),
                    _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)),
                )
            };
            lanes.iter().sum::<f64>() + rest.iter().map(|&x| x as f64).sum::<f64>()
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { avx2(v, ahead) };
        }
    }
    let _ = ahead;
    v.iter().map(|&x| x as f64).sum()
}

/// Write the f32 cube `raw` [t, lat, lon] as `.tet` at `out`.
fn write_tet(raw: &[u8], out: &str, t: u64, lat: u64, lon: u64, zstd: bool) -> datafusion::error::Result<()> {
    write_cubes(&[("temp", raw)], out, t, lat, lon, zstd)
}

/// Write f32 cubes [t, lat, lon] (name, raw bytes), in order, as datasets of one `.tet`
/// at `out`, with the `lat`/`lon` coordinate variables after them.
fn write_cubes(
    cubes: &[(&str, &[u8])],
    out: &str,
    t: u64,
    lat: u64,
    lon: u64,
    zstd: bool,
) -> datafusion::error::Result<()> {
    let lats: Vec<u8> = (0..lat)
        .flat_map(|i| (-90.0f32 + 180.0 * i as f32 / (lat - 1) as f32).to_le_bytes())
        .collect();
    let lons: Vec<u8> = (0..lon)
        .flat_map(|j| (360.0f32 * j as f32 / lon as f32).to_le_bytes())
        .collect();
    let mut w = TetWriter::new();
    for &(name, raw) in cubes {
        w.dataset(
            DatasetSpec::new(name, DType::F32, &[t, lat, lon], &[1, lat, lon], raw)
                .dim_names(&["time", "lat", "lon"])
                .codecs(if zstd { ChunkCodecs::Zstd(3) } else { ChunkCodecs::Raw }),
        )
        .map_err(to_df)?;
    }
    w.dataset(DatasetSpec::new("lat", DType::F32, &[lat], &[lat], &lats).dim_names(&["lat"]))
        .map_err(to_df)?;
    w.dataset(DatasetSpec::new("lon", DType::F32, &[lon], &[lon], &lons).dim_names(&["lon"]))
        .map_err(to_df)?;
    w.write_path(out).map_err(to_df)
}

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("write-tet") => {
            let raw = std::fs::read(&args[2])?;
            let dims: Vec<u64> = args[4..7].iter().map(|s| s.parse().expect("extent")).collect();
            let zstd = args.get(7).is_some_and(|c| c == "zstd");
            write_tet(&raw, &args[3], dims[0], dims[1], dims[2], zstd)?;
        }
        Some("write-tet2") => {
            let (a, b) = (std::fs::read(&args[2])?, std::fs::read(&args[3])?);
            let dims: Vec<u64> = args[5..8].iter().map(|s| s.parse().expect("extent")).collect();
            write_cubes(&[("a", &a), ("b", &b)], &args[4], dims[0], dims[1], dims[2], false)?;
        }
        Some("run") => run(&args[2], Some(&args[3]), args[4].parse::<usize>().expect("reps")).await?,
        Some("kernel") => kernel(&args[2], args[3].parse::<usize>().expect("reps")).await?,
        Some("plans") => plans(&args[2], args[3].parse::<usize>().expect("reps")).await?,
        Some("phases") => phases(&args[2], args[3].parse::<usize>().expect("reps")).await?,
        Some("run-multi") => run_multi(&args[2], args[3].parse::<usize>().expect("reps")).await?,
        None | Some("--bench") => {
            // `cargo bench`: a self-contained pass over a smaller cube, our engine only.
            let t: u64 = std::env::var("TET_BENCH_TIME")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(64);
            let (lat, lon) = (361u64, 720u64);
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target")
                .join("bench");
            std::fs::create_dir_all(&dir)?;
            let out = dir.join(format!("cube-{t}.tet"));
            let out = out.to_string_lossy().into_owned();
            if !std::path::Path::new(&out).exists() {
                let raw: Vec<u8> = (0..t * lat * lon)
                    .flat_map(|k| (((k * 2654435761) % 4001) as f32 / 100.0 - 10.0).to_le_bytes())
                    .collect();
                write_tet(&raw, &out, t, lat, lon, false)?;
            }
            eprintln!("cube {out}: f32 [{t}, {lat}, {lon}]");
            run(&out, None, 5).await?;
        }
        _ => eprintln!(
            "usage: driver [write-tet RAW OUT T LAT LON [zstd] | write-tet2 RAW_A RAW_B OUT T LAT LON | \
             run TET PARQUET REPS | phases TET REPS | plans TET REPS | kernel TET REPS | \
             run-multi TET REPS]"
        ),
    }
    Ok(())
}

/// Whether `name` is in the comma-separated list in environment variable `var` (all
/// names when it is unset).
fn chosen(var: &str, name: &str) -> bool {
    std::env::var(var).map_or(true, |list| list.split(',').any(|x| x.trim() == name))
}

/// Time the queries over `tet` (and `parquet`, when given) `reps` times each.
async fn run(tet: &str, parquet: Option<&str>, reps: usize) -> datafusion::error::Result<()> {
    println!(
        "{{\"kernels\":\"{}\",\"detected\":\"{}\"}}",
        datafusion_tet::exec::kernel::simd::current().name(),
        datafusion_tet::exec::kernel::simd::detected().name()
    );
    let file_bytes = std::fs::read(tet)?;
    let file = TetFile::open(file_bytes.as_slice()).map_err(to_df)?;
    let ds = file.dataset("temp").map_err(to_df)?;
    let slice = (ds.shape()[0] / 10).max(1);
    let entries: Vec<_> = ds.chunk_rows.iter().map(|&r| &file.chunks[r as usize]).collect();
    if entries.iter().any(|e| e.codec != Codec::Raw) {
        // zstd chunks: the native floor decompresses and sums them (benches/floor_zstd.c).
        let raw: u64 = entries.iter().map(|e| e.raw_byte_len).sum();
        let stored: u64 = entries.iter().map(|e| e.stored_byte_len).sum();
        println!(r#"{{"raw_bytes":{raw},"stored_bytes":{stored}}}"#);
        if let Ok(bin) = std::env::var("TET_FLOOR_ZSTD_BIN") {
            let list = std::env::temp_dir().join(format!("tet-bench-chunks-{}.txt", std::process::id()));
            let lines: Vec<String> = entries
                .iter()
                .map(|e| format!("{} {} {}", e.payload_offset, e.stored_byte_len, e.raw_byte_len))
                .collect();
            std::fs::write(&list, lines.join("\n"))?;
            let out = std::process::Command::new(bin)
                .args([tet, &list.display().to_string(), &reps.to_string()])
                .output()?;
            std::fs::remove_file(&list)?;
            let line = String::from_utf8_lossy(&out.stdout);
            eprintln!("native zstd floor {line}{}", String::from_utf8_lossy(&out.stderr));
            report("floor_native_zstd", "full_mean", vec![json_number(&line, "median_s")]);
        }
        return time_queries(tet, parquet, reps, slice, None).await;
    }
    // Floor: one pass summing every f32 of the dataset's payload (warm, in memory),
    // split over all cores as our partitions are.
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mut times = Vec::new();
    let mut check = 0.0;
    for _ in 0..reps {
        let start = Instant::now();
        let parts: Vec<&[u32]> = ds.chunk_rows.chunks(ds.chunk_rows.len().div_ceil(threads)).collect();
        check = std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .iter()
                .map(|rows| {
                    let (file, file_bytes) = (&file, &file_bytes);
                    s.spawn(move || {
                        let mut lanes = [0f64; 8];
                        for &r in rows.iter() {
                            let e = &file.chunks[r as usize];
                            let bytes =
                                &file_bytes[e.payload_offset as usize..(e.payload_offset + e.stored_byte_len) as usize];
                            let vals = datafusion_tet::format::elements::<f32>(bytes);
                            for c in vals.chunks_exact(8) {
                                for i in 0..8 {
                                    lanes[i] += c[i] as f64;
                                }
                            }
                        }
                        lanes.iter().sum::<f64>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(f64::NAN)).sum::<f64>()
        });
        times.push(start.elapsed().as_secs_f64());
    }
    eprintln!("floor sum {check}");
    report("floor_sum_f32", "full_mean", times);
    // The native floor: benches/floor.c built for this machine (TET_FLOOR_BIN), over the
    // payload bytes, which this cube stores contiguously.
    if let Ok(bin) = std::env::var("TET_FLOOR_BIN") {
        report(
            "floor_native_c",
            "full_mean",
            vec![native_floor(&bin, tet, &entries, reps)?],
        );
    }
    let paired = match std::env::var("TET_FLOOR_BIN") {
        Ok(bin) => Some(PairedFloor::start(&bin, tet, payload_span(&entries))?),
        Err(_) => None,
    };
    time_queries(tet, parquet, reps, slice, paired).await
}

/// Queries over two variables `a`, `b` of one file: `{m}` is the table of both, `{x}`
/// and `{y}` the one-dataset tables of each, `{SLICE}` the first eighth of the time steps.
const MULTI_QUERIES: &[(&str, &str)] = &[
    ("diff_by_lat", "SELECT lat, avg(a - b) FROM {m} GROUP BY lat"),
    (
        "weighted_product",
        "SELECT sum(a * b * cos(radians(lat))) / sum(cos(radians(lat))) FROM {m}",
    ),
    ("corr", "SELECT corr(a, b) FROM {m}"),
    (
        "filtered_by_lat",
        "SELECT lat, avg(a) FROM {m} WHERE b > 290 GROUP BY lat",
    ),
    (
        "join_diff_by_lat",
        "SELECT x.lat, avg(x.v - y.v) FROM {x} x JOIN {y} y \
         ON x.time = y.time AND x.lat = y.lat AND x.lon = y.lon GROUP BY x.lat",
    ),
    (
        "diff_by_lat_sliced",
        "SELECT lat, avg(a - b) FROM {m} WHERE time < {SLICE} GROUP BY lat",
    ),
    (
        "join_diff_by_lat_sliced",
        "SELECT x.lat, avg(x.v - y.v) FROM {x} x JOIN {y} y \
         ON x.time = y.time AND x.lat = y.lat AND x.lon = y.lon WHERE x.time < {SLICE} GROUP BY x.lat",
    ),
];

/// Time [`MULTI_QUERIES`] over datasets `a` and `b` of `tet` (see the module doc).
async fn run_multi(tet: &str, reps: usize) -> datafusion::error::Result<()> {
    let file_bytes = std::fs::read(tet)?;
    let file = TetFile::open(file_bytes.as_slice()).map_err(to_df)?;
    let mut entries = Vec::new();
    for name in ["a", "b"] {
        let ds = file.dataset(name).map_err(to_df)?;
        entries.extend(ds.chunk_rows.iter().map(|&r| &file.chunks[r as usize]));
    }
    let slice = (file.dataset("a").map_err(to_df)?.shape()[0] / 8).max(1);
    if let Ok(bin) = std::env::var("TET_FLOOR_BIN") {
        report(
            "floor_native_c",
            "both_payloads",
            vec![native_floor(&bin, tet, &entries, reps)?],
        );
    }
    let m = format!("tet('{tet}', 'a', 'b')");
    let (x, y) = (format!("tet('{tet}', 'a')"), format!("tet('{tet}', 'b')"));
    for (engine, setting) in [
        ("ours_rust_api", None),
        ("datafusion_over_our_scan", Some("tet.aggregate_pushdown")),
        ("datafusion_hash_join", Some("tet.join_rewrite")),
    ] {
        if !chosen("TET_BENCH_ENGINES", engine) {
            continue;
        }
        let ctx = SessionContext::new();
        datafusion_tet::register(&ctx);
        if let Some(s) = setting {
            ctx.sql(&format!("SET {s} = false")).await?.collect().await?;
        }
        for (name, sql) in MULTI_QUERIES
            .iter()
            .filter(|(name, _)| chosen("TET_BENCH_QUERIES", name))
        {
            // DataFusion's hash join of every cell: only on the time slice (the whole
            // cube's join is minutes and gigabytes); the pushdown-off aggregate only of
            // the table of both datasets.
            let join = name.starts_with("join");
            match engine {
                "datafusion_hash_join" if !(join && name.ends_with("sliced")) => continue,
                "datafusion_over_our_scan" if join => continue,
                _ => {}
            }
            let sql = sql
                .replace("{m}", &m)
                .replace("{x}", &x)
                .replace("{y}", &y)
                .replace("{SLICE}", &slice.to_string());
            let reps = if engine == "datafusion_hash_join" {
                reps.min(3)
            } else {
                reps
            };
            time_sql(&ctx, engine, name, &sql, reps, None, None).await?;
        }
    }
    Ok(())
}

/// The bytes `[start, start + len)` of `tet` that hold the payloads of `entries`, which
/// must be raw and stored one after another (the floor sums them in one pass).
fn payload_span(entries: &[&datafusion_tet::format::ChunkEntry]) -> (u64, u64) {
    let start = entries.iter().map(|e| e.payload_offset).min().unwrap_or(0);
    let end = entries
        .iter()
        .map(|e| e.payload_offset + e.stored_byte_len)
        .max()
        .unwrap_or(0);
    let stored: u64 = entries.iter().map(|e| e.stored_byte_len).sum();
    assert_eq!(stored, end - start, "the floor needs contiguous raw payloads");
    (start, stored)
}

/// The median seconds of the native floor `bin` (benches/floor.c) summing the payloads of
/// `entries` ([`payload_span`]) `reps` times.
fn native_floor(
    bin: &str,
    tet: &str,
    entries: &[&datafusion_tet::format::ChunkEntry],
    reps: usize,
) -> datafusion::error::Result<f64> {
    let (start, stored) = payload_span(entries);
    let out = std::process::Command::new(bin)
        .args([tet, &start.to_string(), &stored.to_string(), &reps.to_string()])
        .output()?;
    let line = String::from_utf8_lossy(&out.stdout);
    eprintln!("native floor over {stored} bytes {line}");
    Ok(json_number(&line, "median_s"))
}

/// A child process driven line by line: lines written to its stdin, read from its
/// stdout. Dropping it closes its stdin, which ends its loop, and waits for it.
struct PipedChild {
    name: &'static str,
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl PipedChild {
    fn spawn(name: &'static str, mut command: std::process::Command) -> std::io::Result<Self> {
        use std::process::Stdio;
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other(format!("{name}: no stdout")))?;
        Ok(PipedChild {
            name,
            child,
            out: std::io::BufReader::new(stdout),
        })
    }

    /// Write `text` and a newline to the child's stdin.
    fn send(&mut self, text: &str) -> std::io::Result<()> {
        use std::io::Write;
        let stdin = self
            .child
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other(format!("{}: no stdin", self.name)))?;
        writeln!(stdin, "{text}")?;
        stdin.flush()
    }

    /// The next line of the child's stdout (empty once it has ended).
    fn line(&mut self) -> std::io::Result<String> {
        use std::io::BufRead;
        let mut line = String::new();
        self.out.read_line(&mut line)?;
        Ok(line)
    }
}

impl Drop for PipedChild {
    fn drop(&mut self) {
        drop(self.child.stdin.take()); // EOF ends the child's loop
        let _ = self.child.wait();
    }
}

/// The native floor in its paired mode (benches/floor.c with 0 repetitions): one process
/// with the payload mapped and its pages touched, making one pass per [`PairedFloor::pass`],
/// so that each of our timed queries has a floor measured just before it.
struct PairedFloor(PipedChild);

impl PairedFloor {
    fn start(bin: &str, tet: &str, span: (u64, u64)) -> std::io::Result<Self> {
        let mut command = std::process::Command::new(bin);
        command
            .args([tet, &span.0.to_string(), &span.1.to_string(), "0"])
            // Idle OpenMP threads sleep instead of spinning: they would take the cores
            // from the query timed after each pass.
            .env("OMP_WAIT_POLICY", "PASSIVE");
        let mut floor = PipedChild::spawn("floor", command)?;
        let line = floor.line()?;
        if line.trim() != "ready" {
            return Err(std::io::Error::other(format!("floor: {line}")));
        }
        Ok(PairedFloor(floor))
    }

    /// One pass of the floor: its seconds.
    fn pass(&mut self) -> std::io::Result<f64> {
        self.0.send("pass")?;
        Ok(json_number(&self.0.line()?, "s"))
    }
}

/// The number after `"key": ` in a floor program's JSON line (NaN when absent).
fn json_number(line: &str, key: &str) -> f64 {
    line.split(&format!("\"{key}\": "))
        .nth(1)
        .and_then(|r| r.split([',', '}']).next())
        .and_then(|x| x.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

/// A session with DataFusion's defaults, or `TET_BENCH_PARTITIONS` target partitions.
fn session() -> SessionContext {
    match std::env::var("TET_BENCH_PARTITIONS").ok().and_then(|v| v.parse().ok()) {
        Some(n) => SessionContext::new_with_config(SessionConfig::new().with_target_partitions(n)),
        None => SessionContext::new(),
    }
}

/// Time the benchmark queries through each engine (`TET_BENCH_ENGINES`).
/// `floor`: the native floor paired with each run of our Rust API (see [`time_sql`]).
async fn time_queries(
    tet: &str,
    parquet: Option<&str>,
    reps: usize,
    slice: u64,
    mut floor: Option<PairedFloor>,
) -> datafusion::error::Result<()> {
    for (engine, pushdown, table) in [
        ("ours_rust_api", true, "tet"),
        ("datafusion_over_our_scan", false, "tet"),
        ("datafusion_parquet", false, "parquet"),
    ] {
        if (table == "parquet" && parquet.is_none()) || !chosen("TET_BENCH_ENGINES", engine) {
            continue;
        }
        let ctx = session();
        datafusion_tet::register(&ctx);
        if !pushdown {
            ctx.sql("SET tet.aggregate_pushdown = false").await?.collect().await?;
        }
        if table == "tet" {
            // `empty`: the table of the planning bound (see `time_sql`).
            register_t_and_empty(&ctx, tet)?;
        } else {
            ctx.register_parquet("t", parquet.unwrap_or_default(), ParquetReadOptions::default())
                .await?;
        }
        for (name, sql) in QUERIES.iter().filter(|(name, _)| chosen("TET_BENCH_QUERIES", name)) {
            let sql = sql.replace("{SLICE}", &slice.to_string());
            let paired = floor.as_mut().filter(|_| engine == "ours_rust_api");
            let bound = over_empty(&sql);
            let bound =
                Some(bound.as_str()).filter(|_| paired.is_some() && chosen("TET_BENCH_ENGINES", "planning_bound"));
            time_sql(&ctx, engine, name, &sql, reps, paired, bound).await?;
        }
    }
    if let (Ok(bin), Some(floor)) = (std::env::var("TET_SQL_BIN"), floor.as_mut())
        && chosen("TET_BENCH_ENGINES", "ours_tet_sql")
    {
        let mut shell = TetSqlSession::start(&bin, tet)?;
        for (name, sql) in QUERIES.iter().filter(|(name, _)| chosen("TET_BENCH_QUERIES", name)) {
            let sql = sql.replace("{SLICE}", &slice.to_string());
            shell.query(&sql)?; // warm-up
            let (mut times, mut floors) = (Vec::new(), Vec::new());
            for _ in 0..reps {
                floors.push(floor.pass()?);
                times.push(shell.query(&sql)?);
            }
            let ratios = times.iter().zip(&floors).map(|(t, f)| t / f).collect();
            report("floor_native_c_paired_tet_sql", name, floors);
            report("ours_tet_sql_per_paired_floor", name, ratios);
            report("ours_tet_sql_paired", name, times);
        }
    }
    Ok(())
}

/// A `tet-sql` REPL (`TET_SQL_BIN`) reading queries from a pipe, with the benchmark file
/// as table `t`: each query's time is the shell's own `Elapsed` line (millisecond steps).
struct TetSqlSession(PipedChild);

impl TetSqlSession {
    fn start(bin: &str, tet: &str) -> std::io::Result<Self> {
        let mut command = std::process::Command::new(bin);
        command.args(["--format", "csv"]);
        let mut shell = TetSqlSession(PipedChild::spawn("tet-sql", command)?);
        shell.query(&format!(
            "CREATE EXTERNAL TABLE t STORED AS TET LOCATION '{tet}' OPTIONS ('tet.dataset' 'temp')"
        ))?;
        Ok(shell)
    }

    /// Run `sql`: the seconds of its `Elapsed` line. A failed query prints no such line
    /// (its error goes to stderr), so a `SELECT 'end of query'` after each one ends the
    /// wait either way, and a query whose own line is missing is an error.
    fn query(&mut self, sql: &str) -> std::io::Result<f64> {
        self.0.send(&format!("{sql};\nSELECT 'end of query';"))?;
        let (mut elapsed, mut marker) = (Vec::new(), false);
        loop {
            let line = self.0.line()?;
            if line.is_empty() {
                return Err(std::io::Error::other(format!("tet-sql ended during {sql}")));
            }
            if let Some(rest) = line.strip_prefix("Elapsed ") {
                if marker {
                    break; // the marker's own
                }
                elapsed.push(rest.split(' ').next().and_then(|x| x.parse::<f64>().ok()));
            }
            marker |= line.trim() == "end of query";
        }
        match elapsed.as_slice() {
            [Some(s)] => Ok(*s),
            _ => Err(std::io::Error::other(format!("tet-sql: no Elapsed line for {sql}"))),
        }
    }
}
