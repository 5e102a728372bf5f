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
