//! [`TableModel`]: the table one or several datasets on one grid present — one column
//! per axis, then one value column per dataset ([`ValueColumn`]) — and the statistics of
//! a selection of it.

use super::axes::{Axis, axes_of, coordinate_spans, without};
use super::limits::{Limits, MAX_TABLE_CELLS};
use super::selection::AxisSelection;
use super::tasks::TaskCache;
use super::values::{VALUE_COLUMN, arrow_type};
use crate::format::{Dataset, MissingValues, Packing};
use crate::io::TetSource;
use arrow::array::Array;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, Result, ScalarValue, Statistics, plan_err};
use datafusion::error::DataFusionError;
use std::sync::Arc;

/// One dataset of an opened file as a table, or several datasets of one shape and
/// dimension names (of one file or of several) side by side: the axis columns (from the
/// first dataset) and the schema (the axes in dimension order, then one value column per
/// dataset), and how stored elements become values (the CF rules of
/// [`crate::format::cf`]: missing values, packing, per value column).
///
/// A table of one dataset names its value column `v`; a table of several names each
/// value column after its dataset. A value column is nullable when its dataset has
/// missing values or is a float dataset (the session option `tet.nan_is_null` makes NaN
/// NULL); it is Float64 for a packed dataset. Every column carries its CF attributes
/// (`units`, `long_name`, ...) as Arrow field metadata.
#[derive(Debug, Clone)]
pub struct TableModel {
    /// The file of the first dataset (whose axes the table has).
    pub source: Arc<TetSource>,
    /// Directory position of the first dataset.
    pub dataset: usize,
    /// The axis columns, in dimension order.
    pub axes: Vec<Axis>,
    /// Axis columns, then the value columns.
    pub schema: SchemaRef,
    /// The value columns, in schema order; the first is of `source`'s `dataset`.
    pub values: Vec<ValueColumn>,
    /// Whether every NaN is NULL (the session option `tet.nan_is_null`).
    pub nan_is_null: bool,
    /// How much a query may make of the file's claims (the session's `tet.max_*` options).
    pub limits: Limits,
    /// The chunk tasks of recent selections (shared by the copies of this table that
    /// differ in session options only: those change no task).
    pub tasks: Arc<TaskCache>,
}

/// One dataset as a value column of a [`TableModel`]: where its chunks are, and how its
/// stored elements become values.
#[derive(Debug, Clone)]
pub struct ValueColumn {
    /// The dataset's file.
    pub source: Arc<TetSource>,
    /// Directory position of the dataset in that file.
    pub dataset: usize,
    /// The column's name: `v` in a table of one dataset, else the dataset's name.
    pub name: String,
    /// Which stored elements are NULL.
    pub missing: MissingValues,
    /// Integer packing, when the dataset is packed.
    pub packing: Option<Packing>,
}

impl ValueColumn {
    /// Dataset `ds` of `source` as the value column `name`.
    pub fn new(source: Arc<TetSource>, ds: usize, name: &str) -> Result<Self> {
        let d = &source.file.datasets[ds];
        let in_file = |e: crate::format::FormatError| DataFusionError::from(e.in_file(&source.location));
        Ok(ValueColumn {
            missing: d.missing_values(false).map_err(in_file)?,
            packing: d.packing().map_err(in_file)?,
            name: name.to_owned(),
            dataset: ds,
            source,
        })
    }

    /// The dataset.
    pub fn dataset(&self) -> &Dataset {
        &self.source.file.datasets[self.dataset]
    }

    /// Whether any cell can be NULL under this column's rule.
    pub fn has_missing(&self) -> bool {
        !self.missing.is_empty()
    }

    /// The column's Arrow type: the dataset's, or Float64 when packed.
    pub fn data_type(&self) -> DataType {
        match self.packing {
            Some(_) => DataType::Float64,
            None => arrow_type(self.dataset().dtype()),
        }
    }

    /// The column's Arrow field. Its metadata is the dataset's attributes without the
    /// encoding the column has applied: the missing-value attributes (those cells are
    /// NULL) and `scale_factor`/`add_offset` (values are unpacked, here or, for float
    /// datasets, by the converter that wrote the file). `tet_datasets` keeps them.
    fn field(&self) -> Field {
        let ds = self.dataset();
        let nullable = self.has_missing() || ds.dtype().is_float();
        let mut applied = crate::format::cf::MISSING_VALUE_ATTRS.to_vec();
        applied.extend(crate::format::cf::PACKING_ATTRS);
        let attrs = without(&ds.meta.attrs, &applied);
        Field::new(&self.name, self.data_type(), nullable).with_metadata(field_metadata(&attrs))
    }

