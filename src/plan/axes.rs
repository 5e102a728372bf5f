//! The axis columns of a dataset's table (design §2): name and values of each axis.
//!
//! Values come from, in order: a CF coordinate variable (a 1-D dataset of the same file
//! named like the axis, of the axis' length), the footer coordinate labels (typed by
//! parsing: Int64, Float64, Timestamp, else Utf8; repeats allowed), else the position as
//! Int64. Numbers whose attributes (the coordinate variable's, or for a 1-D dataset's own
//! axis its own) say `units = "<unit> since <date>"` are decoded as CF time
//! ([`super::cf_time`]).

use super::attrs::without;
use super::cf_time::CfTime;
use super::values::array_from_le;
use crate::format::{Dataset, FormatError, ReadAt, TetFile};
use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, StringArray, TimestampNanosecondArray, UInt64Array};
use arrow::buffer::Buffer;
use arrow::compute::kernels::cast_utils::string_to_timestamp_nanos;
use arrow::datatypes::{DataType, TimeUnit};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Coordinate variables larger than this are not loaded as axis values.
const MAX_COORD_BYTES: u64 = 256 << 20;

/// Where an axis column's values come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AxisSource {
    /// The 0-based position.
    Position,
    /// A 1-D dataset of the same file.
    CoordinateVariable(String),
    /// Footer `coords.<dim>.labels`.
    Labels,
}

/// One axis column.
#[derive(Debug, Clone)]
pub struct Axis {
    pub name: String,
    pub extent: u64,
    pub source: AxisSource,
    /// Value at each position (`None` for positions).
    pub values: Option<ArrayRef>,
    /// No two positions hold equal values, as a `GROUP BY` compares them (NULLs equal):
    /// grouping by the axis alone then makes one group per position.
    pub distinct: bool,
    /// Attributes of the coordinate variable (`units`, `long_name`, ...), if any, as
    /// stored (the encoding included).
    pub attrs: BTreeMap<String, String>,
    /// The CF time encoding the values were decoded from, when they were.
    pub cf_time: Option<CfTime>,
}

impl Axis {
    /// Arrow type of the column.
    pub fn data_type(&self) -> DataType {
        match &self.values {
            Some(v) => v.data_type().clone(),
            None => DataType::Int64,
        }
    }

    /// The attributes that describe the column's values: [`Axis::attrs`] without the
    /// encoding already applied (`units` and `calendar` of a decoded CF time), as xarray
    /// splits `attrs` from `encoding`. Two files of one archive whose times count from
    /// different reference dates then give equal fields.
    pub fn described_attrs(&self) -> BTreeMap<String, String> {
        let applied: &[&str] = match self.cf_time {
            Some(_) => &["units", "calendar"],
            None => &[],
        };
        without(&self.attrs, applied)
    }

    /// Whether `other` is the same column: name, length, type and values.
    pub fn same_as(&self, other: &Axis) -> bool {
        self.name == other.name
            && self.extent == other.extent
            && match (&self.values, &other.values) {
                (None, None) => true,
                (Some(a), Some(b)) => a.as_ref() == b.as_ref(),
                _ => false,
            }
    }

    /// Values at positions `lo..hi`.
    pub fn values_range(&self, lo: u64, hi: u64) -> ArrayRef {
        match &self.values {
            Some(v) => v.slice(lo as usize, (hi - lo) as usize),
            None => Arc::new(Int64Array::from_iter_values(lo as i64..hi as i64)),
        }
    }

    /// Values at the given positions.
    pub fn take(&self, positions: &[u64]) -> datafusion::error::Result<ArrayRef> {
        match &self.values {
            None => Ok(Arc::new(Int64Array::from_iter_values(
                positions.iter().map(|&p| p as i64),
            ))),
            Some(v) => {
                let idx = UInt64Array::from_iter_values(positions.iter().copied());
                Ok(arrow::compute::take(v.as_ref(), &idx, None)?)
            }
        }
    }
}

