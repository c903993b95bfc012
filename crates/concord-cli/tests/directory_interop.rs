//! A foreign client against `concord directory serve`: a Python script using `requests`
//! and `sseclient-py` (PyPI), written from the W3C WoT Discovery specification
//! (`tests/interop/directory_client.py`): CRUD, paging `Link` headers, validation errors,
//! SSE with `Last-Event-ID` resume, JSONPath. It needs `CONCORD_ANP_PYTHON`, a Python
//! with `requests` and `sseclient-py` (`.ci/run` makes one and runs this with
//! `--ignored`).

mod support;

use std::ffi::OsStr;
use std::process::Command;

use support::*;

#[test]
#[ignore = "needs Python with requests and sseclient-py: set CONCORD_ANP_PYTHON (`.ci/run` does)"]
fn a_python_client_using_requests_and_sseclient_uses_the_directory() {
    let python = std::env::var("CONCORD_ANP_PYTHON")
        .expect("CONCORD_ANP_PYTHON: a Python with requests and sseclient-py");
    let data = tempfile::tempdir().unwrap();
    let served = Served::directory(&[
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        data.path().as_os_str(),
    ]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/directory_client.py"
    );
    let output = Command::new(python)
        .arg(script)
        .arg(&served.url)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{said}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(said.contains("all checks passed"), "{said}");
}
