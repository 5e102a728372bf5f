//! [`TableModel`]: the table a dataset presents — one column per axis, then the value
//! column — and the statistics of a selection of it.

use super::axes::{Axis, axes_of, coordinate_spans};
use super::limits::{Limits, MAX_TABLE_CELLS};
use super::selection::AxisSelection;
use super::values::{VALUE_COLUMN, arrow_type};
use crate::format::{Dataset, MissingValues, Packing};
use crate::io::TetSource;
use arrow::array::Array;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, Result, ScalarValue, Statistics, plan_err};
use datafusion::error::DataFusionError;
use std::sync::Arc;

/// One dataset of an opened file as a table: its axis columns and its schema (the axes in
/// dimension order, then `v`), and how stored elements become values of `v` (the CF
/// rules of [`crate::format::cf`]: missing values, packing).
///
/// `v` is nullable when the dataset has missing values or is a float dataset (the session
/// option `tet.nan_is_null` makes NaN NULL); it is Float64 for a packed dataset. Every
/// column carries its CF attributes (`units`, `long_name`, ...) as Arrow field metadata.
#[derive(Debug, Clone)]
pub struct TableModel {
    /// The opened file.
    pub source: Arc<TetSource>,
    /// Directory position of the dataset.
    pub dataset: usize,
    /// The axis columns, in dimension order.
    pub axes: Vec<Axis>,
    /// Axis columns, then the value column.
    pub schema: SchemaRef,
    /// Which stored elements are NULL.
    pub missing: MissingValues,
    /// Integer packing, when the dataset is packed.
    pub packing: Option<Packing>,
    /// Whether every NaN is NULL (the session option `tet.nan_is_null`).
    pub nan_is_null: bool,
    /// How much a query may make of the file's claims (the session's `tet.max_*` options).
    pub limits: Limits,
}

impl TableModel {
    /// `dataset` of an already opened file, fetching what the axes need (an object store
    /// file's coordinate variables) on demand.
    pub async fn for_source(source: Arc<TetSource>, dataset: Option<&str>) -> Result<Self> {
        let ds = Self::pick(&source, dataset)?;
        let file = source.file.clone();
        // Every chunk of the coordinate variables at once (coalesced), not one per parse.
        source.prefetch(&coordinate_spans(&file, &file.datasets[ds])).await?;
        let axes = source.resolve(|r| axes_of(r, &file, &file.datasets[ds])).await?;
        Self::build(source, ds, axes)
    }

    /// `dataset` of an already opened file whose axes can be read without fetching (local
    /// files; object store files whose coordinate variables are already cached).
    pub fn from_source(source: Arc<TetSource>, dataset: Option<&str>) -> Result<Self> {
        let ds = Self::pick(&source, dataset)?;
        let file = source.file.clone();
        let axes = axes_of(source.as_ref(), &file, &file.datasets[ds]).map_err(|e| e.in_file(&source.location))?;
        Self::build(source, ds, axes)
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
        let file = source.file.clone();
        let ds = &file.datasets[ds];
        if axes.iter().any(|a| a.name == VALUE_COLUMN) {
            return plan_err!(
                "{}: dataset {:?} has an axis named {VALUE_COLUMN:?}, which clashes with the value column",
                source.location,
                ds.name()
            );
        }
        if ds.record.cell_count > MAX_TABLE_CELLS {
            return plan_err!(
                "{}: dataset {:?}: shape {:?} has {} cells, more than a table can count (2^63 - 1 rows)",
                source.location,
                ds.name(),
                ds.shape(),
                ds.record.cell_count
            );
        }
        let in_file = |e: crate::format::FormatError| DataFusionError::from(e.in_file(&source.location));
        let missing = ds.missing_values(false).map_err(in_file)?;
        let packing = ds.packing().map_err(in_file)?;
        let mut fields: Vec<Field> = axes
            .iter()
            .map(|a| Field::new(&a.name, a.data_type(), false).with_metadata(field_metadata(&a.attrs)))
            .collect();
        let value_type = match packing {
            Some(_) => DataType::Float64,
            None => arrow_type(ds.dtype()),
        };
        let nullable = !missing.is_empty() || ds.dtype().is_float();
        fields.push(Field::new(VALUE_COLUMN, value_type, nullable).with_metadata(field_metadata(&ds.meta.attrs)));
        Ok(TableModel {
            dataset: ds.id,
            source,
            axes,
            schema: Arc::new(Schema::new(fields)),
            missing,
            packing,
            nan_is_null: false,
            limits: Limits::default(),
        })
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
        // The attributes parsed when the table was built, so this cannot fail here.
        if let Ok(m) = t.dataset().missing_values(on) {
            t.missing = m;
        }
        Arc::new(t)
    }

    /// The dataset.
    pub fn dataset(&self) -> &Dataset {
        &self.source.file.datasets[self.dataset]
    }

    /// Arrow type of the value column.
    pub fn value_type(&self) -> DataType {
        self.schema.field(self.value_index()).data_type().clone()
    }

    /// Whether any cell can be NULL under this table's rule.
    pub fn has_missing(&self) -> bool {
        !self.missing.is_empty()
    }

    /// Index of the value column in [`TableModel::schema`] (after the axes).
    pub fn value_index(&self) -> usize {
        self.axes.len()
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
        cols.push(ColumnStatistics::new_unknown());
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