/// The coordinate variable whose values axis `d` (named `name`) of `ds` takes: a 1-D
/// dataset of the same file named like the axis, of the axis' length and at most
/// `MAX_COORD_BYTES`.
fn coordinate_variable<'a>(file: &'a TetFile, ds: &Dataset, d: usize, name: &str) -> Option<&'a Dataset> {
    let extent = ds.shape()[d];
    file.datasets
        .iter()
        .find(|c| c.id != ds.id && c.name() == name && c.ndim() == 1 && c.shape()[0] == extent)
        .filter(|c| c.record.cell_count * c.dtype().size() as u64 <= MAX_COORD_BYTES)
}

/// The stored spans of every chunk of the coordinate variables [`axes_of`] reads for
/// `ds`, so that an object store file can fetch them together before the axes are built
/// (those above `max_positions`, which [`axes_of`] refuses, are not fetched).
pub fn coordinate_spans(file: &TetFile, ds: &Dataset, max_positions: u64) -> Vec<std::ops::Range<u64>> {
    let mut spans = Vec::new();
    for (d, name) in ds.dim_names().iter().enumerate() {
        if let Some(cv) = coordinate_variable(file, ds, d, name).filter(|c| c.record.cell_count <= max_positions) {
            spans.extend(cv.chunk_rows.iter().map(|&row| {
                let e = &file.chunks[row as usize];
                e.payload_offset..e.payload_end()
            }));
        }
    }
    spans
}

/// Build the axes of `ds`. A coordinate variable is decoded whole, so one of more than
/// `max_positions` (the session's `tet.max_axis_positions`) is refused; its memory is
/// allocated fallibly.
pub fn axes_of(
    source: &dyn ReadAt,
    file: &TetFile,
    ds: &Dataset,
    max_positions: u64,
) -> Result<Vec<Axis>, FormatError> {
    let names = ds.dim_names();
    let mut out = Vec::with_capacity(ds.ndim());
    for (d, name) in names.into_iter().enumerate() {
        let extent = ds.shape()[d];
        let (src, values, attrs) = if let Some(cv) = coordinate_variable(file, ds, d, &name) {
            if cv.record.cell_count > max_positions {
                return Err(FormatError::invalid(
                    format!("dataset {:?}, axis {name:?}", ds.name()),
                    "coordinate variable",
                    format!(
                        "{:?} has {} positions, above tet.max_axis_positions = {max_positions}; raise it with \
                         SET tet.max_axis_positions = <n> if this is intended",
                        cv.name(),
                        cv.record.cell_count
                    ),
                ));
            }
            let raw = file.read_all(source, cv, MAX_COORD_BYTES)?;
            (
                AxisSource::CoordinateVariable(cv.name().to_owned()),
                Some(array_from_le(cv.dtype(), Buffer::from_vec(raw), None)),
                cv.meta.attrs.clone(),
            )
        } else {
            // A 1-D dataset's own axis (a coordinate variable read as a table) carries
            // the dataset's attributes.
            let attrs = if ds.ndim() == 1 && ds.name() == name {
                ds.meta.attrs.clone()
            } else {
                BTreeMap::new()
            };
            match ds.labels(d) {
                Some(labels) => (AxisSource::Labels, Some(typed_labels(labels)), attrs),
                None => (AxisSource::Position, None, attrs),
            }
        };
        let invalid_units = |problem| FormatError::Invalid {
            region: format!("dataset {:?}, axis {name:?}", ds.name()),
            field: "units",
            problem,
        };
        let (values, cf_time) = match values {
            Some(v) if v.data_type().is_numeric() => match CfTime::from_attrs(&attrs).map_err(invalid_units)? {
                Some(t) => (Some(t.decode(&v).map_err(invalid_units)?), Some(t)),
                None => (Some(v), None),
            },
            v => (v, None),
        };
        out.push(Axis {
            name,
            extent,
            source: src,
            distinct: values.as_ref().is_none_or(all_distinct),
            values,
            attrs,
            cf_time,
        });
    }
    Ok(out)
}

