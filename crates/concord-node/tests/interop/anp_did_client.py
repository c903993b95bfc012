"""A caller built on the reference Python SDK (PyPI `anp` 1.0.7, `anp.authentication`)
opening a Concord session with DID authentication, as an ANP agent would.

It creates its own DID the SDK's way (`create_did_wba_document`, the e1 profile, on
`localhost:PORT` with the path `agents/sdk`), serves that document over HTTP on PORT (the
Concord node resolves loopback DIDs over http:// in its test mode), signs the WebSocket
upgrade with the SDK (`generate_http_signature_headers`, or the legacy `generate_auth_header`),
says a sourceHello and reads the destinationHello. The session is plain: the SDK's
meta-protocol speaks no Noise, which the node's default policy allows.

Then it replays the very same signed headers: the node must refuse them with 401 and ANP's
`WWW-Authenticate` challenge (`error="invalid_nonce"`).

Usage: anp_did_client.py ENDPOINT FORM        (FORM: http-signatures | didwba)
Prints one JSON object on its last line: the DID, the destinationHello, and the replay's
status and challenge.
"""

import asyncio
import http.server
import json
import socket
import sys
import threading
from urllib.parse import urlparse

import websockets
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from anp.authentication import create_did_wba_document, generate_auth_header
from anp.authentication.http_signatures import generate_http_signature_headers

TIMEOUT = 20


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve_document(port, path, document):
    body = json.dumps(document).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path != path:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/did+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def signed_headers(form, document, keys, endpoint):
    private_key = load_pem_private_key(keys["key-1"][0], password=None)

    def sign(content, fragment):
        assert fragment == "key-1", fragment
        return private_key.sign(content)

    if form == "didwba":
        host = urlparse(endpoint).hostname
        return {"Authorization": generate_auth_header(document, host, sign)}
    return generate_http_signature_headers(
        did_document=document,
        request_url=endpoint,
        request_method="GET",
        sign_callback=sign,
    )


async def main(endpoint, form):
    port = free_port()
    document, keys = create_did_wba_document(
        hostname="localhost", port=port, path_segments=["agents", "sdk"]
    )
    did = document["id"]
    path = "/" + "/".join(did.split(":")[3:]) + "/did.json"
    server = serve_document(port, path, document)
    headers = signed_headers(form, document, keys, endpoint)
    hello = {
        "version": "1.0",
        "type": "sourceHello",
        "messageId": "sdk-did-hello-1",
        "metaProtocol": {"version": "1.0", "supportedCapabilities": []},
    }
    async with websockets.connect(
        endpoint, additional_headers=headers, open_timeout=TIMEOUT
    ) as connection:
        await connection.send(json.dumps(hello))
        destination = json.loads(await asyncio.wait_for(connection.recv(), TIMEOUT))
    replay = {"status": None, "challenge": None}
    try:
        async with websockets.connect(
            endpoint, additional_headers=headers, open_timeout=TIMEOUT
        ):
            replay["status"] = 101
    except websockets.exceptions.InvalidStatus as refused:
        replay["status"] = refused.response.status_code
        replay["challenge"] = refused.response.headers.get("WWW-Authenticate")
    server.shutdown()
    print(json.dumps({"did": did, "destination": destination, "replay": replay}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
