//! Reading a peer's DID document — untrusted bytes — into the keys it vouches for.

use ed25519_dalek::VerifyingKey;
use serde_json::{Map, Value};

use crate::did::Did;
use crate::encoding::{
    b64url_canonical_32, base58_decode, ed25519_thumbprint, multibase_z_decode, ED25519_MULTICODEC,
    X25519_MULTICODEC,
};
use crate::proof::{self, ProofFault};

/// Bounds on a DID document read from a peer. `Default` gives the documented values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DidDocumentLimits {
    /// Largest document, in bytes (default 64 KiB). Checked before anything else.
    pub max_bytes: usize,
    /// Deepest nesting of arrays and objects (default 16; the top-level object is depth 1).
    pub max_depth: usize,
    /// Most `verificationMethod` entries (default 16).
    pub max_verification_methods: usize,
    /// Most entries in each verification relationship (`authentication`, `assertionMethod`,
    /// `keyAgreement`, `capabilityInvocation`, `capabilityDelegation`) (default 16).
    pub max_relationship_entries: usize,
    /// Most `service` entries (default 32).
    pub max_services: usize,
}

impl Default for DidDocumentLimits {
    fn default() -> Self {
        DidDocumentLimits {
            max_bytes: 64 * 1024,
            max_depth: 16,
            max_verification_methods: 16,
            max_relationship_entries: 16,
            max_services: 32,
        }
    }
}

/// Why a DID document is refused, or a key in it cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DidDocumentError {
    /// The document is larger than `max_bytes`.
    #[error("DID document is {size} bytes, more than the {max} accepted")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The document nests deeper than `max_depth`.
    #[error("DID document nests deeper than {max} levels")]
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// The bytes are not JSON.
    #[error("DID document is not JSON: {detail}")]
    Json {
        /// The parser's message.
        detail: String,
    },
    /// The document is not a JSON object.
    #[error("DID document is not a JSON object")]
    NotObject,
    /// The document's `id` is not the DID that was resolved.
    #[error("DID document id {found:?} differs from the resolved DID {expected:?}")]
    IdMismatch {
        /// The DID that was resolved.
        expected: String,
        /// The `id` in the document (empty when missing or not a string; at most 256 chars).
        found: String,
    },
    /// The DID uses the `k1_` (secp256k1) profile, which Concord does not support.
    #[error("DID {did} uses the k1 (secp256k1) profile, which is not supported")]
    UnsupportedProfile {
        /// The DID.
        did: String,
    },
    /// A list has more entries than the limits allow.
    #[error("DID document field {field:?} has {count} entries, more than the {max} accepted")]
    TooMany {
        /// The field.
        field: &'static str,
        /// Its entries.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A field has the wrong JSON shape.
    #[error("DID document field {field} is malformed: {detail}")]
    Malformed {
        /// The field (with index), e.g. `verificationMethod[2].id`.
        field: String,
        /// What is wrong.
        detail: &'static str,
    },
    /// Two verification methods carry the same id.
    #[error("DID document has two verification methods with id {id:?}")]
    DuplicateMethod {
        /// The id.
        id: String,
    },
    /// An Ed25519 or X25519 method's key material is unreadable.
    #[error("verification method {id:?} has unusable key material: {detail}")]
    BadKey {
        /// The method id.
        id: String,
        /// What is wrong.
        detail: &'static str,
    },
    /// An e1 DID's document has no proof.
    #[error("DID document of an e1 DID has no proof")]
    MissingProof,
    /// The proof is not one we check (wrong type, cryptosuite, purpose, fields, or method).
    #[error("DID document proof is not acceptable: {detail}")]
    BadProof {
        /// What is wrong.
        detail: &'static str,
    },
    /// The proof's signature does not verify: the document was altered or signed by another key.
    #[error("DID document proof signature does not verify")]
    ProofSignature,
    /// The proof key's fingerprint is not the DID's `e1_` segment.
    #[error("e1 fingerprint mismatch: DID says {expected:?}, the proof key gives {found:?}")]
    FingerprintMismatch {
        /// The fingerprint in the DID.
        expected: String,
        /// The fingerprint of the proof key.
        found: String,
    },
    /// The key id is not listed in `authentication`.
    #[error("verification method {keyid:?} is not listed in the document's authentication")]
    NotAuthentication {
        /// The key id.
        keyid: String,
    },
    /// The key id is listed in `authentication` but is not a usable Ed25519 key.
    #[error("authentication method {keyid:?} is not an Ed25519 key Concord can verify")]
    NotEd25519 {
        /// The key id.
        keyid: String,
    },
}

