//! Archives as one table (a glob, a folder, `**`): random cubes written whole and split
//! along time into files of their own chunk grids, codecs and time reference dates; every
//! answer of the split table equals the whole file's under DataFusion's own plan (our
//! rules off). Then what a one-file selection reads, the listing forms, and the archives
//! that must be refused, each with an error naming the files.

use crate::common::{
    Rng, Val, assert_same, ctx, ctx_with, random_codecs, rows, rows_and_scan_metrics, small_values, tempdir,
};
use datafusion_tet::format::{ChunkCodecs, DType, DatasetSpec, TetWriter};
use object_store::ObjectStoreExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The hours of each time step: 6-hourly from the reference date of the whole cube.
const STEP_HOURS: i32 = 6;

/// A cube `time × y × x` of two variables (`a`, and `b` with a fill value), as written
/// whole and as files split along time.
struct Cube {
    dtype: DType,
    /// Time steps per file.
    lengths: Vec<u64>,
    ny: u64,
    nx: u64,
    a: Vec<u8>,
    b: Vec<u8>,
}

impl Cube {
    fn random(rng: &mut Rng) -> Cube {
        let dtype = [DType::F32, DType::F64, DType::I16, DType::I32][rng.below(4) as usize];
        let files = rng.range(2, 6) as usize;
        let lengths: Vec<u64> = (0..files).map(|_| rng.range(1, 9)).collect();
        let (ny, nx) = (rng.range(1, 6), rng.range(1, 6));
        Cube::new(rng, dtype, lengths, ny, nx)
    }

    /// A cube of random values, one file per entry of `lengths`.
    fn new(rng: &mut Rng, dtype: DType, lengths: Vec<u64>, ny: u64, nx: u64) -> Cube {
        let cells = (lengths.iter().sum::<u64>() * ny * nx) as usize;
        let a = small_values(rng, dtype, cells);
        let mut b = small_values(rng, dtype, cells);
        // About one cell in seven is the fill value.
        let size = dtype.size();
        for c in 0..cells {
            if rng.below(7) == 0 {
                b[c * size..(c + 1) * size].copy_from_slice(&fill(dtype));
            }
        }
        Cube {
            dtype,
            lengths,
            ny,
            nx,
            a,
            b,
        }
    }

    fn steps(&self) -> u64 {
        self.lengths.iter().sum()
    }

    /// Write time steps `t0..t0+n` as a file whose times count from its own first step
    /// (`hours since` that instant), chunked by `chunk`.
    fn write(&self, path: &Path, t0: u64, n: u64, chunk: &[u64], rng: &mut Rng) {
        let plane = (self.ny * self.nx) as usize * self.dtype.size();
        let part = |v: &[u8]| v[t0 as usize * plane..(t0 + n) as usize * plane].to_vec();
        let shape = [n, self.ny, self.nx];
        let grid: u64 = shape.iter().zip(chunk).map(|(s, c)| s.div_ceil(*c)).product();
        let first_hour = t0 as i32 * STEP_HOURS;
        let hours: Vec<u8> = (0..n as i32).flat_map(|i| (i * STEP_HOURS).to_le_bytes()).collect();
        let since = chrono_like(first_hour);
        let mut w = TetWriter::new();
        let (a, b) = (part(&self.a), part(&self.b));
        for (name, data, filled) in [("a", &a, false), ("b", &b, true)] {
            let mut spec = DatasetSpec::new(name, self.dtype, &shape, chunk, data)
                .dim_names(&["time", "y", "x"])
                .codecs(random_codecs(rng, grid))
                .attr("long_name", name);
            if filled {
                spec = spec.attr("_FillValue", &fill_text(self.dtype));
            }
            w.dataset(spec).unwrap();
        }
        w.dataset(
            DatasetSpec::new("time", DType::I32, &[n], &[n.clamp(1, 4)], &hours)
                .attr("units", &format!("hours since {since}"))
                .attr("standard_name", "time"),
        )
        .unwrap();
        w.write_path(path).unwrap();
    }

    /// The whole cube as one file, and the split files in `dir/parts` (named so that
    /// path order is not time order).
    fn write_both(&self, dir: &Path, rng: &mut Rng) -> (PathBuf, PathBuf) {
        let whole = dir.join("whole.tet");
        let steps = self.steps();
        self.write(&whole, 0, steps, &[steps.min(3), self.ny, self.nx], rng);
        let parts = dir.join("parts");
        std::fs::create_dir_all(&parts).unwrap();
        let mut t0 = 0;
        for (i, &n) in self.lengths.iter().enumerate() {
            let chunk = [
                rng.range(1, n + 1),
                rng.range(1, self.ny + 1),
                rng.range(1, self.nx + 1),
            ];
            let name = format!("{}-part.tet", (b'z' - i as u8) as char);
            self.write(&parts.join(name), t0, n, &chunk, rng);
            t0 += n;
        }
        (whole, parts)
    }
}

