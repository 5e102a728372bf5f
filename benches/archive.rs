//! Benchmark of archive tables (issue 57): one table over many `.tet` files concatenated
//! along time, against the same cube as one file. Not a test; `benches/run.py --archive`
//! drives it and writes the section `## Archives (issue 57)` of benches/RESULTS.md.
//! Every subcommand prints JSON lines (`{"engine", "query", "median_s", "runs", ...}` as
//! benches/driver.rs does, and a few lines of other keys); notes go to stderr.
//!
//! `archive write RAW_F32 DIR T LAT LON FILES`: the f32 cube [T, LAT, LON] (raw
//!   little-endian, as `run.py` makes it) as `DIR/one.tet` and split along time into
//!   `DIR/split{FILES}/part-NN.tet` (T / FILES steps each). Each file as driver.rs's
//!   `write-tet` writes it (dataset `temp`, one raw chunk per time step, `lat`/`lon` CF
//!   coordinate variables) plus a CF `time` coordinate variable (int32 hours,
//!   `units = "hours since <the file's own first step>"`, hourly from 2024-01-01), so that
//!   the one file and the split files decode to the same timestamps.
//! `archive write-mixed RAW_F32 DIR T LAT LON FILES`: the split files alone, as
//!   `DIR/mixed{FILES}/part-NN.tet`, every other one declaring `_FillValue = -1e30` (which
//!   no value is): the same values in two storage classes, folded one class at a time.
//! `archive write-small DIR N`: `N` small files `DIR/f-NNNN.tet` of one archive (dataset
//!   `temp` [24, 8, 16] f32 in one chunk, a day each, their own `hours since`), for the
//!   cost of opening and planning many files.
//! `archive pair ONE.tet PATTERN REPS`: [`QUERIES`] over the one file and over the archive
//!   `PATTERN`, both registered through `TetTableProvider::open` in one session. Each run of
//!   either follows one pass of the native floor (`TET_FLOOR_BIN`, benches/floor.c over the
//!   one file's payload, the bytes both tables read), as driver.rs's `run` pairs; the two
//!   tables alternate which goes first. Reports each table's median, its median ratio to
//!   its paired floor pass, and the median over runs of (archive / its floor) / (one file /
//!   its floor), with the quartiles of that ratio. The answers of the two tables are
//!   compared first (relative 1e-9): a difference is an error. After each query's runs,
//!   its planning alone (`ctx.sql` + `create_physical_plan`) on both tables, as many times.
//!   Then the time slice's `EXPLAIN ANALYZE` lines of our operators and the `bytes_read` /
//!   `chunks_read` metrics of both tables.
//! `archive open PATTERN ONE_SMALL REPS`: opening and planning a table of many small local
//!   files: per repetition a fresh session runs `SELECT avg(v)` over `tet(PATTERN, 'temp')`
//!   twice (the first query opens every file; the second finds them in the session's
//!   cache), each split into planning (`ctx.sql` + `create_physical_plan`) and execution;
//!   likewise through `TetTableProvider::open` (open, then the query planned and run, then a
//!   second query); and the same SQL over one small file alone (`ONE_SMALL`) as the
//!   per-query baseline; with the minor page faults taken by the executions (`getrusage`).
//!   (`run.py` also runs it over the 16 large files against the one file.)
//! `archive s3 ENDPOINT SMALL_DIR N REPS`: the same over `N` of those files uploaded to a
//!   bucket of an S3 server at `ENDPOINT` (moto on loopback; the bucket `archive` is made
//!   here), through a store registered in each session for `s3://archive`.
//! `archive cold ONE.tet DIR REPS`: the full mean over the archive `DIR/*.tet` with its
//!   files' pages dropped from the page cache (`posix_fadvise(POSIX_FADV_DONTNEED)` on each
//!   file, after `fdatasync`) in a fresh session, against a sequential `read` of the same
//!   files (pages dropped too; 1 MiB reads) in the same repetition, the same archive opened
//!   through `TetTableProvider::open` (`archive_open`), and the one file's full mean cold
//!   beside them; the four alternate their order. The queries' planning part (which lists
//!   and opens the files) is reported on its own (`_cold_plan`). Each is then run again
//!   with the pages it brought in (`_warm`: for the queries a fresh session again). Each
//!   measurement prints the share of the files' pages still resident after the drop
//!   (`mincore`), which should be about 0.
//! `archive query LOCATION`: `SELECT avg(v)` over `tet(LOCATION, 'temp')` once in a fresh
//!   session, its time and page faults (`run.py` uses it to bring dropped pages back
//!   through the engine's maps).

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use datafusion_tet::TetTableProvider;
use datafusion_tet::format::{ChunkCodecs, DType, DatasetSpec, TetFile, TetWriter};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

// The allocator of datafusion-cli and of benches/driver.rs.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The dataset every file holds.
const DATASET: &str = "temp";

/// Days from 1970-01-01 to 2024-01-01, the first step of every cube here.
const EPOCH_2024: i64 = 19_723;

