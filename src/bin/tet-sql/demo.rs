//! The demo file: a weather-like cube written by our writer, and `tet_demo_file(path)`,
//! which writes it when missing (used by `sql/demo.sql`).
//!
//! Layout: `temp` f32 [time 48, lat 361, lon 720] in chunks of one time step (raw), and
//! `precip` f32 of the same shape, zstd-compressed, with `_FillValue` -9999 over the
//! oceans of a toy land mask. `time` has ISO-8601 labels (6-hourly); `lat` (-90..90 step
//! 0.5) and `lon` (0..359.5 step 0.5) are CF coordinate variables. About 50 MB.

use arrow::array::{BooleanArray, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result, plan_err};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::Expr;
use datafusion_tet::format::{ChunkCodecs, DType, DatasetSpec, FileMeta, HistoryEvent, TetWriter};
use std::path::Path;
use std::sync::Arc;

/// Demo cube extents.
pub const TIME: u64 = 48;
pub const LAT: u64 = 361;
pub const LON: u64 = 720;

/// Temperature in kelvin at (t, lat index, lon index): a latitude profile, a moving
/// daily wave and a deterministic ripple.
pub fn temperature(t: u64, i: u64, j: u64) -> f32 {
    let lat = -90.0 + 0.5 * i as f64;
    let lon = 0.5 * j as f64;
    let hour = (t * 6 % 24) as f64;
    let base = 300.0 - 45.0 * (lat.to_radians().sin()).powi(2);
    let daily = 6.0 * ((lon / 15.0 + hour) / 24.0 * std::f64::consts::TAU).cos() * lat.to_radians().cos();
    let ripple = 0.5 * ((i * 7 + j * 13 + t * 3) % 11) as f64 / 11.0;
    (base + daily + ripple) as f32
}

fn land(i: u64, j: u64) -> bool {
    (i / 40 + j / 60).is_multiple_of(3)
}

/// Write the demo file at `path`; `progress(done, total)` is called after each time step.
pub fn write_weather(path: &Path, mut progress: impl FnMut(u64, u64)) -> datafusion_tet::format::Result<()> {
    let cells = (TIME * LAT * LON) as usize;
    let mut temp = Vec::with_capacity(cells * 4);
    let mut precip = Vec::with_capacity(cells * 4);
    for t in 0..TIME {
        for i in 0..LAT {
            for j in 0..LON {
                temp.extend_from_slice(&temperature(t, i, j).to_le_bytes());
                let p = if land(i, j) {
                    ((i * 3 + j + t * 5) % 17) as f32 * 0.25
                } else {
                    -9999.0
                };
                precip.extend_from_slice(&p.to_le_bytes());
            }
        }
        progress(t + 1, TIME * 2);
    }
    let lat: Vec<u8> = (0..LAT)
        .flat_map(|i| (-90.0f32 + 0.5 * i as f32).to_le_bytes())
        .collect();
    let lon: Vec<u8> = (0..LON).flat_map(|j| (0.5f32 * j as f32).to_le_bytes()).collect();
    let times: Vec<String> = (0..TIME)
        .map(|t| format!("2024-01-{:02}T{:02}:00:00", 1 + t / 4, (t % 4) * 6))
        .collect();
    let (shape, chunk) = ([TIME, LAT, LON], [1, LAT, LON]);
    let dims = ["time", "lat", "lon"];
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("temp", DType::F32, &shape, &chunk, &temp)
            .dim_names(&dims)
            .labels("time", times.clone())
            .attr("units", "K")
            .attr("long_name", "air temperature at 2 m"),
    )?;
    w.dataset(
        DatasetSpec::new("precip", DType::F32, &shape, &chunk, &precip)
            .codecs(ChunkCodecs::Zstd(3))
            .dim_names(&dims)
            .labels("time", times)
            .attr("units", "mm/h")
            .attr("_FillValue", "-9999"),
    )?;
    w.dataset(
        DatasetSpec::new("lat", DType::F32, &[LAT], &[LAT], &lat)
            .dim_names(&["lat"])
            .attr("units", "degrees_north"),
    )?;
    w.dataset(
        DatasetSpec::new("lon", DType::F32, &[LON], &[LON], &lon)
            .dim_names(&["lon"])
            .attr("units", "degrees_east"),
    )?;
    w.zone_maps(true);
    w.file_meta(FileMeta {
        tool: Some("datafusion-tet demo".into()),
        library_version: Some(env!("CARGO_PKG_VERSION").into()),
        created_at: None,
    });
    w.history(HistoryEvent {
        op: "write".into(),
        source: "datafusion-tet demo".into(),
        at: "0".into(),
        ..Default::default()
    });
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tet.partial");
    w.write_path(&tmp)?;
    progress(TIME * 2, TIME * 2);
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// `tet_demo_file(path)`: writes the demo file at `path` unless it exists; one row with
/// `path`, `created` and `bytes`.
#[derive(Debug, Default)]
pub struct DemoFileFunction;

impl TableFunctionImpl for DemoFileFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let path = match args.exprs() {
            [Expr::Literal(v, _)] => match v.try_as_str() {
                Some(Some(s)) => s.to_owned(),
                _ => return plan_err!("tet_demo_file(path) takes one string"),
            },
            _ => return plan_err!("tet_demo_file(path) takes one string"),
        };
        let p = Path::new(&path);
        let created = !p.exists();
        if created {
            let start = std::time::Instant::now();
            write_weather(p, |done, total| {
                if start.elapsed().as_secs_f64() > 1.0 {
                    eprint!("\rwriting demo file {path}: {:3}%", done * 100 / total);
                }
            })
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e.in_file(&path))))?;
            if start.elapsed().as_secs_f64() > 1.0 {
                eprintln!();
            }
        }
        let bytes = std::fs::metadata(p)?.len();
        let schema = Arc::new(Schema::new(vec![
            Field::new("path", DataType::Utf8, false),
            Field::new("created", DataType::Boolean, false),
            Field::new("bytes", DataType::UInt64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec![path.clone()])),
                Arc::new(BooleanArray::from(vec![created])),
                Arc::new(UInt64Array::from(vec![bytes])),
            ],
        )?;
        Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
    }
}
