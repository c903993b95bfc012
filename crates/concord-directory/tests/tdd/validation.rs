//! Validation with the strict validator, on the W3C's and the shared test TDs.

use concord_directory::DirectoryError;
use serde_json::Value;

use crate::support::*;

/// Registers a TD: `PUT` when it has an id, else `POST`.
fn register(
    d: &concord_directory::Directory,
    name: &str,
    body: &[u8],
) -> Result<String, DirectoryError> {
    let id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|td| td.get("id").and_then(Value::as_str).map(str::to_owned));
    match id {
        Some(id) => d.put(&id, body, &alice(), at(0)).map(|_| id),
        None => d.create(body, fastrand_bytes(name), &alice(), at(0)),
    }
}

fn fastrand_bytes(name: &str) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    for (n, byte) in name.bytes().enumerate() {
        bytes[n % 16] ^= byte.wrapping_mul(31).wrapping_add(n as u8);
    }
    bytes
}

#[test]
fn tdd_validation_syntactic_valid_foreign_tds_are_stored() {
    for kind in ["valid", "warning"] {
        let Some(files) = testdata(kind) else { return };
        for under in directories() {
            for (name, body) in &files {
                let id = register(&under.directory, name, body).unwrap_or_else(|error| {
                    panic!("{}: {kind}/{name} refused: {error}", under.name)
                });
                let got = under.directory.get(&id, at(1)).unwrap();
                assert_eq!(got["id"], id.as_str(), "{name}");
            }
        }
    }
}

#[test]
fn tdd_validation_result_and_response_invalid_tds_are_refused_with_validation_errors() {
    let Some(files) = testdata("invalid") else {
        return;
    };
    for under in directories() {
        for (name, body) in &files {
            let error = register(&under.directory, name, body)
                .err()
                .unwrap_or_else(|| panic!("{}: invalid/{name} was stored", under.name));
            assert_eq!(error.status(), 400, "{name}: {error}");
            let errors = error
                .validation_errors()
                .unwrap_or_else(|| panic!("{name}: {error:?} has no validationErrors"));
            assert!(!errors.is_empty(), "{name}");
            for e in errors {
                // `field` is a JSON pointer (RFC 6901): empty or starting with `/`.
                assert!(
                    e.field.is_empty() || e.field.starts_with('/'),
                    "{name}: {e:?}"
                );
                assert!(!e.description.is_empty(), "{name}");
            }
            let problem = serde_json::to_value(errors).unwrap();
            assert!(problem[0].get("field").is_some() && problem[0].get("description").is_some());
        }
        assert_eq!(
            under
                .directory
                .list(&Default::default(), at(0))
                .unwrap()
                .total,
            0
        );
    }
}

#[test]
fn the_w3c_test_documents_are_stored_or_refused_as_their_names_say() {
    let Some(files) = testdata("w3c") else { return };
    for under in directories() {
        for (name, body) in files
            .iter()
            .filter(|(name, _)| !name.starts_with("td-json-schema"))
        {
            let result = register(&under.directory, name, body);
            if name.starts_with("valid") {
                assert!(result.is_ok(), "{}: {name}: {result:?}", under.name);
            } else {
                assert!(
                    matches!(result, Err(DirectoryError::InvalidTd { .. })),
                    "{}: {name}: {result:?}",
                    under.name
                );
            }
        }
    }
}
