//! The value column: its name, the Arrow type of each dtype, and Arrow arrays over
//! little-endian element bytes.

use crate::format::{DType, Element, elements, with_dtype};
use arrow::array::{ArrayRef, PrimitiveArray};
use arrow::buffer::{Buffer, NullBuffer, ScalarBuffer};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use std::sync::Arc;

/// Name of the value column.
pub const VALUE_COLUMN: &str = "v";

/// The Arrow primitive type whose native type is this element type.
pub trait ArrowElement: Element {
    /// The Arrow type.
    type Arrow: ArrowPrimitiveType<Native = Self>;
}

macro_rules! arrow_element {
    ($($t:ty => $a:ty),*) => {$(impl ArrowElement for $t { type Arrow = $a; })*};
}
arrow_element!(
    f32 => Float32Type, f64 => Float64Type, half::f16 => Float16Type, i16 => Int16Type, i32 => Int32Type,
    i64 => Int64Type, u8 => UInt8Type, u16 => UInt16Type, u32 => UInt32Type, u64 => UInt64Type
);

/// Arrow type of a dtype's values.
pub fn arrow_type(dtype: DType) -> DataType {
    with_dtype!(dtype, T => <<T as ArrowElement>::Arrow as ArrowPrimitiveType>::DATA_TYPE)
}

/// An Arrow array over little-endian elements of `dtype`: `bytes` shared when aligned,
/// copied otherwise; trailing bytes short of an element are ignored.
pub fn array_from_le(dtype: DType, bytes: Buffer, nulls: Option<NullBuffer>) -> ArrayRef {
    with_dtype!(dtype, T => primitive::<<T as ArrowElement>::Arrow>(bytes, nulls))
}

fn primitive<A: ArrowPrimitiveType>(bytes: Buffer, nulls: Option<NullBuffer>) -> ArrayRef
where
    A::Native: Element,
{
    let len = bytes.len() / std::mem::size_of::<A::Native>();
    let values = if bytes.as_ptr().align_offset(std::mem::align_of::<A::Native>()) == 0 {
        ScalarBuffer::<A::Native>::new(bytes, 0, len)
    } else {
        ScalarBuffer::from(elements::<A::Native>(bytes.as_slice()).into_owned())
    };
    Arc::new(PrimitiveArray::<A>::new(values, nulls))
}

/// The type values of types `a` and `b` (numeric Arrow types of value columns) take
/// together, as numpy's `result_type` gives it (what xarray's concatenation of two files
/// gives): the wider of two floats or of two integers of one signedness; a signed integer
/// wide enough for both when the signedness differs (Float64 past 64 bits); a float wide
/// enough for the integer's values beside an integer (Float16 holds 8-bit, Float32 16-bit
/// integers). `None` for a type that is not a numeric value column's.
pub fn common_type(a: &DataType, b: &DataType) -> Option<DataType> {
    use DataType::*;
    /// (is float, is signed, bits).
    fn kind(t: &DataType) -> Option<(bool, bool, u32)> {
        Some(match t {
            Float16 => (true, true, 16),
            Float32 => (true, true, 32),
            Float64 => (true, true, 64),
            Int8 => (false, true, 8),
            Int16 => (false, true, 16),
            Int32 => (false, true, 32),
            Int64 => (false, true, 64),
            UInt8 => (false, false, 8),
            UInt16 => (false, false, 16),
            UInt32 => (false, false, 32),
            UInt64 => (false, false, 64),
            _ => return None,
        })
    }
    let float = |bits: u32| match bits {
        0..=16 => Float16,
        17..=32 => Float32,
        _ => Float64,
    };
    let int = |signed: bool, bits: u32| match (signed, bits) {
        (true, 0..=8) => Int8,
        (true, 9..=16) => Int16,
        (true, 17..=32) => Int32,
        (true, 33..=64) => Int64,
        (false, 0..=8) => UInt8,
        (false, 9..=16) => UInt16,
        (false, 17..=32) => UInt32,
        (false, 33..=64) => UInt64,
        _ => Float64,
    };
    let (x, y) = (kind(a)?, kind(b)?);
    Some(match (x, y) {
        ((true, _, p), (true, _, q)) => float(p.max(q)),
        ((true, _, f), (false, _, i)) | ((false, _, i), (true, _, f)) => float(f.max(if i >= 32 { 64 } else { 2 * i })),
        ((false, true, p), (false, false, q)) | ((false, false, q), (false, true, p)) => int(true, p.max(2 * q)),
        ((false, s, p), (false, _, q)) => int(s, p.max(q)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Float32Array, UInt16Array};

    #[test]
    fn arrays_from_aligned_and_misaligned_bytes() {
        let vals: Vec<u8> = [1.0f32, -9.0, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&vals);
        for buf in [Buffer::from_vec(vals.clone()), Buffer::from_vec(shifted).slice(1)] {
            let a = array_from_le(DType::F32, buf, None);
            let a = a.as_any().downcast_ref::<Float32Array>().unwrap();
            assert_eq!(a.values().to_vec(), vec![1.0, -9.0, 3.0]);
        }
        let a = array_from_le(DType::U16, Buffer::from_vec(vec![1u8, 0, 2, 1, 9]), None);
        let a = a.as_any().downcast_ref::<UInt16Array>().unwrap();
        assert_eq!(a.values().to_vec(), vec![1, 258]);
        assert_eq!(arrow_type(DType::F16), DataType::Float16);
        assert_eq!(arrow_type(DType::U64), DataType::UInt64);
    }
}
