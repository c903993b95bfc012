//! Scalars and tensors: the text between a tag and its `]`, turned into values.

use crate::base85::{self, Base85Error};
use crate::error::ErrorKind;
use crate::tensor::{self, DType, Tensor};

/// Lenient mode: where the value starts, skipping prose or a code fence before it
/// (the first `[` followed by a tag letter and `:`).
pub(super) fn lenient_start(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'[', bytes)
        .find(|&start| {
            matches!(
                bytes.get(start + 1..start + 3),
                Some(&[b's' | b'i' | b'f' | b'b' | b'l' | b'd' | b't', b':'])
            )
        })
        .unwrap_or(0)
}

/// A short quote of the text at `offset`, for error messages.
pub(super) fn quote(text: &str, offset: usize) -> String {
    let rest = text.get(offset..).unwrap_or("");
    if rest.is_empty() {
        return "end of input".to_owned();
    }
    let shown: String = rest.chars().take(16).collect();
    let ellipsis = if shown.len() < rest.len() { "…" } else { "" };
    format!("`{shown}{ellipsis}`")
}

/// `[i:…]`: strict is `-?(0|[1-9][0-9]*)`; lenient also allows `+` and leading zeros.
pub(super) fn parse_int(text: &str, strict: bool) -> Result<i64, ErrorKind> {
    let bytes = text.as_bytes();
    let (negative, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') if !strict => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    let bad = || ErrorKind::BadInt {
        text: text.to_owned(),
    };
    if digits.is_empty() || (strict && digits.len() > 1 && digits[0] == b'0') {
        return Err(bad());
    }
    let mut magnitude: u64 = 0;
    let mut overflow = false;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return Err(bad());
        }
        match magnitude
            .checked_mul(10)
            .and_then(|value| value.checked_add(u64::from(digit)))
        {
            Some(value) => magnitude = value,
            None => overflow = true,
        }
    }
    let value = if negative {
        // -2^63 has no positive counterpart; go through i128.
        i64::try_from(-i128::from(magnitude)).ok()
    } else {
        i64::try_from(magnitude).ok()
    };
    match value {
        Some(value) if !overflow => Ok(value),
        _ => Err(ErrorKind::IntOverflow {
            text: text.to_owned(),
        }),
    }
}

/// `[f:…]`: strict is `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, `inf`, `-inf` or `nan`;
/// lenient is anything Rust's `f64::from_str` reads (`+1`, `.5`, `Infinity`, `NaN`, …).
/// A finite literal too large for `f64` is refused in both modes.
pub(super) fn parse_float(text: &str, strict: bool) -> Result<f64, ErrorKind> {
    match text {
        "inf" => return Ok(f64::INFINITY),
        "-inf" => return Ok(f64::NEG_INFINITY),
        "nan" => return Ok(f64::NAN),
        _ => {}
    }
    let bad = || ErrorKind::BadFloat {
        text: text.to_owned(),
    };
    if strict {
        match strict_float_prefix(text.as_bytes()) {
            (StrictFloat::Exact(value), read) if read == text.len() => return Ok(value),
            (StrictFloat::Valid, read) if read == text.len() => {}
            _ => return Err(bad()),
        }
    }
    let value: f64 = text.parse().map_err(|_| bad())?;
    if value.is_infinite() {
        let unsigned = text.trim_start_matches(['+', '-']);
        let literal_is_infinite = unsigned
            .get(..3)
            .is_some_and(|start| start.eq_ignore_ascii_case("inf"));
        if !literal_is_infinite {
            return Err(bad());
        }
    }
    Ok(value)
}

/// Powers of ten that are exact doubles.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// What one pass over a float's text found.
pub(super) enum StrictFloat {
    /// Valid, and computed exactly by the fast path.
    Exact(f64),
    /// Valid, but needs the general algorithm (more than 15 digits or a large exponent).
    Valid,
    /// Not the strict grammar.
    Invalid,
}

