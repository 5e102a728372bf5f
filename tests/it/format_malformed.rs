//! Malformed variants of files we generate: truncations at every byte, length and count
//! fields overwritten with hostile values, random corruption. Each must give an error or a
//! consistent file — never a panic, never a large allocation.

use crate::common::{Rng, random_values};
use crate::largest_allocation;
use datafusion_tet::format::{ChunkCodecs, Codec, DType, DatasetSpec, HistoryEvent, TetFile, TetWriter};

/// A small file exercising every region: two datasets, zstd and raw chunks, labels,
/// attrs, history and zone maps.
fn sample() -> Vec<u8> {
    let mut rng = Rng(7);
    let a = random_values(&mut rng, DType::F32, 5 * 7);
    let b = random_values(&mut rng, DType::I16, 3 * 4 * 2);
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("a", DType::F32, &[5, 7], &[2, 3], &a)
            .codecs(ChunkCodecs::PerChunk(
                (0..9)
                    .map(|i| if i % 2 == 0 { Codec::Zstd } else { Codec::Raw })
                    .collect(),
            ))
            .dim_names(&["y", "x"])
            .labels("y", (0..5).map(|i| format!("y{i}")).collect())
            .attr("_FillValue", "-9999"),
    )
    .unwrap();
    w.dataset(DatasetSpec::new("b", DType::I16, &[3, 4, 2], &[2, 2, 2], &b).codecs(ChunkCodecs::Zstd(1)))
        .unwrap();
    w.history(HistoryEvent {
        op: "write".into(),
        source: "test".into(),
        at: "0".into(),
        ..Default::default()
    });
    w.zone_maps(true);
    w.to_bytes().unwrap()
}

/// Open, and when that succeeds decode every chunk of every dataset; return whether all
/// of it succeeded. Asserts the allocation bound.
fn exercise(bytes: &[u8], what: &str) -> bool {
    let (ok, largest) = largest_allocation(|| match TetFile::open(bytes) {
        Err(e) => {
            assert!(!e.to_string().is_empty());
            false
        }
        Ok(f) => f.datasets.iter().all(|d| f.read_all(bytes, d, 1 << 20).is_ok()),
    });
    assert!(largest < 4 << 20, "{what}: allocated {largest} bytes at once");
    ok
}

#[test]
fn the_sample_itself_is_valid() {
    assert!(exercise(&sample(), "sample"));
}

#[test]
fn every_truncation_is_an_error() {
    let full = sample();
    for len in 0..full.len() {
        assert!(
            !exercise(&full[..len], &format!("truncated to {len}")),
            "truncated to {len} was accepted"
        );
    }
}

#[test]
fn hostile_length_and_count_fields_never_panic() {
    let full = sample();
    let f = TetFile::open(full.as_slice()).unwrap();
    let idx = f.superblock.chunk_index_offset as usize;
    // (offset, width) of every length/count/offset field we know of.
    let mut fields: Vec<(usize, usize)> = vec![(4, 4), (8, 4), (12, 4), (16, 8), (24, 8), (32, 8)];
    fields.extend([(40, 4), (44, 4), (48, 4)]); // first record: name_len, dtype, ndim
    fields.extend([(idx + 4, 4), (idx + 8, 8)]);
    for r in 0..f.chunks.len() {
        let row = idx + 32 + r * 104;
        for k in 0..13 {
            fields.push((row + k * 8, 8));
        }
        fields.push((row + 96, 4));
    }
    let n = full.len();
    fields.extend([(n - 16, 8), (n - 8, 4)]);
    let hostile: [u64; 9] = [
        0,
        1,
        7,
        104,
        u32::MAX as u64,
        u64::MAX,
        1 << 40,
        (1 << 62) + 3,
        n as u64,
    ];
    let mut accepted = 0;
    for &(off, width) in &fields {
        for &v in &hostile {
            let mut b = full.clone();
            b[off..off + width].copy_from_slice(&v.to_le_bytes()[..width]);
            if exercise(&b, &format!("field at {off} = {v}")) {
                accepted += 1;
            }
        }
    }
    // Some rewrites are harmless (a value equal to the original); most must be refused.
    assert!(
        accepted < fields.len() * hostile.len() / 4,
        "{accepted} hostile variants accepted"
    );
}

#[test]
fn random_corruption_never_panics() {
    let full = sample();
    let mut rng = Rng(99);
    for i in 0..3000 {
        let mut b = full.clone();
        for _ in 0..rng.range(1, 4) {
            let p = rng.below(b.len() as u64) as usize;
            b[p] ^= 1 << rng.below(8);
        }
        exercise(&b, &format!("corruption {i}"));
    }
}

#[test]
fn huge_counts_are_refused_before_allocation() {
    let full = sample();
    // dataset_count = u32::MAX.
    let mut b = full.clone();
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = TetFile::open(b.as_slice()).unwrap_err().to_string();
    assert!(e.contains("dataset_count"), "{e}");
    // entry_count = 2^60.
    let idx = TetFile::open(full.as_slice()).unwrap().superblock.chunk_index_offset as usize;
    let mut b = full.clone();
    b[idx + 8..idx + 16].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let e = TetFile::open(b.as_slice()).unwrap_err().to_string();
    assert!(e.contains("entry_count"), "{e}");
}