/// The queries of [`pair`]: `{t}` the table, `{A}`/`{B}` the ends of the time slice.
const QUERIES: &[(&str, &str)] = &[
    ("full_mean", "SELECT avg(v) FROM {t}"),
    ("by_lat", "SELECT lat, avg(v) FROM {t} GROUP BY lat"),
    ("by_time", "SELECT time, avg(v) FROM {t} GROUP BY time"),
    (
        "hour_of_day",
        "SELECT date_part('hour', time) AS h, avg(v) FROM {t} GROUP BY date_part('hour', time)",
    ),
    (
        "time_slice",
        "SELECT lat, avg(v) FROM {t} WHERE time >= TIMESTAMP '{A}' AND time < TIMESTAMP '{B}' GROUP BY lat",
    ),
];

fn err(msg: impl Into<String>) -> DataFusionError {
    DataFusionError::Execution(msg.into())
}

fn to_df(e: datafusion_tet::format::FormatError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

fn median(v: &[f64]) -> f64 {
    quantile(v, 0.5)
}

/// The `q` quantile of `v` (the value at rank `q * (n - 1)`, rounded; NaN when empty).
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n => v[((n - 1) as f64 * q).round() as usize],
    }
}

/// One JSON line: `extra`'s keys with `engine`, `query`, the median of `times`, their
/// count and every one of them (`all`; `median_s` and `all` are ratios for the engines
/// named `_per_`).
fn report(engine: &str, query: &str, times: &[f64], extra: Value) {
    let mut line = json!({
        "engine": engine,
        "query": query,
        "median_s": median(times),
        "runs": times.len(),
        "all": times,
    });
    if let (Some(l), Value::Object(e)) = (line.as_object_mut(), extra) {
        l.extend(e);
    }
    println!("{line}");
}

/// A session with DataFusion's defaults and the crate registered.
fn session() -> SessionContext {
    let ctx = SessionContext::new();
    datafusion_tet::register(&ctx);
    ctx
}

/// `(year, month, day)` of `days` after 1970-01-01 (proleptic Gregorian).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// 2024-01-01T00:00:00 plus `hours`, as `YYYY-MM-DDTHH:00:00`.
fn instant(hours: u64) -> String {
    let (y, m, d) = civil(EPOCH_2024 + (hours / 24) as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}:00:00", hours % 24)
}

/// Write the f32 cube `raw` [n, lat, lon] as `out`: dataset `temp` (one raw chunk of
/// `chunk_t` steps), then `time` (int32 hours since the file's first step, `t0` hours
/// after 2024-01-01), `lat` and `lon` (the values driver.rs writes).
/// With `fill`, `temp` declares that `_FillValue` (one none of the cube's values has: the
/// same values, stored by another rule).
#[allow(clippy::too_many_arguments)]
fn write_cube(
    out: &Path,
    raw: &[u8],
    t0: u64,
    n: u64,
    lat: u64,
    lon: u64,
    chunk_t: u64,
    fill: Option<&str>,
) -> Result<()> {
    let lats: Vec<u8> = (0..lat)
        .flat_map(|i| (-90.0f32 + 180.0 * i as f32 / (lat.max(2) - 1) as f32).to_le_bytes())
        .collect();
    let lons: Vec<u8> = (0..lon)
        .flat_map(|j| (360.0f32 * j as f32 / lon as f32).to_le_bytes())
        .collect();
    let hours: Vec<u8> = (0..n as i32).flat_map(|i| i.to_le_bytes()).collect();
    let units = format!("hours since {}", instant(t0));
    let mut w = TetWriter::new();
    let mut temp = DatasetSpec::new(DATASET, DType::F32, &[n, lat, lon], &[chunk_t, lat, lon], raw)
        .dim_names(&["time", "lat", "lon"])
        .codecs(ChunkCodecs::Raw);
    if let Some(f) = fill {
        temp = temp.attr("_FillValue", f);
    }
    w.dataset(temp).map_err(to_df)?;
    w.dataset(
        DatasetSpec::new("time", DType::I32, &[n], &[n], &hours)
            .dim_names(&["time"])
            .attr("units", &units)
            .attr("standard_name", "time"),
    )
    .map_err(to_df)?;
    w.dataset(DatasetSpec::new("lat", DType::F32, &[lat], &[lat], &lats).dim_names(&["lat"]))
        .map_err(to_df)?;
    w.dataset(DatasetSpec::new("lon", DType::F32, &[lon], &[lon], &lons).dim_names(&["lon"]))
        .map_err(to_df)?;
    w.write_path(out).map_err(to_df)
}