fn fill(dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => (-999.0f32).to_le_bytes().to_vec(),
        DType::F64 => (-999.0f64).to_le_bytes().to_vec(),
        DType::I16 => (-999i16).to_le_bytes().to_vec(),
        _ => (-999i32).to_le_bytes().to_vec(),
    }
}

fn fill_text(_: DType) -> String {
    "-999".into()
}

/// `2024-01-01T00:00:00` plus `hours`, as CF `since` text (within one month: the cubes
/// are at most 40 steps of 6 hours).
fn chrono_like(hours: i32) -> String {
    let (day, hour) = (1 + hours / 24, hours % 24);
    format!("2024-01-{day:02}T{hour:02}:00:00")
}

/// The queries compared between the split and the whole table (`{t}` the table).
const QUERIES: &[&str] = &[
    "SELECT time, y, x, a, b FROM {t}",
    "SELECT time, a FROM {t} WHERE time >= TIMESTAMP '2024-01-01T18:00:00' AND time < TIMESTAMP '2024-01-03T06:00:00' AND y = 0",
    "SELECT count(*), count(b), sum(a), avg(b), min(a), max(b) FROM {t}",
    "SELECT y, avg(a), stddev(b), count(b) FROM {t} GROUP BY y",
    "SELECT time, sum(a), max(b) FROM {t} GROUP BY time",
    "SELECT date_trunc('day', time) AS d, avg(a), min(b) FROM {t} GROUP BY d",
    "SELECT date_part('hour', time) AS h, x, avg(a) FILTER (WHERE b > 0) FROM {t} GROUP BY h, x",
    "SELECT y, avg(a - b), corr(a, b) FROM {t} GROUP BY y",
    "SELECT x, count(*) FROM {t} WHERE a > 10 GROUP BY x",
    "SELECT min(time), max(time), count(*) FROM {t} WHERE time > TIMESTAMP '2024-01-02T00:00:00'",
    "SELECT count(*) FROM (SELECT time, a FROM {t} LIMIT 7)",
];

/// The split archive answers as the whole file does, under every query, over a glob and
/// a folder, with partitions and the merge in the scan varied; the whole file's answers
/// come from DataFusion's own plan (aggregate pushdown off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_cube_answers_as_the_whole_file() {
    let mut rng = Rng(0xa5c1_1e57);
    for case in 0..12 {
        let dir = tempdir();
        let cube = Cube::random(&mut rng);
        let (whole, parts) = cube.write_both(dir.path(), &mut rng);
        let oracle = ctx_with(&["tet.aggregate_pushdown = false"]).await;
        let sessions = [
            ctx_with(&[]).await,
            ctx_with(&["datafusion.execution.target_partitions = 1"]).await,
            ctx_with(&[
                "datafusion.execution.target_partitions = 3",
                "tet.merge_in_scan = false",
            ])
            .await,
        ];
        let glob = format!("{}/*.tet", parts.display());
        let folder = format!("{}/", parts.display());
        for q in QUERIES {
            let want = rows(
                &oracle,
                &q.replace("{t}", &format!("tet('{}', 'a', 'b')", whole.display())),
            )
            .await;
            for (s, ctx) in sessions.iter().enumerate() {
                let location = if s == 1 { &folder } else { &glob };
                let sql = q.replace("{t}", &format!("tet('{location}', 'a', 'b')"));
                let got = rows(ctx, &sql).await;
                assert_same(
                    got,
                    want.clone(),
                    &format!("case {case} ({:?}, {:?}), session {s}: {sql}", cube.dtype, cube.lengths),
                );
            }
        }
        // A join of two archive tables on every axis is the join rewrite's one scan of
        // both, file by file, and answers as DataFusion's join.
        let join = format!(
            "SELECT l.y, count(*), avg(l.v - r.v), max(r.v) FROM tet('{glob}', 'a') AS l JOIN tet('{folder}', 'b') AS r \
             ON l.time = r.time AND l.y = r.y AND l.x = r.x GROUP BY l.y"
        );
        let no_rewrite = ctx_with(&["tet.join_rewrite = false"]).await;
        assert_same(
            rows(&sessions[0], &join).await,
            rows(&no_rewrite, &join).await,
            &format!("case {case}: {join}"),
        );
        let plan = format!("{:?}", rows(&sessions[0], &format!("EXPLAIN {join}")).await);
        assert!(!plan.contains("HashJoinExec") && plan.contains("files="), "{plan}");
        // One variable: its column is `v`, as for one file.
        let one = rows(
            &sessions[0],
            &format!("SELECT y, sum(v) FROM tet('{glob}', 'b') GROUP BY y"),
        )
        .await;
        let want = rows(
            &oracle,
            &format!("SELECT y, sum(v) FROM tet('{}', 'b') GROUP BY y", whole.display()),
        )
        .await;
        assert_same(one, want, &format!("case {case}: one variable"));
    }
}

