//! String formats TD terms must follow: URIs and URI templates, BCP 47 language tags,
//! RFC 3339 date-times, media types.

use std::borrow::Cow;

use url::Url;

/// How an `href` resolves.
pub(crate) enum Href {
    /// Absolute, or resolved against `base`.
    Resolved,
    /// Relative, and there is no `base`.
    Relative,
}

/// Checks a URI reference (possibly a URI template) and resolves it against `base`.
pub(crate) fn resolve_href(href: &str, base: Option<&Url>) -> Result<Href, String> {
    let plain = expand_templates(href)?;
    check_characters(&plain)?;
    match Url::parse(&plain) {
        Ok(_) => Ok(Href::Resolved),
        Err(url::ParseError::RelativeUrlWithoutBase) => match base {
            Some(base) => base
                .join(&plain)
                .map(|_| Href::Resolved)
                .map_err(|e| format!("cannot be resolved against base {base}: {e}")),
            None => Ok(Href::Relative),
        },
        Err(e) => Err(format!("is not a URI: {e}")),
    }
}

/// Checks an absolute URI (no templates).
pub(crate) fn absolute_uri(uri: &str) -> Result<Url, String> {
    if uri.is_empty() {
        return Err("is empty; an absolute URI (with a scheme) is required".into());
    }
    check_characters(uri)?;
    match Url::parse(uri) {
        Ok(url) => Ok(url),
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            Err("is a relative reference; an absolute URI (with a scheme) is required".into())
        }
        Err(e) => Err(format!("is not a URI: {e}")),
    }
}

/// Checks a URI reference (absolute or relative, no templates).
pub(crate) fn uri_reference(uri: &str) -> Result<(), String> {
    resolve_href(uri, None).map(|_| ())
}

/// Replaces each RFC 6570 expression (`{p}`, `{?a,b}`) with a plain character, so the rest
/// can be checked as a URI.
fn expand_templates(href: &str) -> Result<Cow<'_, str>, String> {
    if !href.contains(['{', '}']) {
        return Ok(Cow::Borrowed(href));
    }
    let mut plain = String::with_capacity(href.len());
    let mut in_expression = false;
    for c in href.chars() {
        match (c, in_expression) {
            ('{', false) => in_expression = true,
            ('}', true) => {
                in_expression = false;
                plain.push('t');
            }
            ('{', true) => return Err("has `{` inside a URI template expression".into()),
            ('}', false) => return Err("has `}` without a matching `{`".into()),
            (_, true) => {}
            (c, false) => plain.push(c),
        }
    }
    if in_expression {
        return Err("has a URI template expression without its closing `}`".into());
    }
    Ok(Cow::Owned(plain))
}

/// Rejects characters RFC 3986/3987 never allow unencoded.
fn check_characters(uri: &str) -> Result<(), String> {
    match uri
        .chars()
        .find(|c| c.is_control() || c.is_whitespace() || "\"<>\\^`{|}".contains(*c))
    {
        Some(c) if c.is_control() || c.is_whitespace() => Err(format!(
            "contains U+{:04X}, which a URI must percent-encode",
            u32::from(c)
        )),
        Some(c) => Err(format!("contains `{c}`, which a URI must percent-encode")),
        None => Ok(()),
    }
}

/// Whether `tag` is a well-formed BCP 47 (RFC 5646) language tag.
pub(crate) fn is_language_tag(tag: &str) -> bool {
    const GRANDFATHERED: [&str; 26] = [
        "en-GB-oed",
        "i-ami",
        "i-bnn",
        "i-default",
        "i-enochian",
        "i-hak",
        "i-klingon",
        "i-lux",
        "i-mingo",
        "i-navajo",
        "i-pwn",
        "i-tao",
        "i-tay",
        "i-tsu",
        "sgn-BE-FR",
        "sgn-BE-NL",
        "sgn-CH-DE",
        "art-lojban",
        "cel-gaulish",
        "no-bok",
        "no-nyn",
        "zh-guoyu",
        "zh-hakka",
        "zh-min",
        "zh-min-nan",
        "zh-xiang",
    ];
    if GRANDFATHERED.iter().any(|g| g.eq_ignore_ascii_case(tag)) {
        return true;
    }
    let subtags: Vec<&str> = tag.split('-').collect();
    let alpha = |s: &str, min: usize, max: usize| {
        (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphabetic())
    };
    let alnum = |s: &str, min: usize, max: usize| {
        (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric())
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let private_use = |rest: &[&str]| !rest.is_empty() && rest.iter().all(|s| alnum(s, 1, 8));

    let first = subtags.first().copied().unwrap_or_default();
    if first.eq_ignore_ascii_case("x") {
        return private_use(&subtags[1..]);
    }
    // language: 2-3 letters with up to three 3-letter extlangs, or 4, or 5-8 letters.
    let mut i = 1;
    if alpha(first, 2, 3) {
        let mut extlangs = 0;
        while extlangs < 3 && subtags.get(i).is_some_and(|s| alpha(s, 3, 3)) {
            i += 1;
            extlangs += 1;
        }
    } else if !alpha(first, 4, 8) {
        return false;
    }
    // script
    if subtags.get(i).is_some_and(|s| alpha(s, 4, 4)) {
        i += 1;
    }
    // region
    if subtags
        .get(i)
        .is_some_and(|s| alpha(s, 2, 2) || digits(s, 3))
    {
        i += 1;
    }
    // variants
    while subtags.get(i).is_some_and(|s| {
        alnum(s, 5, 8) || (s.len() == 4 && s.as_bytes()[0].is_ascii_digit() && alnum(s, 4, 4))
    }) {
        i += 1;
    }
    // extensions: a singleton (not x) followed by 2-8 alphanumerics, one or more
    while let Some(singleton) = subtags.get(i) {
        if singleton.len() != 1 || !alnum(singleton, 1, 1) || singleton.eq_ignore_ascii_case("x") {
            break;
        }
        let start = i + 1;
        let mut end = start;
        while subtags.get(end).is_some_and(|s| alnum(s, 2, 8)) {
            end += 1;
        }
        if end == start {
            return false;
        }
        i = end;
    }
    match subtags.get(i) {
        None => true,
        Some(x) if x.eq_ignore_ascii_case("x") => private_use(&subtags[i + 1..]),
        Some(_) => false,
    }
}

/// Whether `text` is an RFC 3339 `date-time` (`2018-11-14T19:10:23.824Z`).
pub(crate) fn is_date_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = bytes.get(range)?;
        if part.iter().all(u8::is_ascii_digit) {
            std::str::from_utf8(part).ok()?.parse().ok()
        } else {
            None
        }
    };
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if bytes.len() < 20
        || separators.iter().any(|&(i, b)| bytes.get(i) != Some(&b))
        || !matches!(bytes.get(10), Some(b'T' | b't'))
    {
        return false;
    }
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        number(0..4),
        number(5..7),
        number(8..10),
        number(11..13),
        number(14..16),
        number(17..19),
    ) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    if day == 0 || day > days_in_month || hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    let mut i = 19;
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        i += digits;
    }
    match bytes.get(i) {
        Some(b'Z' | b'z') => i + 1 == bytes.len(),
        Some(b'+' | b'-') => {
            i + 6 == bytes.len()
                && bytes.get(i + 3) == Some(&b':')
                && number(i + 1..i + 3).is_some_and(|h| h <= 23)
                && number(i + 4..i + 6).is_some_and(|m| m <= 59)
        }
        _ => false,
    }
}

