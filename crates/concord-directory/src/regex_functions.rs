//! RFC 9535's `match()` and `search()` (§2.4.6, §2.4.7), registered with `serde_json_path`
//! in place of its own (its documented way to name a function `match`; a registered
//! function is found before the built-in one), with the same answers: the I-Regexp in
//! the `regex` crate's syntax, `match` anchored at both ends, `search` anywhere, `.` not
//! matching `\r` or `\n` (`(?R)`), and `false` for a value or pattern that is not a
//! string or a pattern that does not compile.
//!
//! The difference is the cost: the built-in ones compile the pattern again for every
//! string node they test, which makes a query over the TDs' nodes cost thousands of
//! compilations (a Unicode class takes milliseconds each). A directory search compiles its
//! query's patterns once, when it checks the query ([`Patterns`]), and runs the query
//! [`with`] them: the functions take the compiled pattern from there. A pattern they do not
//! find there (a query run some other way) is compiled for the call, within
//! [`PATTERN_PROGRAM_BYTES`](crate::PATTERN_PROGRAM_BYTES) (beyond it: `false`, as for a
//! pattern that does not compile). The registration holds for every query of the process.

use std::cell::RefCell;
use std::sync::Arc;

use regex::Regex;
use serde_json::Value;
use serde_json_path::functions::{LogicalType, ValueType};

use crate::query_shape::PATTERN_PROGRAM_BYTES;

/// The patterns of one query, compiled as the functions use them.
#[derive(Debug, Default, Clone)]
pub(crate) struct Patterns {
    /// (the pattern as given to the `regex` crate, compiled).
    compiled: Vec<(String, Arc<Regex>)>,
}

impl Patterns {
    /// Compiles `source` (as [`source`] gives it) within the program size limit, once.
    ///
    /// # Errors
    /// The `regex` crate's, when it does not compile.
    pub(crate) fn compile(&mut self, source: String) -> Result<(), regex::Error> {
        if self.compiled.iter().any(|(held, _)| *held == source) {
            return Ok(());
        }
        let regex = build(&source)?;
        self.compiled.push((source, Arc::new(regex)));
        Ok(())
    }

    fn find(&self, source: &str) -> Option<Arc<Regex>> {
        self.compiled
            .iter()
            .find(|(held, _)| held == source)
            .map(|(_, regex)| Arc::clone(regex))
    }
}

thread_local! {
    /// The patterns of the query running on this thread, if it runs [`with`] them.
    static RUNNING: RefCell<Patterns> = RefCell::new(Patterns::default());
}

/// Runs `query` on this thread with `patterns` at the functions' hand.
pub(crate) fn with<T>(patterns: &Patterns, query: impl FnOnce() -> T) -> T {
    /// Puts the previous patterns back, also when `query` panics.
    struct Restore(Option<Patterns>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(previous) = self.0.take() {
                RUNNING.with(|running| *running.borrow_mut() = previous);
            }
        }
    }
    let previous = RUNNING.with(|running| running.replace(patterns.clone()));
    let _restore = Restore(Some(previous));
    query()
}

/// The pattern `given` as the function `name` compiles it.
pub(crate) fn source(name: &str, given: &str) -> String {
    if name == "match" {
        format!("(?R)^({given})$")
    } else {
        format!("(?R)({given})")
    }
}

fn build(source: &str) -> Result<Regex, regex::Error> {
    regex::RegexBuilder::new(source)
        .size_limit(PATTERN_PROGRAM_BYTES)
        .build()
}

/// Whether `value` is a string the pattern `rgx` matches, as the function `name` reads it.
fn matches(name: &str, value: &ValueType, rgx: &ValueType) -> LogicalType {
    match (value.as_value(), rgx.as_value()) {
        (Some(Value::String(text)), Some(Value::String(given))) => {
            let source = source(name, given);
            let held = RUNNING.with(|running| running.borrow().find(&source));
            match held {
                Some(regex) => regex.is_match(text),
                None => build(&source).is_ok_and(|regex| regex.is_match(text)),
            }
            .into()
        }
        _ => LogicalType::False,
    }
}

/// `match(value, pattern)`: the whole string matches.
#[serde_json_path::function(name = "match")]
fn match_whole(value: ValueType, rgx: ValueType) -> LogicalType {
    matches("match", &value, &rgx)
}

/// `search(value, pattern)`: a part of the string matches.
#[serde_json_path::function(name = "search")]
fn search_within(value: ValueType, rgx: ValueType) -> LogicalType {
    matches("search", &value, &rgx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use serde_json_path::JsonPath;

    fn count(query: &str, value: &Value) -> usize {
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
        // Over the program size limit: does not compile, false.
        assert_eq!(count(r"$[?match(@, '\\p{L}{50}')]", &value), 0);
    }

    #[test]
    fn a_query_run_with_its_patterns_uses_them_compiled() {
        let many = Value::Array((0..200).map(|n| json!(format!("w{n}"))).collect());
        let mut patterns = Patterns::default();
        patterns.compile(source("match", r"\w{4}")).unwrap();
        patterns.compile(source("match", r"\w{4}")).unwrap();
        assert_eq!(patterns.compiled.len(), 1, "compiled once");
        // "w100" ..= "w199": four word characters; the same answer with and without.
        let query = r"$[?match(@, '\\w{4}')]";
        assert_eq!(with(&patterns, || count(query, &many)), 100);
        assert_eq!(count(query, &many), 100);
        // While the query runs, the functions find the compiled pattern; after, none.
        let found = with(&patterns, || {
            RUNNING.with(|running| running.borrow().find(&source("match", r"\w{4}")))
        });
        assert!(found.is_some_and(|regex| Arc::ptr_eq(&regex, &patterns.compiled[0].1)));
        assert!(RUNNING.with(|running| running.borrow().compiled.is_empty()));
    }
}
