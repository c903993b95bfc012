"""A provider built on the reference Python SDK (PyPI `anp` 1.0.7, `anp.meta_protocol`)
that a Concord requester discovers, negotiates with and calls.

It serves DESCRIPTION_FILE at `/.well-known/wot` and the meta-protocol WebSocket at
`/concord` (aiohttp, one of the SDK's own dependencies), on 127.0.0.1 and a free port. The
description names the placeholder host `anp-provider.invalid`, replaced here by the real
address. The SDK has no hello: this script answers the sourceHello (no optional
capabilities, as the SDK supports none). Everything in between is the SDK's own:
`wait_remote_negotiation` judges the requester's candidate with its LLM (the test's scripted
server answers), then `notify_code_generation`/`wait_for_code_generation`. Application
requests are answered by hand per the agreed protocol, as the SDK's generated code would.

Usage: anp_provider.py DESCRIPTION_FILE LLM_BASE_URL
Prints `listening <base URL>` once serving; on stderr, what the SDK logs.
"""

import asyncio
import json
import logging
import socket
import sys

from aiohttp import WSMsgType, web
from anp.meta_protocol import MetaProtocol
from anp.utils.llm.base_llm import AzureLLM
from openai import AsyncOpenAI

META, APPLICATION = 0, 1
PLACEHOLDER = "anp-provider.invalid"
PRODUCTS = {"P2": ("Mouse", "A quiet wireless mouse.", 19.5)}


def answer(request: dict) -> dict:
    found = PRODUCTS.get(request.get("productId"))
    if found is None:
        return {
            "messageId": request.get("messageId"),
            "type": "RESPONSE",
            "status": {"code": 404, "message": "no such product"},
            "productInfo": None,
        }
    name, description, price = found
    return {
        "messageId": request.get("messageId"),
        "type": "RESPONSE",
        "status": {"code": 200, "message": "OK"},
        "productInfo": {
            "productId": request["productId"],
            "productName": name,
            "productDescription": description,
            "price": price,
            "currency": "EUR",
        },
    }


def app(description: str, llm_base_url: str) -> web.Application:
    async def serve_description(_request: web.Request) -> web.Response:
        return web.Response(text=description, content_type="application/td+json")

    async def session(request: web.Request) -> web.WebSocketResponse:
        peer = web.WebSocketResponse()
        await peer.prepare(request)
        source_hello = json.loads((await peer.receive()).data)
        assert source_hello["type"] == "sourceHello", source_hello
        await peer.send_str(json.dumps({
            "version": "1.0",
            "type": "destinationHello",
            "messageId": "anpprovider00001",
            "metaProtocol": {"version": "1.0"},
        }))

        async def send(data: bytes) -> None:
            await peer.send_bytes(data)

        llm = AzureLLM(AsyncOpenAI(base_url=llm_base_url, api_key="scripted"), "scripted")
        meta = MetaProtocol(send_callback=send, llm=llm)

        async def read() -> None:
            async for message in peer:
                if message.type != WSMsgType.BINARY:
                    continue
                frame = message.data
                if frame[0] >> 6 == META:
                    meta.handle_meta_data(frame)
                elif frame[0] >> 6 == APPLICATION:
                    response = answer(json.loads(frame[1:]))
                    await peer.send_bytes(bytes([APPLICATION << 6]) + json.dumps(response).encode())

        reader = asyncio.create_task(read())
        # Without a code path the SDK reports (False, "") even when it accepted.
        await meta.wait_remote_negotiation()
        await meta.notify_code_generation()
        await meta.wait_for_code_generation()
        await reader
        return peer

    application = web.Application()
    application.router.add_get("/.well-known/wot", serve_description)
    application.router.add_get("/concord", session)
    return application


async def main(description_file: str, llm_base_url: str) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    base = "127.0.0.1:%d" % listener.getsockname()[1]
    description = open(description_file, encoding="utf-8").read().replace(PLACEHOLDER, base)
    runner = web.AppRunner(app(description, llm_base_url))
    await runner.setup()
    await web.SockSite(runner, listener).start()
    print(f"listening http://{base}/", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(sys.argv[1], sys.argv[2]))
