"""An identity made by the SDK, and requests it signs.

stdin: {"hostname": str, "port": int|null, "path_segments": [str], "method": str, "url": str,
        "body_b64": str, "domain": str, "created": int, "nonce": str, "timestamp": str}
stdout: {"document": {...}, "x25519_raw_b64": str,
         "http_plain": {headers}, "http_body": {headers}, "legacy": str}
"""
import base64
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import read_request, reply  # noqa: E402

from cryptography.hazmat.primitives.serialization import (  # noqa: E402
    Encoding,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from anp.authentication import create_did_wba_document, generate_auth_header  # noqa: E402
from anp.authentication.http_signatures import generate_http_signature_headers  # noqa: E402

req = read_request()
doc, keys = create_did_wba_document(
    hostname=req["hostname"], port=req.get("port"), path_segments=req["path_segments"]
)
signing = load_pem_private_key(keys["key-1"][0], password=None)
x25519_public = load_pem_public_key(keys["key-3"][1])


def sign(content, fragment):
    assert fragment == "key-1", fragment
    return signing.sign(content)


body = base64.b64decode(req.get("body_b64", ""))
http_plain = generate_http_signature_headers(
    doc, req["url"], req["method"], sign, created=req["created"], nonce=req["nonce"] + "-plain"
)
http_body = generate_http_signature_headers(
    doc, req["url"], req["method"], sign, body=body, created=req["created"], nonce=req["nonce"] + "-body"
)
legacy = generate_auth_header(doc, req["domain"], sign, nonce=req["nonce"] + "-legacy", timestamp=req["timestamp"])
reply({
    "document": doc,
    "x25519_raw_b64": base64.b64encode(x25519_public.public_bytes(Encoding.Raw, PublicFormat.Raw)).decode(),
    "http_plain": http_plain,
    "http_body": http_body,
    "legacy": legacy,
})
