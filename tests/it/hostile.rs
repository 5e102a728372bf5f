//! Hostile files: geometry and sizes a few hundred bytes of file can claim (tiles of 2^40
//! cells behind a zstd frame without a content size, datasets of more than 2^63 cells,
//! axes of 2^40 positions, many tiny chunks) run through every SQL entry point in the
//! `tet-sql` binary under an address-space limit. Each query must answer or fail with a
//! message — never a signal, never an abort — within seconds.

use crate::common::tempdir;
use datafusion_tet::format::{ChunkCodecs, Codec, DType, DatasetSpec, TetFile, TetWriter};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Address space a hostile query may use (KiB, as `ulimit -v` takes it): the binary's own
/// mappings (≈ 150 MiB) plus a few hundred MiB.
const ADDRESS_SPACE_KIB: u64 = 640 << 10;
/// Wall time after which a query counts as hung (the queries below take milliseconds).
const HUNG: Duration = Duration::from_secs(20);

/// A zstd frame of a few bytes that declares no content size (streaming encoder, size
/// not pledged): a reader cannot know from the frame how much it will yield.
fn frame_without_size() -> Vec<u8> {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    e.include_contentsize(false).unwrap();
    e.write_all(&[0u8; 16]).unwrap();
    let f = e.finish().unwrap();
    assert!(matches!(zstd::zstd_safe::get_frame_content_size(&f), Ok(None)));
    f
}

/// One patch of a chunk row: its raw length, and a zstd frame to store instead of the
/// written raw bytes (the frame must fit in the written payload).
struct RowPatch {
    raw_byte_len: u64,
    frame: Option<Vec<u8>>,
}

/// A file whose one dataset `v` (u8, rank of `shape`) is written with geometry
/// `written` / `written_chunk` (which fixes the chunk grid and payload room) and then
/// patched in place to claim `shape` / `chunk` and the chunk rows `rows` (row-major chunk
/// order, which is the writer's row order). The grid of the claim must equal the grid
/// written.
fn patched(written: &[u64], written_chunk: &[u64], shape: &[u64], chunk: &[u64], rows: &[RowPatch]) -> Vec<u8> {
    let cells: u64 = written.iter().product();
    let data = vec![7u8; cells as usize];
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("v", DType::U8, written, written_chunk, &data))
        .unwrap();
    let mut b = w.to_bytes().unwrap();
    let f = TetFile::open(b.as_slice()).unwrap();
    let n = shape.len();
    // Record 0 at 40: 16-byte head, the name "v" padded to 8, then shape and chunk_shape.
    for d in 0..n {
        b[64 + 8 * d..72 + 8 * d].copy_from_slice(&shape[d].to_le_bytes());
        b[64 + 8 * (n + d)..72 + 8 * (n + d)].copy_from_slice(&chunk[d].to_le_bytes());
    }
    let idx = f.superblock.chunk_index_offset as usize + 32;
    assert_eq!(rows.len(), f.chunks.len());
    for (i, (p, entry)) in rows.iter().zip(&f.chunks).enumerate() {
        let row = idx + 104 * i;
        b[row + 80..row + 88].copy_from_slice(&p.raw_byte_len.to_le_bytes());
        let stored = match &p.frame {
            Some(frame) => {
                assert!(frame.len() as u64 <= entry.stored_byte_len, "frame does not fit");
                let at = entry.payload_offset as usize;
                b[at..at + frame.len()].copy_from_slice(frame);
                b[row + 96..row + 100].copy_from_slice(&Codec::Zstd.tag().to_le_bytes());
                frame.len() as u64
            }
            None => p.raw_byte_len,
        };
        b[row + 88..row + 96].copy_from_slice(&stored.to_le_bytes());
    }
    b
}