/// Whether `text` is a media type (`type/subtype`, optionally `; name=value` parameters).
pub(crate) fn is_media_type(text: &str) -> bool {
    let restricted_name = |s: &str| {
        let s = s.trim();
        !s.is_empty()
            && s.len() <= 127
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    let mut parts = text.split(';');
    let essence = parts.next().unwrap_or_default();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    restricted_name(kind)
        && restricted_name(subtype)
        && parts.all(|parameter| {
            parameter
                .split_once('=')
                .is_some_and(|(name, value)| restricted_name(name) && !value.trim().is_empty())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hrefs_with_templates_and_base() {
        let base = Url::parse("https://mylamp.example.com").unwrap();
        for ok in [
            "coaps://mylamp.example.com/{p}/{d}/toggle/{?a,b}",
            "mqtt://test.mosquitto.org",
            "urn:dev:wot:com:example:servient:lamp",
        ] {
            assert!(matches!(resolve_href(ok, None), Ok(Href::Resolved)), "{ok}");
        }
        assert!(matches!(
            resolve_href("/status", Some(&base)),
            Ok(Href::Resolved)
        ));
        assert!(matches!(resolve_href("/status", None), Ok(Href::Relative)));
        // An empty reference is the base itself (RFC 3986 section 5.2).
        assert!(matches!(resolve_href("", Some(&base)), Ok(Href::Resolved)));
        for bad in [
            "http://exa mple.com/",
            "http://[::1/x",
            "/a{b",
            "/a}b",
            "http://a.com/\u{7}",
        ] {
            assert!(resolve_href(bad, Some(&base)).is_err(), "{bad}");
        }
        assert!(absolute_uri("/relative").is_err());
        assert!(absolute_uri("urn:uuid:6f1d3a7a-1f97-4e6b-b45f-f3c2e1c84c77").is_ok());
    }

    #[test]
    fn language_tags() {
        for ok in [
            "en",
            "de-DE",
            "zh-Hant-TW",
            "sr-Latn-RS",
            "en-GB-oed",
            "x-private",
            "de-CH-1901",
            "en-a-bbb-x-a",
            "es-419",
            "it",
        ] {
            assert!(is_language_tag(ok), "{ok}");
        }
        for bad in [
            "",
            "e",
            "abcdefghi",
            "en_US",
            "en--US",
            "en-",
            "123",
            "en-x",
            "de-a",
        ] {
            assert!(!is_language_tag(bad), "{bad}");
        }
    }

    #[test]
    fn date_times() {
        for ok in [
            "2018-11-15T09:12:43.124Z",
            "2024-02-29T23:59:60+01:30",
            "1985-04-12t23:20:50.52z",
        ] {
            assert!(is_date_time(ok), "{ok}");
        }
        for bad in [
            "2018-11-15",
            "2023-02-29T00:00:00Z",
            "2018-11-15T24:00:00Z",
            "2018-11-15T09:12:43",
            "2018-11-15T09:12:43.Z",
            "2018-11-15T09:12:43+0100",
            "2018-11-15 09:12:43Z",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
    }

    #[test]
    fn media_types() {
        for ok in [
            "application/json",
            "application/td+json",
            "text/plain; charset=utf-8",
            "image/png",
        ] {
            assert!(is_media_type(ok), "{ok}");
        }
        for bad in [
            "json",
            "application/",
            "/json",
            "text/plain; charset",
            "a b/c",
        ] {
            assert!(!is_media_type(bad), "{bad}");
        }
    }
}
