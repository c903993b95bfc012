//! One request to a directory: signed when the client has an identity, bounded in time and
//! in the bytes of its answer, an error status read into [`DirectoryError::Status`].

use std::sync::Arc;
use std::time::Duration;

use concord_identity::{Identity, RequestTarget};
use reqwest::header::{HeaderMap, CONTENT_TYPE, LINK, LOCATION, RETRY_AFTER};
use reqwest::Method;
use url::Url;

use super::{DirectoryClientLimits, DirectoryError, Problem};

/// How a client sends its requests.
#[derive(Debug, Clone)]
pub(super) struct Request {
    http: reqwest::Client,
    pub(super) limits: DirectoryClientLimits,
    pub(super) identity: Option<Arc<Identity>>,
}

/// A successful answer, its body read whole (within the limit).
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) body: Vec<u8>,
    pub(super) location: Option<String>,
    /// Every `Link` header's value.
    pub(super) links: Vec<String>,
}

impl Request {
    pub(super) fn new(http: reqwest::Client, limits: DirectoryClientLimits) -> Self {
        Self {
            http,
            limits,
            identity: None,
        }
    }

    /// Sends one request; `Ok` for a 2xx answer whose body fits the limit.
    pub(super) async fn send(
        &self,
        method: Method,
        url: &Url,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Result<Answer, DirectoryError> {
        let timeout = self.limits.timeout;
        let bytes = body.as_ref().map_or(&[][..], |(_, bytes)| bytes.as_slice());
        let mut request = self
            .http
            .request(method.clone(), url.clone())
            .timeout(timeout)
            .header(
                reqwest::header::ACCEPT,
                "application/td+json, application/ld+json, application/json",
            );
        if let Some(identity) = &self.identity {
            let target = RequestTarget {
                method: method.as_str(),
                target_uri: url.as_str(),
            };
            let signed = concord_identity::sign_request(
                identity,
                &target,
                bytes,
                crate::identity::upgrade::now_unix(),
                &crate::identity::upgrade::nonce(),
            );
            request = request
                .header("Signature-Input", signed.signature_input)
                .header("Signature", signed.signature);
            if let Some(digest) = signed.content_digest {
                request = request.header("Content-Digest", digest);
            }
        }
        if let Some((media_type, bytes)) = body {
            request = request.header(CONTENT_TYPE, media_type).body(bytes);
        }
        let failed = |error: reqwest::Error| transport_error(error, url, timeout);
        let mut response = request.send().await.map_err(failed)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let limit = self.limits.max_response_bytes;
        let too_large = || DirectoryError::TooLarge {
            url: url.to_string(),
            limit,
        };
        if response
            .content_length()
            .is_some_and(|length| length > limit as u64)
        {
            return Err(too_large());
        }
        let mut read = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if read.len() + chunk.len() > limit {
                return Err(too_large());
            }
            read.extend_from_slice(&chunk);
        }
        if !(200..300).contains(&status) {
            return Err(DirectoryError::Status {
                url: url.to_string(),
                status,
                problem: Problem::parse(&read).map(Box::new),
                retry_after: retry_after(&headers),
            });
        }
        Ok(Answer {
            status,
            body: read,
            location: header_text(&headers, LOCATION),
            links: headers
                .get_all(LINK)
                .iter()
                .filter_map(|value| value.to_str().ok().map(str::to_owned))
                .collect(),
        })
    }
}

impl Answer {
    /// The body as JSON.
    pub(super) fn json(&self, url: &Url) -> Result<serde_json::Value, DirectoryError> {
        serde_json::from_slice(&self.body).map_err(|error| DirectoryError::Invalid {
            url: url.to_string(),
            reason: format!("the answer is not JSON: {error}"),
        })
    }

    /// The target of `Link: <…>; rel="next"`, resolved against the page's URL.
    pub(super) fn next_link(&self, url: &Url) -> Result<Option<Url>, DirectoryError> {
        let Some(target) = self
            .links
            .iter()
            .flat_map(|value| links(value))
            .find(|(_, rels)| rels.iter().any(|rel| rel.eq_ignore_ascii_case("next")))
            .map(|(target, _)| target)
        else {
            return Ok(None);
        };
        url.join(target)
            .map(Some)
            .map_err(|error| DirectoryError::Invalid {
                url: url.to_string(),
                reason: format!("its next link {target:?} is not a URL: {error}"),
            })
    }
}

/// The links of one `Link` header value (RFC 8288): each target with its `rel` values.
/// A link without `<…>` ends the parse (the rest is not read).
fn links(value: &str) -> Vec<(&str, Vec<&str>)> {
    let mut found = Vec::new();
    let mut rest = value.trim_start();
    while let Some(open) = rest.strip_prefix('<') {
        let Some(close) = open.find('>') else { break };
        let target = &open[..close];
        let after = &open[close + 1..];
        // The parameters run to the next comma outside a quoted string.
        let mut quoted = false;
        let end = after
            .char_indices()
            .find(|&(_, c)| {
                if c == '"' {
                    quoted = !quoted;
                }
                c == ',' && !quoted
            })
            .map_or(after.len(), |(index, _)| index);
        let rels = after[..end]
            .split(';')
            .filter_map(|param| {
                let (name, value) = param.split_once('=')?;
                name.trim()
                    .eq_ignore_ascii_case("rel")
                    .then(|| value.trim().trim_matches('"'))
            })
            .flat_map(str::split_whitespace)
            .collect();
        found.push((target, rels));
        rest = after[end..].trim_start_matches(',').trim_start();
    }
    found
}

fn header_text(headers: &HeaderMap, name: reqwest::header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// `Retry-After` in seconds (the HTTP-date form is not read).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    header_text(headers, RETRY_AFTER)
        .and_then(|text| text.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

fn transport_error(error: reqwest::Error, url: &Url, timeout: Duration) -> DirectoryError {
    if error.is_timeout() {
        DirectoryError::Timeout {
            url: url.to_string(),
            after: timeout,
        }
    } else {
        DirectoryError::Unreachable {
            url: url.to_string(),
            cause: concord_llm::with_causes(&error.without_url()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_headers_are_read() {
        let value =
            r#"</things?offset=10&limit=10>; rel="next", </things>; rel="canonical"; etag="v1,2""#;
        let found = links(value);
        assert_eq!(found[0], ("/things?offset=10&limit=10", vec!["next"]));
        assert_eq!(found[1], ("/things", vec!["canonical"]));
        assert_eq!(links("<a>; rel=\"prev next\"")[0].1, ["prev", "next"]);
        assert!(links("garbage").is_empty());
    }
}
