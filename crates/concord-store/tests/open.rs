//! Opening files: fresh directories, empty files, migrations, files that are not ours.

use std::fs;

use concord_proto::Role;
use concord_store::{NewProtocol, Store, StoreError};

fn pragma(path: &std::path::Path, name: &str) -> String {
    let connection = rusqlite::Connection::open(path).unwrap();
    connection
        .query_row(&format!("PRAGMA {name}"), [], |row| {
            row.get::<_, rusqlite::types::Value>(0)
        })
        .map(|value| match value {
            rusqlite::types::Value::Integer(n) => n.to_string(),
            rusqlite::types::Value::Text(text) => text,
            other => format!("{other:?}"),
        })
        .unwrap()
}

#[test]
fn creates_the_directory_and_a_wal_file_at_the_latest_schema() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("nested/data");
    let store = Store::open(&data).unwrap();
    assert_eq!(store.path(), data.join(Store::FILE_NAME));
    assert!(store.path().is_file());
    assert_eq!(pragma(store.path(), "journal_mode"), "wal");
    assert_eq!(
        pragma(store.path(), "user_version"),
        Store::schema_version().to_string()
    );
    assert_eq!(
        pragma(store.path(), "application_id"),
        0x436e_6364.to_string()
    );
    assert!(Store::schema_version() >= 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&data).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "the data directory is private");
    }
}

#[test]
fn migrates_an_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(Store::FILE_NAME);
    fs::write(&path, b"").unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        pragma(&path, "user_version"),
        Store::schema_version().to_string()
    );
    // Every table is there and usable.
    store
        .save_protocol(&NewProtocol::negotiated("# x\n", "p"))
        .unwrap();
    store.list_consensus().unwrap();
    store.list_transcripts(1).unwrap();
    assert!(store.check().unwrap().is_empty());
}

#[test]
fn reopening_keeps_data_and_does_not_migrate_again() {
    let dir = tempfile::tempdir().unwrap();
    let hash = {
        let store = Store::open(dir.path()).unwrap();
        store
            .save_protocol(
                &NewProtocol::negotiated("# x\n", "p").with_handler(Role::Provider, "js"),
            )
            .unwrap()
    };
    for _ in 0..3 {
        let store = Store::open(dir.path()).unwrap();
        assert!(store.can_resume(&hash, Role::Provider).unwrap());
        assert_eq!(store.list_protocols().unwrap().len(), 1);
    }
}

/// Several processes opening a new store at once all succeed, and it is migrated once.
/// (Before `enable_wal` retried it, the switch to WAL answered `SQLITE_BUSY` without
/// waiting: in 25 of 300 runs of one round of 4, and in 6 of 10 runs of this test.)
#[test]
fn concurrent_first_opens_migrate_once() {
    for _ in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open(path).map(|_| ())
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap().unwrap();
        }
        assert!(Store::open(&path).unwrap().check().unwrap().is_empty());
    }
}

#[test]
fn a_file_that_is_not_sqlite_is_an_open_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(Store::FILE_NAME);
    fs::write(
        &path,
        b"this is not a database, just some text that is long enough......",
    )
    .unwrap();
    let error = Store::open(dir.path()).unwrap_err();
    assert!(
        matches!(&error, StoreError::Open { path: p, .. } if *p == path),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(&path.display().to_string()),
        "{error}"
    );
    assert_cause_said_once(&error);
}

/// The message ends with the underlying error, which is not chained again as a source.
fn assert_cause_said_once(error: &StoreError) {
    let cause = match error {
        StoreError::Open { cause, .. } => cause.to_string(),
        StoreError::CreateDir { cause, .. } => cause.to_string(),
        other => panic!("no underlying error in {other:?}"),
    };
    assert!(error.to_string().ends_with(&cause), "{error}");
    assert!(std::error::Error::source(error).is_none(), "{error:?}");
}

#[test]
fn another_programs_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(Store::FILE_NAME);
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection
        .execute_batch("CREATE TABLE notes (body TEXT)")
        .unwrap();
    drop(connection);
    assert!(matches!(
        Store::open(dir.path()),
        Err(StoreError::ForeignDatabase {
            application_id: 0,
            ..
        })
    ));
    let connection = rusqlite::Connection::open(&path).unwrap();
    let tables: i64 = connection
        .query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))
        .unwrap();
    assert_eq!(tables, 1, "nothing was added to the foreign database");

    connection
        .execute_batch("PRAGMA application_id = 1234")
        .unwrap();
    drop(connection);
    assert!(matches!(
        Store::open(dir.path()),
        Err(StoreError::ForeignDatabase {
            application_id: 1234,
            ..
        })
    ));
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let path = dir.path().join(Store::FILE_NAME);
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    drop(connection);
    let error = Store::open(dir.path()).unwrap_err();
    assert!(
        matches!(error, StoreError::UnsupportedSchema { found: 99, supported, .. } if supported == Store::schema_version()),
        "{error:?}"
    );
    assert!(error.to_string().contains("upgrade"), "{error}");
}

#[test]
fn a_data_dir_that_cannot_be_created_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    fs::write(&file, b"").unwrap();
    let error = Store::open(file.join("data")).unwrap_err();
    assert!(
        matches!(&error, StoreError::CreateDir { path, .. } if *path == file.join("data")),
        "{error:?}"
    );
    assert_cause_said_once(&error);
}

#[cfg(target_os = "linux")]
#[test]
fn default_dir_is_the_xdg_data_dir() {
    let dir = Store::default_dir().unwrap();
    assert!(dir.ends_with("concord"), "{}", dir.display());
    assert!(dir.is_absolute());
}
