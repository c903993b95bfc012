//! `concord identity new|show|export`: keys created once (mode 0600) in the data directory,
//! the DID a node has with them, and a signed DID document that Concord's reader (and the
//! reference SDK, when `CONCORD_ANP_PYTHON` names a Python with `anp` 1.0.7) accepts.

mod support;

use std::path::{Path, PathBuf};

use concord_identity::{read_document, Did, DidDocumentLimits};
use support::*;

fn identity(data_dir: &Path, args: &[&str]) -> Output {
    run(concord()
        .arg("identity")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir))
}

#[test]
fn new_show_export_and_the_document_is_accepted() {
    let data = tempfile::tempdir().unwrap();
    let key_file = data.path().join("identity/keys.json");

    // No identity yet: show and export say how to get one (1).
    identity(data.path(), &["show"]).fails(1, "no identity yet");
    identity(data.path(), &["show"])
        .says(1, "`concord identity new` or start `concord serve` once");
    identity(data.path(), &["export", "--host", "agents.example.com"]).fails(1, "no identity yet");
    assert!(!key_file.exists());

    let created = identity(data.path(), &["new"]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    assert!(
        created
            .stdout
            .contains(&format!("created:     {}", key_file.display())),
        "{}",
        created.stdout
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let fingerprint = created
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("fingerprint: "))
        .unwrap()
        .to_owned();
    assert!(
        fingerprint.starts_with("e1_") && fingerprint.len() == 46,
        "{fingerprint}"
    );

    // A second `new` refuses, naming the file; the keys stay.
    let again = identity(data.path(), &["new"]);
    again.fails(1, "an identity exists already");
    assert!(
        again.stderr.contains(&key_file.display().to_string()),
        "{}",
        again.stderr
    );
    assert!(again.stderr.contains("--force"), "{}", again.stderr);
    let before = std::fs::read(&key_file).unwrap();

    // show: as a node serving on 127.0.0.1:9000 names itself.
    let shown = identity(
        data.path(),
        &["show", "--url", "http://127.0.0.1:9000/", "--json"],
    );
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let shown = shown.json();
    let did = shown["did"].as_str().unwrap().to_owned();
    assert_eq!(
        did,
        format!("did:wba:localhost%3A9000:agents:{fingerprint}")
    );
    assert_eq!(shown["fingerprint"], fingerprint.as_str());
    assert_eq!(
        shown["documentUrl"],
        format!("https://localhost:9000/agents/{fingerprint}/did.json")
    );
    assert_eq!(shown["keyFile"], key_file.display().to_string());
    assert!(shown["authentication"]["publicKeyMultibase"]
        .as_str()
        .unwrap()
        .starts_with("z6Mk"));
    assert_eq!(shown["keyAgreement"]["id"], format!("{did}#key-3"));
    // The same with --host and --port, and in words.
    let words = identity(
        data.path(),
        &["show", "--host", "localhost", "--port", "9000"],
    );
    assert_eq!(words.code, 0, "{}", words.stderr);
    assert!(
        words.stdout.starts_with(&format!("did:          {did}\n")),
        "{}",
        words.stdout
    );
    for label in [
        "fingerprint:",
        "ed25519:",
        "x25519:",
        "document:",
        "key file:",
    ] {
        assert!(words.stdout.contains(label), "{}", words.stdout);
    }
    // A public host without a port; a non-loopback IP address is no did:wba host.
    let public = identity(
        data.path(),
        &["show", "--url", "https://agents.example.com/", "--json"],
    );
    assert_eq!(
        public.json()["did"],
        format!("did:wba:agents.example.com:agents:{fingerprint}")
    );
    identity(data.path(), &["show", "--url", "http://192.0.2.7:8080/"])
        .fails(1, "not an IP address");
    identity(data.path(), &["export"]).fails(1, "--url URL or --host HOST");

    // export: the signed document, which the reader accepts for that DID.
    let exported = identity(
        data.path(),
        &["export", "--host", "agents.example.com", "--port", "8443"],
    );
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    let document = exported.json();
    let did = Did::parse(&format!(
        "did:wba:agents.example.com%3A8443:agents:{fingerprint}"
    ))
    .unwrap();
    assert_eq!(document["id"], did.as_str());
    let verified = read_document(
        exported.stdout.as_bytes(),
        &did,
        &DidDocumentLimits::default(),
    )
    .unwrap();
    assert_eq!(verified.key_agreement().len(), 1);
    verified
        .authentication_key(&format!("{did}#key-1"))
        .unwrap();
    // Public keys only: nothing of the key file is in it.
    let key_json: serde_json::Value = serde_json::from_slice(&before).unwrap();
    for secret in ["ed25519", "x25519"] {
        let secret = key_json[secret].as_str().unwrap();
        assert!(!exported.stdout.contains(secret));
        assert!(!words.stdout.contains(secret));
    }
    check_with_the_reference_sdk(&document);

    // --force replaces the keys: a new fingerprint.
    let forced = identity(data.path(), &["new", "--force"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert!(!forced.stdout.contains(&fingerprint), "{}", forced.stdout);
    assert_ne!(std::fs::read(&key_file).unwrap(), before);
}

#[test]
fn a_key_file_others_can_read_is_refused_naming_it() {
    let data = tempfile::tempdir().unwrap();
    assert_eq!(identity(data.path(), &["new"]).code, 0);
    let key_file = data.path().join("identity/keys.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let output = identity(data.path(), &["show"]);
        output.fails(1, "mode 0644");
        assert!(output.stderr.contains("keys.json"), "{}", output.stderr);
    }
    std::fs::write(&key_file, "{}").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    identity(data.path(), &["show"]).fails(1, "is not a concord key file");
    // `new` does not replace a broken file without --force either.
    identity(data.path(), &["new"]).fails(1, "--force replaces the key file");
    assert_eq!(identity(data.path(), &["new", "--force"]).code, 0);
}

#[test]
fn every_identity_command_has_examples() {
    for args in [
        vec!["identity", "--help"],
        vec!["identity", "new", "--help"],
        vec!["identity", "show", "--help"],
        vec!["identity", "export", "--help"],
    ] {
        let output = run(concord().args(&args));
        assert_eq!(output.code, 0, "{}", output.stderr);
        assert!(
            output.stdout.contains("Examples:"),
            "{args:?}: {}",
            output.stdout
        );
    }
}

/// The reference SDK's verdict on `document` (binding and proof), when
/// `CONCORD_ANP_PYTHON` names a Python with `anp` installed.
fn check_with_the_reference_sdk(document: &serde_json::Value) {
    let Some(python) = std::env::var_os("CONCORD_ANP_PYTHON") else {
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../concord-identity/tests/anp/check_document.py");
    let mut child = std::process::Command::new(python)
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(
                serde_json::json!({ "document": document })
                    .to_string()
                    .as_bytes(),
            )
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let verdict: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(verdict["binding"], true, "{verdict}");
    assert_eq!(verdict["proof"], true, "{verdict}");
}
