//! CF conventions read from dataset attributes: which stored elements are missing
//! (`_FillValue`, `missing_value`) and integer packing (`scale_factor`, `add_offset`).
//!
//! The rule, the same on every read path (scan, fold, zone maps, remote, Ballista):
//! - Every value of `_FillValue`, `missing_value` and `fill_value` (a number, or a list
//!   written `[a, b]`, `a,b` or `a b`) marks the stored elements numerically equal to it
//!   as missing. Matching is on the stored (raw) value, before any unpacking.
//! - Float datasets: the value is converted to the dtype first (as numpy does); a NaN
//!   value makes every NaN element missing; `0` matches `-0.0` and the other way round,
//!   because they are equal numbers.
//! - Integer datasets: a value written as a float (`-9999.0`) counts when it is a whole
//!   number; a value that no element of the dtype can equal (out of range, such as `-1`
//!   for `u8`, or fractional, or infinite) is ignored, as no element ever matches it.
//! - Text that is not a number is an error naming the dataset and the attribute.
//!
//! Packing applies to integer datasets only: the value is `raw × scale_factor +
//! add_offset` (either may be absent). Float datasets keep their values: the upstream
//! converter unpacks float variables when it imports them but copies the attributes.

use super::dtype::{DType, Scalar};
use super::error::{FormatError, Result};
use super::file::Dataset;
use half::f16;
use std::collections::BTreeMap;

/// Attributes whose values mark missing elements.
pub const MISSING_VALUE_ATTRS: [&str; 3] = ["_FillValue", "missing_value", "fill_value"];

/// Attributes whose values pack integers (`raw × scale_factor + add_offset`).
pub const PACKING_ATTRS: [&str; 2] = ["scale_factor", "add_offset"];

/// Which stored elements of a dataset are missing (NULL).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MissingValues {
    /// Stored values (little-endian bytes of the dataset's dtype) that mark a missing
    /// element, compared as numbers.
    pub values: Vec<Vec<u8>>,
    /// Whether every NaN element is missing (a NaN fill value, or the session's
    /// `tet.nan_is_null`; float datasets only).
    pub nan: bool,
}

impl MissingValues {
    /// True when no element can be missing.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && !self.nan
    }

    /// The rule as a test of decoded elements of `dtype` (the values decoded once).
    pub fn matcher(&self, dtype: DType) -> impl Fn(Scalar) -> bool + use<> {
        let values: Vec<Scalar> = self.values.iter().filter_map(|v| dtype.decode(v).ok()).collect();
        let nan = self.nan;
        move |x| (nan && matches!(x, Scalar::F64(f) if f.is_nan())) || values.contains(&x)
    }
}

/// Integer packing: `value = raw × scale + offset`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Packing {
    pub scale: f64,
    pub offset: f64,
}

impl Packing {
    /// The unpacked value of `raw`.
    #[inline(always)]
    pub fn apply(&self, raw: f64) -> f64 {
        raw * self.scale + self.offset
    }
}

impl Dataset {
    /// The missing-value rule of this dataset's attributes (see the module docs);
    /// `nan_is_null` also makes every NaN missing.
    pub fn missing_values(&self, nan_is_null: bool) -> Result<MissingValues> {
        missing_values_of(self.name(), self.dtype(), &self.meta.attrs, nan_is_null)
    }

    /// The packing of an integer dataset with `scale_factor` and/or `add_offset`.
    pub fn packing(&self) -> Result<Option<Packing>> {
        if self.dtype().is_float() {
            return Ok(None);
        }
        let read = |attr: &'static str, default: f64| -> Result<(bool, f64)> {
            match self.meta.attrs.get(attr) {
                None => Ok((false, default)),
                Some(text) => match parse_number(text.trim()) {
                    Some(Number::Float(x)) if x.is_finite() => Ok((true, x)),
                    Some(Number::Int(i)) => Ok((true, i as f64)),
                    _ => Err(attr_error(self.name(), attr, text, "is not a finite number")),
                },
            }
        };
        let (has_scale, scale) = read(PACKING_ATTRS[0], 1.0)?;
        // Without `add_offset` nothing is added (as xarray decodes): -0.0 is the offset
        // that keeps every value, a zero's sign included (+0.0 would turn -0.0 to +0.0).
        let (has_offset, offset) = read(PACKING_ATTRS[1], -0.0)?;
        Ok((has_scale || has_offset).then_some(Packing { scale, offset }))
    }
}

/// The missing-value rule of a dataset named `name` with these attributes.
pub fn missing_values_of(
    name: &str,
    dtype: DType,
    attrs: &BTreeMap<String, String>,
    nan_is_null: bool,
) -> Result<MissingValues> {
    let mut out = MissingValues {
        values: Vec::new(),
        nan: nan_is_null && dtype.is_float(),
    };
    for attr in MISSING_VALUE_ATTRS {
        let Some(text) = attrs.get(attr) else { continue };
        for item in list_items(text) {
            let x = parse_number(item).ok_or_else(|| attr_error(name, attr, text, "is not a number"))?;
            match stored_value(dtype, x) {
                Stored::Nan => out.nan = true,
                Stored::Bytes(b) if !out.values.contains(&b) => out.values.push(b),
                Stored::Bytes(_) | Stored::Never => {}
            }
        }
    }
    Ok(out)
}

fn attr_error(dataset: &str, attr: &'static str, text: &str, problem: &str) -> FormatError {
    FormatError::Invalid {
        region: format!("dataset {dataset:?}"),
        field: attr,
        problem: format!("attribute {text:?} {problem}"),
    }
}

