//! Print the parsed structure of a `.tet` file (directory, index, footer) as JSON, or the error (exit 1).
//!
//! `cargo run --example inspect -- FILE`

use datafusion_tet::format::{Codec, TetFile};
use serde_json::json;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: inspect FILE.tet");
        std::process::exit(2);
    };
    match inspect(&path) {
        Ok(v) => println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default()),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn inspect(path: &str) -> Result<serde_json::Value, datafusion_tet::format::FormatError> {
    let bytes = std::fs::read(path).map_err(|e| datafusion_tet::format::FormatError::from(e).in_file(path))?;
    let file = TetFile::open(bytes.as_slice()).map_err(|e| e.in_file(path))?;
    let datasets: Vec<_> = file
        .datasets
        .iter()
        .map(|d| {
            let rows = d.chunk_rows.iter().map(|&r| &file.chunks[r as usize]);
            let zstd = rows.clone().filter(|e| e.codec == Codec::Zstd).count();
            let coords: serde_json::Map<String, serde_json::Value> = (0..d.ndim())
                .filter_map(|i| d.labels(i).map(|l| (d.dim_names()[i].clone(), json!(l))))
                .collect();
            json!({
                "name": d.name(),
                "dtype": d.dtype().name(),
                "shape": d.shape(),
                "chunk_shape": d.record.chunk_shape,
                "chunk_count": d.record.chunk_count,
                "dim_names": d.dim_names(),
                "coords": coords,
                "attrs": d.meta.attrs,
                "codecs": {"raw": d.chunk_rows.len() - zstd, "zstd": zstd},
                "bytes_raw": rows.clone().map(|e| e.raw_byte_len).sum::<u64>(),
                "bytes_stored": rows.map(|e| e.stored_byte_len).sum::<u64>(),
                "zone_maps": d.zones.is_some(),
            })
        })
        .collect();
    let footer = file.footer.as_ref().map(|f| {
        json!({
            "history_version": f.history_version,
            "history": f.history,
            "file": f.file,
            "metadata_spilled": f.metadata_spilled,
            "zone_maps": f.has_zone_maps,
            "secondary_index": f.secondary_index.is_some(),
        })
    });
    Ok(json!({
        "path": path,
        "file_len": file.file_len,
        "layout_version": file.superblock.layout_version,
        "execution": {
            "memory_budget_percent_bps": file.execution.memory_budget_percent_bps,
            "memory_budget_bytes": file.execution.memory_budget_bytes,
        },
        "datasets": datasets,
        "footer": footer,
    }))
}
