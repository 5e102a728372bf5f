//! [`ValueColumn`]: one dataset as a value column of a table: where its chunks are, and
//! how its stored elements become values (missing values, packing).

use super::attrs::{field_metadata, without};
use super::values::arrow_type;
use crate::format::{Dataset, MissingValues, Packing};
use crate::io::TetSource;
use arrow::datatypes::{DataType, Field};
use datafusion::common::Result;
use datafusion::error::DataFusionError;
use std::sync::Arc;

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

    /// Whether `other` stores its elements as this column does (one element type, missing
    /// rule and packing), so that one decoding serves both.
    pub fn stored_alike(&self, other: &ValueColumn) -> bool {
        self.dataset().dtype() == other.dataset().dtype()
            && self.packing == other.packing
            && self.missing == other.missing
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
    pub(super) fn field(&self) -> Field {
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
