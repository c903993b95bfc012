//! Standard output for every command. `println!` panics when standard output is gone
//! (`concord protocols list | head -1`); these macros return the write's
//! `std::io::Result` instead, so a command stops at the first failed write with `?`, and
//! `main` ends quietly when the reader has gone away ([`is_broken_pipe`]), as Unix tools
//! do. `println!` and `print!` are denied in this crate (`clippy::print_stdout`).

use std::fmt;
use std::io::{self, Write};

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
