//! Directories over each store, TDs, and a clock.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use concord_directory::{
    Directory, DirectoryError, DirectoryLimits, DirectoryStore, MemoryDirectoryStore, Registrant,
};
use serde_json::{json, Value};

/// A directory and what keeps its store alive.
pub struct Under {
    pub name: &'static str,
    pub directory: Directory,
    _dir: Option<tempfile::TempDir>,
}

/// A directory over each store, with `limits`.
pub fn directories_with(limits: DirectoryLimits) -> Vec<Under> {
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite: Arc<dyn DirectoryStore> =
        Arc::new(concord_store::Store::open(dir.path()).expect("open the SQLite store"));
    let memory: Arc<dyn DirectoryStore> = Arc::new(MemoryDirectoryStore::new());
    vec![
        Under {
            name: "memory",
            directory: Directory::new(memory, limits.clone()).expect("limits"),
            _dir: None,
        },
        Under {
            name: "sqlite",
            directory: Directory::new(sqlite, limits).expect("limits"),
            _dir: Some(dir),
        },
    ]
}

/// A directory over each store, with the default limits.
pub fn directories() -> Vec<Under> {
    directories_with(DirectoryLimits::default())
}

/// A fixed instant (2026-12-03T15:00:00Z) and later ones.
pub fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_310_000 + seconds)
}

pub fn alice() -> Registrant<'static> {
    Registrant::client("127.0.0.1")
}

/// A small valid TD with `id` (or none), `title`, and one action `act`.
pub fn td(id: Option<&str>, title: &str) -> Value {
    let mut td = json!({
        "@context": "https://www.w3.org/2022/wot/td/v1.1",
        "title": title,
        "securityDefinitions": {"nosec": {"scheme": "nosec"}},
        "security": "nosec",
        "actions": {"act": {
            "input": {"type": "object", "properties": {"city": {"type": "string"}}},
            "output": {"type": "object", "properties": {"forecast": {"type": "string"}}},
            "forms": [{"href": "https://thing.example/act"}]
        }}
    });
    if let Some(id) = id {
        td["id"] = json!(id);
    }
    td
}

pub fn bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("JSON")
}

/// The `.json` files of `../shared/testdata/td/<kind>` (beside the repository, never copied
/// into it), sorted, as (name, bytes); `None` (after saying why) when they are absent.
pub fn testdata(kind: &str) -> Option<Vec<(String, Vec<u8>)>> {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/testdata/td"
    ))
    .join(kind);
    if !dir.is_dir() {
        eprintln!(
            "SKIPPED: external TD test documents not found at {} (clone ../shared beside the repository to run this test)",
            dir.display()
        );
        return None;
    }
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("read {}: {error}", dir.display()))
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| {
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&path).expect("read a TD"))
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no documents in {}", dir.display());
    Some(files)
}

/// The HTTP status an operation's refusal answers.
pub fn status<T: std::fmt::Debug>(result: Result<T, DirectoryError>) -> u16 {
    match result {
        Ok(value) => panic!("expected a refusal, got {value:?}"),
        Err(error) => error.status(),
    }
}
