//! Maps per grid cell over an outer axis (`GROUP BY lat, lon` over time: the per-cell fold,
//! block of cells by block of cells over batches of tiles): on files whose tiles hold one
//! or several time steps, all or part of the cells, with NaNs, fill values and packing,
//! each answer equals DataFusion's own plan (pushdown off), with the fold in the plan.

use crate::agg_differential::{compare, merged_by_datafusion, no_pushdown};
use crate::common::{Rng, Val, assert_same, ctx, rows, tempdir};
use datafusion_tet::format::{DType, DatasetSpec, TetWriter};
use std::path::Path;

/// A `(time, lat, lon)` cube of `shape` in tiles of `chunk`: f32 around 280 with the fill
/// value -999 and (`nans`) NaNs, or (`packed`) int16 with a scale, an offset and a fill value.
fn write_cube(path: &Path, shape: [u64; 3], chunk: [u64; 3], packed: bool, nans: bool, rng: &mut Rng) {
    let n = shape.iter().product::<u64>() as usize;
    let mut bytes = Vec::with_capacity(n * 4);
    for _ in 0..n {
        let r = rng.below(1000);
        if packed {
            let x: i16 = if r < 20 {
                -32768
            } else {
                (rng.below(4000) as i16) - 2000
            };
            bytes.extend_from_slice(&x.to_le_bytes());
        } else {
            let x: f32 = match r {
                0..10 if nans => f32::NAN,
                10..30 => -999.0,
                _ => 280.0 + (rng.below(2_000_000) as f32 - 1_000_000.0) / 50_000.0,
            };
            bytes.extend_from_slice(&x.to_le_bytes());
        }
    }
    let dtype = if packed { DType::I16 } else { DType::F32 };
    let mut spec = DatasetSpec::new("t", dtype, &shape, &chunk, &bytes).dim_names(&["time", "lat", "lon"]);
    spec = if packed {
        spec.attr("_FillValue", "-32768")
            .attr("scale_factor", "0.01")
            .attr("add_offset", "280.0")
    } else {
        spec.attr("_FillValue", "-999.0")
    };
    let mut w = TetWriter::new();
    w.dataset(spec).unwrap();
    w.write_path(path).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn per_cell_maps_equal_datafusion() {
    let dir = tempdir();
    let (on, off, states) = (ctx(), no_pushdown().await, merged_by_datafusion().await);
    let mut rng = Rng(59);
    // 40 × 60 = 2 400 cells per time step: more than one block of cells. Tiles of one
    // step (batches across tasks), of several (and more than a batch in one tile), of part
    // of the cells (batches end where the cells change), and of the whole cube.
    let layouts: [([u64; 3], [u64; 3], bool); 6] = [
        ([70, 40, 60], [1, 40, 60], false),
        ([70, 40, 60], [8, 40, 60], false),
        ([70, 40, 60], [70, 40, 60], false),
        ([70, 40, 60], [5, 16, 25], false),
        ([70, 40, 60], [3, 40, 60], true),
        ([41, 7, 9], [2, 3, 9], true),
    ];
    for (k, (shape, chunk, packed)) in layouts.into_iter().enumerate() {
        let path = dir.path().join(format!("maps{k}.tet"));
        write_cube(&path, shape, chunk, packed, false, &mut rng);
        let f = format!("tet('{}', 't')", path.display());
        for q in [
            format!("SELECT lat, lon, avg(v), stddev(v), max(v) FROM {f} GROUP BY lat, lon"),
            format!(
                "SELECT lat, lon, count(*), count(v), sum(v), min(v), var_pop(v) FROM {f} \
                 WHERE time >= 3 AND time < 61 GROUP BY lat, lon"
            ),
            format!(
                "SELECT lon, lat, avg(v) FILTER (WHERE v > 280.5), count(*) FILTER (WHERE v < 279), var(v) \
                 FROM {f} WHERE lon BETWEEN 5 AND 47 AND lat <> 3 GROUP BY lon, lat"
            ),
            format!("SELECT lat, lon, count(*) FROM {f} WHERE time % 2 = 0 GROUP BY lat, lon"),
            format!("SELECT lat, lon, avg(v * 1.8 - 459.67), stddev_pop(v) FROM {f} WHERE v > 279.5 GROUP BY 1, 2"),
            format!("SELECT lon, var(v), stddev_pop(v), min(v), count(v) FROM {f} GROUP BY lon"),
            format!("SELECT lat, lon, avg(v) FROM {f} WHERE lat < 2 AND lon > 50 GROUP BY lat, lon"),
        ] {
            assert!(compare(&on, &off, &q, Some(true)).await, "{q}");
            assert!(compare(&states, &off, &q, Some(true)).await, "{q}");
        }
        // NaNs among the values, without extremes: DataFusion's grouped min/max of floats
        // depend on the order rows arrive in when a NaN is among them (docs/pushdown.md).
        let path = dir.path().join(format!("maps{k}_nan.tet"));
        write_cube(&path, shape, chunk, packed, true, &mut rng);
        let f = format!("tet('{}', 't')", path.display());
        for q in [
            format!("SELECT lat, lon, avg(v), stddev(v), count(v), count(*) FROM {f} GROUP BY lat, lon"),
            format!(
                "SELECT lat, lon, sum(v) FILTER (WHERE v > 280.5), var_pop(v) FROM {f} \
                 WHERE time > 4 AND lon < 33 GROUP BY lat, lon"
            ),
        ] {
            assert!(compare(&on, &off, &q, Some(true)).await, "{q}");
            assert!(compare(&states, &off, &q, Some(true)).await, "{q}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn per_cell_maps_of_four_axes_equal_datafusion() {
    // Two outer axes not grouped, and an inner axis not grouped between grouped ones: its
    // cells share a group inside each slice.
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let mut rng = Rng(5901);
    let shape = [9u64, 4, 30, 50];
    let n = shape.iter().product::<u64>() as usize;
    let bytes: Vec<u8> = (0..n)
        .flat_map(|_| ((rng.below(100_000) as f64 - 50_000.0) / 7.0).to_le_bytes())
        .collect();
    let path = dir.path().join("four.tet");
    let spec =
        DatasetSpec::new("t", DType::F64, &shape, &[2, 4, 30, 50], &bytes).dim_names(&["time", "level", "y", "x"]);
    let mut w = TetWriter::new();
    w.dataset(spec).unwrap();
    w.write_path(&path).unwrap();
    let f = format!("tet('{}', 't')", path.display());
    for q in [
        format!("SELECT y, x, avg(v), var(v), max(v), count(*) FROM {f} GROUP BY y, x"),
        format!("SELECT level, x, stddev(v), min(v) FROM {f} WHERE y BETWEEN 4 AND 20 GROUP BY level, x"),
        format!("SELECT level, y, x, sum(v) FROM {f} WHERE time > 2 GROUP BY level, y, x"),
    ] {
        assert!(compare(&on, &off, &q, Some(true)).await, "{q}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_percentile_per_cell_folded_or_in_datafusions_row_plan_does_not_panic() {
    // DataFusion 55.2's grouped `percentile_cont` panics once a partial aggregate of many
    // groups stops aggregating (here: 4 values in each of 259 920 groups); the sessions we
    // register keep partial aggregation on, and the fold gathers the values itself. Each
    // cell's 4 values are 4c, 4c + 1, ... in some order, so its median is 4c + 1.5.
    let dir = tempdir();
    let mut rng = Rng(5902);
    let (t, cells) = (4u64, 361u64 * 720);
    let mut values = vec![0f32; (t * cells) as usize];
    for c in 0..cells {
        let mut steps = [0u64, 1, 2, 3];
        for i in (1..4).rev() {
            steps.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for (k, s) in steps.into_iter().enumerate() {
            values[(s * cells + c) as usize] = (4 * c + k as u64) as f32;
        }
    }
    let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
    let path = dir.path().join("cells.tet");
    let spec =
        DatasetSpec::new("t", DType::F32, &[t, 361, 720], &[1, 361, 720], &bytes).dim_names(&["time", "lat", "lon"]);
    let mut w = TetWriter::new();
    w.dataset(spec).unwrap();
    w.write_path(&path).unwrap();
    let f = format!("tet('{}', 't')", path.display());
    let q = format!("SELECT lat, lon, percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FROM {f} GROUP BY lat, lon");
    let want: Vec<Vec<Val>> = (0..cells)
        .map(|c| {
            let (lat, lon) = ((c / 720) as i128, (c % 720) as i128);
            vec![Val::Int(lat), Val::Int(lon), Val::Float((4 * c) as f32 as f64 + 1.5)]
        })
        .collect();
    assert_same(rows(&ctx(), &q).await, want.clone(), &q);
    assert_same(rows(&no_pushdown().await, &q).await, want, &q);
}
