//! What every test of the store on a real file starts from.

use concord_store::Store;

/// A fresh store in a temporary directory, which lives as long as the returned guard.
pub fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    (dir, store)
}