/// `archive write` and, `mixed`, `archive write-mixed` (see the module doc).
fn write(raw: &str, dir: &str, t: u64, lat: u64, lon: u64, files: u64, mixed: bool) -> Result<()> {
    let raw = std::fs::read(raw)?;
    let plane = (lat * lon * 4) as usize;
    if raw.len() != t as usize * plane || files == 0 || !t.is_multiple_of(files) {
        return Err(err(format!(
            "{} bytes for [{t}, {lat}, {lon}] f32 in {files} files",
            raw.len()
        )));
    }
    let dir = Path::new(dir);
    let split = dir.join(format!("{}{files}", if mixed { "mixed" } else { "split" }));
    std::fs::create_dir_all(&split)?;
    if !mixed {
        write_cube(&dir.join("one.tet"), &raw, 0, t, lat, lon, 1, None)?;
    }
    let per = t / files;
    for k in 0..files {
        let (a, b) = ((k * per) as usize * plane, ((k + 1) * per) as usize * plane);
        // Mixed: every other file declares a fill value its values never take.
        let fill = (mixed && k % 2 == 1).then_some("-1e30");
        write_cube(
            &split.join(format!("part-{k:02}.tet")),
            &raw[a..b],
            k * per,
            per,
            lat,
            lon,
            1,
            fill,
        )?;
    }
    match mixed {
        true => eprintln!("wrote {files} files in {}", split.display()),
        false => eprintln!(
            "wrote {} and {files} files in {}",
            dir.join("one.tet").display(),
            split.display()
        ),
    }
    Ok(())
}

/// `archive write-small` (see the module doc).
fn write_small(dir: &str, n: u64) -> Result<()> {
    let (steps, lat, lon) = (24u64, 8u64, 16u64);
    let dir = Path::new(dir);
    std::fs::create_dir_all(dir)?;
    for k in 0..n {
        let raw: Vec<u8> = (0..steps * lat * lon)
            .flat_map(|c| (280.0f32 + ((c * 7 + k * 13) % 41) as f32 / 4.0).to_le_bytes())
            .collect();
        write_cube(
            &dir.join(format!("f-{k:04}.tet")),
            &raw,
            k * steps,
            steps,
            lat,
            lon,
            steps,
            None,
        )?;
    }
    eprintln!("wrote {n} files of [{steps}, {lat}, {lon}] f32 in {}", dir.display());
    Ok(())
}

