//! A reader that goes away (`concord … | head -1`): every command stops quietly with exit
//! code 0, as Unix tools do, with no panic and nothing on standard error.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use support::*;

/// Runs `concord <args>` (with `stdin`) writing into a pipe whose reader is already gone.
fn with_closed_stdout(args: &[&str], stdin: &str) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = process()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command may stop before it reads its input.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let output = child.wait_with_output().unwrap();
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::new(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

#[test]
fn every_kind_of_output_stops_quietly_when_standard_output_is_closed() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap();
    let config = example_config();
    let config = config.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        // The narrative, as it happens, and JSON.
        (&["demo", "--calls", "10"], ""),
        (&["demo", "--json", "--calls", "10"], ""),
        // Plain lines, JSON from a writer, text with no newline at the end.
        (&["protocols", "list", "--json", "--data-dir", data_dir], ""),
        (&["describe", "new", "--title", "Shop"], ""),
        (
            &["aicl", "encode", "--pretty"],
            r#"{"tool": "web_scraper"}"#,
        ),
        (&["protocol", "hash"], "abc"),
        // A server's banner.
        (
            &[
                "serve",
                "--config",
                config,
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                data_dir,
            ],
            "",
        ),
        // clap's own help.
        (&["call", "--help"], ""),
    ];
    for (args, stdin) in cases {
        let output = with_closed_stdout(args, stdin);
        // Only `serve` has logged a line (`serving`) before its banner.
        assert!(
            output.code == 0
                && !output.stderr.contains("panicked")
                && !output.stderr.contains("concord: "),
            "concord {}: exit {}: {}",
            args.join(" "),
            output.code,
            output.stderr
        );
    }
}

#[test]
fn a_reader_that_stops_after_the_first_line_ends_the_demo_quietly() {
    let mut child = process()
        .args(["demo", "--calls", "1000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("Concord demo: "), "{first}");
    // The reader is dropped here, like `head -1` exiting; the demo goes on writing.
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!((output.status.code(), stderr.as_str()), (Some(0), ""));
}
