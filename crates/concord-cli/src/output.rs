//! Standard output for every command. `println!` panics when standard output is gone
//! (`concord protocols list | head -1`); these macros return the write's
//! `std::io::Result` instead, so a command stops at the first failed write with `?`, and
//! `main` ends quietly when the reader has gone away ([`is_broken_pipe`]), as Unix tools
//! do. `println!` and `print!` are denied in this crate (`clippy::print_stdout`).
//!
//! How a command ends, too: an error is one line on standard error, `concord: …`
//! ([`one_line`]), and its exit code is 1 when it is a [`Wrong`] (the input was checked and
//! found wrong, or the peer said no) and 2 otherwise (the command could not run), as
//! [`exit_code`] says.

use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;

/// Like `print!`, but returns `std::io::Result<()>`.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write(::std::format_args!($($arg)*))
    };
}

/// Like `println!`, but returns `std::io::Result<()>`.
macro_rules! outln {
    () => {
        $crate::output::write(::std::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write(::std::format_args!("{}\n", ::std::format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};

/// Writes to standard output.
pub fn write(text: fmt::Arguments<'_>) -> io::Result<()> {
    io::stdout().lock().write_fmt(text)
}

/// Writes `value` as indented JSON and a newline.
pub fn json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)?;
    stdout.write_all(b"\n")?;
    Ok(())
}

/// Writes out what standard output still buffers (a last line with no newline).
pub fn flush() -> io::Result<()> {
    io::stdout().lock().flush()
}

/// Whether `error` comes from writing to a pipe whose reader has gone away.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        let kind = cause
            .downcast_ref::<io::Error>()
            .map(io::Error::kind)
            .or_else(|| {
                cause
                    .downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            });
        kind == Some(io::ErrorKind::BrokenPipe)
    })
}

/// An error meaning "the input was read and checked, and it is wrong" (or the peer said
/// no): exit code 1. Every other error a command returns means it could not run: exit 2.
///
/// Its message is what `main` prints after `concord: `, made one line by [`one_line`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Wrong(pub String);

impl Wrong {
    /// The error `message` makes, as an [`anyhow::Error`].
    pub fn error(message: impl fmt::Display) -> anyhow::Error {
        anyhow::Error::new(Wrong(message.to_string()))
    }

    /// `error`, with its causes on one line, classed as wrong input.
    pub fn from_error(error: &anyhow::Error) -> anyhow::Error {
        Wrong::error(crate::logging::error_line(error))
    }
}

/// Makes `Err(Wrong)` of an error: `read_json(…).map_err(wrong)?`.
pub fn wrong(error: anyhow::Error) -> anyhow::Error {
    if error.downcast_ref::<Wrong>().is_some() {
        return error;
    }
    Wrong::from_error(&error)
}

/// The exit code of a command that failed with `error`: 1 for a [`Wrong`] anywhere in its
/// chain, else 2.
pub fn exit_code(error: &anyhow::Error) -> ExitCode {
    if error
        .chain()
        .any(|cause| cause.downcast_ref::<Wrong>().is_some())
    {
        ExitCode::from(1)
    } else {
        ExitCode::from(2)
    }
}

/// `text` on one line: each line trimmed, the empty ones dropped, the others joined with
/// `"; "` (a line ending in `:` or `;` is followed by a space only).
pub fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len());
    // Control characters (a peer's text may carry terminal escapes) are dropped.
    let printable: String = text
        .chars()
        .filter(|c| *c == '\n' || !c.is_control())
        .collect();
    for part in printable
        .lines()
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        if !line.is_empty() {
            line.push_str(if line.ends_with([':', ';', ',']) {
                " "
            } else {
                "; "
            });
        }
        line.push_str(part);
    }
    line
}

/// Says `message` on standard error as one `concord: …` line (for notes beside a result, or
/// an error a command reports itself before its exit code).
pub fn note(message: impl fmt::Display) {
    eprintln!("concord: {}", one_line(&message.to_string()));
}

/// Classes an error reading and checking an input file: one that could not be read (an I/O
/// error anywhere in its chain) stays "could not run"; any other (the file is not the JSON
/// or the document it should be) becomes [`Wrong`].
pub fn checked(error: anyhow::Error) -> anyhow::Error {
    if error
        .chain()
        .any(|cause| cause.downcast_ref::<io::Error>().is_some())
    {
        return error;
    }
    wrong(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_lines_and_drops_the_empty_ones() {
        assert_eq!(one_line("a"), "a");
        assert_eq!(
            one_line("rejected:\n  - no `id`\n\n  - no `price`\n"),
            "rejected: - no `id`; - no `price`"
        );
        assert_eq!(one_line("first\nsecond"), "first; second");
        assert_eq!(one_line(""), "");
        assert_eq!(one_line("peer says \u{1b}[2Jhi\r\n"), "peer says [2Jhi");
    }

    #[test]
    fn a_wrong_anywhere_in_the_chain_exits_1_and_anything_else_2() {
        let wrong = Wrong::error("no action `nope`");
        assert_eq!(exit_code(&wrong), ExitCode::from(1));
        assert_eq!(
            exit_code(&wrong.context("protocol draft")),
            ExitCode::from(1)
        );
        assert_eq!(
            exit_code(&anyhow::anyhow!("cannot read x")),
            ExitCode::from(2)
        );
        let unreadable = anyhow::Error::new(io::Error::from(io::ErrorKind::NotFound));
        assert_eq!(exit_code(&checked(unreadable)), ExitCode::from(2));
        let not_json = anyhow::anyhow!("x.json is not an action");
        assert_eq!(exit_code(&checked(not_json)), ExitCode::from(1));
    }
}
