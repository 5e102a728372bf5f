//! Cross-implementation checks against the upstream `tetration` 0.8.3 crate: files it
//! writes are read by us, files we write pass its `verify` and decode to the same tiles.

use crate::common::{Rng, tempdir};
use crate::format_roundtrip::RandomDataset;
use datafusion_tet::format::{ChunkCodecs, Codec, DType, TetFile, TetWriter};
use std::collections::BTreeMap;
use tetration::catalog::{CHUNK_PAYLOAD_CODEC_V1, CoordAxisV1, TetDatasetWrite, TetWriterSession, read_tet_summary_v1};
use tetration::verify::{VerifyOptions, verify_tet_file_with_options};

/// Datasets covering every dtype and ranks 1–5, with edge tiles.
fn cover_all(seed: u64) -> Vec<RandomDataset> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for (i, dtype) in DType::ALL.iter().enumerate() {
        let mut d = RandomDataset::generate(&mut rng, &format!("d{i}"));
        d.dtype = *dtype;
        let ndim = i % 5 + 1;
        let (shape, chunk) = crate::common::random_geometry(&mut rng, ndim, 2000);
        // Force at least one clipped edge tile on axis 0.
        let (shape, chunk) = if shape[0] > 1 {
            let mut c = chunk;
            c[0] = shape[0] - 1;
            (shape, c)
        } else {
            (shape, chunk)
        };
        d.data = crate::common::random_values(&mut rng, *dtype, shape.iter().product::<u64>() as usize);
        let chunks: u64 = shape.iter().zip(&chunk).map(|(s, c)| s.div_ceil(*c)).product();
        d.codecs = ChunkCodecs::PerChunk(
            (0..chunks)
                .map(|k| if k % 2 == 0 { Codec::Zstd } else { Codec::Raw })
                .collect(),
        );
        d.labels.retain(|(ax, _)| *ax < ndim);
        d.labels = (0..ndim)
            .filter(|a| a % 2 == 0)
            .map(|a| (a, (0..shape[a]).map(|k| format!("lab{}", k % 3)).collect()))
            .collect();
        d.dims = Some((0..ndim).map(|a| format!("axis{a}")).collect());
        d.attrs = vec![
            ("units".into(), "K".into()),
            ("long_name".into(), format!("dataset {i}")),
        ];
        d.shape = shape;
        d.chunk = chunk;
        out.push(d);
    }
    out
}

#[test]
fn upstream_verifies_and_decodes_files_we_write() {
    let dir = tempdir();
    for (k, zones) in [(1u64, false), (2, true)] {
        let sets = cover_all(k);
        let mut w = TetWriter::new();
        for s in &sets {
            w.dataset(s.spec()).unwrap();
        }
        w.zone_maps(zones);
        let path = dir.path().join(format!("ours{k}.tet"));
        w.write_path(&path).unwrap();
        let report = verify_tet_file_with_options(&path, VerifyOptions { deep_decode: true }).unwrap();
        assert!(report.ok, "upstream verify rejected our file: {:?}", report.findings);

        let bytes = std::fs::read(&path).unwrap();
        let summary = read_tet_summary_v1(&bytes).unwrap();
        assert_eq!(summary.datasets.len(), sets.len());
        for (rec, s) in summary.datasets.iter().zip(&sets) {
            assert_eq!(
                (rec.name.as_str(), rec.dtype, &rec.shape, &rec.chunk_shape),
                (s.name.as_str(), s.dtype.tag(), &s.shape, &s.chunk)
            );
            let meta = summary.metadata.datasets.get(&s.name).expect("metadata");
            assert_eq!(meta.dim_names.as_ref(), s.dims.as_ref());
            for (ax, labels) in &s.labels {
                assert_eq!(&meta.coords.as_ref().unwrap()[&s.dim_name(*ax)].labels, labels);
            }
            assert_eq!(meta.attrs.get("units").map(String::as_str), Some("K"));
        }
        // Every chunk decoded by upstream equals the tile cut from the array by brute force.
        for e in &summary.chunks {
            let s = &sets[e.dataset_id as usize];
            let stored = &bytes[e.payload_offset as usize..(e.payload_offset + e.stored_byte_len) as usize];
            let raw = CHUNK_PAYLOAD_CODEC_V1
                .decode_tile_payload(stored, e.raw_byte_len, e.stored_byte_len, e.codec)
                .unwrap();
            assert_eq!(raw.as_ref(), s.tile(&e.chunk_index[..s.shape.len()]).as_slice());
        }
    }
}

