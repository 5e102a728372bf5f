//! The real files written by upstream in `../shared/fixtures/upstream` (skipped with a
//! notice when that folder is absent).

use crate::common::upstream_fixtures;
use crate::largest_allocation;
use datafusion_tet::format::{DType, FormatError, TetFile};

fn open(name: &str) -> Option<(Vec<u8>, Result<TetFile, FormatError>)> {
    let dir = upstream_fixtures()?;
    let bytes = std::fs::read(dir.join(name)).unwrap();
    let (r, largest) = largest_allocation(|| TetFile::open(bytes.as_slice()));
    assert!(largest < 1 << 20, "{name}: open allocated {largest} bytes at once");
    Some((bytes, r))
}

fn values(name: &str, ds: &str) -> Option<(TetFile, Vec<f64>)> {
    let (bytes, f) = open(name)?;
    let f = f.unwrap_or_else(|e| panic!("{name}: {e}"));
    let d = f.dataset(ds).unwrap();
    let raw = f.read_all(bytes.as_slice(), d, 1 << 30).unwrap();
    let v = raw
        .chunks_exact(d.dtype().size())
        .map(|b| d.dtype().decode(b).unwrap().as_f64())
        .collect();
    Some((f, v))
}

#[test]
fn accepted_fixtures_give_the_documented_values() {
    let Some((_, v)) = values("sample.tet", "temperature") else {
        return;
    };
    assert_eq!(v, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    for (name, dtype) in [
        ("multichunk_u8.tet", DType::U8),
        ("multichunk_u32.tet", DType::U32),
        ("multichunk_f16.tet", DType::F16),
    ] {
        let (f, v) = values(name, "a").unwrap();
        assert_eq!(f.dataset("a").unwrap().dtype(), dtype);
        assert_eq!(f.dataset("a").unwrap().record.chunk_count, 2);
        assert_eq!(v, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "{name}");
        let mean = v.iter().sum::<f64>() / 6.0;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 6.0;
        assert_eq!((v.iter().sum::<f64>(), mean), (21.0, 3.5));
        assert!((var - 2.9166666666666665).abs() < 1e-12);
    }
    let (f, v) = values("large.tet", "a").unwrap();
    let d = f.dataset("a").unwrap();
    assert_eq!((d.shape(), d.record.chunk_count), (&[34u64, 64][..], 144));
    assert_eq!(v.len(), 34 * 64);
    // Edge tiles are clipped: the last row of chunks holds 2 × 4 cells.
    let (_, e) = f.chunk(d, 143);
    assert_eq!(e.raw_byte_len, 2 * 4 * 4);

    let (f, v) = values("embedded_zone.tet", "a").unwrap();
    assert_eq!(v, vec![1.0, 2.0, 10.0, 11.0]);
    let footer = f.footer.as_ref().unwrap();
    assert_eq!(footer.history_version, 2);
    assert!(footer.has_zone_maps && footer.secondary_index.is_some());
    let zones = f.dataset("a").unwrap().zones.as_ref().unwrap();
    let z0 = zones[0].as_ref().unwrap();
    assert_eq!((z0.min.unwrap().as_f64(), z0.max.unwrap().as_f64()), (1.0, 2.0));
    // `v > 5` can skip chunk 0: its max is 2.
    assert!(z0.max.unwrap().as_f64() <= 5.0);
    assert_eq!(v.iter().filter(|x| **x > 5.0).sum::<f64>(), 21.0);

    let (f, v) = values("group_by_labels.tet", "a").unwrap();
    let d = f.dataset("a").unwrap();
    assert_eq!(d.dim_names(), vec!["row", "col"]);
    let labels = d.labels(1).unwrap();
    assert_eq!(labels, ["east", "east", "west"]);
    let by = |l: &str| (0..6).filter(|i| labels[i % 3] == l).map(|i| v[i]).sum::<f64>();
    assert_eq!((by("east"), by("west")), (12.0, 9.0));

    let (f, _) = values("align_pair.tet", "b").unwrap();
    assert_eq!(f.dataset_list(), "a, b");
    for n in ["a", "b"] {
        let d = f.dataset(n).unwrap();
        assert_eq!(d.labels(0).unwrap(), ["r0", "r1"]);
        assert_eq!(d.labels(1).unwrap(), ["c0", "c1", "c2"]);
    }

    let (f, v) = values("recording.tet", "frames").unwrap();
    assert_eq!(v.len(), 24);
    let d = f.dataset("frames").unwrap();
    assert_eq!(d.meta.attrs.get("frame_rate").map(String::as_str), Some("30"));
    assert_eq!(d.meta.attrs.get("media_kind").map(String::as_str), Some("video"));
    let h = &f.footer.as_ref().unwrap().history;
    assert!(
        h.iter()
            .any(|e| e.params.get("tool").map(String::as_str) == Some("tetration"))
    );
}

#[test]
fn damaged_fixtures_are_refused_with_a_message_naming_the_problem() {
    let Some(_) = upstream_fixtures() else { return };
    let cases: &[(&str, &str)] = &[
        ("plan.tet", "footer"),
        ("reject/payload_offset_past_eof.tet", "payload"),
        ("reject/inflated_stored_past_eof.tet", "chunk index row 0"),
        ("reject/raw_stored_len_mismatch.tet", "stored_byte_len"),
        ("reject/truncated_payload.tet", ""),
        ("reject/truncated_tidx.tet", ""),
        ("reject/duplicate_payload_offset.tet", "overlaps"),
        ("reject/chunk_coord_out_of_grid.tet", "chunk grid"),
        ("reject/zero_chunk_shape.tet", "chunk_shape"),
        ("reject/oom_dataset_count.tet", "dataset_count"),
        ("reject/overflow_tile_extent.tet", ""),
    ];
    for (name, needle) in cases {
        let (_, r) = open(name).unwrap();
        let e = r.err().unwrap_or_else(|| panic!("{name} was accepted")).to_string();
        assert!(e.contains(needle), "{name}: {e}");
        eprintln!("{name}: {e}");
    }
    // A corrupt zstd frame may open; reading that chunk fails clearly.
    let (bytes, r) = open("reject/zstd_garbage_payload.tet").unwrap();
    let f = r.unwrap();
    let d = &f.datasets[0];
    let e = f.read_all(bytes.as_slice(), d, 1 << 30).unwrap_err().to_string();
    assert!(e.contains("zstd") && e.contains("chunk index row"), "{e}");
}
