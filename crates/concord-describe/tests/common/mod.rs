//! Access to the external test documents in `../shared/testdata` (never copied into the repo).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `../shared/testdata/td`, or None (after saying why) when it is absent.
pub fn td_dir() -> Option<PathBuf> {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/testdata/td"
    ));
    if dir.is_dir() {
        Some(dir.to_path_buf())
    } else {
        eprintln!(
            "SKIPPED: external TD test documents not found at {} (clone ../shared beside the repository to run this test)",
            dir.display()
        );
        None
    }
}

/// The `.json` files of `dir/sub` whose names start with `prefix`, sorted, as (name, bytes).
pub fn documents(dir: &Path, sub: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.join(sub))
        .unwrap_or_else(|e| panic!("cannot list {}/{sub}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.ends_with(".json")
                && name.starts_with(prefix)
                && !name.starts_with("td-json-schema")
        })
        .map(|path| {
            let name = format!("{sub}/{}", path.file_name().unwrap().to_string_lossy());
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no documents in {}/{sub}", dir.display());
    files
}

/// A fixture committed with this crate (`tests/fixtures/`).
pub fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")).join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}