/// The rows of `batches`, every column as f64 (timestamps as their integer value),
/// sorted: for comparing two tables' answers.
fn rows(batches: &[RecordBatch]) -> Result<Vec<Vec<f64>>> {
    let mut out: Vec<Vec<f64>> = Vec::new();
    for b in batches {
        let cols: Vec<ArrayRef> = b
            .columns()
            .iter()
            .map(|c| {
                let c = match c.data_type() {
                    DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => cast(c, &DataType::Int64)?,
                    _ => c.clone(),
                };
                Ok(cast(&c, &DataType::Float64)?)
            })
            .collect::<Result<_>>()?;
        let cols: Vec<&datafusion::arrow::array::Float64Array> = cols
            .iter()
            .map(|c| c.as_any().downcast_ref().ok_or_else(|| err("not f64")))
            .collect::<Result<_>>()?;
        for r in 0..b.num_rows() {
            out.push(
                cols.iter()
                    .map(|c| if c.is_null(r) { f64::NAN } else { c.value(r) })
                    .collect(),
            );
        }
    }
    out.sort_by(|a, b| {
        a.iter()
            .zip(b)
            .map(|(x, y)| x.total_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(out)
}

/// The largest relative difference between `a` and `b` (both from [`rows`]); infinite
/// when their shapes differ or a NaN stands against a number.
fn max_rel_diff(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let mut worst = 0.0f64;
    for (ra, rb) in a.iter().zip(b) {
        if ra.len() != rb.len() {
            return f64::INFINITY;
        }
        for (x, y) in ra.iter().zip(rb) {
            if x.is_nan() || y.is_nan() {
                if x.is_nan() != y.is_nan() {
                    return f64::INFINITY;
                }
                continue;
            }
            worst = worst.max((x - y).abs() / x.abs().max(y.abs()).max(1e-300));
        }
    }
    worst
}

/// Metric `name` summed over every TetScanExec and TetAggregateExec of `plan` (as
/// tests/it/common.rs's `tet_metric`).
fn tet_metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> Option<usize> {
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

/// The lines of `EXPLAIN [ANALYZE] sql` that name our operators.
async fn explain_lines(ctx: &SessionContext, sql: &str) -> Result<Vec<String>> {
    let batches = ctx.sql(sql).await?.collect().await?;
    let mut out = Vec::new();
    for b in &batches {
        let col = cast(b.column(b.num_columns() - 1), &DataType::Utf8)?;
        let col = col
            .as_any()
            .downcast_ref::<datafusion::arrow::array::StringArray>()
            .ok_or_else(|| err("EXPLAIN: not text"))?;
        for r in 0..col.len() {
            out.extend(
                col.value(r)
                    .lines()
                    .filter(|l| l.contains("TetAggregateExec") || l.contains("TetScanExec"))
                    .map(|l| l.trim().to_string()),
            );
        }
    }
    Ok(out)
}

/// `[start, start + len)`: the bytes of `tet` holding dataset `temp`'s payloads, which
/// this bench writes raw and one after another (the floor sums them in one pass).
fn payload_span(tet: &str) -> Result<(u64, u64)> {
    let bytes = std::fs::read(tet)?;
    let file = TetFile::open(bytes.as_slice()).map_err(to_df)?;
    let ds = file.dataset(DATASET).map_err(to_df)?;
    let entries: Vec<_> = ds.chunk_rows.iter().map(|&r| &file.chunks[r as usize]).collect();
    let start = entries.iter().map(|e| e.payload_offset).min().unwrap_or(0);
    let end = entries
        .iter()
        .map(|e| e.payload_offset + e.stored_byte_len)
        .max()
        .unwrap_or(0);
    let stored: u64 = entries.iter().map(|e| e.stored_byte_len).sum();
    if stored != end - start {
        return Err(err("the floor needs contiguous raw payloads"));
    }
    Ok((start, stored))
}

/// The native floor in its paired mode (benches/floor.c with 0 repetitions), as in
/// benches/driver.rs: one process with the payload mapped, one pass per [`Floor::pass`].
struct Floor {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Floor {
    fn start(bin: &str, tet: &str) -> Result<Self> {
        use std::io::BufRead;
        use std::process::Stdio;
        let (start, len) = payload_span(tet)?;
        let mut child = std::process::Command::new(bin)
            .args([tet, &start.to_string(), &len.to_string(), "0"])
            // Idle OpenMP threads sleep instead of spinning (they would take the cores
            // from the query timed after each pass).
            .env("OMP_WAIT_POLICY", "PASSIVE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| err("floor: no stdout"))?;
        let mut floor = Floor {
            child,
            out: std::io::BufReader::new(stdout),
        };
        let mut line = String::new();
        floor.out.read_line(&mut line)?;
        if line.trim() != "ready" {
            return Err(err(format!("floor: {line}")));
        }
        eprintln!("paired floor over {len} bytes of {tet}");
        Ok(floor)
    }

    /// One pass of the floor: its seconds.
    fn pass(&mut self) -> Result<f64> {
        use std::io::{BufRead, Write};
        let stdin = self.child.stdin.as_mut().ok_or_else(|| err("floor: no stdin"))?;
        writeln!(stdin, "pass")?;
        stdin.flush()?;
        let mut line = String::new();
        self.out.read_line(&mut line)?;
        let v: Value = serde_json::from_str(&line).map_err(|e| err(format!("floor: {e}: {line}")))?;
        v["s"].as_f64().ok_or_else(|| err(format!("floor: {line}")))
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        drop(self.child.stdin.take()); // EOF ends its loop
        let _ = self.child.wait();
    }
}

/// The time slice of [`QUERIES`]: the steps of the file a third of the way along
/// (`per` steps per file), which lie in that file alone.
fn slice_ends(files: u64, per: u64) -> (String, String) {
    let k = files / 3;
    (instant(k * per), instant((k + 1) * per))
}

/// `archive pair` (see the module doc).
async fn pair(one: &str, pattern: &str, reps: usize) -> Result<()> {
    let ctx = session();
    let state = ctx.state();
    ctx.register_table(
        "one",
        Arc::new(TetTableProvider::open(&state, one, Some(DATASET)).await?),
    )?;
    ctx.register_table(
        "archive",
        Arc::new(TetTableProvider::open(&state, pattern, Some(DATASET)).await?),
    )?;
    // The archive's files and steps per file, from its own table.
    let count = |sql: String| {
        let ctx = ctx.clone();
        async move {
            let r = rows(&ctx.sql(&sql).await?.collect().await?)?;
            Ok::<_, DataFusionError>(r.first().and_then(|r| r.first()).copied().unwrap_or(f64::NAN) as u64)
        }
    };
    let steps = count("SELECT count(DISTINCT time) FROM one".into()).await?;
    let files = explain_lines(&ctx, "EXPLAIN SELECT avg(v) FROM archive")
        .await?
        .iter()
        .find_map(|l| l.split("files=").nth(1).and_then(|r| r.split('/').nth(1)))
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| err("EXPLAIN of the archive names no files=<read>/<total>"))?;
    let (a, b) = slice_ends(files, steps / files);
    println!("{}", json!({"files": files, "steps": steps, "slice": [a, b]}));
    let mut floor = match std::env::var("TET_FLOOR_BIN") {
        Ok(bin) => Some(Floor::start(&bin, one)?),
        Err(_) => None,
    };
    for (name, sql) in QUERIES {
        let sql = sql.replace("{A}", &a).replace("{B}", &b);
        let of = |t: &str| sql.replace("{t}", t);
        // The answers first: the archive must answer as the one file does.
        let want = rows(&ctx.sql(&of("one")).await?.collect().await?)?;
        let got = rows(&ctx.sql(&of("archive")).await?.collect().await?)?;
        let diff = max_rel_diff(&want, &got);
        println!("{}", json!({"check": name, "rows": want.len(), "max_rel_diff": diff}));
        if diff.is_nan() || diff > 1e-9 {
            return Err(err(format!(
                "{name}: the archive answers differently from the one file (max relative difference {diff}, {} vs {} rows): {}",
                got.len(),
                want.len(),
                of("archive")
            )));
        }
        for table in ["one", "archive"] {
            for line in explain_lines(&ctx, &format!("EXPLAIN {}", of(table))).await? {
                println!("{}", json!({"explain": name, "table": table, "line": line}));
            }
        }
        let (mut t1, mut t16, mut f1, mut f16) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for r in 0..reps {
            let order = if r % 2 == 0 {
                ["one", "archive"]
            } else {
                ["archive", "one"]
            };
            for table in order {
                let f = match floor.as_mut() {
                    Some(fl) => fl.pass()?,
                    None => f64::NAN,
                };
                let start = Instant::now();
                let out = ctx.sql(&of(table)).await?.collect().await?;
                let s = start.elapsed().as_secs_f64();
                std::hint::black_box(out);
                let (t, fl) = if table == "one" {
                    (&mut t1, &mut f1)
                } else {
                    (&mut t16, &mut f16)
                };
                t.push(s);
                fl.push(f);
            }
        }
        let per = |t: &[f64], f: &[f64]| t.iter().zip(f).map(|(t, f)| t / f).collect::<Vec<_>>();
        let (p1, p16) = (per(&t1, &f1), per(&t16, &f16));
        let raw: Vec<f64> = t16.iter().zip(&t1).map(|(a, b)| a / b).collect();
        let paired: Vec<f64> = p16.iter().zip(&p1).map(|(a, b)| a / b).collect();
        let spread = |v: &[f64]| json!({"p25": quantile(v, 0.25), "p75": quantile(v, 0.75), "min": quantile(v, 0.0), "max": quantile(v, 1.0)});
        report("one_file", name, &t1, json!({"spread": spread(&t1)}));
        report("archive", name, &t16, json!({"spread": spread(&t16), "files": files}));
        if floor.is_some() {
            report("floor_paired_one_file", name, &f1, json!({}));
            report("floor_paired_archive", name, &f16, json!({}));
            report("one_file_per_paired_floor", name, &p1, json!({}));
            report("archive_per_paired_floor", name, &p16, json!({}));
            report(
                "archive_per_one_file_paired",
                name,
                &paired,
                json!({"spread": spread(&paired)}),
            );
        }
        report("archive_per_one_file", name, &raw, json!({"spread": spread(&raw)}));
        // Planning alone (`ctx.sql` + `create_physical_plan`), back to back: the part of
        // each time that does not scale with the bytes read.
        let (mut q1, mut q16) = (Vec::new(), Vec::new());
        for r in 0..reps {
            for table in if r % 2 == 0 {
                ["one", "archive"]
            } else {
                ["archive", "one"]
            } {
                let start = Instant::now();
                std::hint::black_box(ctx.sql(&of(table)).await?.create_physical_plan().await?);
                let s = start.elapsed().as_secs_f64();
                if table == "one" { q1.push(s) } else { q16.push(s) }
            }
        }
        report("one_file_plan", name, &q1, json!({}));
        report("archive_plan", name, &q16, json!({}));
    }
    // The slice reads one file's payload: our operators' EXPLAIN ANALYZE lines and metrics.
    let slice = QUERIES
        .iter()
        .find(|(n, _)| *n == "time_slice")
        .map(|(_, s)| s.replace("{A}", &a).replace("{B}", &b))
        .unwrap_or_default();
    for table in ["one", "archive"] {
        let sql = slice.replace("{t}", table);
        for line in explain_lines(&ctx, &format!("EXPLAIN ANALYZE {sql}")).await? {
            println!(
                "{}",
                json!({"explain_analyze": "time_slice", "table": table, "line": line})
            );
        }
        let plan = ctx.sql(&sql).await?.create_physical_plan().await?;
        datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx()).await?;
        let m = |n: &str| tet_metric(&plan, n);
        println!(
            "{}",
            json!({"metrics": "time_slice", "table": table, "bytes_read": m("bytes_read"),
                   "chunks_read": m("chunks_read"), "chunks_total": m("chunks_total")})
        );
        // The full mean's, for scale.
        let plan = ctx
            .sql(&format!("SELECT avg(v) FROM {table}"))
            .await?
            .create_physical_plan()
            .await?;
        datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx()).await?;
        println!(
            "{}",
            json!({"metrics": "full_mean", "table": table, "bytes_read": tet_metric(&plan, "bytes_read"),
                   "chunks_read": tet_metric(&plan, "chunks_read")})
        );
    }
    Ok(())
}

/// Plan `sql` in `ctx` and run it: (planning seconds, execution seconds, the first
/// value of the answer).
async fn plan_and_run(ctx: &SessionContext, sql: &str) -> Result<(f64, f64, f64, f64)> {
    let t0 = Instant::now();
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    let t1 = Instant::now();
    let faults = minor_faults();
    let out = datafusion::physical_plan::collect(plan, ctx.task_ctx()).await?;
    let t2 = Instant::now();
    let faults = (minor_faults() - faults) as f64;
    let v = rows(&out)?.first().and_then(|r| r.first()).copied().unwrap_or(f64::NAN);
    Ok(((t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64(), v, faults))
}

/// The minor page faults of this process so far (`getrusage`): a fresh map of cached
/// pages costs one per page table entry filled (or per fault-around block).
fn minor_faults() -> i64 {
    // SAFETY: `getrusage` fills the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u.ru_minflt
    }
}

/// Time the first and the second query of fresh sessions over `location` (`setup` makes
/// each session: registers stores), through `tet(...)` and through
/// `TetTableProvider::open`, `reps` times after one warm-up; `label` prefixes the engines.
async fn open_and_plan<F>(label: &str, location: &str, reps: usize, setup: F) -> Result<()>
where
    F: Fn() -> SessionContext,
{
    let sql = format!("SELECT avg(v) FROM tet('{location}', '{DATASET}')");
    let mut first = [Vec::new(), Vec::new(), Vec::new()];
    let mut warm = [Vec::new(), Vec::new(), Vec::new()];
    let mut prov = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut answer = f64::NAN;
    let mut faults = [Vec::new(), Vec::new()];
    for r in 0..reps + 1 {
        // tet(...) in SQL: the first query lists and opens every file; the second lists
        // them again and finds each in the session's cache.
        let ctx = setup();
        let (p, e, v, f) = plan_and_run(&ctx, &sql).await?;
        let (p2, e2, _, f2) = plan_and_run(&ctx, &sql).await?;
        drop(ctx);
        // TetTableProvider::open: the table opened once, then two queries over it.
        let ctx = setup();
        let t0 = Instant::now();
        let table = TetTableProvider::open(&ctx.state(), location, Some(DATASET)).await?;
        ctx.register_table("t", Arc::new(table))?;
        let open = t0.elapsed().as_secs_f64();
        let (pp, pe, _, _) = plan_and_run(&ctx, "SELECT avg(v) FROM t").await?;
        let (pp2, pe2, _, _) = plan_and_run(&ctx, "SELECT avg(v) FROM t").await?;
        drop(ctx);
        answer = v;
        if r == 0 {
            continue; // warm-up
        }
        faults[0].push(f);
        faults[1].push(f2);
        for (slot, x) in first.iter_mut().zip([p, e, p + e]) {
            slot.push(x);
        }
        for (slot, x) in warm.iter_mut().zip([p2, e2, p2 + e2]) {
            slot.push(x);
        }
        for (slot, x) in prov.iter_mut().zip([open, open + pp, open + pp + pe, pp2 + pe2]) {
            slot.push(x);
        }
    }
    let q = "full_mean";
    let x = json!({"answer": answer});
    report(&format!("{label}_tet_first_plan"), q, &first[0], x.clone());
    report(&format!("{label}_tet_first_exec"), q, &first[1], x.clone());
    report(&format!("{label}_tet_first_total"), q, &first[2], x.clone());
    report(&format!("{label}_tet_warm_plan"), q, &warm[0], x.clone());
    report(&format!("{label}_tet_warm_exec"), q, &warm[1], x.clone());
    report(&format!("{label}_tet_warm_total"), q, &warm[2], x.clone());
    report(&format!("{label}_provider_open"), q, &prov[0], x.clone());
    report(&format!("{label}_provider_open_plan"), q, &prov[1], x.clone());
    report(&format!("{label}_provider_first_total"), q, &prov[2], x.clone());
    report(&format!("{label}_provider_warm_total"), q, &prov[3], x);
    println!(
        "{}",
        json!({"minor_faults": label, "first_exec": median(&faults[0]), "warm_exec": median(&faults[1])})
    );
    Ok(())
}

/// The row and time-step counts of `pattern`'s table, and EXPLAIN of its full mean:
/// what `open` and `s3` print before timing.
async fn rows_and_explain(ctx: &SessionContext, pattern: &str) -> Result<(Vec<Vec<f64>>, Vec<String>)> {
    let n = rows(
        &ctx.sql(&format!(
            "SELECT count(*), count(DISTINCT time) FROM tet('{pattern}', '{DATASET}')"
        ))
        .await?
        .collect()
        .await?,
    )?;
    let explain = explain_lines(
        ctx,
        &format!("EXPLAIN SELECT avg(v) FROM tet('{pattern}', '{DATASET}')"),
    )
    .await?;
    Ok((n, explain))
}

/// `archive open` (see the module doc).
async fn open(pattern: &str, one_small: &str, reps: usize) -> Result<()> {
    let ctx = session();
    let (n, files) = rows_and_explain(&ctx, pattern).await?;
    println!("{}", json!({"open": pattern, "count_rows_steps": n, "explain": files}));
    open_and_plan("local", pattern, reps, session).await?;
    open_and_plan("local_one_file", one_small, reps, session).await
}

/// Create `bucket` on the S3 server at `endpoint` (a plain `PUT /bucket`, as
/// tests/it/servers.rs does: object_store has no call for it).
fn create_bucket(endpoint: &str, bucket: &str) -> Result<()> {
    use std::io::{Read, Write};
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(host)?;
    write!(
        s,
        "PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    if !reply.starts_with("HTTP/1.1 200") {
        return Err(err(format!("creating bucket {bucket}: {reply}")));
    }
    Ok(())
}

/// `archive s3` (see the module doc).
async fn s3(endpoint: &str, small_dir: &str, n: usize, reps: usize) -> Result<()> {
    use object_store::{ObjectStore, ObjectStoreExt, PutPayload, aws::AmazonS3Builder, path::Path as ObjPath};
    let bucket = "archive";
    create_bucket(endpoint, bucket)?;
    let store: Arc<dyn ObjectStore> = Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .build()?,
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(small_dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tet"))
        .collect();
    files.sort();
    files.truncate(n);
    let t0 = Instant::now();
    for f in &files {
        let name = f
            .file_name()
            .map(|x| x.to_string_lossy().into_owned())
            .unwrap_or_default();
        store
            .put(
                &ObjPath::from(format!("small/{name}")),
                PutPayload::from(std::fs::read(f)?),
            )
            .await?;
    }
    eprintln!("uploaded {} files in {:.1} s", files.len(), t0.elapsed().as_secs_f64());
    let url = url::Url::parse(&format!("s3://{bucket}")).map_err(|e| err(e.to_string()))?;
    let setup = || {
        let ctx = session();
        ctx.register_object_store(&url, store.clone());
        ctx
    };
    let pattern = format!("s3://{bucket}/small/*.tet");
    let ctx = setup();
    let (n, explain) = rows_and_explain(&ctx, &pattern).await?;
    println!(
        "{}",
        json!({"s3": pattern, "objects": files.len(), "count_rows_steps": n, "explain": explain})
    );
    open_and_plan("s3", &pattern, reps, setup).await
}

/// Flush `path`'s dirty pages and drop its pages from the page cache.
fn drop_pages(path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path)?;
    f.sync_data()?;
    // SAFETY: a valid descriptor; the call only advises the kernel.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc).into());
    }
    Ok(())
}

/// The share of `paths`' pages in the page cache (`mincore` over a map of each, which
/// maps without reading).
fn resident(paths: &[PathBuf]) -> Result<f64> {
    let (mut pages, mut held) = (0usize, 0usize);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    for p in paths {
        let f = std::fs::File::open(p)?;
        if f.metadata()?.len() == 0 {
            continue;
        }
        // SAFETY: the map is only passed to mincore, never read.
        let map = unsafe { memmap2::Mmap::map(&f)? };
        let n = map.len().div_ceil(page);
        let mut vec = vec![0u8; n];
        // SAFETY: `vec` holds one byte per page of the map.
        let rc = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, map.len(), vec.as_mut_ptr()) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        pages += n;
        held += vec.iter().filter(|&&b| b & 1 == 1).count();
    }
    Ok(held as f64 / pages.max(1) as f64)
}

/// Read `paths` one after another with `read` into a 1 MiB buffer: the bytes read. (Cold,
/// on this benchmark's virtio disk with 8 MiB of readahead, reads of 128 KiB-1 MiB took
/// 0.23-0.24 s for the 16 files and reads of 8 MiB 0.34-0.37 s: `dd`, December 2026.)
fn read_all(paths: &[PathBuf]) -> Result<u64> {
    use std::io::Read;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    for p in paths {
        let mut f = std::fs::File::open(p)?;
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
            std::hint::black_box(&buf[..n]);
        }
    }
    Ok(total)
}

