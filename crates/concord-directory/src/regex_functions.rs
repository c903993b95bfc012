//! RFC 9535's `match()` and `search()` (§2.4.6, §2.4.7), registered with `serde_json_path`
//! in place of its own (its documented way to name a function `match`; a registered
//! function is found before the built-in one), with the same answers: the I-Regexp in
//! the `regex` crate's syntax, `match` anchored at both ends, `search` anywhere, `.` not
//! matching `\r` or `\n` (`(?R)`), and `false` for a value or pattern that is not a
//! string or a pattern that does not compile.
//!
//! The difference is the cost: the built-in ones compile the pattern again for every
//! string node they test, which makes a query over the TDs' nodes cost thousands of
//! compilations (a Unicode class takes milliseconds each). These keep the last
//! [`COMPILED_KEPT`] compiled patterns, each compiled within
//! [`PATTERN_PROGRAM_BYTES`](crate::PATTERN_PROGRAM_BYTES) (beyond it: `false`, as for
//! a pattern that does not compile). The registration holds for every query of the
//! process.

use std::sync::{Arc, Mutex, PoisonError};

use regex::Regex;
use serde_json::Value;
use serde_json_path::functions::{LogicalType, ValueType};

use crate::query_shape::PATTERN_PROGRAM_BYTES;

/// How many compiled patterns are kept, the most recently used first.
pub const COMPILED_KEPT: usize = 16;

/// A pattern as compiled, or `None` when it does not compile.
type Compiled = Option<Arc<Regex>>;

/// The compiled patterns kept: (the pattern as given to the `regex` crate, compiled).
static KEPT: Mutex<Vec<(String, Compiled)>> = Mutex::new(Vec::new());

/// The compiled form of `pattern`, from those kept or compiled now.
fn compiled(pattern: String) -> Compiled {
    // A panic while the lock is held cannot leave a half-written entry: entries are
    // pushed and removed whole.
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(at) = kept.iter().position(|(held, _)| *held == pattern) {
        let entry = kept.remove(at);
        let regex = entry.1.clone();
        kept.insert(0, entry);
        return regex;
    }
    drop(kept);
    let regex = regex::RegexBuilder::new(&pattern)
        .size_limit(PATTERN_PROGRAM_BYTES)
        .build()
        .ok()
        .map(Arc::new);
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    kept.insert(0, (pattern, regex.clone()));
    kept.truncate(COMPILED_KEPT);
    regex
}

/// Whether `value` is a string the pattern `rgx` (written into `pattern`) matches.
fn matches(value: &ValueType, rgx: &ValueType, pattern: impl Fn(&str) -> String) -> LogicalType {
    match (value.as_value(), rgx.as_value()) {
        (Some(Value::String(text)), Some(Value::String(given))) => compiled(pattern(given))
            .is_some_and(|regex| regex.is_match(text))
            .into(),
        _ => LogicalType::False,
    }
}

/// `match(value, pattern)`: the whole string matches.
#[serde_json_path::function(name = "match")]
fn match_whole(value: ValueType, rgx: ValueType) -> LogicalType {
    matches(&value, &rgx, |given| format!("(?R)^({given})$"))
}

/// `search(value, pattern)`: a part of the string matches.
#[serde_json_path::function(name = "search")]
fn search_within(value: ValueType, rgx: ValueType) -> LogicalType {
    matches(&value, &rgx, |given| format!("(?R)({given})"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use serde_json_path::JsonPath;

    fn count(query: &str, value: &serde_json::Value) -> usize {
        JsonPath::parse(query).unwrap().query(value).len()
    }

    #[test]
    fn match_and_search_answer_as_rfc_9535_says() {
        let value = json!(["abc", "xabcx", "a\nc", 7, "a.c"]);
        // RFC 9535 §2.4.6: the whole string; §2.4.7: a substring; `.` matches neither
        // \n nor \r (I-Regexp).
        assert_eq!(count("$[?match(@, 'a.c')]", &value), 2);
        assert_eq!(count("$[?search(@, 'a.c')]", &value), 3);
        // Not a string, or a pattern that does not compile: false.
        assert_eq!(count("$[?match(@, '7')]", &value), 0);
        assert_eq!(count("$[?match(@, '(')]", &value), 0);
        assert_eq!(count("$[?!match(@, '(')]", &value), 5);
    }

    #[test]
    fn a_pattern_is_compiled_once_for_many_nodes() {
        let many = serde_json::Value::Array((0..2_000).map(|n| json!(format!("w{n}"))).collect());
        // "w100" ..= "w999": four word characters.
        assert_eq!(count(r"$[?match(@, '\\w{4}')]", &many), 900);
        let pattern = r"(?R)^(\w{4})$";
        let held = super::KEPT
            .lock()
            .unwrap()
            .iter()
            .any(|(held, _)| held == pattern);
        assert!(held, "the query went through these functions");
        let kept = super::compiled(pattern.to_owned()).expect("compiles");
        let again = super::compiled(pattern.to_owned()).expect("compiles");
        assert!(Arc::ptr_eq(&kept, &again), "kept, not compiled again");
        let too_large = super::compiled(r"\p{L}{50}".to_owned());
        assert!(
            too_large.is_none(),
            "over PATTERN_PROGRAM_BYTES: does not compile"
        );
    }
}
