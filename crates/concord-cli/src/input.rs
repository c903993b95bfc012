//! Reading command input: a file named on the command line, or standard input.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use concord_negotiate::{ActionSpec, Need, ProtocolDocument};
use serde::de::DeserializeOwned;

/// Whether `path` means standard input: none given, or `-`.
pub fn is_stdin(path: Option<&Path>) -> bool {
    path.is_none_or(|path| path == Path::new("-"))
}

/// Reads the whole of `path` as bytes, or standard input when `path` is `None` or `-`.
pub fn read_bytes(path: Option<&Path>) -> anyhow::Result<Vec<u8>> {
    match path {
        Some(path) if !is_stdin(Some(path)) => {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
        }
        _ => {
            let mut buffer = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buffer)
                .context("cannot read standard input")?;
            Ok(buffer)
        }
    }
}

/// Reads `path` (or standard input, as for [`read_bytes`]) as UTF-8 text; `what` names it
/// in the error (`the candidate`).
pub fn read_text(path: Option<&Path>, what: &str) -> anyhow::Result<String> {
    String::from_utf8(read_bytes(path)?).with_context(|| match path {
        Some(path) if !is_stdin(Some(path)) => {
            format!("{what} ({}) is not UTF-8 text", path.display())
        }
        _ => format!("{what} (on standard input) is not UTF-8 text"),
    })
}

/// Reads a JSON file into a `T`; `what` says what it should be (`a need (…)`).
pub fn read_json<T: DeserializeOwned>(path: &Path, what: &str) -> anyhow::Result<T> {
    serde_json::from_slice(&read_bytes(Some(path))?)
        .with_context(|| format!("{} is not {what}", path.display()))
}

/// Reads an action as JSON: `{"name", "description"?, "input", "output"}`.
pub fn read_action(path: &Path) -> anyhow::Result<ActionSpec> {
    read_json(
        path,
        "an action (`{\"name\", \"description\"?, \"input\", \"output\"}`)",
    )
}

/// Reads a requester's need as JSON: `{"action", "input"?, "output"?}`.
pub fn read_need(path: &Path) -> anyhow::Result<Need> {
    read_json(path, "a need (`{\"action\", \"input\"?, \"output\"?}`)")
}

/// Reads a protocol document (as for [`read_text`]); exit code 1, after saying why on
/// standard error, when it does not parse.
pub fn read_protocol(path: &Path) -> anyhow::Result<Result<ProtocolDocument, ExitCode>> {
    let text = read_text(Some(path), "the protocol document")?;
    Ok(ProtocolDocument::parse(&text).map_err(|error| {
        crate::output::note(format_args!("{}: {error}", path.display()));
        ExitCode::from(1)
    }))
}
