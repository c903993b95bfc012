//! The identity's two key pairs — Ed25519 (authentication, assertion) and X25519 (key
//! agreement, the Noise static key) — and the key file that keeps them.

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use concord_text::TextPosition;
use ed25519_dalek::{Signer, SigningKey};
use rand_core::OsRng;
use serde::{Deserialize, Serialize};
use x25519_dalek::{PublicKey as XPublic, StaticSecret};
use zeroize::{Zeroize, Zeroizing};

use crate::encoding::{b64url, b64url_decode, ed25519_thumbprint};

/// The `format` value of the key file.
pub const KEY_FILE_FORMAT: &str = "concord-identity-keys/1";
/// Largest key file read, in bytes.
const MAX_KEY_FILE: u64 = 4096;

/// Why a key file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    /// Reading, writing, renaming or creating the directory failed.
    #[error("key file {path}: {action} failed: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is readable or writable by group or others.
    #[error("key file {path} has mode {mode:04o}; it must not be accessible by group or others (chmod 600)")]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is larger than a key file can be.
    #[error("key file {path} is larger than {max} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        max: u64,
    },
    /// The file is not the JSON object of a key file.
    #[error("key file {path} is not a concord key file: {detail}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Where in the file (the column counted in characters), when the error comes from
        /// reading it.
        position: Option<TextPosition>,
        /// The JSON error (no key material).
        detail: String,
    },
    /// The `format` field names another format.
    #[error("key file {path} has format {found:?}, expected {KEY_FILE_FORMAT:?}")]
    Format {
        /// The file.
        path: PathBuf,
        /// The format found.
        found: String,
    },
    /// A key field is not base64url of 32 bytes.
    #[error("key file {path}: field {field:?} is not base64url of 32 bytes ({detail})")]
    Key {
        /// The file.
        path: PathBuf,
        /// `ed25519` or `x25519`.
        field: &'static str,
        /// What is wrong (never the key).
        detail: String,
    },
}

/// The identity's secret keys: an Ed25519 signing key and an X25519 static secret.
///
/// Both are zeroized on drop; `Debug` shows only the public fingerprint.
pub struct Keys {
    signing: SigningKey,
    agreement: StaticSecret,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    format: String,
    ed25519: String,
    x25519: String,
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        self.ed25519.zeroize();
        self.x25519.zeroize();
    }
}

impl Keys {
    /// Generates fresh keys from the operating system's RNG.
    pub fn generate() -> Keys {
        Keys {
            signing: SigningKey::generate(&mut OsRng),
            agreement: StaticSecret::random_from_rng(OsRng),
        }
    }

    /// Builds keys from their raw secret bytes (Ed25519 seed, X25519 scalar).
    pub fn from_secret_bytes(ed25519_seed: &[u8; 32], x25519_secret: &[u8; 32]) -> Keys {
        Keys {
            signing: SigningKey::from_bytes(ed25519_seed),
            agreement: StaticSecret::from(*x25519_secret),
        }
    }

    /// RFC 7638 thumbprint of the Ed25519 public key as the JWK `{"crv","kty","x"}`:
    /// SHA-256, base64url without padding (43 characters) — the `e1_` segment of the DID.
    pub fn fingerprint(&self) -> String {
        ed25519_thumbprint(&self.signing_public())
    }

    /// The Ed25519 public key.
    pub fn signing_public(&self) -> [u8; 32] {
        self.signing.verifying_key().to_bytes()
    }

    /// The Ed25519 verifying key.
    pub fn verifying_key(&self) -> ed25519_dalek::VerifyingKey {
        self.signing.verifying_key()
    }

    /// The X25519 public key.
    pub fn agreement_public(&self) -> [u8; 32] {
        XPublic::from(&self.agreement).to_bytes()
    }

    /// The X25519 **secret** key, for the Noise static key. It is secret: never log it, and
    /// zeroize the copy when done.
    pub fn agreement_secret(&self) -> [u8; 32] {
        self.agreement.to_bytes()
    }