/// The items of an attribute that may hold a list.
fn list_items(text: &str) -> impl Iterator<Item = &str> {
    let t = text.trim();
    let t = t
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .or_else(|| t.strip_prefix('(').and_then(|s| s.strip_suffix(')')))
        .unwrap_or(t);
    t.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Number {
    Int(i128),
    Float(f64),
}

fn parse_number(s: &str) -> Option<Number> {
    if let Ok(i) = s.parse::<i128>() {
        return Some(Number::Int(i));
    }
    let lower = s.to_ascii_lowercase();
    let f = match lower.trim_start_matches(['+', '-']) {
        "nan" => f64::NAN,
        "inf" | "infinity" => {
            if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        _ if s.bytes().any(|b| b.is_ascii_digit()) => s.parse::<f64>().ok()?,
        _ => return None,
    };
    Some(Number::Float(f))
}

enum Stored {
    /// Every NaN element.
    Nan,
    /// Elements equal to these LE bytes.
    Bytes(Vec<u8>),
    /// No element of the dtype can equal the value.
    Never,
}

fn stored_value(dtype: DType, x: Number) -> Stored {
    let f = match x {
        Number::Int(i) => i as f64,
        Number::Float(f) => f,
    };
    if dtype.is_float() {
        if f.is_nan() {
            return Stored::Nan;
        }
        return Stored::Bytes(match dtype {
            DType::F32 => (f as f32).to_le_bytes().to_vec(),
            DType::F16 => f16::from_f64(f).to_le_bytes().to_vec(),
            _ => f.to_le_bytes().to_vec(),
        });
    }
    let i = match x {
        Number::Int(i) => i,
        Number::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38 => f as i128,
        Number::Float(_) => return Stored::Never,
    };
    let bytes = match dtype {
        DType::I16 => i16::try_from(i).ok().map(|v| v.to_le_bytes().to_vec()),
        DType::I32 => i32::try_from(i).ok().map(|v| v.to_le_bytes().to_vec()),
        DType::I64 => i64::try_from(i).ok().map(|v| v.to_le_bytes().to_vec()),
        DType::U8 => u8::try_from(i).ok().map(|v| v.to_le_bytes().to_vec()),
        DType::U16 => u16::try_from(i).ok().map(|v| v.to_le_bytes().to_vec()),
        DType::U32 => u32::try_from(i).ok().map(|v| v.to_le_bytes().to_vec()),
        DType::U64 => u64::try_from(i).ok().map(|v| v.to_le_bytes().to_vec()),
        DType::F16 | DType::F32 | DType::F64 => None,
    };
    bytes.map_or(Stored::Never, Stored::Bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{DatasetSpec, TetFile, TetWriter};

    fn dataset(dtype: DType, attrs: &[(&str, &str)]) -> Dataset {
        let data = vec![0u8; dtype.size() * 2];
        let mut w = TetWriter::new();
        let mut spec = DatasetSpec::new("d", dtype, &[2], &[2], &data);
        for (k, v) in attrs {
            spec = spec.attr(k, v);
        }
        w.dataset(spec).unwrap();
        let file = TetFile::open(w.to_bytes().unwrap().as_slice()).unwrap();
        file.datasets[0].clone()
    }

    #[test]
    fn fill_values_by_dtype() {
        let m = dataset(DType::F32, &[("_FillValue", "NaN")])
            .missing_values(false)
            .unwrap();
        assert_eq!((m.values.len(), m.nan), (0, true));
        let m = dataset(
            DType::I16,
            &[("_FillValue", "-9999.0"), ("missing_value", "[1, 2 ,70000]")],
        )
        .missing_values(false)
        .unwrap();
        assert_eq!(
            m.values,
            vec![
                (-9999i16).to_le_bytes().to_vec(),
                1i16.to_le_bytes().to_vec(),
                2i16.to_le_bytes().to_vec()
            ]
        );
        // Out of range, fractional and infinite values match nothing.
        let m = dataset(DType::U8, &[("_FillValue", "-1"), ("missing_value", "2.5 inf")])
            .missing_values(false)
            .unwrap();
        assert!(m.is_empty());
        // Zero matches both signed zeros.
        let m = dataset(DType::F64, &[("_FillValue", "0")])
            .missing_values(false)
            .unwrap();
        assert!(m.matcher(DType::F64)(Scalar::F64(-0.0)));
        assert!(!m.matcher(DType::F64)(Scalar::F64(f64::NAN)));
        let m = dataset(DType::F64, &[]).missing_values(true).unwrap();
        assert!(m.matcher(DType::F64)(Scalar::F64(f64::NAN)));
        assert!(dataset(DType::I32, &[]).missing_values(true).unwrap().is_empty());
        let err = dataset(DType::F32, &[("_FillValue", "none")])
            .missing_values(false)
            .unwrap_err();
        assert!(
            err.to_string().contains("_FillValue") && err.to_string().contains("\"d\""),
            "{err}"
        );
    }

    #[test]
    fn packing_of_integer_datasets_only() {
        let p = dataset(DType::I16, &[("scale_factor", "0.5"), ("add_offset", "273.15")])
            .packing()
            .unwrap();
        assert_eq!(
            p,
            Some(Packing {
                scale: 0.5,
                offset: 273.15
            })
        );
        assert_eq!(p.unwrap().apply(2.0), 274.15);
        let p = dataset(DType::U8, &[("add_offset", "-3")]).packing().unwrap();
        assert_eq!(
            p,
            Some(Packing {
                scale: 1.0,
                offset: -3.0
            })
        );
        assert_eq!(dataset(DType::F32, &[("scale_factor", "2")]).packing().unwrap(), None);
        assert_eq!(dataset(DType::I32, &[]).packing().unwrap(), None);
        let err = dataset(DType::I16, &[("scale_factor", "nan")]).packing().unwrap_err();
        assert!(err.to_string().contains("scale_factor"), "{err}");
    }
}