/// `archive cold` (see the module doc).
async fn cold(one: &str, dir: &str, reps: usize) -> Result<()> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tet"))
        .collect();
    files.sort();
    let bytes: u64 = files
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()))
        .sum::<std::io::Result<u64>>()?;
    let one_files = vec![PathBuf::from(one)];
    let pattern = format!("{}/*.tet", dir.trim_end_matches('/'));
    let archive_sql = format!("SELECT avg(v) FROM tet('{pattern}', '{DATASET}')");
    let one_sql = format!("SELECT avg(v) FROM tet('{one}', '{DATASET}')");
    // `archive_open`: the archive through `TetTableProvider::open` (its files opened
    // `tet.open_concurrency` at a time) rather than `tet(...)`.
    let modes = ["sequential_read", "archive", "one_file", "archive_open"];
    let n = modes.len();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut left: Vec<Vec<f64>> = vec![Vec::new(); n];
    // The warm figures of the same, once each pass below has read the files back in.
    let mut warm: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut answers = [f64::NAN; 3];
    // The planning part (listing, opening the files, planning) of the cold queries.
    let mut plans: Vec<Vec<f64>> = vec![Vec::new(); n];
    for r in 0..reps {
        for k in 0..n {
            let m = (r + k) % n;
            let paths = if m == 2 { &one_files } else { &files };
            for p in paths.iter() {
                drop_pages(p)?;
            }
            left[m].push(resident(paths)?);
            let mut cold_pass = true;
            for pass in [&mut times[m], &mut warm[m]] {
                let start = Instant::now();
                match modes[m] {
                    "sequential_read" => {
                        let n = read_all(paths)?;
                        if n != bytes {
                            return Err(err(format!("read {n} of {bytes} bytes")));
                        }
                    }
                    "archive_open" => {
                        let ctx = session();
                        let t0 = Instant::now();
                        let table = TetTableProvider::open(&ctx.state(), &pattern, Some(DATASET)).await?;
                        ctx.register_table("t", Arc::new(table))?;
                        let open = t0.elapsed().as_secs_f64();
                        let (plan, _, v, _) = plan_and_run(&ctx, "SELECT avg(v) FROM t").await?;
                        answers[m - 1] = v;
                        if cold_pass {
                            plans[m].push(open + plan);
                        }
                    }
                    mode => {
                        let ctx = session();
                        let sql = if mode == "archive" { &archive_sql } else { &one_sql };
                        let (plan, _, v, _) = plan_and_run(&ctx, sql).await?;
                        answers[m - 1] = v;
                        if cold_pass {
                            plans[m].push(plan);
                        }
                    }
                }
                pass.push(start.elapsed().as_secs_f64());
                cold_pass = false;
            }
        }
    }
    let diff = max_rel_diff(
        &[vec![answers[0]], vec![answers[2]]],
        &[vec![answers[1]], vec![answers[1]]],
    );
    println!(
        "{}",
        json!({"cold_answers": answers, "max_rel_diff": diff, "archive_bytes": bytes, "files": files.len()})
    );
    if diff.is_nan() || diff > 1e-9 {
        return Err(err(format!(
            "cold full mean: the archive answers {} (opened by the provider: {}) and the one file {}",
            answers[0], answers[2], answers[1]
        )));
    }
    for m in 0..n {
        let x = json!({"resident_after_drop": left[m], "bytes": bytes});
        report(&format!("{}_cold", modes[m]), "full_mean", &times[m], x);
        report(&format!("{}_warm", modes[m]), "full_mean", &warm[m], json!({}));
        if m > 0 {
            report(&format!("{}_cold_plan", modes[m]), "full_mean", &plans[m], json!({}));
        }
    }
    let ratio: Vec<f64> = times[1].iter().zip(&times[0]).map(|(a, b)| a / b).collect();
    report(
        "archive_cold_per_sequential_read_cold",
        "full_mean",
        &ratio,
        json!({"spread": [quantile(&ratio, 0.0), quantile(&ratio, 1.0)]}),
    );
    Ok(())
}