    /// Signs `message` with the Ed25519 key.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.signing.sign(message).to_bytes()
    }

    /// Reads a key file. Refuses (on Unix) a file accessible by group or others, naming the
    /// mode; a file over 4 KiB; bad JSON; another format; keys that are not 32 bytes.
    pub fn load(path: &Path) -> Result<Keys, KeyFileError> {
        let io = |action, source| KeyFileError::Io {
            path: path.to_owned(),
            action,
            source,
        };
        let file = std::fs::File::open(path).map_err(|e| io("open", e))?;
        let meta = file.metadata().map_err(|e| io("stat", e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o077 != 0 {
                return Err(KeyFileError::Permissions {
                    path: path.to_owned(),
                    mode,
                });
            }
        }
        if meta.len() > MAX_KEY_FILE {
            return Err(KeyFileError::TooLarge {
                path: path.to_owned(),
                max: MAX_KEY_FILE,
            });
        }
        let mut bytes = Zeroizing::new(Vec::with_capacity(512));
        file.take(MAX_KEY_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| io("read", e))?;
        if bytes.len() as u64 > MAX_KEY_FILE {
            return Err(KeyFileError::TooLarge {
                path: path.to_owned(),
                max: MAX_KEY_FILE,
            });
        }
        let parsed: KeyFile = serde_json::from_slice(&bytes).map_err(|e| {
            let position = TextPosition::of_json_error(&bytes, &e);
            KeyFileError::Json {
                path: path.to_owned(),
                position,
                detail: match position {
                    Some(at) => {
                        format!("{} at line {} column {}", classify(&e), at.line, at.column)
                    }
                    None => classify(&e).to_owned(),
                },
            }
        })?;
        if parsed.format != KEY_FILE_FORMAT {
            return Err(KeyFileError::Format {
                path: path.to_owned(),
                found: parsed.format.chars().take(64).collect(),
            });
        }
        let seed = decode_key(path, "ed25519", &parsed.ed25519)?;
        let secret = decode_key(path, "x25519", &parsed.x25519)?;
        Ok(Keys::from_secret_bytes(&seed, &secret))
    }

    /// Writes the key file atomically: a temporary file created with mode 0600 in the same
    /// directory, synced, then renamed over `path`. A missing parent directory is created
    /// with mode 0700.
    pub fn save(&self, path: &Path) -> Result<(), KeyFileError> {
        let io = |p: &Path, action, source| KeyFileError::Io {
            path: p.to_owned(),
            action,
            source,
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        if !parent.exists() {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                builder.mode(0o700);
            }
            builder
                .create(&parent)
                .map_err(|e| io(&parent, "create directory", e))?;
        }
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "keys".into());
        let mut nonce = [0u8; 8];
        rand_core::RngCore::fill_bytes(&mut OsRng, &mut nonce);
        let temp = parent.join(format!(".{file_name}.tmp-{}", hex::encode(nonce)));
        let content = KeyFile {
            format: KEY_FILE_FORMAT.to_owned(),
            ed25519: b64url(self.signing.as_bytes()),
            x25519: b64url(&self.agreement.to_bytes()),
        };
        let json = Zeroizing::new(serde_json::to_vec_pretty(&content).map_err(|e| {
            KeyFileError::Json {
                path: path.to_owned(),
                position: None,
                detail: e.to_string(),
            }
        })?);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let result = (|| {
            let mut file = options.open(&temp).map_err(|e| io(&temp, "create", e))?;
            file.write_all(&json).map_err(|e| io(&temp, "write", e))?;
            file.write_all(b"\n").map_err(|e| io(&temp, "write", e))?;
            file.sync_all().map_err(|e| io(&temp, "sync", e))?;
            std::fs::rename(&temp, path).map_err(|e| io(path, "rename", e))
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result?;
        if let Ok(dir) = std::fs::File::open(&parent) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

fn classify(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Io => "I/O error",
        serde_json::error::Category::Syntax => "JSON syntax error",
        serde_json::error::Category::Data => "wrong fields (expected format, ed25519, x25519)",
        serde_json::error::Category::Eof => "truncated JSON",
    }
}

fn decode_key(path: &Path, field: &'static str, text: &str) -> Result<[u8; 32], KeyFileError> {
    let bad = |detail: String| KeyFileError::Key {
        path: path.to_owned(),
        field,
        detail,
    };
    let bytes = Zeroizing::new(b64url_decode(text).ok_or_else(|| bad("not base64url".into()))?);
    let array: [u8; 32] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| bad(format!("{} bytes", bytes.len())))?;
    Ok(array)
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keys")
            .field("fingerprint", &self.fingerprint())
            .field("secrets", &"<redacted>")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_round_trip_with_private_modes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("identity.json");
        let keys = Keys::generate();
        keys.save(&path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            let dmode = std::fs::metadata(path.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(dmode, 0o700);
        }
        let back = Keys::load(&path).unwrap();
        assert_eq!(back.signing_public(), keys.signing_public());
        assert_eq!(back.agreement_public(), keys.agreement_public());
        assert_eq!(back.agreement_secret(), keys.agreement_secret());
        keys.save(&path).unwrap(); // overwrite works
    }

    #[cfg(unix)]
    #[test]
    fn load_refuses_group_readable_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.json");
        Keys::generate().save(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = Keys::load(&path).unwrap_err();
        assert!(
            matches!(err, KeyFileError::Permissions { mode: 0o640, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("0640"));
    }

    #[test]
    fn load_refuses_bad_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.json");
        let write = |text: &str| {
            std::fs::write(&path, text).unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            }
        };
        write("{not json");
        assert!(matches!(Keys::load(&path), Err(KeyFileError::Json { .. })));
        // "é" is two bytes and one character: the stray `x` is the 16th character of its
        // line (serde_json says column 17, in bytes).
        write("{\"format\": \"é\" x}");
        let Err(KeyFileError::Json {
            position, detail, ..
        }) = Keys::load(&path)
        else {
            panic!("a syntax error is a JSON error");
        };
        assert_eq!(
            position,
            Some(TextPosition {
                line: 1,
                column: 16
            })
        );
        assert_eq!(detail, "JSON syntax error at line 1 column 16");
        let short = b64url(&[1u8; 31]);
        let good = b64url(&[1u8; 32]);
        write(&format!(
            r#"{{"format":"{KEY_FILE_FORMAT}","ed25519":"{short}","x25519":"{good}"}}"#
        ));
        assert!(matches!(
            Keys::load(&path),
            Err(KeyFileError::Key {
                field: "ed25519",
                ..
            })
        ));
        write(&format!(
            r#"{{"format":"other/1","ed25519":"{good}","x25519":"{good}"}}"#
        ));
        assert!(matches!(
            Keys::load(&path),
            Err(KeyFileError::Format { .. })
        ));
        write(&format!(
            r#"{{"format":"{KEY_FILE_FORMAT}","ed25519":"{good}","x25519":"{good}"}}"#
        ));
        assert!(Keys::load(&path).is_ok());
    }

    #[test]
    fn debug_redacts() {
        let keys = Keys::from_secret_bytes(&[9u8; 32], &[8u8; 32]);
        let text = format!("{keys:?}");
        assert!(text.contains("redacted"));
        assert!(!text.contains(&b64url(&[9u8; 32])));
        assert_eq!(keys.fingerprint().len(), 43);
    }
}