/// A DID document that passed [`read_document`]: its id is the expected DID, its limits
/// hold, and (for e1 DIDs) its proof binds it to the DID's fingerprint.
#[derive(Debug, Clone)]
pub struct VerifiedDocument {
    did: Did,
    document: Value,
    authentication: Vec<(String, Option<VerifyingKey>)>,
    key_agreement: Vec<[u8; 32]>,
}

impl VerifiedDocument {
    /// The DID (the document's `id`).
    pub fn did(&self) -> &Did {
        &self.did
    }

    /// The Ed25519 key `keyid` (full `did#fragment`), which must be listed in
    /// `authentication` (by reference or embedded): otherwise [`DidDocumentError::NotAuthentication`];
    /// listed but not Ed25519 (e.g. a P-256 `#key-2`): [`DidDocumentError::NotEd25519`].
    pub fn authentication_key(&self, keyid: &str) -> Result<&VerifyingKey, DidDocumentError> {
        match self.authentication.iter().find(|(id, _)| id == keyid) {
            Some((_, Some(key))) => Ok(key),
            Some((_, None)) => Err(DidDocumentError::NotEd25519 {
                keyid: keyid.to_owned(),
            }),
            None => Err(DidDocumentError::NotAuthentication {
                keyid: keyid.to_owned(),
            }),
        }
    }

    /// The X25519 public keys listed in `keyAgreement`, in document order.
    pub fn key_agreement(&self) -> &[[u8; 32]] {
        &self.key_agreement
    }

    /// The document as parsed.
    pub fn document(&self) -> &Value {
        &self.document
    }
}

/// What a verification method holds.
#[derive(Debug, Clone, Copy)]
enum Material {
    Ed25519(VerifyingKey),
    X25519([u8; 32]),
    Other,
}

/// Nesting depth of JSON text, without recursion; `None` once it passes `max`.
fn depth_within(bytes: &[u8], max: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &c in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    true
}

fn clip(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}

/// Relative `#fragment` references are read against the DID.
fn absolute(did: &Did, id: &str) -> String {
    if id.starts_with('#') {
        format!("{did}{id}")
    } else {
        id.to_owned()
    }
}

const RELATIONSHIPS: [&str; 5] = [
    "authentication",
    "assertionMethod",
    "keyAgreement",
    "capabilityInvocation",
    "capabilityDelegation",
];