/// `archive query LOCATION` (see the module doc).
async fn query_once(location: &str) -> Result<()> {
    let start = Instant::now();
    let (_, _, v, faults) = plan_and_run(
        &session(),
        &format!("SELECT avg(v) FROM tet('{location}', '{DATASET}')"),
    )
    .await?;
    let s = start.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({"query_once": location, "s": s, "answer": v, "minor_faults": faults})
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or_default();
    let num = |i: usize| -> Result<u64> { arg(i).parse().map_err(|_| err(format!("argument {i}: a number"))) };
    match arg(1) {
        "write" => write(arg(2), arg(3), num(4)?, num(5)?, num(6)?, num(7)?, false),
        "write-mixed" => write(arg(2), arg(3), num(4)?, num(5)?, num(6)?, num(7)?, true),
        "write-small" => write_small(arg(2), num(3)?),
        "pair" => pair(arg(2), arg(3), num(4)? as usize).await,
        "open" => open(arg(2), arg(3), num(4)? as usize).await,
        "s3" => s3(arg(2), arg(3), num(4)? as usize, num(5)? as usize).await,
        "cold" => cold(arg(2), arg(3), num(4)? as usize).await,
        "query" => query_once(arg(2)).await,
        // `cargo bench` without arguments: nothing to do without the files run.py makes.
        "" | "--bench" => {
            eprintln!("archive: run through `python3 benches/run.py --archive` (see the module doc)");
            Ok(())
        }
        other => Err(err(format!(
            "archive: unknown subcommand {other:?}; usage: archive [write RAW DIR T LAT LON FILES | \
             write-mixed RAW DIR T LAT LON FILES | write-small DIR N | pair ONE.tet PATTERN REPS | open PATTERN ONE_SMALL REPS | \
             s3 ENDPOINT SMALL_DIR N REPS | cold ONE.tet DIR REPS | query LOCATION]"
        ))),
    }
}