    /// `file:dataset`, for messages.
    pub fn describe(&self) -> String {
        format!("{}:{}", self.source.location, self.dataset().name())
    }
}

impl TableModel {
    /// `dataset` of an already opened file, fetching what the axes need (an object store
    /// file's coordinate variables) on demand.
    /// `dataset` of an already opened file, fetching what the axes need (an object store
    /// file's coordinate variables) on demand, within `limits` (a coordinate variable is
    /// decoded whole: at most `max_axis_positions` of it).
    pub async fn for_source(source: Arc<TetSource>, dataset: Option<&str>, limits: Limits) -> Result<Self> {
        let ds = Self::pick(&source, dataset)?;
        let file = source.file.clone();
        let most = limits.max_axis_positions;
        // Every chunk of the coordinate variables at once (coalesced), not one per parse.
        source
            .prefetch(&coordinate_spans(&file, &file.datasets[ds], most))
            .await?;
        let axes = source.resolve(|r| axes_of(r, &file, &file.datasets[ds], most)).await?;
        Ok(Self::build(source, ds, axes)?.limited(limits))
    }

    /// `dataset` of an already opened file whose axes can be read without fetching (local
    /// files; object store files whose coordinate variables are already cached), within
    /// `limits`.
    pub fn from_source(source: Arc<TetSource>, dataset: Option<&str>, limits: Limits) -> Result<Self> {
        let ds = Self::pick(&source, dataset)?;
        let file = source.file.clone();
        let axes = axes_of(source.as_ref(), &file, &file.datasets[ds], limits.max_axis_positions)
            .map_err(|e| e.in_file(&source.location))?;
        Ok(Self::build(source, ds, axes)?.limited(limits))
    }

