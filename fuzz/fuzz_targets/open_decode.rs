//! Fuzz target: open any byte string as a `.tet` file and, when it opens, decode every
//! chunk of every dataset. Must never panic, overflow or allocate without bound.
#![no_main]

#[allow(dead_code)]
#[path = "../../src/format/mod.rs"]
mod format;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(file) = format::TetFile::open(data) {
        for ds in &file.datasets {
            // Chunk-by-chunk decode, tiles of at most 16 MiB (a zstd row may claim more).
            for linear in 0..ds.record.chunk_count {
                let _ = file.read_chunk(data, ds, linear, 1 << 24);
            }
            let _ = file.read_all(data, ds, 1 << 24);
        }
    }
});