/// The hostile files, by name.
fn hostile_files() -> Vec<(&'static str, Vec<u8>)> {
    let frame = frame_without_size;
    vec![
        // One u8 chunk of 2^40 cells behind a frame that declares no size.
        (
            "claimed_tile",
            patched(
                &[64],
                &[64],
                &[1 << 40],
                &[1 << 40],
                &[RowPatch {
                    raw_byte_len: 1 << 40,
                    frame: Some(frame()),
                }],
            ),
        ),
        // The same claim in two dimensions: 2^30 × 2^10.
        (
            "claimed_tile_2d",
            patched(
                &[8, 8],
                &[8, 8],
                &[1 << 30, 1 << 10],
                &[1 << 30, 1 << 10],
                &[RowPatch {
                    raw_byte_len: 1 << 40,
                    frame: Some(frame()),
                }],
            ),
        ),
        // 2^63 + 1 cells in chunks of 2^63: (k + 1) · chunk wraps in u64.
        (
            "wrapping_grid",
            patched(
                &[64],
                &[32],
                &[(1 << 63) + 1],
                &[1 << 63],
                &[
                    RowPatch {
                        raw_byte_len: 1 << 63,
                        frame: Some(frame()),
                    },
                    RowPatch {
                        raw_byte_len: 1,
                        frame: None,
                    },
                ],
            ),
        ),
        // An axis of 2^62 + 1 positions: a claimed tile of 2^62 cells and a clipped one of
        // 1 cell. Work on positions must not scale with the axis.
        (
            "long_axis",
            patched(
                &[64],
                &[32],
                &[(1 << 62) + 1],
                &[1 << 62],
                &[
                    RowPatch {
                        raw_byte_len: 1 << 62,
                        frame: Some(frame()),
                    },
                    RowPatch {
                        raw_byte_len: 1,
                        frame: None,
                    },
                ],
            ),
        ),
        // 20 000 chunks of one cell each.
        ("many_tiny_chunks", {
            let data = vec![3u8; 20_000];
            let mut w = TetWriter::new();
            w.dataset(DatasetSpec::new("v", DType::U8, &[20_000], &[1], &data))
                .unwrap();
            w.to_bytes().unwrap()
        }),
    ]
}

/// The queries every hostile file goes through (`{f}` = the file's path).
const QUERIES: &[&str] = &[
    "SELECT count(*) FROM tet('{f}')",
    "SELECT sum(v) FROM tet('{f}')",
    "SELECT v FROM tet('{f}') LIMIT 1",
    "SELECT dim_0 FROM tet('{f}') LIMIT 1",
    "SELECT count(*) FROM tet('{f}') WHERE dim_0 < 5",
    "SELECT sum(v) FROM tet('{f}') WHERE dim_0 < 5",
    "SELECT dim_0, v FROM tet('{f}') WHERE dim_0 BETWEEN 3 AND 4 OR dim_0 IN (10, 11)",
    "SELECT count(*) FROM tet('{f}') WHERE dim_0 % 2 = 0",
    "SELECT dim_0 % 3 AS k, count(*) FROM tet('{f}') GROUP BY k",
    "SELECT dim_0, max(v) FROM tet('{f}') WHERE dim_0 > 2 AND dim_0 <= 6 GROUP BY dim_0",
    "SELECT min(v) FROM tet('{f}') WHERE v > 2",
    "EXPLAIN SELECT sum(v) FROM tet('{f}')",
    "EXPLAIN ANALYZE SELECT count(*) FROM tet('{f}')",
    "SELECT * FROM tet_datasets('{f}')",
    "SELECT count(*) FROM tet_chunks('{f}')",
    "CREATE EXTERNAL TABLE t STORED AS TET LOCATION '{f}'; SELECT sum(v) FROM t WHERE dim_0 < 3",
];

/// Run `sql` in tet-sql under the address-space limit: (exit status, stdout, stderr,
/// elapsed). A query still running after [`HUNG`] is killed and reported as hung.
fn run_limited(sql: &str, dir: &Path) -> (Option<i32>, String, String, Duration) {
    run_limited_with(&[], sql, dir)
}

