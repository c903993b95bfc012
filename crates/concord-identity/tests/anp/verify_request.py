"""Does the SDK accept requests signed by Concord?

stdin: {"document": {...}, "checks": [
    {"kind": "http", "method": str, "url": str, "headers": {...}, "body_b64": str},
    {"kind": "legacy", "header": str, "domain": str}]}
stdout: {"results": [{"ok": bool, "message": str}, ...]}
"""
import base64
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import read_request, reply  # noqa: E402

from anp.authentication import verify_auth_header_signature  # noqa: E402
from anp.authentication.http_signatures import verify_http_message_signature  # noqa: E402

req = read_request()
doc = req["document"]
results = []
for check in req["checks"]:
    if check["kind"] == "http":
        ok, message, _ = verify_http_message_signature(
            did_document=doc,
            request_method=check["method"],
            request_url=check["url"],
            headers=check["headers"],
            body=base64.b64decode(check.get("body_b64", "")),
        )
    else:
        ok, message = verify_auth_header_signature(check["header"], doc, check["domain"])
    results.append({"ok": bool(ok), "message": message})
reply({"results": results})
