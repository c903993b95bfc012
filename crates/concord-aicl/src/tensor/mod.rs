//! Tensors: `[t:dtype:shape:base85]`, little-endian C-order data.

mod element;
pub(crate) mod serde_impl;

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, ErrorKind, Result};

pub use element::Element;
pub(crate) use element::Scalar;

/// The element type of a tensor (SPEC-NOTES §4).
///
/// ```
/// use concord_aicl::DType;
///
/// let dtype: DType = "bfloat16".parse()?;
/// assert_eq!(dtype, DType::BFloat16);
/// assert_eq!(dtype.itemsize(), 2);
/// assert_eq!(dtype.to_string(), "bfloat16");
/// # Ok::<(), concord_aicl::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// One byte, 0 or 1.
    Bool,
    /// Signed 8-bit integer.
    Int8,
    /// Unsigned 8-bit integer (also how raw bytes are carried).
    UInt8,
    /// Signed 16-bit integer.
    Int16,
    /// Unsigned 16-bit integer.
    UInt16,
    /// Signed 32-bit integer.
    Int32,
    /// Unsigned 32-bit integer.
    UInt32,
    /// Signed 64-bit integer.
    Int64,
    /// Unsigned 64-bit integer.
    UInt64,
    /// IEEE 754 half precision.
    Float16,
    /// bfloat16 (the top half of a float32).
    BFloat16,
    /// IEEE 754 single precision.
    Float32,
    /// IEEE 754 double precision.
    Float64,
}

impl DType {
    /// Every dtype, in the order of SPEC-NOTES §4.
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::Int8,
        DType::UInt8,
        DType::Int16,
        DType::UInt16,
        DType::Int32,
        DType::UInt32,
        DType::Int64,
        DType::UInt64,
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
    ];

    /// The name written in AICL text (numpy's spelling).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int8 => "int8",
            DType::UInt8 => "uint8",
            DType::Int16 => "int16",
            DType::UInt16 => "uint16",
            DType::Int32 => "int32",
            DType::UInt32 => "uint32",
            DType::Int64 => "int64",
            DType::UInt64 => "uint64",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }

    /// The dtype written `name`, if there is one.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|dtype| dtype.name() == name)
    }

    /// Bytes per element.
    pub fn itemsize(self) -> usize {
        match self {
            DType::Bool | DType::Int8 | DType::UInt8 => 1,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 => 4,
            DType::Int64 | DType::UInt64 | DType::Float64 => 8,
        }
    }

    /// Whether elements are floating point.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        DType::from_name(name).ok_or_else(|| {
            Error::new(ErrorKind::UnknownDType {
                name: name.to_owned(),
            })
        })
    }
}

/// Number of bytes a tensor of `dtype` and `shape` holds, or `None` if it overflows `usize`.
pub(crate) fn byte_len(dtype: DType, shape: &[usize]) -> Option<usize> {
    shape
        .iter()
        .try_fold(dtype.itemsize(), |bytes, &dim| bytes.checked_mul(dim))
}

/// Appends a shape as AICL writes it: dimensions separated by commas, nothing for a scalar.
pub(crate) fn write_shape(out: &mut String, shape: &[usize]) {
    for (index, dim) in shape.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(itoa::Buffer::new().format(*dim));
    }
}

/// A shape as AICL writes it, for error messages.
pub(crate) fn format_shape(shape: &[usize]) -> String {
    let mut text = String::new();
    write_shape(&mut text, shape);
    text
}

