//! `concord find` and targets by agent id or `--find`: what happens without a directory
//! or with one that cannot be reached (the directory's own tests are in
//! `directory_find.rs`, against `concord directory serve`).

mod support;

use support::*;

#[test]
fn find_without_a_directory_is_refused() {
    let output =
        run(concord()
            .env_remove("CONCORD_DIRECTORY")
            .args(["find", "--action", "getProductInfo"]));
    assert_eq!(output.code, 1, "{output:?}");
    assert!(output.stderr.starts_with("concord: "), "{}", output.stderr);
    assert!(output.stderr.contains("--directory"), "{}", output.stderr);
    assert_eq!(output.stderr.lines().count(), 1, "{}", output.stderr);
}

#[test]
fn find_at_a_directory_that_cannot_be_reached_could_not_run() {
    // Port 1 on loopback: nothing listens.
    let output = run(concord().args([
        "find",
        "--directory",
        "http://127.0.0.1:1/",
        "--action",
        "getProductInfo",
    ]));
    assert_eq!(output.code, 2, "{output:?}");
    assert!(output.stderr.contains("unreachable"), "{}", output.stderr);
    // The environment variable stands for --directory.
    let output = run(concord()
        .env("CONCORD_DIRECTORY", "http://127.0.0.1:1/")
        .args(["find", "--field", "productId", "--json"]));
    assert_eq!(output.code, 2, "{output:?}");
    assert!(output.stderr.contains("127.0.0.1:1"), "{}", output.stderr);
}

#[test]
fn a_target_by_id_or_find_needs_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    for args in [
        &[
            "call",
            "urn:uuid:6f1c2e0a-8b7d-4c39-9a51-2d4e8f0b3c71",
            "getProductInfo",
            "{}",
        ][..],
        &["call", "--find", "getProductInfo", "getProductInfo", "{}"][..],
        &["read", "did:wba:localhost%3A9:agents:e1_x", "stock"][..],
        &["subscribe", "--find", "event=priceChanged", "priceChanged"][..],
    ] {
        let output = run(concord()
            .env_remove("CONCORD_DIRECTORY")
            .args(args)
            .args(["--data-dir", data]));
        assert_eq!(output.code, 1, "{args:?}: {output:?}");
        assert!(
            output.stderr.contains("needs a directory"),
            "{args:?}: {}",
            output.stderr
        );
    }
    // A malformed query is refused before any directory is asked.
    let output = run(concord().args([
        "call",
        "--directory",
        "http://127.0.0.1:1/",
        "--find",
        "colour=red",
        "getProductInfo",
        "{}",
        "--data-dir",
        data,
    ]));
    assert_eq!(output.code, 1, "{output:?}");
    assert!(output.stderr.contains("unknown key"), "{}", output.stderr);
}
