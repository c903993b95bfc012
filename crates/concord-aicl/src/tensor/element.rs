//! Element types: the Rust types a tensor can be built from, and numbers for the JSON bridge.

use half::{bf16, f16};

use super::DType;

pub(crate) mod sealed {
    /// Byte access for [`super::Element`]; private so the set of element types stays closed.
    pub trait Sealed: Sized {
        /// Appends the little-endian bytes of `self`.
        fn put_le(self, out: &mut Vec<u8>);
        /// Reads one element from exactly `itemsize` little-endian bytes.
        fn get_le(bytes: &[u8]) -> Self;
    }
}

/// A Rust type that is the element type of a [`DType`]: `bool`, `i8`…`i64`, `u8`…`u64`,
/// [`half::f16`], [`half::bf16`], `f32`, `f64`.
pub trait Element: Copy + sealed::Sealed + 'static {
    /// The dtype whose elements are this type.
    const DTYPE: DType;
}

macro_rules! numeric_element {
    ($($ty:ty => $dtype:ident),* $(,)?) => {$(
        impl sealed::Sealed for $ty {
            #[inline]
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn get_le(bytes: &[u8]) -> Self {
                let mut array = [0u8; std::mem::size_of::<$ty>()];
                array.copy_from_slice(bytes);
                <$ty>::from_le_bytes(array)
            }
        }
        impl Element for $ty {
            const DTYPE: DType = DType::$dtype;
        }
    )*};
}

numeric_element! {
    i8 => Int8, u8 => UInt8, i16 => Int16, u16 => UInt16, i32 => Int32, u32 => UInt32,
    i64 => Int64, u64 => UInt64, f16 => Float16, bf16 => BFloat16, f32 => Float32, f64 => Float64,
}

impl sealed::Sealed for bool {
    #[inline]
    fn put_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    #[inline]
    fn get_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
}

/// One tensor element as a number: how elements appear in JSON and in human-readable serde formats.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Scalar {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
}

impl Scalar {
    /// Reads the element in `bytes` (exactly `dtype.itemsize()` of them).
    pub(crate) fn read(dtype: DType, bytes: &[u8]) -> Scalar {
        use sealed::Sealed;
        match dtype {
            DType::Bool => Scalar::Bool(bool::get_le(bytes)),
            DType::Int8 => Scalar::Int(i8::get_le(bytes).into()),
            DType::UInt8 => Scalar::Int(u8::get_le(bytes).into()),
            DType::Int16 => Scalar::Int(i16::get_le(bytes).into()),
            DType::UInt16 => Scalar::Int(u16::get_le(bytes).into()),
            DType::Int32 => Scalar::Int(i32::get_le(bytes).into()),
            DType::UInt32 => Scalar::Int(u32::get_le(bytes).into()),
            DType::Int64 => Scalar::Int(i64::get_le(bytes)),
            DType::UInt64 => Scalar::UInt(u64::get_le(bytes)),
            DType::Float16 => Scalar::Float(f16::get_le(bytes).to_f64()),
            DType::BFloat16 => Scalar::Float(bf16::get_le(bytes).to_f64()),
            DType::Float32 => Scalar::Float(f32::get_le(bytes).into()),
            DType::Float64 => Scalar::Float(f64::get_le(bytes)),
        }
    }

    /// Appends this number as an element of `dtype`, or says why it is not one.
    pub(crate) fn write(self, dtype: DType, out: &mut Vec<u8>) -> Result<(), String> {
        use sealed::Sealed;
        match dtype {
            DType::Bool => match self {
                Scalar::Bool(value) => value.put_le(out),
                other => return Err(format!("{} is not a bool", other.describe())),
            },
            DType::Int8 => self.integer::<i8>(dtype)?.put_le(out),
            DType::UInt8 => self.integer::<u8>(dtype)?.put_le(out),
            DType::Int16 => self.integer::<i16>(dtype)?.put_le(out),
            DType::UInt16 => self.integer::<u16>(dtype)?.put_le(out),
            DType::Int32 => self.integer::<i32>(dtype)?.put_le(out),
            DType::UInt32 => self.integer::<u32>(dtype)?.put_le(out),
            DType::Int64 => self.integer::<i64>(dtype)?.put_le(out),
            DType::UInt64 => self.integer::<u64>(dtype)?.put_le(out),
            DType::Float16 => {
                let value = self.float(dtype)?;
                finite_or_err(f16::from_f64(value), value, dtype, f16::is_infinite)?.put_le(out)
            }
            DType::BFloat16 => {
                let value = self.float(dtype)?;
                finite_or_err(bf16::from_f64(value), value, dtype, bf16::is_infinite)?.put_le(out)
            }
            DType::Float32 => {
                let value = self.float(dtype)?;
                finite_or_err(value as f32, value, dtype, f32::is_infinite)?.put_le(out)
            }
            DType::Float64 => self.float(dtype)?.put_le(out),
        }
        Ok(())
    }

