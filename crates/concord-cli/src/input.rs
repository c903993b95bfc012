//! Reading command input: a file named on the command line, or standard input.

use std::io::Read;
use std::path::Path;

use anyhow::Context;

/// Reads the whole of `path` as bytes, or standard input when `path` is `None` or `-`.
pub fn read_bytes(path: Option<&Path>) -> anyhow::Result<Vec<u8>> {
    match path {
        Some(path) if path != Path::new("-") => {
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