/// Reads the longest prefix of `bytes` in the strict float grammar
/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` and returns what it found and how many
/// bytes it read. In the same pass it tries Clinger's fast path: when the digits form an
/// integer below 10¹⁵ (< 2⁵³) and the power of ten is at most 22 either way, both are exact
/// doubles and one multiplication or division rounds correctly.
#[inline]
pub(super) fn strict_float_prefix(bytes: &[u8]) -> (StrictFloat, usize) {
    let negative = bytes.first() == Some(&b'-');
    let integer_start = usize::from(negative);
    // The digits before and after the point, as one integer; it wraps past 19 digits, when
    // it is not used.
    let mut mantissa: u64 = 0;
    let mut at = integer_start;
    let mut digits = |at: &mut usize| {
        let start = *at;
        while let Some(digit) = bytes.get(*at).map(|byte| byte.wrapping_sub(b'0')) {
            if digit > 9 {
                break;
            }
            mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(digit));
            *at += 1;
        }
        *at - start
    };
    let integer = digits(&mut at);
    if integer == 0 || (integer > 1 && bytes[integer_start] == b'0') {
        return (StrictFloat::Invalid, at);
    }
    let mut fraction = 0;
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        fraction = digits(&mut at);
        if fraction == 0 {
            return (StrictFloat::Invalid, at);
        }
    }
    let mut exponent: i32 = 0;
    if let Some(b'e' | b'E') = bytes.get(at) {
        at += 1;
        let negative_exponent = bytes.get(at) == Some(&b'-');
        if matches!(bytes.get(at), Some(b'-' | b'+')) {
            at += 1;
        }
        let exponent_start = at;
        while let Some(&byte) = bytes.get(at) {
            if !byte.is_ascii_digit() {
                break;
            }
            exponent = exponent
                .saturating_mul(10)
                .saturating_add(i32::from(byte - b'0'));
            at += 1;
        }
        if at == exponent_start {
            return (StrictFloat::Invalid, at);
        }
        if negative_exponent {
            exponent = -exponent;
        }
    }
    // Below 10¹⁵ with at most 19 digits: at most 15 significant digits, no wrapping.
    if integer + fraction > 19 || mantissa >= 1_000_000_000_000_000 {
        return (StrictFloat::Valid, at);
    }
    let fraction = i32::try_from(fraction).unwrap_or(i32::MAX);
    let power = exponent.saturating_sub(fraction);
    let Some(&scale) = EXACT_POWERS_OF_TEN.get(power.unsigned_abs() as usize) else {
        return (StrictFloat::Valid, at);
    };
    let magnitude = mantissa as f64;
    let value = if power >= 0 {
        magnitude * scale
    } else {
        magnitude / scale
    };
    (
        StrictFloat::Exact(if negative { -value } else { value }),
        at,
    )
}

/// `[b:…]`: `true` or `false`; lenient ignores case.
pub(super) fn parse_bool(text: &str, strict: bool) -> Result<bool, ErrorKind> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ if !strict && text.eq_ignore_ascii_case("true") => Ok(true),
        _ if !strict && text.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(ErrorKind::BadBool {
            text: text.to_owned(),
        }),
    }
}

/// `dtype:shape:data`, the text between `[t:` and `]`. Errors carry an offset into `inner`.
pub(super) fn parse_tensor(
    inner: &str,
    strict: bool,
    scratch: &mut String,
) -> Result<Tensor, (ErrorKind, usize)> {
    let Some(dtype_end) = inner.find(':') else {
        return Err((bad_layout("expected `dtype:shape:data`"), inner.len()));
    };
    let dtype_text = trimmed(&inner[..dtype_end], strict);
    let dtype = DType::from_name(dtype_text).ok_or_else(|| {
        (
            ErrorKind::UnknownDType {
                name: dtype_text.to_owned(),
            },
            0,
        )
    })?;
    let shape_start = dtype_end + 1;
    let Some(shape_length) = inner[shape_start..].find(':') else {
        return Err((bad_layout("expected `:` after the shape"), inner.len()));
    };
    let shape_text = &inner[shape_start..shape_start + shape_length];
    let shape = parse_shape(shape_text, strict).ok_or_else(|| {
        (
            ErrorKind::BadShape {
                text: shape_text.to_owned(),
            },
            shape_start,
        )
    })?;
    let data_start = shape_start + shape_length + 1;
    let mut data_text = &inner[data_start..];
    let filtered = !strict && data_text.bytes().any(|byte| byte.is_ascii_whitespace());
    if filtered {
        scratch.clear();
        scratch.extend(data_text.chars().filter(|c| !c.is_ascii_whitespace()));
        data_text = scratch.as_str();
    }
    let expected = tensor::byte_len(dtype, &shape)
        .and_then(|bytes| base85::encoded_len(bytes).map(|chars| (bytes, chars)));
    let Some((expected_bytes, expected_chars)) = expected else {
        return Err((
            ErrorKind::BadShape {
                text: format!("{shape_text} (size overflows)"),
            },
            shape_start,
        ));
    };
    if data_text.len() != expected_chars {
        return Err((
            ErrorKind::TensorLength {
                dtype: dtype.name(),
                shape: tensor::format_shape(&shape),
                expected: expected_bytes,
                expected_chars,
                actual: data_text.len(),
            },
            data_start,
        ));
    }
    let data = base85::decode(data_text.as_bytes()).map_err(|error| {
        let original = &inner[data_start..];
        // Where the n-th decoded character is in the text (lenient data may hold whitespace).
        let nth_data_byte = |n: usize| {
            if filtered {
                nth_non_whitespace(original, n)
            } else {
                n
            }
        };
        match error {
            Base85Error::BadChar { index, byte } => {
                let at = nth_data_byte(index);
                let found = original
                    .get(at..)
                    .and_then(|rest| rest.chars().next())
                    .unwrap_or(char::from(byte));
                (ErrorKind::BadBase85Char { found }, data_start + at)
            }
            Base85Error::Overflow { group_start } => (
                ErrorKind::Base85Overflow { group_start },
                data_start + nth_data_byte(group_start),
            ),
        }
    })?;
    tensor::check_bool_bytes(dtype, &data).map_err(|error| (error.kind().clone(), data_start))?;
    Ok(Tensor::from_checked_parts(dtype, shape, data))
}

/// Lenient mode trims spaces around a part.
fn trimmed(text: &str, strict: bool) -> &str {
    if strict {
        text
    } else {
        text.trim()
    }
}

fn bad_layout(reason: &str) -> ErrorKind {
    ErrorKind::BadTensor {
        reason: reason.to_owned(),
    }
}

/// Dimensions separated by commas; empty for a scalar. Strict: no spaces, no leading zeros.
fn parse_shape(text: &str, strict: bool) -> Option<Vec<usize>> {
    let text = trimmed(text, strict);
    if text.is_empty() {
        return Some(Vec::new());
    }
    text.split(',')
        .map(|dim| {
            let dim = trimmed(dim, strict);
            let valid = !dim.is_empty()
                && dim.bytes().all(|byte| byte.is_ascii_digit())
                && !(strict && dim.len() > 1 && dim.starts_with('0'));
            if valid {
                dim.parse().ok()
            } else {
                None
            }
        })
        .collect()
}

/// Byte index in `data` of its `n`th non-whitespace byte.
fn nth_non_whitespace(data: &str, n: usize) -> usize {
    data.bytes()
        .enumerate()
        .filter(|(_, byte)| !byte.is_ascii_whitespace())
        .nth(n)
        .map_or(data.len(), |(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_int("-42", true), Ok(-42));
        assert_eq!(parse_int("0", true), Ok(0));
        assert_eq!(parse_int("-9223372036854775808", true), Ok(i64::MIN));
        assert_eq!(parse_int("9223372036854775807", true), Ok(i64::MAX));
        assert!(matches!(
            parse_int("9223372036854775808", true),
            Err(ErrorKind::IntOverflow { .. })
        ));
        assert!(matches!(
            parse_int("99999999999999999999999", true),
            Err(ErrorKind::IntOverflow { .. })
        ));
        for bad in ["", "-", "+1", "007", "1.0", " 1", "1_000", "0x10"] {
            assert!(
                matches!(parse_int(bad, true), Err(ErrorKind::BadInt { .. })),
                "{bad}"
            );
        }
        assert_eq!(parse_int("+007", false), Ok(7));
    }

    #[test]
    fn floats() {
        assert_eq!(parse_float("8.3145126", true), Ok(8.3145126));
        assert_eq!(parse_float("-1.5e-3", true), Ok(-1.5e-3));
        assert_eq!(parse_float("3", true), Ok(3.0));
        assert_eq!(parse_float("-inf", true), Ok(f64::NEG_INFINITY));
        assert!(parse_float("nan", true).is_ok_and(f64::is_nan));
        for bad in [
            "", ".5", "5.", "+1", "1e", "Infinity", "NaN", "01.5", "1e400", "1.0.0",
        ] {
            assert!(
                matches!(parse_float(bad, true), Err(ErrorKind::BadFloat { .. })),
                "{bad}"
            );
        }
        assert_eq!(parse_float(".5", false), Ok(0.5));
        assert_eq!(parse_float("Infinity", false), Ok(f64::INFINITY));
        assert!(parse_float("1e400", false).is_err());
    }

    #[test]
    fn the_fast_path_agrees_with_the_general_one() {
        for text in [
            "0.0",
            "-0.0",
            "1.5",
            "899.99",
            "0.1",
            "3.1415926535",
            "123456789012345",
            "1e22",
            "1.5e-7",
            "-2.5E+3",
            "0.000001",
            "9007199254740993",
            "1e23",
            "123456789.123456789",
        ] {
            let general: f64 = text.parse().unwrap();
            let fast = parse_float(text, true).unwrap();
            assert_eq!(fast.to_bits(), general.to_bits(), "{text}");
        }
        assert!(matches!(
            strict_float_prefix(b"1e23"),
            (StrictFloat::Valid, 4)
        ));
        assert!(matches!(
            strict_float_prefix(b"1234567890123456"),
            (StrictFloat::Valid, 16)
        ));
        assert!(matches!(
            strict_float_prefix(b"1.5]"),
            (StrictFloat::Exact(_), 3)
        ));
        assert!(matches!(
            strict_float_prefix(b"1.]"),
            (StrictFloat::Invalid, _)
        ));
    }

    proptest::proptest! {
        #[test]
        fn every_written_float_reads_back_exactly(value in proptest::num::f64::ANY) {
            let mut out = String::new();
            crate::ser::write_float_for_tests(&mut out, value);
            let text = &out[3..out.len() - 1];
            let back = parse_float(text, true).unwrap();
            proptest::prop_assert!(back.to_bits() == value.to_bits() || (back.is_nan() && value.is_nan()));
        }

        #[test]
        fn decimals_agree_with_the_standard_parser(mantissa in 0u64..10_000_000_000_000_000, point in 0usize..18, exponent in -30i32..30) {
            let digits = mantissa.to_string();
            let point = point.min(digits.len() - 1);
            let text = if point == 0 { format!("{digits}e{exponent}") } else { format!("{}.{}e{exponent}", &digits[..digits.len() - point], &digits[digits.len() - point..]) };
            let expected: f64 = text.parse().unwrap();
            let parsed = parse_float(&text, true);
            if expected.is_infinite() {
                proptest::prop_assert!(parsed.is_err());
            } else {
                proptest::prop_assert_eq!(parsed.unwrap().to_bits(), expected.to_bits(), "{}", text);
            }
        }
    }

    #[test]
    fn shapes() {
        assert_eq!(parse_shape("", true), Some(vec![]));
        assert_eq!(parse_shape("3,224,224", true), Some(vec![3, 224, 224]));
        assert_eq!(parse_shape("3, 224", true), None);
        assert_eq!(parse_shape("3, 224", false), Some(vec![3, 224]));
        assert_eq!(parse_shape("3,,4", true), None);
        assert_eq!(parse_shape("-1", true), None);
        assert_eq!(parse_shape("99999999999999999999999", true), None);
    }

    #[test]
    fn lenient_start_skips_prose_and_fences() {
        let text = b"Sure! ```aicl\n[d:[s:a]:[i:1]]\n```";
        assert_eq!(lenient_start(text), 14);
        assert_eq!(lenient_start(b"see [1] then [i:2]"), 13);
    }
}