    fn integer<T: TryFrom<i64> + TryFrom<u64>>(self, dtype: DType) -> Result<T, String> {
        let converted = match self {
            Scalar::Int(value) => T::try_from(value).ok(),
            Scalar::UInt(value) => T::try_from(value).ok(),
            other => return Err(format!("{} is not an integer", other.describe())),
        };
        converted.ok_or_else(|| format!("{} is out of range for {dtype}", self.describe()))
    }

    fn float(self, dtype: DType) -> Result<f64, String> {
        match self {
            Scalar::Int(value) => Ok(value as f64),
            Scalar::UInt(value) => Ok(value as f64),
            Scalar::Float(value) => Ok(value),
            Scalar::Bool(_) => Err(format!("{} is not a number for {dtype}", self.describe())),
        }
    }

    fn describe(self) -> String {
        match self {
            Scalar::Bool(value) => value.to_string(),
            Scalar::Int(value) => value.to_string(),
            Scalar::UInt(value) => value.to_string(),
            Scalar::Float(value) => format!("{value:?}"),
        }
    }
}

/// Refuses a finite number that became infinite in a narrower float type.
fn finite_or_err<T: Copy>(
    narrowed: T,
    value: f64,
    dtype: DType,
    is_infinite: fn(T) -> bool,
) -> Result<T, String> {
    if value.is_finite() && is_infinite(narrowed) {
        Err(format!("{value:?} is out of range for {dtype}"))
    } else {
        Ok(narrowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_range_checked() {
        let mut out = Vec::new();
        assert!(Scalar::Int(255).write(DType::UInt8, &mut out).is_ok());
        assert!(Scalar::Int(256).write(DType::UInt8, &mut out).is_err());
        assert!(Scalar::Int(-1).write(DType::UInt64, &mut out).is_err());
        assert!(Scalar::UInt(u64::MAX)
            .write(DType::UInt64, &mut out)
            .is_ok());
        assert!(Scalar::Float(1.5).write(DType::Int32, &mut out).is_err());
    }

    #[test]
    fn floats_round_but_do_not_overflow() {
        let mut out = Vec::new();
        assert!(Scalar::Float(0.1).write(DType::Float16, &mut out).is_ok());
        assert!(Scalar::Float(1e6).write(DType::Float16, &mut out).is_err());
        assert!(Scalar::Float(f64::INFINITY)
            .write(DType::Float32, &mut out)
            .is_ok());
        assert!(Scalar::Float(1e300)
            .write(DType::Float32, &mut out)
            .is_err());
    }

    #[test]
    fn every_dtype_reads_what_it_writes() {
        for dtype in DType::ALL {
            let scalar = if dtype == DType::Bool {
                Scalar::Bool(true)
            } else {
                Scalar::Int(100)
            };
            let mut out = Vec::new();
            scalar.write(dtype, &mut out).unwrap();
            assert_eq!(out.len(), dtype.itemsize());
            let back = Scalar::read(dtype, &out);
            let expected = match (dtype.is_float(), dtype) {
                (true, _) => Scalar::Float(100.0),
                (false, DType::UInt64) => Scalar::UInt(100),
                (false, DType::Bool) => Scalar::Bool(true),
                (false, _) => Scalar::Int(100),
            };
            assert_eq!(back, expected, "{dtype}");
        }
    }
}
