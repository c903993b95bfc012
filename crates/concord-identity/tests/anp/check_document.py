"""Does the SDK accept a DID document written by Concord?

stdin: {"document": {...}}
stdout: {"binding": bool, "proof": bool, "key1": str|null, "key3": str|null, "key3_raw_b64": str|null}
"""
import base64
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import read_request, reply  # noqa: E402

from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat  # noqa: E402

from anp.authentication.did_wba import validate_did_document_binding  # noqa: E402
from anp.authentication.did_wba import _extract_public_key  # noqa: E402
from anp.authentication.verification_methods import create_verification_method  # noqa: E402
from anp.proof import verify_w3c_proof  # noqa: E402

req = read_request()
doc = req["document"]
binding = validate_did_document_binding(doc, verify_proof=True)
methods = {m["id"]: m for m in doc.get("verificationMethod", [])}
key1 = methods.get(doc["id"] + "#key-1")
key3 = methods.get(doc["id"] + "#key-3")
proof_ok = False
key1_kind = None
key3_kind = None
key3_raw = None
if key1 is not None:
    v1 = create_verification_method(key1)
    key1_kind = type(v1.public_key).__name__
    proof_ok = verify_w3c_proof(doc, _extract_public_key(key1), expected_purpose="assertionMethod")
if key3 is not None:
    v3 = create_verification_method(key3)
    key3_kind = type(v3.public_key).__name__
    key3_raw = base64.b64encode(v3.public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
reply({"binding": bool(binding), "proof": bool(proof_ok), "key1": key1_kind, "key3": key3_kind, "key3_raw_b64": key3_raw})
