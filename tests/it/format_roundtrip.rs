//! Property tests: random files written by our writer read back cell for cell.

use crate::common::{Rng, random_codecs, random_geometry, random_values};
use datafusion_tet::format::{
    ChunkCodecs, Codec, DType, DatasetSpec, ExecutionSettings, HistoryEvent, Scalar, TetFile, TetWriter,
};
use proptest::prelude::*;

/// A random dataset description (owning its data).
pub struct RandomDataset {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub chunk: Vec<u64>,
    pub data: Vec<u8>,
    pub codecs: ChunkCodecs,
    pub dims: Option<Vec<String>>,
    pub labels: Vec<(usize, Vec<String>)>,
    pub attrs: Vec<(String, String)>,
}

impl RandomDataset {
    pub fn generate(rng: &mut Rng, name: &str) -> RandomDataset {
        let dtype = DType::ALL[rng.below(10) as usize];
        let ndim = rng.range(1, 5) as usize;
        let (shape, chunk) = random_geometry(rng, ndim, 3000);
        let cells: u64 = shape.iter().product();
        let data = random_values(rng, dtype, cells as usize);
        let chunks: u64 = shape.iter().zip(&chunk).map(|(s, c)| s.div_ceil(*c)).product();
        let codecs = match rng.below(3) {
            0 => ChunkCodecs::Raw,
            1 => ChunkCodecs::Zstd(rng.range(1, 5) as i32),
            _ => random_codecs(rng, chunks),
        };
        let dims = (rng.below(3) > 0).then(|| (0..ndim).map(|d| format!("{name}_ax{d}")).collect::<Vec<_>>());
        let mut labels = Vec::new();
        for (d, &extent) in shape.iter().enumerate() {
            if rng.below(3) == 0 {
                // Labels may repeat.
                labels.push((
                    d,
                    (0..extent)
                        .map(|i| format!("L{}", (i * 7 + rng.below(2)) % 5))
                        .collect(),
                ));
            }
        }
        let attrs = (0..rng.below(4))
            .map(|i| (format!("k{i}"), format!("value {}", rng.next())))
            .collect();
        RandomDataset {
            name: name.into(),
            dtype,
            shape,
            chunk,
            data,
            codecs,
            dims,
            labels,
            attrs,
        }
    }

    pub fn dim_name(&self, d: usize) -> String {
        self.dims
            .as_ref()
            .map(|v| v[d].clone())
            .unwrap_or_else(|| format!("dim_{d}"))
    }

    pub fn spec(&self) -> DatasetSpec<'_> {
        let mut s = DatasetSpec::new(self.name.clone(), self.dtype, &self.shape, &self.chunk, &self.data)
            .codecs(self.codecs.clone());
        if let Some(d) = &self.dims {
            s = s.dim_names(&d.iter().map(String::as_str).collect::<Vec<_>>());
        }
        for (d, l) in &self.labels {
            s = s.labels(&self.dim_name(*d), l.clone());
        }
        for (k, v) in &self.attrs {
            s = s.attr(k, v);
        }
        s
    }

    /// The tile at chunk coordinates `c`, extracted by brute force from the array.
    pub fn tile(&self, c: &[u64]) -> Vec<u8> {
        let size = self.dtype.size();
        let start: Vec<u64> = c.iter().zip(&self.chunk).map(|(i, s)| i * s).collect();
        let ext: Vec<u64> = (0..self.shape.len())
            .map(|d| self.chunk[d].min(self.shape[d] - start[d]))
            .collect();
        let mut out = Vec::new();
        let cells: u64 = ext.iter().product();
        for k in 0..cells {
            // Unravel k within the tile, then ravel in the array.
            let mut rem = k;
            let mut idx = vec![0u64; ext.len()];
            for d in (0..ext.len()).rev() {
                idx[d] = rem % ext[d];
                rem /= ext[d];
            }
            let mut off = 0u64;
            for d in 0..ext.len() {
                off = off * self.shape[d] + start[d] + idx[d];
            }
            let o = off as usize * size;
            out.extend_from_slice(&self.data[o..o + size]);
        }
        out
    }
}