/// Whether no two of `values` are equal as group keys: equal rows in Arrow's row format
/// (which DataFusion groups by), NULLs equal to each other. Coordinates are nearly always
/// strictly monotonic, and neighbours that are equal settle it the other way: both are
/// seen in one pass that allocates nothing (the comparator orders floats by IEEE
/// totalOrder, as the row format does). Others are hashed by their rows, the set grown
/// fallibly. `false` (not known to be distinct) is always safe: it only costs grouping
/// by the axis a hash of its values, and the join rewrite.
fn all_distinct(values: &ArrayRef) -> bool {
    use std::cmp::Ordering;
    let n = values.len();
    let Ok(cmp) = arrow::array::make_comparator(values.as_ref(), values.as_ref(), Default::default()) else {
        return false;
    };
    let steps = || (1..n).map(|i| cmp(i - 1, i));
    if steps().all(Ordering::is_lt) || steps().all(Ordering::is_gt) {
        return true;
    }
    if steps().any(Ordering::is_eq) {
        return false;
    }
    let rows = arrow::row::RowConverter::new(vec![arrow::row::SortField::new(values.data_type().clone())])
        .and_then(|c| c.convert_columns(std::slice::from_ref(values)));
    let Ok(rows) = rows else { return false };
    let mut seen = std::collections::HashSet::new();
    for r in rows.iter() {
        if seen.len() == seen.capacity() && seen.try_reserve(seen.len().max(64)).is_err() {
            return false;
        }
        if !seen.insert(r) {
            return false;
        }
    }
    true
}

/// Type footer labels: all integers → Int64, all numbers → Float64, all ISO-8601
/// dates/times → Timestamp(ns), else Utf8.
pub fn typed_labels(labels: &[String]) -> ArrayRef {
    if let Some(v) = labels
        .iter()
        .map(|l| l.trim().parse::<i64>().ok())
        .collect::<Option<Vec<_>>>()
    {
        return Arc::new(Int64Array::from(v));
    }
    if let Some(v) = labels
        .iter()
        .map(|l| l.trim().parse::<f64>().ok().filter(|_| looks_numeric(l)))
        .collect::<Option<Vec<_>>>()
    {
        return Arc::new(Float64Array::from(v));
    }
    if let Some(v) = labels
        .iter()
        .map(|l| {
            looks_like_date(l)
                .then(|| string_to_timestamp_nanos(l.trim()).ok())
                .flatten()
        })
        .collect::<Option<Vec<_>>>()
    {
        return Arc::new(TimestampNanosecondArray::from(v));
    }
    Arc::new(StringArray::from_iter_values(labels))
}

/// Rust's f64 parser accepts "inf", "NaN" and "infinity"; labels such as "nan" or "Inf" are
/// more likely names than numbers, so require a digit.
fn looks_numeric(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

/// `YYYY-MM-DD` prefix (the timestamp parser also accepts other shapes we do not want to
/// reinterpret, such as bare numbers).
fn looks_like_date(s: &str) -> bool {
    let b = s.trim().as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
}

/// The Arrow type a timestamp label axis gets.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn labels_are_typed_by_parsing() {
        assert_eq!(typed_labels(&s(&["1", "-2", "3"])).data_type(), &DataType::Int64);
        assert_eq!(typed_labels(&s(&["1.5", "2", "-3e2"])).data_type(), &DataType::Float64);
        assert_eq!(
            typed_labels(&s(&["2024-01-01", "2024-01-02T06:00:00"])).data_type(),
            &timestamp_type()
        );
        assert_eq!(typed_labels(&s(&["east", "east", "west"])).data_type(), &DataType::Utf8);
        assert_eq!(typed_labels(&s(&["nan", "inf"])).data_type(), &DataType::Utf8);
        let t = typed_labels(&s(&["1970-01-01T00:00:01Z"]));
        let t = t.as_any().downcast_ref::<TimestampNanosecondArray>().unwrap();
        assert_eq!(t.value(0), 1_000_000_000);
    }
}
