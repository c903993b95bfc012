//! Writing scalars and tensors as AICL text.

use super::append::append;
use crate::base85;
use crate::special;
use crate::tensor::{write_shape, Tensor};

/// `[s:` `text` `close`, with `[`, `]` and `\` in `text` escaped.
#[inline(always)]
fn tagged_text(out: &mut String, text: &str, close: &str) {
    match special::find(text.as_bytes()) {
        None => append(out, ["[s:", text, close]),
        Some(first) => {
            out.push_str("[s:");
            escaped_from(out, text, first);
            out.push_str(close);
        }
    }
}

/// Appends `text` escaped, knowing that the byte at `first` is the first to need a backslash.
#[cold]
fn escaped_from(out: &mut String, text: &str, first: usize) {
    let bytes = text.as_bytes();
    let mut copied = 0;
    let mut next = Some(first);
    while let Some(at) = next {
        out.push_str(&text[copied..at]);
        out.push('\\');
        out.push(char::from(bytes[at]));
        copied = at + 1;
        next = special::find(&bytes[copied..]).map(|index| copied + index);
    }
    out.push_str(&text[copied..]);
}

/// `[s:text]`.
#[inline]
pub(crate) fn string(out: &mut String, text: &str) {
    tagged_text(out, text, "]");
}

/// `[s:key]:`, a dictionary key and its colon.
#[inline]
pub(crate) fn key(out: &mut String, key: &str) {
    tagged_text(out, key, "]:");
}

/// `[i:n]`.
#[inline]
pub(crate) fn int(out: &mut String, value: i64) {
    append(out, ["[i:", itoa::Buffer::new().format(value), "]"]);
}

/// `[b:true]` or `[b:false]`.
#[inline]
pub(crate) fn bool(out: &mut String, value: bool) {
    out.push_str(if value { "[b:true]" } else { "[b:false]" });
}

/// `[f:x]`: the shortest text that reads back as the same number, always with `.` or `e`;
/// `inf`, `-inf` and `nan` for the non-finite values.
#[inline]
pub(crate) fn float(out: &mut String, value: f64) {
    let mut buffer = zmij::Buffer::new();
    let (digits, point) = if value.is_finite() {
        let digits = buffer.format_finite(value);
        let looks_like_a_float = digits
            .bytes()
            .any(|byte| matches!(byte, b'.' | b'e' | b'E'));
        (digits, if looks_like_a_float { "" } else { ".0" })
    } else if value.is_nan() {
        ("nan", "")
    } else if value > 0.0 {
        ("inf", "")
    } else {
        ("-inf", "")
    };
    append(out, ["[f:", digits, point, "]"]);
}

/// `[t:dtype:shape:base85]`.
pub(crate) fn tensor(out: &mut String, tensor: &Tensor) {
    out.push_str("[t:");
    out.push_str(tensor.dtype().name());
    out.push(':');
    write_shape(out, tensor.shape());
    out.push(':');
    base85::encode_into(tensor.data(), out);
    out.push(']');
}

/// `[t:uint8:n:base85]`: how raw bytes are written.
pub(crate) fn bytes(out: &mut String, data: &[u8]) {
    out.push_str("[t:uint8:");
    out.push_str(itoa::Buffer::new().format(data.len()));
    out.push(':');
    base85::encode_into(data, out);
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float_text(value: f64) -> String {
        let mut out = String::new();
        float(&mut out, value);
        out
    }

    #[test]
    fn floats_always_look_like_floats() {
        assert_eq!(float_text(1.0), "[f:1.0]");
        assert_eq!(float_text(899.99), "[f:899.99]");
        assert_eq!(float_text(-0.0), "[f:-0.0]");
        assert_eq!(float_text(1e300), "[f:1e+300]");
        assert_eq!(float_text(1e-7), "[f:1e-7]");
        assert_eq!(float_text(f64::NAN), "[f:nan]");
        assert_eq!(float_text(f64::NEG_INFINITY), "[f:-inf]");
        assert_eq!(float_text(crate::value::f32_as_f64(0.1)), "[f:0.1]");
    }

    #[test]
    fn strings_escape_brackets_and_backslashes() {
        let mut out = String::new();
        string(&mut out, r"a[b]c\d: e, f");
        assert_eq!(out, r"[s:a\[b\]c\\d: e, f]");
    }
}