/// A selection inside one file reads that file's chunks only: EXPLAIN names 1 of the
/// files, and the bytes read equal those of the same selection of that file alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selection_inside_one_file_reads_only_that_file() {
    let dir = tempdir();
    let mut rng = Rng(7);
    let cube = Cube::new(&mut rng, DType::F32, vec![4, 4, 4, 4], 3, 2);
    let parts = dir.path().join("parts");
    std::fs::create_dir_all(&parts).unwrap();
    for i in 0..4u64 {
        cube.write(
            &parts.join(format!("m{i}.tet")),
            i * 4,
            4,
            &[2, cube.ny, cube.nx],
            &mut rng,
        );
    }
    let ctx = ctx();
    // Steps 8..12 are the third file's (day 3, 00:00 to 18:00).
    let filter = "time >= TIMESTAMP '2024-01-03T00:00:00' AND time < TIMESTAMP '2024-01-04T00:00:00'";
    let table = format!("tet('{}/*.tet', 'a')", parts.display());
    let explain = rows(&ctx, &format!("EXPLAIN SELECT sum(v) FROM {table} WHERE {filter}")).await;
    let text = format!("{explain:?}");
    assert!(text.contains("files=1/4"), "{text}");
    let (got, m) = rows_and_scan_metrics(&ctx, &format!("SELECT sum(v) FROM {table} WHERE {filter}")).await;
    let (want, alone) = rows_and_scan_metrics(
        &ctx,
        &format!("SELECT sum(v) FROM tet('{}', 'a')", parts.join("m2.tet").display()),
    )
    .await;
    assert_same(got, want, "the third file's sum");
    assert_eq!(m.get("bytes_read"), alone.get("bytes_read"), "{m:?} vs {alone:?}");
    assert_eq!(m.get("chunks_read"), alone.get("chunks_read"), "{m:?} vs {alone:?}");
    // Statistics: the row count of the archive is exact.
    let count = rows(&ctx, &format!("SELECT count(*) FROM {table}")).await;
    assert_eq!(count, vec![vec![Val::Int(16 * (cube.ny * cube.nx) as i128)]]);
}

/// Files along time each chunked whole in space emit time in order, so `ORDER BY time`
/// needs no sort (a merge of the partitions keeps it); with other chunk grids the scan
/// declares nothing and DataFusion sorts. Either way the rows come out in time order
/// and are the whole file's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_comes_out_in_order_where_the_chunk_grids_keep_it() {
    let mut rng = Rng(0x0de5_0127);
    for case in 0..10 {
        let dir = tempdir();
        let cube = Cube::random(&mut rng);
        let (whole, parts) = cube.write_both(dir.path(), &mut rng);
        // Half the cases rewrite the parts chunked whole in space.
        let spatial_whole = case % 2 == 0;
        if spatial_whole {
            let mut t0 = 0;
            for (i, &n) in cube.lengths.iter().enumerate() {
                let name = format!("{}-part.tet", (b'z' - i as u8) as char);
                let chunk = [rng.range(1, n + 1), cube.ny, cube.nx];
                cube.write(&parts.join(name), t0, n, &chunk, &mut rng);
                t0 += n;
            }
        }
        for partitions in [1, 3] {
            let ctx = ctx_with(&[&format!("datafusion.execution.target_partitions = {partitions}")]).await;
            let q = |t: &str| format!("SELECT CAST(time AS BIGINT) AS t, y, x, v FROM {t} ORDER BY time");
            let sql = q(&format!("tet('{}/*.tet', 'a')", parts.display()));
            let got = rows(&ctx, &sql).await;
            let what = format!("case {case} ({:?}), {partitions} partitions: {sql}", cube.lengths);
            assert!(got.windows(2).all(|w| w[0][0] <= w[1][0]), "{what}: time out of order");
            let want = rows(&ctx, &q(&format!("tet('{}', 'a')", whole.display()))).await;
            assert_same(got, want, &what);
            let plan = format!("{:?}", rows(&ctx, &format!("EXPLAIN {sql}")).await);
            if spatial_whole {
                assert!(!plan.contains("SortExec:"), "{what}: {plan}");
            }
        }
    }
}

