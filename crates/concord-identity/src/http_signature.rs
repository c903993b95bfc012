//! The RFC 9421 HTTP Message Signatures profile exactly as the SDK
//! (`anp.authentication.http_signatures`) writes and checks it: covered components
//! `"@method" "@target-uri" "@authority"` (+ `"content-digest"` with a body), parameters
//! rebuilt in the order `created;expires;nonce;keyid`, one signature labelled `sig1`.

use crate::encoding::{b64std, sha256};
use crate::identity::Identity;

/// The three headers a signed request carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeaders {
    /// `Signature-Input` value.
    pub signature_input: String,
    /// `Signature` value.
    pub signature: String,
    /// `Content-Digest` value, present when the body is not empty.
    pub content_digest: Option<String>,
}

/// The request a signature covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestTarget<'a> {
    /// The method (`GET`; upper-cased in the signature base).
    pub method: &'a str,
    /// The full target URI, e.g. `https://example.com/ws?x=1`. `@authority` is its authority
    /// (what Python's `urlparse(uri).netloc` gives).
    pub target_uri: &'a str,
}

/// How long a signature is declared valid: `expires = created + 300`.
pub const SIGNATURE_LIFETIME: i64 = 300;

/// RFC 9530 `Content-Digest` of a body: `sha-256=:<base64>:`.
pub fn content_digest(body: &[u8]) -> String {
    format!("sha-256=:{}:", b64std(&sha256(body)))
}

/// The authority of a URI as Python's `urllib.parse.urlparse(uri).netloc`: after a valid
/// `scheme:` and `//`, up to the first `/`, `?` or `#`; empty otherwise.
pub fn authority(uri: &str) -> &str {
    let trimmed = uri.trim_start_matches(|c: char| c <= ' ');
    let mut rest = trimmed;
    if let Some(colon) = trimmed.find(':') {
        let scheme = &trimmed[..colon];
        let valid = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if valid {
            rest = &trimmed[colon + 1..];
        }
    }
    match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            &after[..end]
        }
        None => "",
    }
}

/// Parsed signature parameters (the four the profile uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SignatureParams {
    pub created: i64,
    pub expires: Option<i64>,
    pub nonce: Option<String>,
    pub keyid: String,
}

/// `("c1" "c2" …);created=…;expires=…;nonce="…";keyid="…"`, in that order.
pub(crate) fn serialize_params(components: &[String], params: &SignatureParams) -> String {
    let quoted: Vec<String> = components.iter().map(|c| format!("\"{c}\"")).collect();
    let mut out = format!("({});created={}", quoted.join(" "), params.created);
    if let Some(expires) = params.expires {
        out.push_str(&format!(";expires={expires}"));
    }
    if let Some(nonce) = &params.nonce {
        out.push_str(&format!(";nonce=\"{nonce}\""));
    }
    out.push_str(&format!(";keyid=\"{}\"", params.keyid));
    out
}

/// The signature base: one `"component": value` line per component, then
/// `"@signature-params": …`, joined by `\n`. `header(name)` gives covered header values;
/// `Err(name)` names a covered header that is missing.
pub(crate) fn signature_base<'h>(
    components: &[String],
    target: &RequestTarget<'_>,
    header: impl Fn(&str) -> Option<&'h str>,
    params: &SignatureParams,
) -> Result<Vec<u8>, String> {
    let mut lines = Vec::with_capacity(components.len() + 1);
    for component in components {
        let value = match component.as_str() {
            "@method" => target.method.to_uppercase(),
            "@target-uri" => target.target_uri.to_owned(),
            "@authority" => authority(target.target_uri).to_owned(),
            name => header(name).ok_or_else(|| name.to_owned())?.to_owned(),
        };
        lines.push(format!("\"{component}\": {value}"));
    }
    lines.push(format!(
        "\"@signature-params\": {}",
        serialize_params(components, params)
    ));
    Ok(lines.join("\n").into_bytes())
}

/// Signs a request as the SDK's `generate_http_signature_headers` does: components
/// `@method @target-uri @authority` (+ `content-digest` when `body` is not empty), parameters
/// `created;expires(=created+300);nonce;keyid` with keyid `did#key-1`, label `sig1`.
/// `nonce` should be a random token (e.g. 32 hex digits) without `"` or `\`.
pub fn sign_request(
    identity: &Identity,
    target: &RequestTarget<'_>,
    body: &[u8],
    created: i64,
    nonce: &str,
) -> SignatureHeaders {
    let mut components: Vec<String> = ["@method", "@target-uri", "@authority"]
        .map(String::from)
        .to_vec();
    let digest = (!body.is_empty()).then(|| content_digest(body));
    if digest.is_some() {
        components.push("content-digest".into());
    }
    let params = SignatureParams {
        created,
        expires: Some(created.saturating_add(SIGNATURE_LIFETIME)),
        nonce: Some(nonce.to_owned()),
        keyid: identity.keyid(),
    };
    let lookup = |name: &str| {
        if name == "content-digest" {
            digest.as_deref()
        } else {
            None
        }
    };
    let base = signature_base(&components, target, lookup, &params).unwrap_or_default();
    let signature = identity.keys().sign(&base);
    SignatureHeaders {
        signature_input: format!("sig1={}", serialize_params(&components, &params)),
        signature: format!("sig1=:{}:", b64std(&signature)),
        content_digest: digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_is_python_netloc() {
        assert_eq!(authority("https://example.com/x"), "example.com");
        assert_eq!(authority("http://h:3000?x#y"), "h:3000");
        assert_eq!(authority("https://user@h:1"), "user@h:1");
        assert_eq!(authority("/just/a/path"), "");
        assert_eq!(authority("wss://[::1]:9/ws"), "[::1]:9");
    }

    #[test]
    fn digest_matches_rfc9530_example_shape() {
        assert_eq!(
            content_digest(b"{\"hello\": \"world\"}"),
            "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
        );
    }
}
