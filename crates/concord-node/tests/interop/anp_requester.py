"""A requester built on the reference Python SDK (PyPI `anp` 1.0.7, `anp.meta_protocol`)
calling a Concord provider over its WebSocket endpoint.

The SDK is transport-free (a send callback, and `handle_meta_data` for every frame received)
and has no hello: this script says the sourceHello (no optional capabilities, as the SDK
supports none) and carries the frames. Everything in between is the SDK's own: its
LLM-drafted candidate (`negotiate_protocol`, with the test's scripted LLM answering the
drafting call), its handling of the provider's answer (its `accepted` echo after an
acceptance, its `rejected` echo after a rejection), and its `codeGeneration` notice.

Once the protocol is agreed, the application requests (given, written by hand per the
agreed protocol, as the SDK's generated code would write them) are sent one at a time.
Every request sent and every response received is validated with `jsonschema` (Draft
2020-12) against the schemas in the agreed markdown (`agreed.py`); every violation is
reported. After a rejection no request is sent, and the script waits for the provider to
close the connection.

Usage: anp_requester.py ENDPOINT LLM_BASE_URL JOB_JSON
JOB_JSON: {"requirement", "inputDescription", "outputDescription": str, "requests": [object]}
Prints one JSON object on its last line: the destinationHello, the meta frames sent and
received, the agreed protocol, the exchanges, the violations and how the connection closed.
"""

import asyncio
import json
import logging
import sys

import websockets
from anp.meta_protocol import MetaProtocol
from anp.utils.llm.base_llm import AzureLLM
from openai import AsyncOpenAI

from agreed import Checker

META, APPLICATION = 0, 1
# Every wait is bounded: the SDK's own (60 s by default) and ours.
STEP_TIMEOUT = 20
RESPONSE_TIMEOUT = 10
CLOSE_TIMEOUT = 10


async def main(endpoint: str, llm_base_url: str, job: dict) -> dict:
    report = {
        "sent": [],
        "received": [],
        "sendErrors": [],
        "negotiated": False,
        "agreed": None,
        "codeGenerated": None,
        "exchanges": [],
        "violations": [],
        "closed": None,
    }
    async with websockets.connect(endpoint) as socket:
        hello = {
            "version": "1.0",
            "type": "sourceHello",
            "messageId": "anppython0000001",
            "metaProtocol": {"version": "1.0"},
        }
        await socket.send(json.dumps(hello))
        report["destinationHello"] = json.loads(
            await asyncio.wait_for(socket.recv(), STEP_TIMEOUT))

        async def send(data: bytes) -> None:
            if data[0] >> 6 == META:
                report["sent"].append(json.loads(data[1:]))
            try:
                await socket.send(data)
            except websockets.ConnectionClosed as error:
                # The SDK sends its echo of a rejection after the provider may have closed:
                # recorded, not raised into the SDK.
                report["sendErrors"].append(f"{json.loads(data[1:]).get('action')}: {error}")

        llm = AzureLLM(AsyncOpenAI(base_url=llm_base_url, api_key="scripted"), "scripted")
        meta = MetaProtocol(send_callback=send, llm=llm)
        meta.negotiation_timeout_seconds = STEP_TIMEOUT
        meta.code_generation_timeout_seconds = STEP_TIMEOUT
        responses = asyncio.Queue()

        async def read() -> None:
            try:
                async for frame in socket:
                    if isinstance(frame, str):
                        continue
                    kind = frame[0] >> 6
                    if kind == META:
                        report["received"].append(json.loads(frame[1:]))
                        meta.handle_meta_data(frame)
                    elif kind == APPLICATION:
                        await responses.put(json.loads(frame[1:]))
            except websockets.ConnectionClosed:
                pass
            report["closed"] = {"code": socket.close_code, "reason": socket.close_reason}

        reader = asyncio.create_task(read())
        # Without a code path the SDK reports (False, "") even when the negotiation succeeded:
        # what the provider answered is read from the frames instead.
        await asyncio.wait_for(meta.negotiate_protocol(
            requirement=job["requirement"],
            input_description=job["inputDescription"],
            output_description=job["outputDescription"],
        ), STEP_TIMEOUT + 5)
        answers = [m for m in report["received"] if m.get("action") == "protocolNegotiation"]
        if answers and answers[-1].get("status") == "accepted":
            report["negotiated"] = True
            draft = next(m for m in report["sent"] if m.get("action") == "protocolNegotiation")
            agreed = answers[-1].get("candidateProtocols") or draft["candidateProtocols"]
            report["agreed"] = agreed
            checker = Checker(agreed, "requester")
            await meta.notify_code_generation()
            report["codeGenerated"] = await asyncio.wait_for(
                meta.wait_for_code_generation(), STEP_TIMEOUT + 5)
            for number, request in enumerate(job["requests"], 1):
                label = f"request {number}"
                checker.check("request", request, label)
                await socket.send(bytes([APPLICATION << 6]) + json.dumps(request).encode())
                response = await asyncio.wait_for(responses.get(), RESPONSE_TIMEOUT)
                checker.check("response", response, f"the response to {label}")
                checker.check_echo(request, response, label)
                report["exchanges"].append({"request": request, "response": response})
            report["violations"] = checker.violations
        else:
            # Rejected (or no answer): the provider ends the session; wait for its close.
            await asyncio.wait_for(reader, CLOSE_TIMEOUT)
        reader.cancel()
    return report


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    endpoint, llm_base_url, job = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    print(json.dumps(asyncio.run(main(endpoint, llm_base_url, job))))
