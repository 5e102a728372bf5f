//! `tet_files(path [, dataset, ...])`: one row per file a location names (one file, or
//! an archive's in path order), with its version, its datasets and the range of each
//! axis: what to look at when an archive is refused, or to see what it holds.

use super::archive::{block_on, open_sources_blocking};
use super::functions::{MAX_TET_DATASETS, string_args};
use super::session_options::TetConfig;
use crate::io::TetSource;
use crate::plan::{Limits, TableModel};
use arrow::array::{
    ArrayRef, ListBuilder, RecordBatch, StringArray, StringBuilder, TimestampNanosecondArray, UInt64Array,
    UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::Result;
use datafusion::datasource::MemTable;
use std::sync::Arc;

/// `tet_files(path [, dataset, ...])`. The axes are those of the named dataset (the
/// first named), else of the file's dataset of the most dimensions.
#[derive(Debug, Default)]
pub struct TetFilesFunction;

impl TableFunctionImpl for TetFilesFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let usage = "(path [, dataset, ...])";
        let a = string_args("tet_files", usage, args.exprs(), 1, 1 + MAX_TET_DATASETS)?;
        let session = args.session();
        let (sources, _) = open_sources_blocking(session, "tet_files()", &a[0])?;
        let names: Vec<&str> = a[1..].iter().map(String::as_str).collect();
        let limits = TetConfig::of(session.config()).limits();
        let tables = sources
            .into_iter()
            .map(|s| axes_of_file(s, &names, limits))
            .collect::<Result<Vec<_>>>()?;
        let batch = files_batch(&tables)?;
        Ok(Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?))
    }
}

/// The table of `source` whose axes the row shows: of `names` (each checked to be in the
/// file), else of its dataset of the most dimensions.
fn axes_of_file(source: Arc<TetSource>, names: &[&str], limits: Limits) -> Result<TableModel> {
    let most = source
        .file
        .datasets
        .iter()
        .rev()
        .max_by_key(|d| d.ndim())
        .map(|d| d.name().to_owned());
    let names: Vec<&str> = match names {
        [] => most.iter().map(String::as_str).collect(),
        _ => names.to_vec(),
    };
    if !source.is_remote() {
        return TableModel::from_datasets(source, &names, limits);
    }
    block_on("tet_files()", TableModel::for_datasets(source, &names, limits))
}

fn text_list(rows: impl Iterator<Item = Vec<String>>) -> ArrayRef {
    let mut b = ListBuilder::new(StringBuilder::new());
    for row in rows {
        for v in row {
            b.values().append_value(v);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

fn list_field(name: &str, item: DataType) -> Field {
    Field::new(name, DataType::List(Arc::new(Field::new("item", item, true))), false)
}

/// The first and last value of each axis of `t`, as text.
fn axis_ends(t: &TableModel) -> Result<(Vec<String>, Vec<String>)> {
    let (mut first, mut last) = (Vec::new(), Vec::new());
    for a in &t.axes {
        let Some(values) = &a.values else {
            first.push("0".to_owned());
            last.push(a.extent.saturating_sub(1).to_string());
            continue;
        };
        let f = ArrayFormatter::try_new(values.as_ref(), &FormatOptions::default())?;
        let n = values.len();
        first.push(if n > 0 { f.value(0).to_string() } else { String::new() });
        last.push(if n > 0 {
            f.value(n - 1).to_string()
        } else {
            String::new()
        });
    }
    Ok((first, last))
}

fn files_batch(tables: &[TableModel]) -> Result<RecordBatch> {
    let versions: Vec<_> = tables.iter().map(|t| t.source.version()).collect();
    let ends = tables.iter().map(axis_ends).collect::<Result<Vec<_>>>()?;
    let time = |t: &TableModel, key: &str| -> Option<String> {
        let axis = t.axes.iter().find(|a| a.cf_time.is_some())?;
        Some(axis.attrs.get(key).cloned().unwrap_or_else(|| "standard".into()))
    };
    let mut extents = ListBuilder::new(UInt64Builder::new());
    for t in tables {
        extents.values().append_slice(&t.shape());
        extents.append(true);
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("file", DataType::Utf8, false),
        Field::new("size", DataType::UInt64, false),
        Field::new("e_tag", DataType::Utf8, true),
        Field::new(
            "modified",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            true,
        ),
        list_field("datasets", DataType::Utf8),
        list_field("axes", DataType::Utf8),
        list_field("extent", DataType::UInt64),
        list_field("first", DataType::Utf8),
        list_field("last", DataType::Utf8),
        Field::new("time_units", DataType::Utf8, true),
        Field::new("calendar", DataType::Utf8, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            tables.iter().map(|t| t.source.location.as_str()),
        )),
        Arc::new(UInt64Array::from_iter_values(versions.iter().map(|v| v.len))),
        Arc::new(StringArray::from_iter(versions.iter().map(|v| v.e_tag.as_deref()))),
        Arc::new(TimestampNanosecondArray::from_iter(versions.iter().map(|v| v.modified_ns)).with_timezone("UTC")),
        text_list(
            tables
                .iter()
                .map(|t| t.source.file.datasets.iter().map(|d| d.name().to_owned()).collect()),
        ),
        text_list(tables.iter().map(|t| t.axes.iter().map(|a| a.name.clone()).collect())),
        Arc::new(extents.finish()),
        text_list(ends.iter().map(|e| e.0.clone())),
        text_list(ends.iter().map(|e| e.1.clone())),
        Arc::new(StringArray::from_iter(tables.iter().map(|t| time(t, "units")))),
        Arc::new(StringArray::from_iter(tables.iter().map(|t| time(t, "calendar")))),
    ];
    Ok(RecordBatch::try_new(schema, columns)?)
}