    fn limited(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The directory position of `dataset` (or of the only dataset).
    fn pick(source: &TetSource, dataset: Option<&str>) -> Result<usize> {
        let file = &source.file;
        match dataset {
            Some(name) => Ok(file.dataset(name).map_err(|e| e.in_file(&source.location))?.id),
            None if file.datasets.len() == 1 => Ok(0),
            None => plan_err!(
                "{}: the file has {} datasets ({}); name one, e.g. tet('{}', '{}')",
                source.location,
                file.datasets.len(),
                file.dataset_list(),
                source.location,
                file.datasets.first().map(|d| d.name()).unwrap_or("")
            ),
        }
    }

    fn build(source: Arc<TetSource>, ds: usize, axes: Vec<Axis>) -> Result<Self> {
        let value = ValueColumn::new(source.clone(), ds, VALUE_COLUMN)?;
        Self::assemble(source, ds, axes, vec![value])
    }

    /// The table of `values` (at least one) on the axes of the first; each value column
    /// is checked against the first: same shape and dimension names, a name of its own.
    fn assemble(source: Arc<TetSource>, ds: usize, axes: Vec<Axis>, values: Vec<ValueColumn>) -> Result<Self> {
        let file = source.file.clone();
        let ds = &file.datasets[ds];
        if ds.record.cell_count > MAX_TABLE_CELLS {
            return plan_err!(
                "{}: dataset {:?}: shape {:?} has {} cells, more than a table can count (2^63 - 1 rows)",
                source.location,
                ds.name(),
                ds.shape(),
                ds.record.cell_count
            );
        }
        let (shape, dims) = (ds.shape(), ds.dim_names());
        for v in &values {
            let d = v.dataset();
            if d.shape() != shape {
                return plan_err!(
                    "{}: dataset {:?} has shape {:?}, {} has {:?}; the datasets of one table must share their shape",
                    v.source.location,
                    d.name(),
                    d.shape(),
                    values[0].describe(),
                    shape
                );
            }
            if d.dim_names() != dims {
                return plan_err!(
                    "{}: dataset {:?} has dimensions {:?}, {} has {:?}; the datasets of one table must share their dimension names",
                    v.source.location,
                    d.name(),
                    d.dim_names(),
                    values[0].describe(),
                    dims
                );
            }
        }
        for (i, v) in values.iter().enumerate() {
            let d = v.dataset();
            if let Some(a) = axes.iter().find(|a| a.name == v.name) {
                return plan_err!(
                    "{}: dataset {:?} gives a value column {:?}, which clashes with the axis column {:?}",
                    v.source.location,
                    d.name(),
                    v.name,
                    a.name
                );
            }
            if values[..i].iter().any(|w| w.name == v.name) {
                return plan_err!(
                    "{}: the value column {:?} is named twice; a table's datasets need distinct names",
                    v.source.location,
                    v.name
                );
            }
        }
        let mut fields: Vec<Field> = axes
            .iter()
            .map(|a| Field::new(&a.name, a.data_type(), false).with_metadata(field_metadata(&a.described_attrs())))
            .collect();
        fields.extend(values.iter().map(ValueColumn::field));
        Ok(TableModel {
            dataset: ds.id,
            source,
            axes,
            schema: Arc::new(Schema::new(fields)),
            values,
            nan_is_null: false,
            limits: Limits::default(),
            tasks: Arc::default(),
        })
    }

    /// The datasets `names` (at least two) of an opened file as one table: its axis
    /// columns from the first, then one value column per dataset, named by the dataset.
    pub async fn for_datasets(source: Arc<TetSource>, names: &[&str], limits: Limits) -> Result<Self> {
        let first = Self::for_source(source.clone(), names.first().copied(), limits).await?;
        first.with_datasets(names)
    }

    /// [`TableModel::for_datasets`] for a file whose axes can be read without fetching.
    pub fn from_datasets(source: Arc<TetSource>, names: &[&str], limits: Limits) -> Result<Self> {
        Self::from_source(source, names.first().copied(), limits)?.with_datasets(names)
    }

    /// This one-dataset table with the datasets `names` of its file as value columns
    /// (`names[0]` is its own dataset); one name keeps the table as it is.
    fn with_datasets(self, names: &[&str]) -> Result<Self> {
        if names.len() <= 1 {
            return Ok(self);
        }
        let values = names
            .iter()
            .map(|n| {
                let id = self
                    .source
                    .file
                    .dataset(n)
                    .map_err(|e| e.in_file(&self.source.location))?
                    .id;
                ValueColumn::new(self.source.clone(), id, n)
            })
            .collect::<Result<Vec<_>>>()?;
        self.with_values(values)
    }

    /// The table of `values` (datasets of this table's shape and dimension names, of any
    /// files) on this table's axes, with its session settings. The values' own axes are
    /// not compared here (a caller joining tables checks them, see
    /// [`TableModel::same_axes`]).
    pub fn with_values(&self, values: Vec<ValueColumn>) -> Result<Self> {
        if values.is_empty() {
            return plan_err!("{}: a table needs at least one dataset", self.source.location);
        }
        let mut t = Self::assemble(self.source.clone(), self.dataset, self.axes.clone(), values)?;
        t.nan_is_null = self.nan_is_null;
        t.limits = self.limits;
        Ok(t.with_missing_rule())
    }

    /// `dataset=temp`, or for a table of several, `datasets=[t2m, sst]` (each with its file
    /// when that is not the first's): what plans display.
    pub fn datasets_text(&self) -> String {
        if !self.is_multi() {
            return format!("dataset={}", self.dataset().name());
        }
        let names: Vec<String> = self
            .values
            .iter()
            .map(|v| match v.source.location == self.source.location {
                true => v.dataset().name().to_owned(),
                false => v.describe(),
            })
            .collect();
        format!("datasets=[{}]", names.join(", "))
    }

    /// Whether `other` has the same axis columns (names, types and values) as this table.
    pub fn same_axes(&self, other: &TableModel) -> bool {
        self.axes.len() == other.axes.len() && self.axes.iter().zip(&other.axes).all(|(a, b)| a.same_as(b))
    }

    /// This table with the session's [`Limits`].
    pub fn with_limits(self: &Arc<Self>, limits: Limits) -> Arc<Self> {
        if limits == self.limits {
            return self.clone();
        }
        let mut t = TableModel::clone(self);
        t.limits = limits;
        Arc::new(t)
    }

    /// This table with `tet.nan_is_null` set to `on` (every NaN NULL when on).
    pub fn with_nan_is_null(self: &Arc<Self>, on: bool) -> Arc<Self> {
        if on == self.nan_is_null {
            return self.clone();
        }
        let mut t = TableModel::clone(self);
        t.nan_is_null = on;
        Arc::new(t.with_missing_rule())
    }

    /// Every value column's missing rule under this table's `nan_is_null`.
    fn with_missing_rule(mut self) -> Self {
        for v in &mut self.values {
            // The attributes parsed when the column was made, so this cannot fail here.
            if let Ok(m) = v.dataset().missing_values(self.nan_is_null) {
                v.missing = m;
            }
        }
        self
    }

    /// The first dataset (whose axes the table has).
    pub fn dataset(&self) -> &Dataset {
        &self.source.file.datasets[self.dataset]
    }

    /// The first value column.
    pub fn value(&self) -> &ValueColumn {
        &self.values[0]
    }

    /// Arrow type of the first value column.
    pub fn value_type(&self) -> DataType {
        self.schema.field(self.value_index()).data_type().clone()
    }

    /// Whether any cell of the first value column can be NULL under this table's rule.
    pub fn has_missing(&self) -> bool {
        self.value().has_missing()
    }

    /// Index of the first value column in [`TableModel::schema`] (after the axes).
    pub fn value_index(&self) -> usize {
        self.axes.len()
    }

    /// The value column at schema index `column`, if it is one.
    pub fn value_at(&self, column: usize) -> Option<(usize, &ValueColumn)> {
        let k = column.checked_sub(self.axes.len())?;
        self.values.get(k).map(|v| (k, v))
    }

    /// The value column named `name`, if there is one.
    pub fn value_named(&self, name: &str) -> Option<(usize, &ValueColumn)> {
        self.values.iter().enumerate().find(|(_, v)| v.name == name)
    }

    /// Whether any value column's file is in an object store.
    pub fn is_remote(&self) -> bool {
        self.values.iter().any(|v| v.source.is_remote())
    }

    /// Whether the table has more than one value column.
    pub fn is_multi(&self) -> bool {
        self.values.len() > 1
    }

    /// The chunk records of the value columns' datasets, in column order: the grids the
    /// table's tasks are aligned on ([`crate::plan::aligned_tasks`]).
    pub fn records(&self) -> Vec<&crate::format::DatasetRecord> {
        self.values.iter().map(|v| &v.dataset().record).collect()
    }

    /// The axis named `name`.
    pub fn axis_index(&self, name: &str) -> Option<usize> {
        self.axes.iter().position(|a| a.name == name)
    }

    /// Statistics of the cells `sel` selects: the row count (exact unless `exact` is false,
    /// e.g. when value predicates may drop rows) and each axis column's bounds.
    pub fn statistics(&self, sel: &[AxisSelection], exact: bool) -> Result<Statistics> {
        let rows = sel.iter().try_fold(1u64, |n, s| n.checked_mul(s.count()));
        let p = |v| {
            if exact {
                Precision::Exact(v)
            } else {
                Precision::Inexact(v)
            }
        };
        let mut cols = Vec::with_capacity(self.schema.fields().len());
        for (d, axis) in self.axes.iter().enumerate() {
            let mut c = ColumnStatistics::new_unknown();
            c.null_count = Precision::Exact(0);
            if rows != Some(0)
                && let Some((lo, hi)) = sel[d].bounds()
            {
                match &axis.values {
                    None => {
                        c.min_value = Precision::Exact(ScalarValue::Int64(Some(lo as i64)));
                        c.max_value = Precision::Exact(ScalarValue::Int64(Some(hi as i64)));
                    }
                    Some(_) if sel[d].count() <= 1 << 20 => {
                        let positions: Vec<u64> = sel[d].positions().collect();
                        let vals = axis.take(&positions)?;
                        if let (Ok(mn), Ok(mx)) = (extreme(&vals, true), extreme(&vals, false)) {
                            c.min_value = Precision::Exact(mn);
                            c.max_value = Precision::Exact(mx);
                        }
                    }
                    Some(_) => {}
                }
            }
            cols.push(c);
        }
        cols.extend(self.values.iter().map(|_| ColumnStatistics::new_unknown()));
        Ok(Statistics {
            num_rows: match rows.and_then(|r| usize::try_from(r).ok()) {
                Some(r) => p(r),
                None => Precision::Absent,
            },
            total_byte_size: Precision::Absent,
            column_statistics: cols,
        })
    }
}

/// Attributes as Arrow field metadata.
fn field_metadata(attrs: &std::collections::BTreeMap<String, String>) -> std::collections::HashMap<String, String> {
    attrs.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The smallest (`min`) or largest value of `a`.
fn extreme(a: &Arc<dyn Array>, min: bool) -> Result<ScalarValue> {
    let mut best: Option<ScalarValue> = None;
    for i in 0..a.len() {
        let v = ScalarValue::try_from_array(a, i)?;
        best = match best {
            None => Some(v),
            Some(b) => {
                let keep_new = match v.partial_cmp(&b) {
                    Some(std::cmp::Ordering::Less) => min,
                    Some(std::cmp::Ordering::Greater) => !min,
                    _ => false,
                };
                Some(if keep_new { v } else { b })
            }
        };
    }
    best.ok_or_else(|| DataFusionError::Internal("empty axis".into()))
}
