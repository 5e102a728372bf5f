//! Local files shared with other processes: a file truncated or rewritten while a query
//! reads it fails that query with an error naming the file, and the process lives on
//! (no SIGBUS); paths that are not regular files (FIFOs, devices, directories) are
//! refused at once, without blocking.

use crate::common::{ctx, rows, tempdir};
use datafusion::physical_plan::collect;
use datafusion_tet::format::{DType, DatasetSpec, TetWriter};
use std::path::Path;
use std::time::Duration;

/// A file of one f32 dataset `temp` (32 × 256 × 256, tiles of 4 × 256 × 256: 1 MiB each,
/// raw), every value 1.0.
fn write_cube(path: &Path) {
    let data: Vec<u8> = std::iter::repeat_n(1.0f32.to_le_bytes(), 32 * 256 * 256)
        .flatten()
        .collect();
    let mut w = TetWriter::new();
    w.dataset(DatasetSpec::new(
        "temp",
        DType::F32,
        &[32, 256, 256],
        &[4, 256, 256],
        &data,
    ))
    .unwrap();
    w.write_path(path).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_truncated_or_rewritten_under_a_query_fails_that_query_and_nothing_else() {
    let dir = tempdir();
    let path = dir.path().join("shrinking.tet");
    let p = path.display().to_string();
    for (k, sql) in [
        format!("SELECT sum(v), count(*) FROM tet('{p}', 'temp')"),
        format!("SELECT dim_1, max(v) FROM tet('{p}', 'temp') GROUP BY dim_1"),
        format!("SELECT * FROM tet('{p}', 'temp') WHERE v > 0.5"),
    ]
    .into_iter()
    .enumerate()
    {
        write_cube(&path);
        let ctx = ctx();
        // Planned (the file opened and mapped), then cut to 1 MiB before it runs.
        let plan = ctx.sql(&sql).await.unwrap().create_physical_plan().await.unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(1 << 20).unwrap();
        let e = collect(plan, ctx.task_ctx()).await.unwrap_err().to_string();
        assert!(e.contains(&p) && e.contains("truncated while being read"), "{sql}: {e}");
        // Rewritten in place to its old length with other bytes: the length matches, the
        // modification time does not.
        write_cube(&path);
        let plan = ctx.sql(&sql).await.unwrap().create_physical_plan().await.unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let len = std::fs::metadata(&path).unwrap().len();
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = (len / 2) as usize;
        bytes[mid..mid + 4].copy_from_slice(&2.0f32.to_le_bytes());
        // Same inode, same length: a write in place (not a rename over it).
        std::fs::write(&path, &bytes).unwrap();
        let e = collect(plan, ctx.task_ctx()).await.unwrap_err().to_string();
        assert!(
            e.contains(&p) && (e.contains("rewritten in place") || e.contains("truncated")),
            "case {k}, {sql}: {e}"
        );
        // The session goes on: the file as it is now answers a new query.
        assert!(!rows(&ctx, &sql).await.is_empty(), "{sql}");
    }
}

/// A file renamed over the one mapped leaves the map on the old inode, whose bytes stay
/// whole: the query planned before answers from them.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_renamed_over_a_mapped_one_leaves_the_query_on_the_old_bytes() {
    let dir = tempdir();
    let path = dir.path().join("replaced.tet");
    write_cube(&path);
    let p = path.display();
    let ctx = ctx();
    let sql = format!("SELECT sum(v) FROM tet('{p}', 'temp')");
    let plan = ctx.sql(&sql).await.unwrap().create_physical_plan().await.unwrap();
    let other = dir.path().join("other.tet");
    std::fs::write(&other, b"not a tet file").unwrap();
    std::fs::rename(&other, &path).unwrap();
    let batches = collect(plan, ctx.task_ctx()).await.unwrap();
    let sum = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::Float64Array>()
        .unwrap()
        .value(0);
    assert_eq!(sum, (32 * 256 * 256) as f64);
}

/// `f` on another thread, which must return within 20 s (a blocking open would not).
fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("blocked: opening the path did not return")
}

#[cfg(unix)]
#[test]
fn fifos_devices_and_directories_are_refused_without_blocking() {
    let dir = tempdir();
    let fifo = dir.path().join("pipe.tet");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let folder = dir.path().join("folder.tet");
    std::fs::create_dir(&folder).unwrap();
    for (path, what) in [
        (fifo.display().to_string(), "a FIFO"),
        ("/dev/zero".to_string(), "a device"),
        ("/dev/null".to_string(), "a device"),
        (folder.display().to_string(), "a directory"),
    ] {
        let p = path.clone();
        let e = within_seconds(move || datafusion_tet::io::TetSource::open(&p).map(|_| ()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&path) && e.contains(what) && e.contains("not a regular file"),
            "{e}"
        );
        let p = path.clone();
        let e = within_seconds(move || {
            tokio::runtime::Runtime::new().unwrap().block_on(async move {
                let ctx = ctx();
                match ctx.sql(&format!("SELECT count(*) FROM tet('{p}')")).await {
                    Ok(df) => df.collect().await.map(|_| ()),
                    Err(e) => Err(e),
                }
            })
        })
        .unwrap_err()
        .to_string();
        // A directory given to tet() names an archive: every .tet in it (none here).
        let refused = match what {
            "a directory" => "matches no .tet file",
            _ => "not a regular file",
        };
        assert!(e.contains(&path) && e.contains(refused), "{e}");
    }
}