/// Reads an untrusted DID document resolved for `expected`.
///
/// In order: size (`max_bytes`), nesting depth (scanned without recursion, and serde_json's
/// own limit), JSON, `id` equal to `expected` exactly, the `k1_` profile refused, counts,
/// key material of Ed25519/X25519 methods (other types, e.g. the SDK's P-256 `#key-2`, are
/// skipped and never usable for authentication), then the proof: required for e1 DIDs and
/// checked as the SDK's `_validate_e1_proof_binding` (type DataIntegrityProof, cryptosuite
/// eddsa-jcs-2022, purpose assertionMethod, method listed in `assertionMethod`, an Ed25519
/// key, the signature, and the key's fingerprint equal to the DID's `e1_` segment); optional
/// for DIDs without an `e1_` segment but verified when present.
pub fn read_document(
    bytes: &[u8],
    expected: &Did,
    limits: &DidDocumentLimits,
) -> Result<VerifiedDocument, DidDocumentError> {
    if bytes.len() > limits.max_bytes {
        return Err(DidDocumentError::TooLarge {
            size: bytes.len(),
            max: limits.max_bytes,
        });
    }
    if !depth_within(bytes, limits.max_depth) {
        return Err(DidDocumentError::TooDeep {
            max: limits.max_depth,
        });
    }
    let document: Value = serde_json::from_slice(bytes).map_err(|e| DidDocumentError::Json {
        detail: e.to_string(),
    })?;
    let map = document.as_object().ok_or(DidDocumentError::NotObject)?;
    let id = map.get("id").and_then(Value::as_str);
    if id != Some(expected.as_str()) {
        return Err(DidDocumentError::IdMismatch {
            expected: expected.to_string(),
            found: clip(id.unwrap_or_default(), 256),
        });
    }
    if expected.is_k1() {
        return Err(DidDocumentError::UnsupportedProfile {
            did: expected.to_string(),
        });
    }
    let methods = list(map, "verificationMethod", limits.max_verification_methods)?;
    for field in RELATIONSHIPS {
        list(map, field, limits.max_relationship_entries)?;
    }
    list(map, "service", limits.max_services)?;

    // Every method, declared or embedded in a relationship, with its material.
    let mut index: Vec<(String, &'static str, Material)> = Vec::new();
    let mut add = |entry: &Map<String, Value>, field: String| -> Result<(), DidDocumentError> {
        let id = entry
            .get("id")
            .and_then(Value::as_str)
            .ok_or(DidDocumentError::Malformed {
                field: format!("{field}.id"),
                detail: "missing or not a string",
            })?;
        let id = absolute(expected, id);
        if index.iter().any(|(known, _, _)| *known == id) {
            return Err(DidDocumentError::DuplicateMethod { id: clip(&id, 256) });
        }
        let material = material(entry).map_err(|detail| DidDocumentError::BadKey {
            id: clip(&id, 256),
            detail,
        })?;
        index.push((id, "", material));
        Ok(())
    };
    for (i, entry) in methods.iter().enumerate() {
        let entry = entry.as_object().ok_or(DidDocumentError::Malformed {
            field: format!("verificationMethod[{i}]"),
            detail: "not an object",
        })?;
        add(entry, format!("verificationMethod[{i}]"))?;
    }
    for field in RELATIONSHIPS {
        for (i, entry) in list(map, field, usize::MAX)?.iter().enumerate() {
            match entry {
                Value::String(_) => {}
                Value::Object(embedded) => add(embedded, format!("{field}[{i}]"))?,
                _ => {
                    return Err(DidDocumentError::Malformed {
                        field: format!("{field}[{i}]"),
                        detail: "neither a reference nor an embedded method",
                    })
                }
            }
        }
    }
    let lookup = |id: &str| {
        index
            .iter()
            .find(|(known, _, _)| known == id)
            .map(|(_, _, m)| *m)
    };
    let relationship_ids = |field: &str| -> Vec<String> {
        map.get(field)
            .and_then(Value::as_array)
            .map(|entries| {
                entries
                    .iter()
                    .filter_map(|e| match e {
                        Value::String(s) => Some(absolute(expected, s)),
                        Value::Object(o) => o
                            .get("id")
                            .and_then(Value::as_str)
                            .map(|s| absolute(expected, s)),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    };

    let authentication = relationship_ids("authentication")
        .into_iter()
        .map(|id| {
            let key = match lookup(&id) {
                Some(Material::Ed25519(key)) => Some(key),
                _ => None,
            };
            (id, key)
        })
        .collect();
    let key_agreement = relationship_ids("keyAgreement")
        .iter()
        .filter_map(|id| match lookup(id) {
            Some(Material::X25519(key)) => Some(key),
            _ => None,
        })
        .collect();

    // The proof.
    let last_segment = expected.path().last().copied().unwrap_or_default();
    let e1 = last_segment.strip_prefix("e1_");
    match map.get("proof") {
        None if e1.is_some() => return Err(DidDocumentError::MissingProof),
        None => {}
        Some(proof) => {
            let proof = proof.as_object().ok_or(DidDocumentError::BadProof {
                detail: "not an object",
            })?;
            if proof.get("type").and_then(Value::as_str) != Some(proof::PROOF_TYPE) {
                return Err(DidDocumentError::BadProof {
                    detail: "type is not DataIntegrityProof",
                });
            }
            if proof.get("cryptosuite").and_then(Value::as_str) != Some(proof::CRYPTOSUITE) {
                return Err(DidDocumentError::BadProof {
                    detail: "cryptosuite is not eddsa-jcs-2022",
                });
            }
            let vm = proof
                .get("verificationMethod")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .ok_or(DidDocumentError::BadProof {
                    detail: "verificationMethod missing",
                })?;
            let vm = absolute(expected, vm);
            if !relationship_ids("assertionMethod").contains(&vm) {
                return Err(DidDocumentError::BadProof {
                    detail: "verificationMethod is not listed in assertionMethod",
                });
            }
            let typed_ed25519 = method_type(map, &vm, expected).is_some_and(|t| {
                matches!(
                    t,
                    "Multikey" | "Ed25519VerificationKey2020" | "Ed25519VerificationKey2018"
                )
            });
            let key = match (typed_ed25519, lookup(&vm)) {
                (true, Some(Material::Ed25519(key))) => key,
                _ => {
                    return Err(DidDocumentError::BadProof {
                        detail: "verificationMethod is not an Ed25519 method",
                    })
                }
            };
            proof::verify(map, proof, &key).map_err(|fault| match fault {
                ProofFault::MissingField(_) => DidDocumentError::BadProof {
                    detail: "a required proof field is missing",
                },
                ProofFault::WrongPurpose => DidDocumentError::BadProof {
                    detail: "proofPurpose is not assertionMethod",
                },
                ProofFault::BadProofValue => DidDocumentError::BadProof {
                    detail: "proofValue is not a 64-byte signature",
                },
                ProofFault::BadSignature => DidDocumentError::ProofSignature,
            })?;
            if let Some(expected_fp) = e1 {
                let found = ed25519_thumbprint(&key.to_bytes());
                if found != expected_fp {
                    return Err(DidDocumentError::FingerprintMismatch {
                        expected: clip(expected_fp, 64),
                        found,
                    });
                }
            }
        }
    }

    Ok(VerifiedDocument {
        did: expected.clone(),
        document,
        authentication,
        key_agreement,
    })
}

/// The `type` of method `id`, looked for in `verificationMethod`, then embedded in
/// `authentication` and `assertionMethod` (the SDK's search order).
fn method_type<'a>(map: &'a Map<String, Value>, id: &str, did: &Did) -> Option<&'a str> {
    ["verificationMethod", "authentication", "assertionMethod"]
        .iter()
        .find_map(|field| {
            map.get(*field)?.as_array()?.iter().find_map(|e| {
                let e = e.as_object()?;
                (absolute(did, e.get("id")?.as_str()?) == id)
                    .then(|| e.get("type").and_then(Value::as_str))?
            })
        })
}

/// The array `field` (absent = empty), bounded by `max`.
fn list<'a>(
    map: &'a Map<String, Value>,
    field: &'static str,
    max: usize,
) -> Result<&'a [Value], DidDocumentError> {
    match map.get(field) {
        None => Ok(&[]),
        Some(Value::Array(entries)) if entries.len() > max => Err(DidDocumentError::TooMany {
            field,
            count: entries.len(),
            max,
        }),
        Some(Value::Array(entries)) => Ok(entries),
        Some(_) => Err(DidDocumentError::Malformed {
            field: field.to_owned(),
            detail: "not an array",
        }),
    }
}

fn str_field<'a>(
    entry: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, &'static str> {
    match entry.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err("a public key field is not a string"),
    }
}

