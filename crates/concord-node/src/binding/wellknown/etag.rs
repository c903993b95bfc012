//! Strong entity tags for the discovery documents and the `If-None-Match` check
//! (RFC 9110 §8.8.3 and §13.1.2: weak comparison, `*` matches any).

use axum::http::header::{self, HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};

/// The strong entity tag of `body`: 128 bits of its SHA-256, quoted.
pub(crate) fn of(body: &[u8]) -> HeaderValue {
    let digest = Sha256::digest(body);
    let tag = format!("\"{}\"", hex::encode(&digest[..16]));
    // Hex digits and quotes only: always a valid header value.
    HeaderValue::from_str(&tag).unwrap_or_else(|_| HeaderValue::from_static("\"\""))
}

/// Whether the request's `If-None-Match` names `etag` (or is `*`): the client holds the
/// current document and gets 304.
pub(crate) fn matches(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    let ours = opaque(etag.to_str().unwrap_or_default());
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || opaque(tag) == ours)
}

/// A tag without its weakness indicator.
fn opaque(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_compares_weakly_and_takes_lists_and_stars() {
        let etag = of(b"{}");
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::IF_NONE_MATCH, HeaderValue::from_str(value).unwrap());
            matches(&headers, &etag)
        };
        let tag = etag.to_str().unwrap().to_owned();
        assert!(with(&tag));
        assert!(with(&format!("\"other\", W/{tag}")));
        assert!(with("*"));
        assert!(!with("\"other\""));
        assert!(!matches(&HeaderMap::new(), &etag));
        assert_ne!(of(b"{}"), of(b"[]"));
    }
}