/// An n-dimensional array: dtype, shape and little-endian C-order data.
///
/// Build one from typed elements with [`Tensor::from_vec`] and read them back with
/// [`Tensor::to_vec`]; [`Tensor::new`] takes raw bytes.
///
/// ```
/// use concord_aicl::{DType, Tensor, Value};
///
/// let tensor = Tensor::from_vec(vec![2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
/// assert_eq!(tensor.dtype(), DType::Float32);
/// assert_eq!(tensor.data().len(), 24);
///
/// let text = concord_aicl::to_string(&Value::Tensor(tensor.clone()))?;
/// assert!(text.starts_with("[t:float32:2,3:"));
/// let back: Tensor = concord_aicl::from_str(&text)?;
/// assert_eq!(back.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
/// # Ok::<(), concord_aicl::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl Tensor {
    /// A tensor over raw little-endian bytes; fails if `data` does not have exactly
    /// `product(shape) × itemsize` bytes, or a `bool` byte is not 0 or 1.
    pub fn new(dtype: DType, shape: impl Into<Vec<usize>>, data: Vec<u8>) -> Result<Tensor> {
        let shape = shape.into();
        let expected = byte_len(dtype, &shape).ok_or_else(|| shape_overflow(&shape))?;
        if expected != data.len() {
            return Err(Error::new(ErrorKind::BadTensor {
                reason: format!(
                    "dtype {dtype} with shape [{}] needs {expected} bytes, got {}",
                    format_shape(&shape),
                    data.len()
                ),
            }));
        }
        check_bool_bytes(dtype, &data)?;
        Ok(Tensor { dtype, shape, data })
    }

    /// A tensor of typed elements in C order; fails if `elements.len()` is not `product(shape)`.
    ///
    /// ```
    /// use concord_aicl::Tensor;
    ///
    /// let image = Tensor::from_vec(vec![2, 2, 3], vec![0u8; 12])?;
    /// assert_eq!(image.shape(), &[2, 2, 3]);
    /// assert!(Tensor::from_vec(vec![5], vec![0u8; 4]).is_err());
    /// # Ok::<(), concord_aicl::Error>(())
    /// ```
    pub fn from_vec<T: Element>(shape: impl Into<Vec<usize>>, elements: Vec<T>) -> Result<Tensor> {
        let mut data = Vec::with_capacity(elements.len() * T::DTYPE.itemsize());
        for element in elements {
            element.put_le(&mut data);
        }
        Tensor::new(T::DTYPE, shape, data)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dimensions; empty for a scalar.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The raw little-endian C-order bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Takes the raw bytes.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }

    /// Number of elements (`product(shape)`).
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.itemsize()
    }

    /// Whether the tensor has no elements (some dimension is 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements as `T`, in C order; fails unless `T` is the tensor's dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::new(ErrorKind::BadTensor {
                reason: format!("tensor holds {} elements, not {}", self.dtype, T::DTYPE),
            }));
        }
        Ok(self
            .data
            .chunks_exact(self.dtype.itemsize())
            .map(T::get_le)
            .collect())
    }

    /// The elements as numbers (floats widened to `f64`), for the JSON bridge and serde.
    pub(crate) fn scalars(&self) -> impl Iterator<Item = Scalar> + '_ {
        let dtype = self.dtype;
        self.data
            .chunks_exact(dtype.itemsize())
            .map(move |bytes| Scalar::read(dtype, bytes))
    }

    /// Builds a tensor from numbers, checking that each fits `dtype` (floats are rounded to
    /// the nearest value of a float dtype; integers must be in range; non-integral numbers
    /// are refused for integer dtypes).
    pub(crate) fn from_scalars(
        dtype: DType,
        shape: Vec<usize>,
        scalars: impl IntoIterator<Item = Scalar>,
    ) -> Result<Tensor> {
        let expected = byte_len(dtype, &shape).ok_or_else(|| shape_overflow(&shape))?;
        let mut data = Vec::with_capacity(expected.min(1 << 24));
        for (index, scalar) in scalars.into_iter().enumerate() {
            if data.len() >= expected {
                return Err(element_count_error(dtype, &shape, index + 1));
            }
            scalar.write(dtype, &mut data).map_err(|reason| {
                Error::new(ErrorKind::BadTensor {
                    reason: format!("element {index}: {reason}"),
                })
            })?;
        }
        if data.len() != expected {
            return Err(element_count_error(
                dtype,
                &shape,
                data.len() / dtype.itemsize(),
            ));
        }
        Ok(Tensor { dtype, shape, data })
    }

    /// A tensor whose parts were already checked (used by the parser).
    pub(crate) fn from_checked_parts(dtype: DType, shape: Vec<usize>, data: Vec<u8>) -> Tensor {
        debug_assert_eq!(byte_len(dtype, &shape), Some(data.len()));
        Tensor { dtype, shape, data }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("bytes", &self.data.len())
            .finish()
    }
}

fn shape_overflow(shape: &[usize]) -> Error {
    Error::new(ErrorKind::BadShape {
        text: format!("{} (size overflows)", format_shape(shape)),
    })
}

fn element_count_error(dtype: DType, shape: &[usize], got: usize) -> Error {
    let needed = byte_len(dtype, shape).unwrap_or(0) / dtype.itemsize();
    Error::new(ErrorKind::BadTensor {
        reason: format!(
            "shape [{}] needs {needed} elements, got {}{got}",
            format_shape(shape),
            if got > needed { "at least " } else { "" }
        ),
    })
}

/// `bool` tensors hold bytes 0 and 1 only.
pub(crate) fn check_bool_bytes(dtype: DType, data: &[u8]) -> Result<()> {
    if dtype == DType::Bool {
        if let Some(index) = data.iter().position(|&byte| byte > 1) {
            return Err(Error::new(ErrorKind::BadTensor {
                reason: format!("bool element {index} is byte {}, not 0 or 1", data[index]),
            }));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for dtype in DType::ALL {
            assert_eq!(DType::from_name(dtype.name()), Some(dtype));
        }
        assert!("float8".parse::<DType>().is_err());
    }

    #[test]
    fn scalar_tensor_has_one_element() {
        let tensor = Tensor::from_vec(Vec::new(), vec![7i32]).unwrap();
        assert_eq!(tensor.len(), 1);
        assert_eq!(tensor.data(), &[7, 0, 0, 0]);
    }

    #[test]
    fn new_checks_length_and_bools() {
        assert!(Tensor::new(DType::Int16, vec![3], vec![0; 5]).is_err());
        assert!(Tensor::new(DType::Bool, vec![2], vec![1, 2]).is_err());
        assert!(Tensor::new(DType::Bool, vec![2], vec![1, 0]).is_ok());
        assert!(Tensor::new(DType::UInt8, vec![usize::MAX, 2], Vec::new()).is_err());
    }

    #[test]
    fn to_vec_checks_the_dtype() {
        let tensor = Tensor::from_vec(vec![2], vec![1u16, 2]).unwrap();
        assert_eq!(tensor.to_vec::<u16>().unwrap(), vec![1, 2]);
        assert!(tensor.to_vec::<i16>().is_err());
    }
}