/// [`run_limited`] with further tet-sql arguments (`-m 32m`).
fn run_limited_with(args: &[&str], sql: &str, dir: &Path) -> (Option<i32>, String, String, Duration) {
    let bin = env!("CARGO_BIN_EXE_tet-sql");
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB}; exec \"$0\" -q --format json \"${{@:2}}\" -c \"$1\""
        ))
        .arg(bin)
        .arg(sql)
        .args(args)
        // One malloc arena: glibc reserves 64 MiB of address space per arena and thread
        // group, which would make the limit measure threads rather than memory.
        .env("MALLOC_ARENA_MAX", "1")
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tet-sql");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            return (
                status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
                start.elapsed(),
            );
        }
        if start.elapsed() > HUNG {
            let _ = child.kill();
            let _ = child.wait();
            return (None, String::new(), "hung".into(), start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn hostile_files_answer_or_fail_with_a_message() {
    let temp = tempdir();
    let dir = kept_or(&temp);
    let mut failures = Vec::new();
    let mut jobs = Vec::new();
    for (name, bytes) in hostile_files() {
        let file = format!("{name}.tet");
        std::fs::write(dir.join(&file), bytes).unwrap();
        for q in QUERIES {
            jobs.push((name, q.replace("{f}", &file)));
        }
    }
    let results: Vec<_> = std::thread::scope(|s| {
        jobs.chunks(jobs.len().div_ceil(4))
            .map(|part| {
                let dir = dir.as_path();
                s.spawn(move || {
                    part.iter()
                        .map(|(name, sql)| (*name, sql.clone(), run_limited(sql, dir)))
                        .collect::<Vec<_>>()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    for (name, sql, (code, out, err, took)) in results {
        // tet-sql, like datafusion-cli, prints a statement's error on stdout.
        let message = format!("{out}{err}");
        let answered = code == Some(0) && !message.contains("Error");
        let refused = code == Some(1) && message.contains("Error") && !message.contains("panicked");
        println!(
            "{name}: {sql}\n  -> exit {code:?} in {took:.2?}: {}",
            message.trim().replace('\n', " | ")
        );
        // What each file must do: the metadata tables list any file that opens; queries
        // of a file that claims too much are refused by the guard that names the claim.
        let metadata = sql.contains("tet_datasets") || sql.contains("tet_chunks");
        let expected: &[&str] = match name {
            "many_tiny_chunks" => &[],
            _ if metadata => &[],
            // A filter that visits each position meets the axis limit first.
            "claimed_tile" | "claimed_tile_2d" => &["tet.max_tile_bytes", "tet.max_axis_positions"],
            "wrapping_grid" => &["more than a table can count"],
            "long_axis" => &["tet.max_dataset_cells"],
            other => unreachable!("{other}"),
        };
        let as_expected = match expected {
            [] => answered,
            why => refused && why.iter().any(|w| message.contains(w)),
        };
        if !as_expected {
            failures.push(format!(
                "{name}: {sql}: exit {code:?} after {took:.2?} (expected {}): {message}",
                if expected.is_empty() {
                    "an answer".to_string()
                } else {
                    expected.join(" or ")
                }
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} queries crashed or hung:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The directory to write files to: `TET_HOSTILE_DIR` when set (to look at them by hand
/// afterwards), else `temp`.
fn kept_or(temp: &tempfile::TempDir) -> std::path::PathBuf {
    std::env::var_os("TET_HOSTILE_DIR").map_or(temp.path().to_path_buf(), Into::into)
}

/// Run each of `queries` (setup statements first) on `file` and check its output contains
/// `want` (an answer's JSON, or the error's key words).
fn expect_all(dir: &Path, file: &str, setup: &str, queries: &[(&str, &str)]) {
    expect_all_with(&[], dir, file, setup, queries)
}

/// [`expect_all`] with further tet-sql arguments.
fn expect_all_with(args: &[&str], dir: &Path, file: &str, setup: &str, queries: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (q, want) in queries {
        let sql = format!("{setup}{}", q.replace("{f}", file));
        let (code, out, err, took) = run_limited_with(args, &sql, dir);
        let message = format!("{out}{err}");
        println!(
            "{sql}\n  -> exit {code:?} in {took:.2?}: {}",
            message.trim().replace('\n', " | ")
        );
        let ok = code.is_some() && !message.contains("panicked") && message.contains(want);
        if !ok {
            failures.push(format!("{sql}: exit {code:?}, expected {want:?}: {message}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn raised_limits_meet_the_next_guard() {
    let temp = tempdir();
    let dir = kept_or(&temp);
    for (name, bytes) in hostile_files() {
        std::fs::write(dir.join(format!("{name}.tet")), bytes).unwrap();
    }
    let raise = "SET tet.max_tile_bytes = 9223372036854775807; SET tet.max_dataset_cells = 9223372036854775807; ";
    // A claimed tile of 1 TiB reaches the decoder, which cannot get the memory (or finds
    // the frame short): an error, not an abort.
    expect_all(
        &dir,
        "claimed_tile.tet",
        raise,
        &[
            ("SELECT sum(v) FROM tet('{f}')", "chunk index row 0"),
            ("SELECT v FROM tet('{f}') LIMIT 1", "chunk index row 0"),
            // Positions alone need no tile: answered, one batch, whatever the axis' length.
            ("SELECT dim_0 FROM tet('{f}') LIMIT 1", r#"[{"dim_0":0}]"#),
            ("SELECT count(*) AS n FROM tet('{f}')", r#"[{"n":1099511627776}]"#),
            ("SELECT count(*) AS n FROM tet('{f}') WHERE dim_0 < 5", r#"[{"n":5}]"#),
            (
                "SELECT dim_0 FROM tet('{f}') WHERE dim_0 BETWEEN 3 AND 4 OR dim_0 IN (10, 11) ORDER BY dim_0",
                r#"[{"dim_0":3},{"dim_0":4},{"dim_0":10},{"dim_0":11}]"#,
            ),
            (
                "SELECT count(*) AS n FROM tet('{f}') WHERE NOT (dim_0 >= 2) AND dim_0 <> 0",
                r#"[{"n":1}]"#,
            ),
            // Filters that must visit each position, and group keys over the whole axis,
            // are refused by the per-axis limit. (A group key over 2^40 positions, such as
            // `dim_0 % 3`, is more groups than the fold takes: DataFusion's plan over every
            // claimed row, which with the limits raised is the user's call.)
            (
                "SELECT count(*) FROM tet('{f}') WHERE dim_0 % 2 = 0",
                "tet.max_axis_positions",
            ),
            ("SELECT sum(dim_0 * 0.5) AS s FROM tet('{f}')", "tet.max_axis_positions"),
            // Over a selected stretch, a weight is evaluated over the stretch only.
            (
                "SELECT sum(dim_0 * 0.5) AS s FROM tet('{f}') WHERE dim_0 >= 1099511627774",
                r#"[{"s":1.0995116277745e12}]"#,
            ),
            (
                "SELECT dim_0, count(*) AS n FROM tet('{f}') WHERE dim_0 > 1099511627770 GROUP BY dim_0 ORDER BY dim_0 LIMIT 2",
                r#"[{"dim_0":1099511627771,"n":1},{"dim_0":1099511627772,"n":1}]"#,
            ),
        ],
    );
    // Over 2^62 + 1 positions, with the dataset limit raised.
    expect_all(
        &dir,
        "long_axis.tet",
        raise,
        &[
            (
                "SELECT count(*) AS n FROM tet('{f}') WHERE dim_0 < 5 OR dim_0 >= 4611686018427387903",
                r#"[{"n":7}]"#,
            ),
            (
                "SELECT max(dim_0) AS m FROM tet('{f}') WHERE dim_0 > 4611686018427387900",
                r#"[{"m":4611686018427387904}]"#,
            ),
            (
                "SELECT v FROM tet('{f}') WHERE dim_0 = 4611686018427387904",
                r#"[{"v":7}]"#,
            ),
        ],
    );
}

#[test]
fn a_large_raw_tile_is_emitted_one_batch_at_a_time() {
    // One raw u8 chunk of 16384 × 16384 (256 MiB): a LIMIT 1 must not build the positions
    // or values of the whole tile (the address-space limit leaves room for the mapping
    // and a few batches, not for 2^28 positions).
    let temp = tempdir();
    let dir = kept_or(&temp);
    large_raw_tile(&dir);
    expect_all(
        &dir,
        "big.tet",
        "",
        &[
            ("SELECT dim_0 FROM tet('{f}') LIMIT 1", r#"[{"dim_0":0}]"#),
            ("SELECT dim_1, v FROM tet('{f}') LIMIT 1", r#"[{"dim_1":0,"v":0}]"#),
            (
                "SELECT dim_0, dim_1, v FROM tet('{f}') WHERE dim_0 = 3 AND dim_1 BETWEEN 5 AND 6",
                r#"[{"dim_0":3,"dim_1":5,"v":212},{"dim_0":3,"dim_1":6,"v":213}]"#,
            ),
            (
                "SELECT count(*) AS n, sum(v) AS s FROM tet('{f}') WHERE dim_0 < 2",
                r#""n":32768"#,
            ),
        ],
    );
}

#[test]
fn a_large_coordinate_variable_from_a_few_bytes_opens_within_the_limits() {
    // 2^25 f64 positions of zeros compress to a few KiB of zstd; decoded, the coordinate
    // variable is 256 MiB. Opening the table must not abort under the address-space limit
    // (it used to be hashed into a set sized for every position), and the axis limit
    // refuses it when set below its length.
    let temp = tempdir();
    let dir = kept_or(&temp);
    let n = 1u64 << 25;
    let zeros = vec![0u8; (n * 8) as usize];
    let mut w = TetWriter::new();
    let zstd = || datafusion_tet::format::ChunkCodecs::Zstd(3);
    w.dataset(DatasetSpec::new("x", DType::F64, &[n], &[n / 8], &zeros).codecs(zstd()))
        .unwrap();
    w.dataset(
        DatasetSpec::new("v", DType::U8, &[n], &[n / 8], &zeros[..n as usize])
            .dim_names(&["x"])
            .codecs(zstd()),
    )
    .unwrap();
    w.write_path(dir.join("coords.tet")).unwrap();
    drop(zeros);
    assert!(std::fs::metadata(dir.join("coords.tet")).unwrap().len() < 256 << 10);
    expect_all(
        &dir,
        "coords.tet",
        "",
        &[
            (
                "SELECT count(*) AS n FROM tet('{f}', 'v') WHERE x = 0",
                r#"[{"n":33554432}]"#,
            ),
            ("SELECT v FROM tet('{f}', 'v') WHERE x >= 0 LIMIT 1", r#"[{"v":0}]"#),
        ],
    );
    expect_all(
        &dir,
        "coords.tet",
        "SET tet.max_axis_positions = 1000000; ",
        &[("SELECT count(*) FROM tet('{f}', 'v')", "tet.max_axis_positions")],
    );
}

/// Cells of a side of [`large_raw_tile`].
const LARGE: u64 = 16384;

/// `big.tet` in `dir`: one raw u8 chunk of 16384 × 16384 (256 MiB), `v = i % 251` of
/// cell `i`.
fn large_raw_tile(dir: &Path) {
    let data: Vec<u8> = (0..LARGE * LARGE).map(|i| (i % 251) as u8).collect();
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new(
        "v",
        DType::U8,
        &[LARGE, LARGE],
        &[LARGE, LARGE],
        &data,
    ))
    .unwrap();
    w.write_path(dir.join("big.tet")).unwrap();
}

#[test]
fn an_evaluated_aggregate_of_a_large_tile_holds_one_slab() {
    // Inputs and filters the fold evaluates with DataFusion's expressions: over the whole
    // 256 MiB tile at once, `CAST(v AS BIGINT)` or `v + 1` is an array of 2 GiB (beyond
    // the address-space limit: an abort); slab by slab, 128 KiB.
    let temp = tempdir();
    let dir = kept_or(&temp);
    large_raw_tile(&dir);
    let cells = 0..LARGE * LARGE;
    let s: u64 = cells.clone().map(|i| i % 251 % 3).sum();
    let n = cells.filter(|i| i % 251 + 1 > 200).count();
    let (want_s, want_n) = (format!(r#"[{{"s":{s}}}]"#), format!(r#"[{{"n":{n}}}]"#));
    expect_all(
        &dir,
        "big.tet",
        "",
        &[
            ("SELECT sum(CAST(v AS BIGINT) % 3) AS s FROM tet('{f}')", &want_s),
            ("SELECT count(*) AS n FROM tet('{f}') WHERE v + 1 > 200", &want_n),
        ],
    );
}

#[test]
fn decoded_tiles_are_bounded_by_the_memory_limit() {
    // Four zstd tiles of 64 MiB (compressing to little): under `-m 32m` none can be held
    // and each query fails naming the file, in the fold and in the scan; under `-m 400m`
    // they answer (the partitions hold a tile each).
    let temp = tempdir();
    let dir = kept_or(&temp);
    let side = 8192u64;
    let data: Vec<u8> = (0..4 * side * side).map(|i| (i % 7) as u8).collect();
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("v", DType::U8, &[4 * side, side], &[side, side], &data).codecs(ChunkCodecs::Zstd(1)))
        .unwrap();
    w.write_path(dir.join("zstd.tet")).unwrap();
    let s: u64 = data.iter().map(|&v| v as u64).sum();
    drop(data);
    let query = "SELECT sum(v) AS s FROM tet('{f}')";
    let off = "SET tet.aggregate_pushdown = false; ";
    for setup in ["", off] {
        expect_all_with(
            &["-m", "32m"],
            &dir,
            "zstd.tet",
            setup,
            &[(query, "Resources exhausted")],
        );
        expect_all_with(&["-m", "32m"], &dir, "zstd.tet", setup, &[(query, "zstd.tet")]);
        expect_all_with(
            &["-m", "400m"],
            &dir,
            "zstd.tet",
            setup,
            &[(query, &format!(r#"[{{"s":{s}}}]"#))],
        );
    }
}

#[test]
fn crossed_chunk_grids_answer_in_bounded_memory() {
    // `a` chunked by rows, `b` by columns, 4096 × 4096 u8 each (33 MB). Cut at every
    // boundary of both grids, their common grid is 16 M single cells: a plan of that many
    // tasks, each with its tile parts, is gigabytes, for any query. Under the
    // address-space limit every query answers, with the aggregate pushdown on and off
    // (DataFusion's own aggregate over the scan), the same as computed here.
    let temp = tempdir();
    let dir = kept_or(&temp);
    let n = 4096u64;
    let (a, b): (Vec<u8>, Vec<u8>) = (0..n * n)
        .map(|c| (((c / n) * 7 + c % n * 3) % 11, ((c / n) * 5 + c % n) % 13))
        .map(|(x, y)| (x as u8, y as u8))
        .unzip();
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new("a", DType::U8, &[n, n], &[1, n], &a))
        .unwrap();
    w.dataset(DatasetSpec::new("b", DType::U8, &[n, n], &[n, 1], &b))
        .unwrap();
    w.write_path(dir.join("crossed.tet")).unwrap();
    // The sums, the cells with a > 7 and their sum of b, the sum of a · b over a band of
    // columns.
    let (mut sa, mut sb, mut big, mut sb_big, mut product) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for c in 0..(n * n) as usize {
        let (x, y) = (a[c] as u64, b[c] as u64);
        (sa, sb) = (sa + x, sb + y);
        if x > 7 {
            (big, sb_big) = (big + 1, sb_big + y);
        }
        if (100..=2000).contains(&(c as u64 % n)) {
            product += x * y;
        }
    }
    let at = (4000 * n + 17) as usize;
    let t = "tet('{f}', 'a', 'b')";
    let queries: Vec<(String, String)> = vec![
        (
            format!("SELECT count(*) AS n FROM (SELECT a, b FROM {t} LIMIT 1)"),
            r#"[{"n":1}]"#.into(),
        ),
        (
            format!("SELECT a, b FROM {t} WHERE dim_0 = 4000 AND dim_1 = 17 LIMIT 1"),
            format!(r#"[{{"a":{},"b":{}}}]"#, a[at], b[at]),
        ),
        (
            format!("SELECT count(*) AS n FROM {t}"),
            format!(r#"[{{"n":{}}}]"#, n * n),
        ),
        (
            format!("SELECT sum(a) AS sa, sum(b) AS sb FROM {t}"),
            format!(r#"[{{"sa":{sa},"sb":{sb}}}]"#),
        ),
        (
            format!("SELECT count(*) AS n, sum(b) AS sb FROM {t} WHERE a > 7"),
            format!(r#"[{{"n":{big},"sb":{sb_big}}}]"#),
        ),
        (
            format!("SELECT sum(a * b) AS p FROM {t} WHERE dim_1 BETWEEN 100 AND 2000"),
            format!(r#"[{{"p":{product}}}]"#),
        ),
    ];
    let mut failures = Vec::new();
    for setup in ["", "SET tet.aggregate_pushdown = false; "] {
        for (q, want) in &queries {
            let sql = format!("{setup}{}", q.replace("{f}", "crossed.tet"));
            let (code, out, err, took) = run_limited(&sql, &dir);
            println!(
                "{sql}\n  -> exit {code:?} in {took:.2?}: {}",
                format!("{out}{err}").trim()
            );
            if code != Some(0) || !out.contains(want.as_str()) {
                failures.push(format!(
                    "{sql}: exit {code:?} after {took:.2?}, expected {want}: {out}{err}"
                ));
            }
        }
    }
    // A tile assembled for a task is held like a decoded one: above the limit, refused
    // with a message naming the file and the limit.
    let sql = format!(
        "SET tet.max_tile_bytes = 1000; SELECT sum(b) FROM {}",
        t.replace("{f}", "crossed.tet")
    );
    let (code, out, err, took) = run_limited(&sql, &dir);
    let message = format!("{out}{err}");
    println!("{sql}\n  -> exit {code:?} in {took:.2?}: {}", message.trim());
    let named = ["crossed.tet", "assembled", "tet.max_tile_bytes"];
    if code != Some(1) || !named.iter().all(|w| message.contains(w)) {
        failures.push(format!(
            "{sql}: exit {code:?}, expected an error naming {named:?}: {message}"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
