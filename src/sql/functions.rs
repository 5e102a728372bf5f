//! Table functions: `tet(path [, dataset, ...])`, `tet_datasets(path)`, `tet_chunks(path [, dataset])`.

use super::archive::{open_sources_blocking, open_table_blocking};
use super::table::TetTableProvider;
use crate::format::Codec;
use crate::io::TetSource;
use arrow::array::{
    ArrayRef, Float64Array, ListBuilder, RecordBatch, StringArray, StringBuilder, UInt64Array, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result, plan_err};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::Expr;
use std::sync::Arc;

/// Read the string arguments of a table function call: `min..=max` non-NULL literals.
pub(super) fn string_args(name: &str, usage: &str, exprs: &[Expr], min: usize, max: usize) -> Result<Vec<String>> {
    if exprs.len() < min || exprs.len() > max {
        return plan_err!("{name}() takes {usage}; got {} argument(s)", exprs.len());
    }
    exprs
        .iter()
        .enumerate()
        .map(|(i, e)| match e {
            Expr::Literal(v, _) => match v.try_as_str() {
                Some(Some(s)) => Ok(s.to_owned()),
                _ => plan_err!(
                    "{name}() argument {} must be a string, got {v:?}; usage: {usage}",
                    i + 1
                ),
            },
            other => plan_err!(
                "{name}() argument {} must be a string literal, got {other}; usage: {usage}",
                i + 1
            ),
        })
        .collect()
}

/// `tet(path [, dataset, ...])`: the dataset as a table, or several datasets of one shape
/// as one table with a value column each (see [`TetTableProvider`]).
#[derive(Debug, Default)]
pub struct TetFunction;

/// The most datasets one `tet()` call names.
pub(super) const MAX_TET_DATASETS: usize = 64;

impl TableFunctionImpl for TetFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = string_args("tet", "(path [, dataset, ...])", args.exprs(), 1, 1 + MAX_TET_DATASETS)?;
        let names: Vec<&str> = a[1..].iter().map(String::as_str).collect();
        let table = open_table_blocking(args.session(), "tet()", &a[0], &names)?;
        Ok(Arc::new(TetTableProvider::from_model(table)))
    }
}

/// `tet_datasets(path)`: one row per dataset of the file.
#[derive(Debug, Default)]
pub struct TetDatasetsFunction;

fn u64_list(values: impl Iterator<Item = Vec<u64>>) -> ArrayRef {
    let mut b = ListBuilder::new(UInt64Builder::new());
    for v in values {
        b.values().append_slice(&v);
        b.append(true);
    }
    Arc::new(b.finish())
}

fn list_field(name: &str, item: DataType) -> Field {
    Field::new(name, DataType::List(Arc::new(Field::new("item", item, true))), false)
}

impl TableFunctionImpl for TetDatasetsFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = string_args("tet_datasets", "(path)", args.exprs(), 1, 1)?;
        let (sources, _) = open_sources_blocking(args.session(), "tet_datasets()", &a[0])?;
        Ok(Arc::new(TetMetadataTable::of_files(
            sources,
            MetadataKind::Datasets,
            None,
        )?))
    }
}

fn datasets_batch(src: &TetSource) -> Result<RecordBatch> {
    let f = &src.file;
    let ds = &f.datasets;
    let rows = |d: &crate::format::Dataset| d.chunk_rows.iter().map(|&r| &f.chunks[r as usize]).collect::<Vec<_>>();
    let mut dims = ListBuilder::new(StringBuilder::new());
    for d in ds {
        for n in d.dim_names() {
            dims.values().append_value(n);
        }
        dims.append(true);
    }
    let codecs = ds.iter().map(|d| {
        let r = rows(d);
        let mut names: Vec<&str> = [Codec::Raw, Codec::Zstd]
            .into_iter()
            .filter(|c| r.iter().any(|e| e.codec == *c))
            .map(Codec::name)
            .collect();
        names.dedup();
        names.join(",")
    });
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("dtype", DataType::Utf8, false),
        list_field("shape", DataType::UInt64),
        list_field("chunk_shape", DataType::UInt64),
        Field::new("chunk_count", DataType::UInt64, false),
        list_field("dim_names", DataType::Utf8),
        Field::new("attrs", DataType::Utf8, false),
        Field::new("codecs", DataType::Utf8, false),
        Field::new("bytes_raw", DataType::UInt64, false),
        Field::new("bytes_stored", DataType::UInt64, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(ds.iter().map(|d| d.name()))),
        Arc::new(StringArray::from_iter_values(ds.iter().map(|d| d.dtype().name()))),
        u64_list(ds.iter().map(|d| d.shape().to_vec())),
        u64_list(ds.iter().map(|d| d.record.chunk_shape.clone())),
        Arc::new(UInt64Array::from_iter_values(ds.iter().map(|d| d.record.chunk_count))),
        Arc::new(dims.finish()),
        Arc::new(StringArray::from_iter_values(
            ds.iter()
                .map(|d| serde_json::to_string(&d.meta.attrs).unwrap_or_default()),
        )),
        Arc::new(StringArray::from_iter_values(codecs)),
        Arc::new(UInt64Array::from_iter_values(
            ds.iter().map(|d| rows(d).iter().map(|e| e.raw_byte_len).sum()),
        )),
        Arc::new(UInt64Array::from_iter_values(
            ds.iter().map(|d| rows(d).iter().map(|e| e.stored_byte_len).sum()),
        )),
    ];
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// `tet_chunks(path [, dataset])`: one row per chunk index row (zone statistics as
/// Float64 when the file has zone maps, else NULL).
#[derive(Debug, Default)]
pub struct TetChunksFunction;

