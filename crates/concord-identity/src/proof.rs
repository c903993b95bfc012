//! W3C Data Integrity proof (`DataIntegrityProof`, `eddsa-jcs-2022`) as the SDK's
//! `anp.proof` writes and checks it: the signature covers
//! `sha256(JCS(proof options)) || sha256(JCS(document without proof))`.

use serde_json::{Map, Value};

use crate::encoding::{b64url, b64url_decode, jcs, multibase_z, multibase_z_decode, sha256};

/// `DataIntegrityProof`.
pub(crate) const PROOF_TYPE: &str = "DataIntegrityProof";
/// `eddsa-jcs-2022`.
pub(crate) const CRYPTOSUITE: &str = "eddsa-jcs-2022";

/// The bytes the proof signs.
pub(crate) fn signing_input(document_without_proof: &Value, options: &Value) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&sha256(&jcs(options)?));
    out.extend_from_slice(&sha256(&jcs(document_without_proof)?));
    Some(out)
}

/// Why a proof does not verify (internal; the document reader maps it to its error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProofFault {
    MissingField(&'static str),
    WrongPurpose,
    BadProofValue,
    BadSignature,
}

/// Verifies the proof of `document` with `key`, as `verify_w3c_proof(expected_purpose =
/// "assertionMethod")`: all of type, proofValue, proofPurpose, verificationMethod, created
/// present; the options are the proof without `proofValue`; a `z`-base58 64-byte proofValue
/// (the current eddsa-jcs-2022 form) also puts the document's `@context` into the options.
pub(crate) fn verify(
    document: &Map<String, Value>,
    proof: &Map<String, Value>,
    key: &ed25519_dalek::VerifyingKey,
) -> Result<(), ProofFault> {
    for field in [
        "type",
        "proofValue",
        "proofPurpose",
        "verificationMethod",
        "created",
    ] {
        match proof.get(field) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => {
                return Err(ProofFault::MissingField(field))
            }
            Some(Value::String(s)) if s.is_empty() => return Err(ProofFault::MissingField(field)),
            _ => {}
        }
    }
    if proof.get("proofPurpose").and_then(Value::as_str) != Some("assertionMethod") {
        return Err(ProofFault::WrongPurpose);
    }
    let proof_value = proof
        .get("proofValue")
        .and_then(Value::as_str)
        .ok_or(ProofFault::BadProofValue)?;
    let mut options: Map<String, Value> = proof
        .iter()
        .filter(|(k, _)| k.as_str() != "proofValue")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let without: Map<String, Value> = document
        .iter()
        .filter(|(k, _)| k.as_str() != "proof")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut signature: Option<Vec<u8>> = None;
    if proof_value.starts_with('z') {
        if let Some(decoded) = multibase_z_decode(proof_value) {
            if decoded.len() == 64 && multibase_z(&decoded) == proof_value {
                if let Some(context) = without.get("@context") {
                    options.insert("@context".into(), context.clone());
                }
                signature = Some(decoded);
            }
        }
    }
    let signature = match signature {
        Some(s) => s,
        None => b64url_decode(proof_value).ok_or(ProofFault::BadProofValue)?,
    };
    let signature: [u8; 64] = signature
        .as_slice()
        .try_into()
        .map_err(|_| ProofFault::BadProofValue)?;
    let input = signing_input(&Value::Object(without), &Value::Object(options))
        .ok_or(ProofFault::BadProofValue)?;
    key.verify_strict(&input, &ed25519_dalek::Signature::from_bytes(&signature))
        .map_err(|_| ProofFault::BadSignature)
}

/// Builds the proof object for `document` (which has no `proof`), signed by `sign`.
pub(crate) fn create(
    document: &Value,
    verification_method: &str,
    created: &str,
    sign: impl Fn(&[u8]) -> [u8; 64],
) -> Value {
    let mut proof = Map::new();
    proof.insert("type".into(), PROOF_TYPE.into());
    proof.insert("created".into(), created.into());
    proof.insert("verificationMethod".into(), verification_method.into());
    proof.insert("proofPurpose".into(), "assertionMethod".into());
    proof.insert("cryptosuite".into(), CRYPTOSUITE.into());
    let input = signing_input(document, &Value::Object(proof.clone())).unwrap_or_default();
    proof.insert("proofValue".into(), b64url(&sign(&input)).into());
    Value::Object(proof)
}