fn check_round_trip(seed: u64) {
    let mut rng = Rng(seed);
    let n = rng.range(1, 3) as usize;
    let sets: Vec<RandomDataset> = (0..n)
        .map(|i| RandomDataset::generate(&mut rng, &format!("ds{i}")))
        .collect();
    let mut w = TetWriter::new();
    for s in &sets {
        w.dataset(s.spec()).unwrap();
    }
    let exec = ExecutionSettings {
        memory_budget_percent_bps: rng.below(10001) as u16,
        memory_budget_bytes: rng.next() as u32,
    };
    w.execution(exec);
    let zones = rng.below(2) == 0;
    w.zone_maps(zones);
    if rng.below(2) == 0 {
        w.history(HistoryEvent {
            op: "write".into(),
            source: "proptest".into(),
            at: seed.to_string(),
            ..Default::default()
        });
    }
    let bytes = w.to_bytes().unwrap();
    let file = TetFile::open(bytes.as_slice()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert_eq!(file.execution, exec);
    assert_eq!(file.datasets.len(), n);
    for s in &sets {
        let ds = file.dataset(&s.name).unwrap();
        assert_eq!(ds.dtype(), s.dtype);
        assert_eq!(ds.shape(), s.shape.as_slice());
        assert_eq!(ds.record.chunk_shape, s.chunk);
        assert_eq!(
            ds.dim_names(),
            (0..s.shape.len()).map(|d| s.dim_name(d)).collect::<Vec<_>>()
        );
        for (d, l) in &s.labels {
            assert_eq!(ds.labels(*d).unwrap(), l.as_slice());
        }
        for (k, v) in &s.attrs {
            assert_eq!(ds.meta.attrs.get(k), Some(v));
        }
        assert_eq!(
            file.read_all(bytes.as_slice(), ds, u64::MAX).unwrap(),
            s.data,
            "seed {seed}"
        );
        for linear in 0..ds.record.chunk_count {
            let c = ds.record.chunk_coords(linear);
            let tile = s.tile(&c);
            assert_eq!(
                file.read_chunk(bytes.as_slice(), ds, linear, u64::MAX).unwrap(),
                tile,
                "seed {seed} chunk {c:?}"
            );
            let (_, e) = file.chunk(ds, linear);
            match &s.codecs {
                ChunkCodecs::Raw => assert_eq!(e.codec, Codec::Raw),
                ChunkCodecs::Zstd(_) => assert_eq!(e.codec, Codec::Zstd),
                ChunkCodecs::PerChunk(v) => assert_eq!(e.codec, v[linear as usize]),
            }
            if zones {
                let z = ds.zones.as_ref().unwrap()[linear as usize].as_ref().unwrap();
                let vals: Vec<Scalar> = tile
                    .chunks_exact(s.dtype.size())
                    .map(|b| s.dtype.decode(b).unwrap())
                    .collect();
                assert_eq!(z.element_count, vals.len() as u64);
                let f: Vec<f64> = vals.iter().map(|v| v.as_f64()).collect();
                let min = f.iter().cloned().fold(f64::INFINITY, f64::min);
                let max = f.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                assert_eq!(z.min.unwrap().as_f64(), min);
                assert_eq!(z.max.unwrap().as_f64(), max);
            } else {
                assert!(ds.zones.is_none());
            }
        }
        // A random sub-box equals brute-force slicing.
        let start: Vec<u64> = s.shape.iter().map(|&e| rng.below(e)).collect();
        let ext: Vec<u64> = s
            .shape
            .iter()
            .zip(&start)
            .map(|(&e, &st)| rng.range(1, e - st))
            .collect();
        let got = file.read_box(bytes.as_slice(), ds, &start, &ext, u64::MAX).unwrap();
        let mut want = Vec::new();
        let size = s.dtype.size() as u64;
        // Brute force, cell by cell: the box's k-th cell (row-major) and its offset.
        let cells: u64 = ext.iter().product();
        for k in 0..cells {
            let (mut rest, mut off, mut stride) = (k, 0u64, 1u64);
            for d in (0..ext.len()).rev() {
                off += (start[d] + rest % ext[d]) * stride;
                rest /= ext[d];
                stride *= s.shape[d];
            }
            want.extend_from_slice(&s.data[(off * size) as usize..((off + 1) * size) as usize]);
        }
        assert_eq!(got, want, "seed {seed} box {start:?}+{ext:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn random_files_round_trip(seed in any::<u64>()) {
        check_round_trip(seed);
    }
}

#[test]
fn empty_file_round_trips() {
    let bytes = TetWriter::new().to_bytes().unwrap();
    assert_eq!(bytes.len(), 32);
    let f = TetFile::open(bytes.as_slice()).unwrap();
    assert!(f.datasets.is_empty());
    assert!(f.dataset("x").unwrap_err().to_string().contains("no datasets"));
}

#[test]
fn large_metadata_spills_out_of_line_and_reads_back() {
    let data: Vec<u8> = (0..64u32).flat_map(|v| (v as f32).to_le_bytes()).collect();
    let mut w = TetWriter::new();
    // 40 datasets × 60 attrs of 40 bytes exceed the 64 KiB inline footer limit.
    let names: Vec<String> = (0..40).map(|i| format!("d{i}")).collect();
    for n in &names {
        let mut s = DatasetSpec::new(n.clone(), DType::F32, &[8, 8], &[3, 5], &data);
        for a in 0..60 {
            s = s.attr(&format!("attr_{a:03}"), &"x".repeat(40));
        }
        w.dataset(s).unwrap();
    }
    let bytes = w.to_bytes().unwrap();
    let f = TetFile::open(bytes.as_slice()).unwrap();
    assert!(f.footer.as_ref().unwrap().metadata_spilled);
    assert_eq!(f.dataset("d39").unwrap().meta.attrs.len(), 60);
}

#[test]
fn writer_refuses_inconsistent_input() {
    let data = vec![0u8; 24];
    let mut w = TetWriter::new();
    let e = w
        .dataset(DatasetSpec::new("a", DType::F32, &[2, 3], &[2, 0], &data))
        .unwrap_err();
    assert!(e.to_string().contains("chunk_shape"), "{e}");
    let e = w
        .dataset(DatasetSpec::new("a", DType::F64, &[2, 3], &[2, 2], &data))
        .unwrap_err();
    assert!(e.to_string().contains("needs 48"), "{e}");
    let e = w
        .dataset(DatasetSpec::new("a", DType::F32, &[2, 3], &[2, 2], &data).labels("dim_1", vec!["x".into()]))
        .unwrap_err();
    assert!(e.to_string().contains("1 labels"), "{e}");
}
