//! A local identity — keys plus its `e1` DID — and the DID document it publishes.

use std::fmt;

use serde_json::{json, Value};

use crate::did::{Did, DidError};
use crate::encoding::{multibase_z, ED25519_MULTICODEC};
use crate::keys::Keys;
use crate::proof;

/// `@context` of an e1 document with its X25519 key, in the SDK's order.
pub const E1_CONTEXT: [&str; 4] = [
    "https://www.w3.org/ns/did/v1",
    "https://w3id.org/security/data-integrity/v2",
    "https://w3id.org/security/multikey/v1",
    "https://w3id.org/security/suites/x25519-2019/v1",
];

/// A service entry of the DID document: `{"id": did#fragment, "type": kind, "serviceEndpoint": endpoint}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// The fragment after `#` (a leading `#` is accepted and dropped), e.g. `ad`.
    pub id_fragment: String,
    /// The service type, e.g. `AgentDescription`.
    pub kind: String,
    /// The endpoint URL.
    pub endpoint: String,
}

/// An agent's identity: its keys and its `did:wba` DID ending in `e1_<fingerprint>`.
pub struct Identity {
    keys: Keys,
    did: Did,
}

impl Identity {
    /// Builds the identity `did:wba:host[%3Aport]:path…:e1_<fingerprint>` (the e1 segment is
    /// always appended, as the SDK's e1 profile does with path segments).
    pub fn new(
        keys: Keys,
        host: &str,
        port: Option<u16>,
        path: &[&str],
    ) -> Result<Identity, DidError> {
        let e1 = format!("e1_{}", keys.fingerprint());
        let mut segments: Vec<&str> = path.to_vec();
        segments.push(&e1);
        let did = Did::from_parts(host, port, &segments)?;
        Ok(Identity { keys, did })
    }

    /// The DID.
    pub fn did(&self) -> &Did {
        &self.did
    }

    /// The keys.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The authentication key id, `did#key-1`.
    pub fn keyid(&self) -> String {
        format!("{}#key-1", self.did)
    }

    /// The DID document, exactly in the SDK's e1 shape: `@context` [did/v1, data-integrity/v2,
    /// multikey/v1, x25519-2019/v1]; `verificationMethod` [`#key-1` Multikey
    /// `z`+base58(0xed01 ‖ key), `#key-3` X25519KeyAgreementKey2019 `z`+base58(raw 32 bytes)];
    /// `authentication` and `assertionMethod` [`#key-1`]; `keyAgreement` [`#key-3`];
    /// `service` when given; and a `DataIntegrityProof` (eddsa-jcs-2022, proofPurpose
    /// assertionMethod, proofValue base64url). `created` is `YYYY-MM-DDTHH:MM:SSZ`.
    pub fn document(&self, created: &str, services: &[Service]) -> Value {
        let did = self.did.as_str();
        let key1 = format!("{did}#key-1");
        let key3 = format!("{did}#key-3");
        let mut ed = Vec::with_capacity(34);
        ed.extend_from_slice(&ED25519_MULTICODEC);
        ed.extend_from_slice(&self.keys.signing_public());
        let mut document = json!({
            "@context": E1_CONTEXT,
            "id": did,
            "verificationMethod": [
                {"id": key1, "type": "Multikey", "controller": did, "publicKeyMultibase": multibase_z(&ed)},
                {"id": key3, "type": "X25519KeyAgreementKey2019", "controller": did,
                 "publicKeyMultibase": multibase_z(&self.keys.agreement_public())},
            ],
            "authentication": [key1],
            "assertionMethod": [key1],
            "keyAgreement": [key3],
        });
        if !services.is_empty() {
            let entries: Vec<Value> = services
                .iter()
                .map(|s| {
                    let frag = s.id_fragment.strip_prefix('#').unwrap_or(&s.id_fragment);
                    json!({"id": format!("{did}#{frag}"), "type": s.kind, "serviceEndpoint": s.endpoint})
                })
                .collect();
            if let Value::Object(map) = &mut document {
                map.insert("service".into(), Value::Array(entries));
            }
        }
        let proof = proof::create(&document, &key1, created, |m| self.keys.sign(m));
        if let Value::Object(map) = &mut document {
            map.insert("proof".into(), proof);
        }
        document
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("did", &self.did.as_str())
            .finish_non_exhaustive()
    }
}