fn upstream_write(path: &std::path::Path, sets: &[RandomDataset], zstd: bool) {
    let mut session = TetWriterSession::create(path);
    for s in sets {
        let mut w =
            TetDatasetWrite::row_major(s.name.clone(), s.dtype.tag(), &s.shape, &s.chunk, s.data.clone()).unwrap();
        if zstd {
            w.chunk_codec = CHUNK_PAYLOAD_CODEC_V1.zstd;
        }
        w.dim_names = s.dims.clone();
        if !s.labels.is_empty() {
            let mut c = BTreeMap::new();
            for (ax, l) in &s.labels {
                c.insert(s.dim_name(*ax), CoordAxisV1 { labels: l.clone() });
            }
            w.coords = Some(c);
        }
        for (k, v) in &s.attrs {
            w = w.with_attr(k.clone(), v.clone());
        }
        session.push_dataset(w).unwrap();
    }
    session.commit().unwrap();
}

#[test]
fn we_read_files_upstream_writes() {
    let dir = tempdir();
    for (k, zstd) in [(11u64, false), (12, true)] {
        let sets = cover_all(k);
        let path = dir.path().join(format!("up{k}.tet"));
        upstream_write(&path, &sets, zstd);
        let bytes = std::fs::read(&path).unwrap();
        let file = TetFile::open(bytes.as_slice()).unwrap_or_else(|e| panic!("{e}"));
        let footer = file.footer.as_ref().expect("upstream writes a footer");
        assert!(!footer.history.is_empty());
        for s in &sets {
            let ds = file.dataset(&s.name).unwrap();
            assert_eq!(ds.dtype(), s.dtype);
            assert_eq!(ds.shape(), s.shape.as_slice());
            assert_eq!(ds.record.chunk_shape, s.chunk);
            assert_eq!(ds.meta.dim_names, s.dims);
            for (ax, labels) in &s.labels {
                assert_eq!(ds.labels(*ax).unwrap(), labels.as_slice());
            }
            assert_eq!(ds.meta.attrs.get("units").map(String::as_str), Some("K"));
            let all = file.read_all(bytes.as_slice(), ds, u64::MAX).unwrap();
            assert_eq!(all, s.data, "dataset {} ({})", s.name, s.dtype);
            for linear in 0..ds.record.chunk_count {
                let (_, e) = file.chunk(ds, linear);
                assert_eq!(e.codec, if zstd { Codec::Zstd } else { Codec::Raw });
            }
            // Upstream embeds zone maps on commit: they must agree with the data.
            if let Some(zones) = &ds.zones {
                for linear in 0..ds.record.chunk_count {
                    let Some(z) = &zones[linear as usize] else { continue };
                    let tile = s.tile(&ds.record.chunk_coords(linear));
                    let vals: Vec<f64> = tile
                        .chunks_exact(s.dtype.size())
                        .map(|b| s.dtype.decode(b).unwrap().as_f64())
                        .collect();
                    assert_eq!(z.element_count, vals.len() as u64);
                    assert_eq!(
                        z.min.unwrap().as_f64(),
                        vals.iter().cloned().fold(f64::INFINITY, f64::min)
                    );
                    assert_eq!(
                        z.max.unwrap().as_f64(),
                        vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                    );
                }
            }
        }
        assert!(
            file.footer.as_ref().unwrap().has_zone_maps,
            "upstream commit embeds zone maps"
        );
    }
}
