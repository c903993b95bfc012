"""A requester built on the reference Python SDK (PyPI `anp` 1.0.7, `anp.meta_protocol`)
calling a Concord provider over its WebSocket endpoint.

The SDK is transport-free (a send callback, and `handle_meta_data` for every frame received)
and has no hello: this script says the sourceHello (no optional capabilities, as the SDK
supports none) and carries the frames. Everything in between is the SDK's own: its
LLM-drafted candidate (`negotiate_protocol`), its handling of the provider's answer, its
`accepted` echo, and its `codeGeneration` notice. The application request is written by hand
from the agreed protocol, as the SDK's generated code would send it.

Usage: anp_requester.py ENDPOINT LLM_BASE_URL REQUEST_JSON
Prints one JSON object on its last line: what was received, and the response.
"""

import asyncio
import json
import logging
import sys

import websockets
from anp.meta_protocol import MetaProtocol
from anp.utils.llm.base_llm import AzureLLM
from openai import AsyncOpenAI

META, APPLICATION = 0, 1


async def main(endpoint: str, llm_base_url: str, request: dict) -> dict:
    async with websockets.connect(endpoint) as socket:
        hello = {
            "version": "1.0",
            "type": "sourceHello",
            "messageId": "anppython0000001",
            "metaProtocol": {"version": "1.0"},
        }
        await socket.send(json.dumps(hello))
        destination_hello = json.loads(await socket.recv())

        async def send(data: bytes) -> None:
            await socket.send(data)

        llm = AzureLLM(AsyncOpenAI(base_url=llm_base_url, api_key="scripted"), "scripted")
        meta = MetaProtocol(send_callback=send, llm=llm)
        received = []
        responses = asyncio.Queue()

        async def read() -> None:
            async for frame in socket:
                if isinstance(frame, str):
                    continue
                kind = frame[0] >> 6
                if kind == META:
                    received.append(json.loads(frame[1:]))
                    meta.handle_meta_data(frame)
                elif kind == APPLICATION:
                    await responses.put(json.loads(frame[1:]))

        reader = asyncio.create_task(read())
        # Without a code path the SDK reports (False, "") even when the negotiation succeeded:
        # what the provider answered is read from the frames instead.
        await meta.negotiate_protocol(
            requirement="Get product information by product id.",
            input_description="A product id, such as P2.",
            output_description="The product's name, description, price and currency.",
        )
        await meta.notify_code_generation()
        code_generated = await meta.wait_for_code_generation()
        await socket.send(bytes([APPLICATION << 6]) + json.dumps(request).encode())
        response = await asyncio.wait_for(responses.get(), timeout=10)
        reader.cancel()
        return {
            "destinationHello": destination_hello,
            "received": received,
            "codeGenerated": code_generated,
            "response": response,
        }


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    endpoint, llm_base_url, request = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    print(json.dumps(asyncio.run(main(endpoint, llm_base_url, request))))