fn ed25519_key(bytes: &[u8]) -> Result<VerifyingKey, &'static str> {
    let array: [u8; 32] = bytes
        .try_into()
        .map_err(|_| "Ed25519 key is not 32 bytes")?;
    let key = VerifyingKey::from_bytes(&array).map_err(|_| "Ed25519 key is not a curve point")?;
    if key.is_weak() {
        return Err("Ed25519 key has small order");
    }
    Ok(key)
}

fn okp_jwk(entry: &Map<String, Value>) -> Result<Option<(String, [u8; 32])>, &'static str> {
    let Some(jwk) = entry.get("publicKeyJwk") else {
        return Ok(None);
    };
    let jwk = jwk.as_object().ok_or("publicKeyJwk is not an object")?;
    if jwk.contains_key("d") {
        return Err("publicKeyJwk carries a private key");
    }
    if jwk.get("kty").and_then(Value::as_str) != Some("OKP") {
        return Ok(Some((String::new(), [0; 32])));
    }
    let crv = jwk
        .get("crv")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let x = jwk
        .get("x")
        .and_then(Value::as_str)
        .ok_or("publicKeyJwk has no x")?;
    let x =
        b64url_canonical_32(x).ok_or("publicKeyJwk x is not canonical base64url of 32 bytes")?;
    Ok(Some((crv, x)))
}