/// Globs (`*`, `?`, `[..]`, `**`), folders with and without `/`, the session's
/// subfolder rule, a file added between two queries, and the empty match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_forms_name_the_files_a_shell_would() {
    let dir = tempdir();
    let mut rng = Rng(11);
    let cube = Cube::new(&mut rng, DType::F64, vec![2, 2, 2, 2], 1, 2);
    let root = dir.path().join("era5");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    cube.write(&root.join("m0.tet"), 0, 2, &[2, 1, 2], &mut rng);
    cube.write(&root.join("m1.tet"), 2, 2, &[1, 1, 2], &mut rng);
    cube.write(&root.join("sub/m2.tet"), 4, 2, &[2, 1, 1], &mut rng);
    std::fs::write(root.join("notes.txt"), "not a tet file").unwrap();
    let ctx = ctx();
    let count = |location: String| {
        let ctx = ctx.clone();
        async move {
            match ctx.sql(&format!("SELECT count(*) FROM tet('{location}', 'a')")).await {
                Ok(df) => match df.collect().await {
                    Ok(b) => Ok(crate::common::rows_of(&b)[0][0].clone()),
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let r = root.display();
    let n = |files: i128| Ok(Val::Int(files * 4));
    assert_eq!(count(format!("{r}/*.tet")).await, n(2));
    assert_eq!(count(format!("{r}/m?.tet")).await, n(2));
    assert_eq!(count(format!("{r}/m[1].tet")).await, n(1));
    assert_eq!(count(format!("{r}/**/*.tet")).await, n(3));
    assert_eq!(count(format!("{r}/")).await, n(2));
    assert_eq!(count(format!("{r}")).await, n(2));
    let recursive = ctx_with(&["datafusion.execution.listing_table_ignore_subdirectory = false"]).await;
    let got = rows(&recursive, &format!("SELECT count(*) FROM tet('{r}/', 'a')")).await;
    assert_eq!(got, vec![vec![Val::Int(12)]]);
    // tet_files: one row per file, with each file's own time reference and axis ends.
    let files = rows(
        &ctx,
        &format!("SELECT file, array_to_string(extent, ','), array_to_string(first, ','), array_to_string(last, ','), time_units FROM tet_files('{r}/*.tet', 'a') ORDER BY file"),
    )
    .await;
    let text = format!("{files:?}");
    assert_eq!(files.len(), 2, "{text}");
    for want in [
        "m0.tet",
        "m1.tet",
        "2024-01-01T12:00:00",
        "2024-01-01T18:00:00",
        "hours since 2024-01-01T12:00:00",
    ] {
        assert!(text.contains(want), "{want} not in {text}");
    }
    // The metadata tables take patterns too, each row naming its file.
    let meta = rows(
        &ctx,
        &format!("SELECT count(*), count(DISTINCT file) FROM tet_datasets('{r}/*.tet')"),
    )
    .await;
    assert_eq!(meta, vec![vec![Val::Int(6), Val::Int(2)]]);
    let chunks = rows(
        &ctx,
        &format!("SELECT file, count(*) FROM tet_chunks('{r}/*.tet', 'a') GROUP BY file ORDER BY file"),
    )
    .await;
    assert_eq!(
        chunks.iter().map(|r| r[1].clone()).collect::<Vec<_>>(),
        vec![Val::Int(1), Val::Int(2)]
    );
    // A file added later is seen by the next query (no listing is cached).
    cube.write(&root.join("m3.tet"), 6, 2, &[2, 1, 2], &mut rng);
    assert_eq!(count(format!("{r}/*.tet")).await, n(3));
    let err = count(format!("{r}/*.nc")).await.unwrap_err();
    assert!(err.contains("*.nc") && err.contains("matches no"), "{err}");
    let limited = ctx_with(&["tet.max_files = 2"]).await;
    let err = limited
        .sql(&format!("SELECT count(*) FROM tet('{r}/*.tet', 'a')"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("tet.max_files"), "{err}");
    // STORED AS TET over a folder, with the axis named.
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE era5 STORED AS TET LOCATION '{r}/' OPTIONS ('tet.datasets' 'a,b', 'tet.concat_axis' 'time')"
    ))
    .await
    .unwrap();
    let got = rows(&ctx, "SELECT count(*), count(a) FROM era5").await;
    assert_eq!(got, vec![vec![Val::Int(12), Val::Int(12)]]);
}

/// Archives that cannot be one table are refused before anything is read, each error
/// naming the files and what differs; nothing is answered from part of an archive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_that_do_not_combine_are_refused_naming_the_files() {
    let mut rng = Rng(3);
    let cube = Cube::new(&mut rng, DType::F32, vec![2, 2], 2, 2);
    let ctx = ctx();
    let error = |dir: &Path| {
        let ctx = ctx.clone();
        let sql = format!("SELECT count(*) FROM tet('{}/*.tet', 'a')", dir.display());
        async move {
            match ctx.sql(&sql).await {
                Ok(df) => match df.collect().await {
                    Ok(b) => panic!("{sql} answered {:?}", crate::common::rows_of(&b)),
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            }
        }
    };
    // Overlapping times: the second file starts inside the first.
    let d = tempdir();
    cube.write(&d.path().join("a.tet"), 0, 2, &[2, 2, 2], &mut rng);
    cube.write(&d.path().join("b.tet"), 1, 2, &[2, 2, 2], &mut rng);
    let e = error(d.path()).await;
    assert!(
        e.contains("overlap") && e.contains("a.tet") && e.contains("b.tet"),
        "{e}"
    );
    // The same file twice: every coordinate equal, nothing to concatenate.
    let d = tempdir();
    cube.write(&d.path().join("a.tet"), 0, 2, &[2, 2, 2], &mut rng);
    cube.write(&d.path().join("b.tet"), 0, 2, &[2, 2, 2], &mut rng);
    let e = error(d.path()).await;
    assert!(e.contains("nothing to concatenate"), "{e}");
    // A grid that differs in one file: axis y has another extent.
    let d = tempdir();
    cube.write(&d.path().join("a.tet"), 0, 2, &[2, 2, 2], &mut rng);
    let other = Cube::new(&mut rng, DType::F32, vec![4], 1, 2);
    other.write(&d.path().join("b.tet"), 2, 2, &[2, 1, 2], &mut rng);
    let e = error(d.path()).await;
    assert!(e.contains("b.tet") && e.contains("axes"), "{e}");
    // A dataset missing in one file.
    let d = tempdir();
    cube.write(&d.path().join("a.tet"), 0, 2, &[2, 2, 2], &mut rng);
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("c", DType::F32, &[2, 2, 2], &[2, 2, 2], &cube.a[..32])
            .dim_names(&["time", "y", "x"])
            .codecs(ChunkCodecs::Raw),
    )
    .unwrap();
    w.write_path(d.path().join("b.tet")).unwrap();
    let e = error(d.path()).await;
    assert!(e.contains("b.tet") && e.contains("\"a\""), "{e}");
    // Another calendar in one file.
    let d = tempdir();
    for (name, calendar, t0) in [("a.tet", "standard", 0), ("b.tet", "noleap", 24)] {
        let days: Vec<u8> = [t0, t0 + 6].iter().flat_map(|h: &i32| h.to_le_bytes()).collect();
        let mut w = TetWriter::new();
        w.dataset(DatasetSpec::new("a", DType::F32, &[2], &[2], &cube.a[..8]).dim_names(&["time"]))
            .unwrap();
        w.dataset(
            DatasetSpec::new("time", DType::I32, &[2], &[2], &days)
                .attr("units", "hours since 2024-01-01")
                .attr("calendar", calendar),
        )
        .unwrap();
        w.write_path(d.path().join(name)).unwrap();
    }
    let e = error(d.path()).await;
    assert!(
        e.contains("calendar") && e.contains("a.tet") && e.contains("b.tet"),
        "{e}"
    );
    // A truncated file among good ones.
    let d = tempdir();
    cube.write(&d.path().join("a.tet"), 0, 2, &[2, 2, 2], &mut rng);
    cube.write(&d.path().join("b.tet"), 2, 2, &[2, 2, 2], &mut rng);
    let bytes = std::fs::read(d.path().join("b.tet")).unwrap();
    std::fs::write(d.path().join("b.tet"), &bytes[..bytes.len() / 2]).unwrap();
    let e = error(d.path()).await;
    assert!(e.contains("b.tet"), "{e}");
    // A forced axis that is no dimension.
    let d = tempdir();
    cube.write(&d.path().join("a.tet"), 0, 2, &[2, 2, 2], &mut rng);
    cube.write(&d.path().join("b.tet"), 2, 2, &[2, 2, 2], &mut rng);
    let forced = ctx_with(&["tet.concat_axis = 'level'"]).await;
    let e = forced
        .sql(&format!(
            "SELECT count(*) FROM tet('{}/*.tet', 'a')",
            d.path().display()
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("level") && e.contains("not a dimension"), "{e}");
}

/// Files that store a variable each their own way (float32 files, a packed int16 file
/// with its own scale and fill value, a float64 file) make one Float64 column, each file
/// decoded by its own rule: every answer equals DataFusion's over the `UNION ALL` of the
/// files, each cast to DOUBLE, and DataFusion's aggregate over the archive's scan (the
/// pushdown off). Aggregates fold per storage class: three `TetAggregateExec`s, the two
/// float32 files (not neighbours on the time axis) in one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_that_store_a_variable_differently_decode_by_their_own_rules() {
    let dir = tempdir();
    let mut rng = Rng(21);
    let (ny, nx) = (3u64, 4u64);
    let plane = (ny * nx) as usize;
    let w_file = |name: &str, t0: u64, dtype: DType, attrs: &[(&str, &str)], rng: &mut Rng| {
        let mut data = small_values(rng, dtype, 2 * plane);
        // A fill value in the first cell of each file.
        let fill: Vec<u8> = match dtype {
            DType::I16 => (-32767i16).to_le_bytes().to_vec(),
            DType::F32 => (-999f32).to_le_bytes().to_vec(),
            _ => (-999f64).to_le_bytes().to_vec(),
        };
        data[..fill.len()].copy_from_slice(&fill);
        let hours: Vec<u8> = [0i32, 6].iter().flat_map(|h| h.to_le_bytes()).collect();
        let mut spec = DatasetSpec::new("a", dtype, &[2, ny, nx], &[1, ny, 2], &data).dim_names(&["time", "y", "x"]);
        for (k, v) in attrs {
            spec = spec.attr(k, v);
        }
        let mut w = TetWriter::new();
        w.dataset(spec).unwrap();
        w.dataset(
            DatasetSpec::new("time", DType::I32, &[2], &[2], &hours)
                .attr("units", &format!("hours since {}", chrono_like(t0 as i32 * 12))),
        )
        .unwrap();
        w.zone_maps(true);
        let path = dir.path().join(name);
        w.write_path(&path).unwrap();
        path
    };
    let files = [
        w_file("f0.tet", 0, DType::F32, &[("_FillValue", "-999")], &mut rng),
        w_file(
            "f1.tet",
            1,
            DType::I16,
            &[("_FillValue", "-32767"), ("scale_factor", "0.5"), ("add_offset", "10")],
            &mut rng,
        ),
        w_file("f2.tet", 2, DType::F64, &[("_FillValue", "-999")], &mut rng),
        w_file("f3.tet", 3, DType::F32, &[("_FillValue", "-999")], &mut rng),
    ];
    let ctx = ctx();
    let archive = format!("tet('{}/*.tet', 'a')", dir.path().display());
    let union = files
        .iter()
        .map(|f| {
            format!(
                "SELECT time, y, x, CAST(v AS DOUBLE) AS v FROM tet('{}', 'a')",
                f.display()
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let union = format!("({union})");
    let ty = rows(&ctx, &format!("SELECT arrow_typeof(v) FROM {archive} LIMIT 1")).await;
    assert_eq!(ty, vec![vec![Val::Str("Float64".into())]]);
    let row_plan = ctx_with(&["tet.aggregate_pushdown = false"]).await;
    let folds = [
        "SELECT y, count(v), sum(v), avg(v), min(v), max(v), stddev(v) FROM {t} GROUP BY y",
        "SELECT time, count(*) FROM {t} WHERE v > 5 GROUP BY time",
        "SELECT x, sum(v) FROM {t} WHERE time >= TIMESTAMP '2024-01-01T12:00:00' GROUP BY x",
        "SELECT count(*), count(v), sum(v), min(v), max(v), var_pop(v), stddev_samp(v) FROM {t}",
        "SELECT date_trunc('day', time) AS d, avg(v * 1.8 + 32), max(v) FILTER (WHERE v < 20) FROM {t} GROUP BY 1",
        "SELECT y, x, avg(v), min(v), corr(v, sqrt(abs(v))) FROM {t} WHERE v BETWEEN 0 AND 40 GROUP BY y, x",
        "SELECT time, y, sum(CAST(v AS DOUBLE) * v), count(*) FILTER (WHERE v IS NULL) FROM {t} GROUP BY time, y",
    ];
    for q in folds {
        let plan = format!(
            "{:?}",
            rows(&ctx, &format!("EXPLAIN {}", q.replace("{t}", &archive))).await
        );
        assert_eq!(plan.matches("TetAggregateExec").count(), 3, "{q}: {plan}");
    }
    for q in ["SELECT time, y, x, v FROM {t}"].into_iter().chain(folds) {
        let got = rows(&ctx, &q.replace("{t}", &archive)).await;
        let want = rows(&ctx, &q.replace("{t}", &format!("{union} AS u"))).await;
        assert_same(got.clone(), want, q);
        let want = rows(&row_plan, &q.replace("{t}", &archive)).await;
        assert_same(got, want, q);
    }
    // The join rewrite's table of the archive beside itself folds per storage class too.
    let join = format!(
        "SELECT l.y, count(*), avg(l.v - r.v), max(r.v) FROM {archive} AS l JOIN {archive} AS r \
         ON l.time = r.time AND l.y = r.y AND l.x = r.x GROUP BY l.y"
    );
    let no_rewrite = ctx_with(&["tet.join_rewrite = false"]).await;
    assert_same(rows(&ctx, &join).await, rows(&no_rewrite, &join).await, &join);
    let plan = format!("{:?}", rows(&ctx, &format!("EXPLAIN {join}")).await);
    assert_eq!(plan.matches("TetAggregateExec").count(), 3, "{plan}");
}

/// The type of a column over files of two types is numpy's `result_type` of theirs (what
/// xarray's concatenation gives), for every pair of the value columns' types.
#[test]
fn common_types_are_numpys_result_types() {
    use arrow::datatypes::DataType;
    let types = [
        ("float16", DataType::Float16),
        ("float32", DataType::Float32),
        ("float64", DataType::Float64),
        ("int8", DataType::Int8),
        ("int16", DataType::Int16),
        ("int32", DataType::Int32),
        ("int64", DataType::Int64),
        ("uint8", DataType::UInt8),
        ("uint16", DataType::UInt16),
        ("uint32", DataType::UInt32),
        ("uint64", DataType::UInt64),
    ];
    let script = "import numpy as np, sys\nts = sys.argv[1:]\nprint(' '.join(str(np.result_type(np.dtype(a), np.dtype(b))) for a in ts for b in ts))";
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(types.iter().map(|t| t.0))
        .output();
    let out = match out {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap(),
        _ if std::env::var_os("CI").is_some() => panic!("python3 with numpy is needed under CI: {out:?}"),
        _ => {
            eprintln!("NOTICE: python3 with numpy is absent; skipping the numpy oracle");
            return;
        }
    };
    let numpy: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(numpy.len(), types.len() * types.len());
    let name = |t: &DataType| types.iter().find(|x| &x.1 == t).map(|x| x.0).unwrap_or("?");
    let mut k = 0;
    for a in &types {
        for b in &types {
            let ours = datafusion_tet::plan::common_type(&a.1, &b.1).unwrap();
            assert_eq!(name(&ours), numpy[k], "{} with {}", a.0, b.0);
            k += 1;
        }
    }
}

/// An archive reaching before 1677 (a paleo or control run) has a `Timestamp(µs)` time
/// axis, the files within 1677-2262 converted to it: date functions and filters work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_before_1677_make_a_microsecond_time_axis() {
    let dir = tempdir();
    for (name, since) in [("a.tet", "1600-01-01"), ("b.tet", "1700-01-01")] {
        let days: Vec<u8> = [0i32, 365].iter().flat_map(|d| d.to_le_bytes()).collect();
        let data: Vec<u8> = (0..4).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let mut w = TetWriter::new();
        w.dataset(DatasetSpec::new("a", DType::F32, &[2, 2], &[1, 2], &data).dim_names(&["time", "x"]))
            .unwrap();
        w.dataset(
            DatasetSpec::new("time", DType::I32, &[2], &[2], &days)
                .attr("units", &format!("days since {since}"))
                .attr("calendar", "proleptic_gregorian"),
        )
        .unwrap();
        w.write_path(dir.path().join(name)).unwrap();
    }
    let ctx = ctx();
    let t = format!("tet('{}/*.tet', 'a')", dir.path().display());
    let ty = rows(&ctx, &format!("SELECT arrow_typeof(time) FROM {t} LIMIT 1")).await;
    assert_eq!(ty, vec![vec![Val::Str("Timestamp(µs)".into())]]);
    // 1600 is a leap year (day 365 is Dec 31), 1700 is not (day 365 is 1701-01-01).
    let years = rows(
        &ctx,
        &format!("SELECT CAST(date_part('year', time) AS BIGINT) AS y, count(*) FROM {t} GROUP BY y ORDER BY y"),
    )
    .await;
    let want: Vec<Vec<Val>> = [(1600, 4), (1700, 2), (1701, 2)]
        .into_iter()
        .map(|(y, n)| vec![Val::Int(y), Val::Int(n)])
        .collect();
    assert_eq!(years, want);
    // (A TIMESTAMP literal is nanoseconds in DataFusion, which cannot hold 1650.)
    let early = rows(
        &ctx,
        &format!(
            "SELECT count(*) FROM {t} WHERE time < arrow_cast('1650-01-01T00:00:00', 'Timestamp(Microsecond, None)')"
        ),
    )
    .await;
    assert_eq!(early, vec![vec![Val::Int(4)]]);
}

/// The same archive in an S3 bucket (moto), named by a glob and by a prefix, answers as
/// the local folder does; a web server that does not list (nginx without WebDAV) gives
/// an error saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_in_object_stores_answer_as_local_ones() {
    let Some(moto) = crate::servers::moto() else { return };
    let dir = tempdir();
    let mut rng = Rng(0x53);
    let cube = Cube::random(&mut rng);
    let (_, parts) = cube.write_both(dir.path(), &mut rng);
    crate::servers::create_bucket(moto, "arch");
    let store = Arc::new(
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&moto.endpoint)
            .with_allow_http(true)
            .with_bucket_name("arch")
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .build()
            .unwrap(),
    );
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&parts).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let key = object_store::path::Path::from(format!("era5/{name}"));
        store.put(&key, std::fs::read(&path).unwrap().into()).await.unwrap();
        names.push(name);
    }
    // Beside them: a file of another kind, and a .tet under another prefix.
    store.put(&"era5/README".into(), "not tet".into()).await.unwrap();
    store.put(&"other/x.tet".into(), "not read".into()).await.unwrap();
    let counted = Arc::new(crate::remote::Counting::new(store.clone()));
    let ctx = ctx();
    crate::remote::register(&ctx, "s3://arch", counted.clone());
    let local = format!("tet('{}/*.tet', 'a', 'b')", parts.display());
    for remote in [
        "tet('s3://arch/era5/*.tet', 'a', 'b')",
        "tet('s3://arch/era5/', 'a', 'b')",
    ] {
        for q in QUERIES {
            let want = rows(&ctx, &q.replace("{t}", &local)).await;
            let got = rows(&ctx, &q.replace("{t}", remote)).await;
            assert_same(got, want, &format!("{remote}: {q}"));
        }
    }
    // Opened again, the files cached in the session are revalidated by the listing: no
    // HEAD request, no read of their metadata.
    let before = counted.snapshot();
    rows(&ctx, "SELECT count(*) FROM tet('s3://arch/era5/*.tet', 'a')").await;
    let after = counted.snapshot();
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (0, 0),
        "GET and HEAD requests of a warm open"
    );
    let files = rows(&ctx, "SELECT count(*) FROM tet_files('s3://arch/era5/*.tet')").await;
    assert_eq!(files, vec![vec![Val::Int(names.len() as i128)]]);
    if let Some(az) = crate::servers::azurite() {
        for name in &names {
            crate::servers::azure_upload(
                az,
                "arch",
                &format!("era5/{name}"),
                &std::fs::read(parts.join(name)).unwrap(),
            );
        }
        let store = object_store::azure::MicrosoftAzureBuilder::new()
            .with_use_emulator(true)
            .with_container_name("arch")
            .build()
            .unwrap();
        crate::remote::register(&ctx, "az://arch", Arc::new(store));
        for q in &QUERIES[2..5] {
            let want = rows(&ctx, &q.replace("{t}", &local)).await;
            let got = rows(&ctx, &q.replace("{t}", "tet('az://arch/era5/*.tet', 'a', 'b')")).await;
            assert_same(got, want, &format!("az: {q}"));
        }
    }
    if let Some(nginx) = crate::servers::nginx() {
        let www = nginx.dir.join("www/arch");
        std::fs::create_dir_all(&www).unwrap();
        for name in &names {
            std::fs::copy(parts.join(name), www.join(name)).unwrap();
        }
        crate::remote::register(&ctx, &nginx.endpoint, crate::remote::http(&nginx.endpoint));
        let sql = format!("SELECT count(*) FROM tet('{}/arch/*.tet', 'a')", nginx.endpoint);
        let err = match ctx.sql(&sql).await {
            Ok(df) => df.collect().await.map(|_| ()).unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("does not list"), "{err}");
        // Its files one by one still work.
        let one = rows(
            &ctx,
            &format!("SELECT count(*) FROM tet('{}/arch/{}', 'a')", nginx.endpoint, names[0]),
        )
        .await;
        assert_eq!(one.len(), 1);
        // A server that lists by WebDAV (PROPFIND): a glob and a folder over http.
        if crate::servers::nginx_lists_dav() {
            let www = nginx.dir.join("www/dav/arch");
            std::fs::create_dir_all(&www).unwrap();
            for name in &names {
                std::fs::copy(parts.join(name), www.join(name)).unwrap();
            }
            for location in ["dav/arch/*.tet", "dav/arch/"] {
                for q in &QUERIES[2..5] {
                    let want = rows(&ctx, &q.replace("{t}", &local)).await;
                    let table = format!("tet('{}/{location}', 'a', 'b')", nginx.endpoint);
                    let got = rows(&ctx, &q.replace("{t}", &table)).await;
                    assert_same(got, want, &format!("http {location}: {q}"));
                }
            }
        } else if std::env::var_os("CI").is_some() {
            panic!("CI installs nginx's WebDAV module (libnginx-mod-http-dav-ext)");
        } else {
            eprintln!("NOTICE: nginx's WebDAV module is absent; skipping listing over http");
        }
    }
}