impl TableFunctionImpl for TetChunksFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = string_args("tet_chunks", "(path [, dataset])", args.exprs(), 1, 2)?;
        let (sources, _) = open_sources_blocking(args.session(), "tet_chunks()", &a[0])?;
        Ok(Arc::new(TetMetadataTable::of_files(
            sources,
            MetadataKind::Chunks,
            a.get(1).map(String::as_str),
        )?))
    }
}

fn chunks_batch(src: &TetSource, dataset: Option<&str>) -> Result<RecordBatch> {
    let f = &src.file;
    let datasets: Vec<&crate::format::Dataset> = match dataset {
        Some(name) => vec![f.dataset(name).map_err(|e| e.in_file(&src.location))?],
        None => f.datasets.iter().collect(),
    };
    let mut names = Vec::new();
    let mut coords = Vec::new();
    let (mut off, mut raw, mut stored, mut codec) = (vec![], vec![], vec![], vec![]);
    let (mut zmin, mut zmax, mut znull) = (vec![], vec![], vec![]);
    for d in datasets {
        for linear in 0..d.record.chunk_count {
            let (_, e) = f.chunk(d, linear);
            names.push(d.name().to_owned());
            coords.push(d.record.chunk_coords(linear));
            off.push(e.payload_offset);
            raw.push(e.raw_byte_len);
            stored.push(e.stored_byte_len);
            codec.push(e.codec.name());
            let z = d.zones.as_ref().and_then(|z| z[linear as usize].as_ref());
            zmin.push(z.and_then(|z| z.min).map(|s| s.as_f64()));
            zmax.push(z.and_then(|z| z.max).map(|s| s.as_f64()));
            znull.push(z.map(|z| z.null_count));
        }
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("dataset", DataType::Utf8, false),
        list_field("chunk_index", DataType::UInt64),
        Field::new("payload_offset", DataType::UInt64, false),
        Field::new("raw_byte_len", DataType::UInt64, false),
        Field::new("stored_byte_len", DataType::UInt64, false),
        Field::new("codec", DataType::Utf8, false),
        Field::new("zone_min", DataType::Float64, true),
        Field::new("zone_max", DataType::Float64, true),
        Field::new("zone_null_count", DataType::UInt64, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(names)),
        u64_list(coords.into_iter()),
        Arc::new(UInt64Array::from(off)),
        Arc::new(UInt64Array::from(raw)),
        Arc::new(UInt64Array::from(stored)),
        Arc::new(StringArray::from(codec)),
        Arc::new(Float64Array::from(zmin)),
        Arc::new(Float64Array::from(zmax)),
        Arc::new(UInt64Array::from(znull)),
    ];
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// `batch` with a last column `file` holding `location` on every row.
fn with_file_column(batch: RecordBatch, location: &str) -> Result<RecordBatch> {
    let mut fields: Vec<Field> = batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("file", DataType::Utf8, false));
    let mut columns = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
        location,
        batch.num_rows(),
    ))));
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

/// Which metadata table a [`TetMetadataTable`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataKind {
    /// `tet_datasets(path)`.
    Datasets,
    /// `tet_chunks(path [, dataset])`.
    Chunks,
}

/// The table of `tet_datasets()` / `tet_chunks()`: a small in-memory table computed from
/// the directory and index of a file (or of each file of an archive), the file named in
/// its last column. Plan codecs carry it as (files, kind, dataset) and recompute it.
#[derive(Debug)]
pub struct TetMetadataTable {
    sources: Vec<Arc<TetSource>>,
    kind: MetadataKind,
    dataset: Option<String>,
    rows: MemTable,
}

impl TetMetadataTable {
    /// The `kind` table of `source` (for [`MetadataKind::Chunks`], of `dataset` or of all).
    pub fn new(source: Arc<TetSource>, kind: MetadataKind, dataset: Option<&str>) -> Result<Self> {
        Self::of_files(vec![source], kind, dataset)
    }

    /// The `kind` table of each of `sources` (at least one), one after the other.
    pub fn of_files(sources: Vec<Arc<TetSource>>, kind: MetadataKind, dataset: Option<&str>) -> Result<Self> {
        let batches = sources
            .iter()
            .map(|source| {
                let batch = match kind {
                    MetadataKind::Datasets => datasets_batch(source)?,
                    MetadataKind::Chunks => chunks_batch(source, dataset)?,
                };
                with_file_column(batch, &source.location)
            })
            .collect::<Result<Vec<_>>>()?;
        let Some(first) = batches.first() else {
            return plan_err!("a metadata table of no file");
        };
        Ok(TetMetadataTable {
            rows: MemTable::try_new(first.schema(), vec![batches])?,
            sources,
            kind,
            dataset: dataset.map(str::to_owned),
        })
    }

    /// The (first) file described.
    pub fn source(&self) -> &Arc<TetSource> {
        &self.sources[0]
    }

    /// Every file described, in row order.
    pub fn sources(&self) -> &[Arc<TetSource>] {
        &self.sources
    }

    /// Which table this is.
    pub fn kind(&self) -> MetadataKind {
        self.kind
    }

    /// The dataset `tet_chunks` was restricted to.
    pub fn dataset(&self) -> Option<&str> {
        self.dataset.as_deref()
    }
}

#[async_trait::async_trait]
impl TableProvider for TetMetadataTable {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.rows.schema()
    }

    fn table_type(&self) -> datafusion::datasource::TableType {
        datafusion::datasource::TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        self.rows.scan(state, projection, filters, limit).await
    }
}