/// The key material of one verification method (see [`read_document`] for the forms read).
fn material(entry: &Map<String, Value>) -> Result<Material, &'static str> {
    let kind = entry
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match kind {
        "Multikey" | "Ed25519VerificationKey2018" | "Ed25519VerificationKey2020" => {
            if let Some((crv, x)) = okp_jwk(entry)? {
                if crv != "Ed25519" {
                    return Err("publicKeyJwk is not OKP/Ed25519");
                }
                return Ok(Material::Ed25519(ed25519_key(&x)?));
            }
            if let Some(b58) = str_field(entry, "publicKeyBase58")? {
                return Ok(Material::Ed25519(ed25519_key(
                    &base58_decode(b58).ok_or("publicKeyBase58 is not base58")?,
                )?));
            }
            if let Some(mb) = str_field(entry, "publicKeyMultibase")? {
                let bytes = multibase_z_decode(mb).ok_or("publicKeyMultibase is not z-base58")?;
                return match bytes.len() {
                    34 if bytes[..2] == ED25519_MULTICODEC => {
                        Ok(Material::Ed25519(ed25519_key(&bytes[2..])?))
                    }
                    34 if kind == "Multikey" && bytes[..2] == X25519_MULTICODEC => {
                        Ok(Material::X25519(
                            bytes[2..]
                                .try_into()
                                .map_err(|_| "X25519 key is not 32 bytes")?,
                        ))
                    }
                    _ => Ok(Material::Ed25519(ed25519_key(&bytes)?)),
                };
            }
            Err("no publicKeyJwk, publicKeyBase58 or publicKeyMultibase")
        }
        "X25519KeyAgreementKey2019" | "X25519KeyAgreementKey2020" => {
            let bytes = if let Some(mb) = str_field(entry, "publicKeyMultibase")? {
                multibase_z_decode(mb).ok_or("publicKeyMultibase is not z-base58")?
            } else if let Some(b58) = str_field(entry, "publicKeyBase58")? {
                base58_decode(b58).ok_or("publicKeyBase58 is not base58")?
            } else {
                return Err("no publicKeyMultibase or publicKeyBase58");
            };
            let raw = match bytes.len() {
                34 if bytes[..2] == X25519_MULTICODEC => &bytes[2..],
                _ => &bytes[..],
            };
            let key: [u8; 32] = raw.try_into().map_err(|_| "X25519 key is not 32 bytes")?;
            Ok(Material::X25519(key))
        }
        "JsonWebKey2020" => match okp_jwk(entry)? {
            Some((crv, x)) if crv == "Ed25519" => Ok(Material::Ed25519(ed25519_key(&x)?)),
            Some((crv, x)) if crv == "X25519" => Ok(Material::X25519(x)),
            _ => Ok(Material::Other),
        },
        _ => Ok(Material::Other),
    }
}
