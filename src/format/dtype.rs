//! Element types (dataset record `dtype` tags 1–10) and little-endian element access.

use super::error::{FormatError, Result};
use half::f16;

/// The element type of a dataset, as tagged in its directory record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    I32,
    I64,
    U8,
    U16,
    I16,
    U32,
    F16,
    U64,
}

impl DType {
    /// Every dtype, in tag order.
    pub const ALL: [DType; 10] = [
        DType::F32,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::I16,
        DType::U32,
        DType::F16,
        DType::U64,
    ];

    /// Decode a wire tag.
    pub fn from_tag(tag: u32) -> Option<DType> {
        DType::ALL.get((tag as usize).wrapping_sub(1)).copied()
    }

    /// The wire tag (1–10).
    pub fn tag(self) -> u32 {
        DType::ALL.iter().position(|d| *d == self).unwrap_or(0) as u32 + 1
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// Lower-case name as used by upstream tools (`f32`, `u16`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::U32 => "u32",
            DType::F16 => "f16",
            DType::U64 => "u64",
        }
    }

    /// True for u8, u16, u32 and u64.
    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// True for f16, f32 and f64.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::F32 | DType::F64)
    }

    /// Decode one element (exactly `size()` bytes) to a [`Scalar`].
    pub fn decode(self, b: &[u8]) -> Result<Scalar> {
        if b.len() != self.size() {
            return Err(FormatError::invalid(
                "element",
                "byte length",
                format!("is {} for dtype {} (expected {})", b.len(), self.name(), self.size()),
            ));
        }
        let a8 = |b: &[u8]| -> [u8; 8] { b.try_into().unwrap_or([0; 8]) };
        let a4 = |b: &[u8]| -> [u8; 4] { b.try_into().unwrap_or([0; 4]) };
        let a2 = |b: &[u8]| -> [u8; 2] { b.try_into().unwrap_or([0; 2]) };
        Ok(match self {
            DType::F32 => Scalar::F64(f32::from_le_bytes(a4(b)) as f64),
            DType::F64 => Scalar::F64(f64::from_le_bytes(a8(b))),
            DType::F16 => Scalar::F64(f16::from_le_bytes(a2(b)).to_f64()),
            DType::I32 => Scalar::I64(i32::from_le_bytes(a4(b)) as i64),
            DType::I64 => Scalar::I64(i64::from_le_bytes(a8(b))),
            DType::I16 => Scalar::I64(i16::from_le_bytes(a2(b)) as i64),
            DType::U8 => Scalar::U64(b[0] as u64),
            DType::U16 => Scalar::U64(u16::from_le_bytes(a2(b)) as u64),
            DType::U32 => Scalar::U64(u32::from_le_bytes(a4(b)) as u64),
            DType::U64 => Scalar::U64(u64::from_le_bytes(a8(b))),
        })
    }

    /// Element `i` of a little-endian buffer of this dtype; `None` when out of range.
    pub fn element(self, buf: &[u8], i: usize) -> Option<Scalar> {
        let s = self.size();
        let start = i.checked_mul(s)?;
        let bytes = buf.get(start..start.checked_add(s)?)?;
        self.decode(bytes).ok()
    }
}

/// Run `$body` with `$T` bound to the native element type of `$dtype` (a [`DType`]): the
/// one place a dtype is dispatched to code generic over its element type.
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::format::with_dtype!(@arms $dtype, $T, $body;
            F32 f32, F64 f64, F16 half::f16, I16 i16, I32 i32, I64 i64, U8 u8, U16 u16, U32 u32, U64 u64)
    };
    (@arms $dtype:expr, $T:ident, $body:expr; $($variant:ident $native:ty),*) => {
        match $dtype {
            $($crate::format::DType::$variant => {
                type $T = $native;
                $body
            })*
        }
    };
}
pub(crate) use with_dtype;

mod sealed {
    /// Only the element types below: no other crate can add one.
    pub trait Sealed {}
}

/// A native element type of a dtype: plain old data for which every bit pattern is a value.
/// Sealed: implemented for the ten element types of the format and nothing else, so
/// [`elements`] cannot be made to reinterpret bytes as any other type.
///
/// # Safety
/// Implementors must have no padding and no invalid bit patterns.
pub unsafe trait Element: sealed::Sealed + Copy + Default + Send + Sync + 'static {}

macro_rules! element {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: primitive numbers (and `half::f16`, a `u16` newtype) have no padding
        // and no invalid bit patterns.
        unsafe impl Element for $t {}
    )*};
}
element!(f32, f64, f16, i16, i32, i64, u8, u16, u32, u64);

#[cfg(not(target_endian = "little"))]
compile_error!("datafusion-tet reads little-endian payloads in place: little-endian targets only");

/// Little-endian bytes viewed as elements: borrowed when aligned, copied otherwise. The
/// one element view of payload bytes; trailing bytes short of an element are ignored.
pub fn elements<T: Element>(bytes: &[u8]) -> std::borrow::Cow<'_, [T]> {
    let size = std::mem::size_of::<T>();
    // SAFETY: `T: Element` is plain old data for which any bit pattern is valid.
    let (pre, mid, post) = unsafe { bytes.align_to::<T>() };
    if pre.is_empty() && post.is_empty() {
        return std::borrow::Cow::Borrowed(mid);
    }
    let n = bytes.len() / size;
    let mut v = vec![T::default(); n];
    // SAFETY: as above; the destination holds exactly `n * size` bytes.
    let dst = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, n * size) };
    dst.copy_from_slice(&bytes[..n * size]);
    std::borrow::Cow::Owned(v)
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One decoded element, widened without loss: floats to f64, signed to i64, unsigned to u64.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    F64(f64),
    I64(i64),
    U64(u64),
}

impl Scalar {
    /// The value as f64 (lossy for integers above 2^53).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::F64(v) => v,
            Scalar::I64(v) => v as f64,
            Scalar::U64(v) => v as f64,
        }
    }
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::F64(v) => write!(f, "{v}"),
            Scalar::I64(v) => write!(f, "{v}"),
            Scalar::U64(v) => write!(f, "{v}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_reject_unknown() {
        for (i, d) in DType::ALL.iter().enumerate() {
            assert_eq!(d.tag(), i as u32 + 1);
            assert_eq!(DType::from_tag(d.tag()), Some(*d));
        }
        assert_eq!(DType::from_tag(0), None);
        assert_eq!(DType::from_tag(11), None);
        assert_eq!(DType::from_tag(u32::MAX), None);
    }

    #[test]
    fn decode_each_dtype() {
        assert_eq!(
            DType::F16.decode(&f16::from_f32(1.5).to_le_bytes()).unwrap(),
            Scalar::F64(1.5)
        );
        assert_eq!(DType::I16.decode(&(-3i16).to_le_bytes()).unwrap(), Scalar::I64(-3));
        assert_eq!(
            DType::U64.decode(&u64::MAX.to_le_bytes()).unwrap(),
            Scalar::U64(u64::MAX)
        );
        assert!(DType::F32.decode(&[0, 0]).is_err());
        assert_eq!(DType::U8.element(&[1, 2, 3], 2), Some(Scalar::U64(3)));
        assert_eq!(DType::U8.element(&[1, 2, 3], 3), None);
    }

    #[test]
    fn misaligned_bytes_are_copied() {
        let mut b = vec![0u8];
        b.extend(1.5f64.to_le_bytes());
        assert_eq!(elements::<f64>(&b[1..])[0], 1.5);
        assert_eq!(with_dtype!(DType::U16, T => std::mem::size_of::<T>()), 2);
    }
}
