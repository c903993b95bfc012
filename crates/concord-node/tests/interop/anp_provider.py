"""A provider built on the reference Python SDK (PyPI `anp` 1.0.7, `anp.meta_protocol`)
that a Concord requester discovers, negotiates with and calls, for three actions
(`getProductInfo`, `getWeather`, `convertCurrency`).

It serves DESCRIPTION_FILE at `/.well-known/wot` and the meta-protocol WebSocket at
`/concord` (aiohttp, one of the SDK's own dependencies), on 127.0.0.1 and a free port. The
description names the placeholder host `anp-provider.invalid`, replaced here by the real
address. The SDK has no hello: this script answers the sourceHello (no optional
capabilities, as the SDK supports none). Everything in between is the SDK's own:
`wait_remote_negotiation` judges the requester's candidate with its LLM (the test's scripted
server answers, with a counter-proposal written the SDK's way), then
`notify_code_generation`/`wait_for_code_generation`.

The protocol agreed in a session must be one of the counter-proposals in CANDIDATES_DIR
(`provider-*.md`): application requests are answered by hand per that protocol, as the
SDK's generated code would. Every request received and every response sent is validated
with `jsonschema` (Draft 2020-12) against the schemas in the agreed markdown (`agreed.py`).

Usage: anp_provider.py DESCRIPTION_FILE LLM_BASE_URL CANDIDATES_DIR
Prints `listening <base URL>` once serving, then one JSON object per line:
`{"event": "agreed", "candidate", "sent", "received", "codeGenerated", "violations"}` once a
session's protocol is agreed and both sides said `generated`, and
`{"event": "exchange", "candidate", "request", "response", "violations"}` per request
(printed before the response is sent). On stderr, what the SDK logs.
"""

import asyncio
import json
import logging
import pathlib
import socket
import sys

from aiohttp import WSMsgType, web
from anp.meta_protocol import MetaProtocol
from anp.utils.llm.base_llm import AzureLLM
from openai import AsyncOpenAI

from agreed import Checker

META, APPLICATION = 0, 1
PLACEHOLDER = "anp-provider.invalid"
STEP_TIMEOUT = 20

PRODUCTS = {"P2": ("Mouse", "A quiet wireless mouse.", 19.5, "EUR")}
WEATHER = {"Berlin": (18.5, "partly cloudy", 62)}
RATES = {("EUR", "USD"): 1.25}


def answer_product_snake_case(request: dict) -> dict:
    """`provider-product-info-snake-case.md`."""
    response = {"message_type": "get_product_info", "message_id": request.get("message_id", "")}
    found = PRODUCTS.get(request.get("product_id"))
    if found is None:
        message = f"no product {request.get('product_id')}"
        return {**response, "code": 404, "error": {"code": 404, "message": message}}
    name, description, price, currency = found
    return {**response, "code": 200, "data": {
        "product_id": request["product_id"],
        "product_name": name,
        "product_description": description,
        "price": price,
        "currency": currency,
    }}


def answer_weather_params(request: dict) -> dict:
    """`provider-weather-params-defs.md`."""
    response = {"messageType": "getWeather", "messageId": request.get("messageId", "")}
    city = (request.get("params") or {}).get("city")
    found = WEATHER.get(city)
    if found is None:
        return {**response, "code": 404, "error": {"message": f"no weather for {city}"}}
    temperature, conditions, humidity = found
    return {**response, "code": 200, "data": {
        "city": city,
        "temperatureCelsius": temperature,
        "conditions": conditions,
        "humidityPercent": humidity,
    }}


def answer_currency_flat(request: dict) -> dict:
    """`provider-currency-flat-error-string.md`."""
    response = {"messageType": "convertCurrency", "messageId": request.get("messageId", "")}
    pair = (request.get("fromCurrency"), request.get("toCurrency"))
    rate = RATES.get(pair)
    if rate is None:
        return {**response, "code": 404, "error": f"no rate from {pair[0]} to {pair[1]}"}
    return {**response, "code": 200, "amount": request["amount"], "fromCurrency": pair[0],
            "toCurrency": pair[1], "rate": rate, "convertedAmount": request["amount"] * rate}


ANSWERS = {
    "provider-product-info-snake-case.md": answer_product_snake_case,
    "provider-weather-params-defs.md": answer_weather_params,
    "provider-currency-flat-error-string.md": answer_currency_flat,
}


def emit(event: dict) -> None:
    print(json.dumps(event), flush=True)


def app(description: str, llm_base_url: str, candidates: dict) -> web.Application:
    async def serve_description(_request: web.Request) -> web.Response:
        return web.Response(text=description, content_type="application/td+json")

    async def session(request: web.Request) -> web.WebSocketResponse:
        peer = web.WebSocketResponse()
        await peer.prepare(request)
        source_hello = json.loads((await peer.receive(timeout=STEP_TIMEOUT)).data)
        assert source_hello["type"] == "sourceHello", source_hello
        await peer.send_str(json.dumps({
            "version": "1.0",
            "type": "destinationHello",
            "messageId": "anpprovider00001",
            "metaProtocol": {"version": "1.0"},
        }))
        sent, received = [], []
        state = {"candidate": None, "checker": None}

        async def send(data: bytes) -> None:
            if data[0] >> 6 == META:
                sent.append(json.loads(data[1:]))
            await peer.send_bytes(data)

        llm = AzureLLM(AsyncOpenAI(base_url=llm_base_url, api_key="scripted"), "scripted")
        meta = MetaProtocol(send_callback=send, llm=llm)
        meta.negotiation_timeout_seconds = STEP_TIMEOUT
        meta.code_generation_timeout_seconds = STEP_TIMEOUT

        async def answer(message: dict) -> dict:
            checker = state["checker"]
            if checker is None:
                emit({"event": "exchange", "candidate": None, "request": message,
                      "response": None, "violations": ["provider: a request before agreement"]})
                return {}
            before = len(checker.violations)
            checker.check("request", message, "a request")
            response = ANSWERS[state["candidate"]](message)
            checker.check("response", response, "our response")
            checker.check_echo(message, response, "our response")
            emit({"event": "exchange", "candidate": state["candidate"], "request": message,
                  "response": response, "violations": checker.violations[before:]})
            return response

        async def read() -> None:
            async for message in peer:
                if message.type != WSMsgType.BINARY:
                    continue
                frame = message.data
                if frame[0] >> 6 == META:
                    received.append(json.loads(frame[1:]))
                    meta.handle_meta_data(frame)
                elif frame[0] >> 6 == APPLICATION:
                    response = await answer(json.loads(frame[1:]))
                    await peer.send_bytes(bytes([APPLICATION << 6]) + json.dumps(response).encode())

        reader = asyncio.create_task(read())
        # Without a code path the SDK reports (False, "") even when it accepted: the agreed
        # text is the one its own `accepted` carries.
        await asyncio.wait_for(meta.wait_remote_negotiation(), STEP_TIMEOUT + 5)
        accepted = [m for m in sent if m.get("action") == "protocolNegotiation"
                    and m.get("status") == "accepted"]
        agreed = accepted[-1].get("candidateProtocols", "") if accepted else ""
        state["candidate"] = candidates.get(agreed)
        violations = []
        if state["candidate"] is None:
            violations.append("provider: the agreed protocol is none of our counter-proposals")
            await peer.close()
        else:
            state["checker"] = Checker(agreed, "provider")
            violations = list(state["checker"].violations)
            await meta.notify_code_generation()
        generated = state["candidate"] is not None and await asyncio.wait_for(
            meta.wait_for_code_generation(), STEP_TIMEOUT + 5)
        emit({"event": "agreed", "candidate": state["candidate"], "sent": sent,
              "received": list(received), "codeGenerated": generated, "violations": violations})
        await reader
        return peer

    application = web.Application()
    application.router.add_get("/.well-known/wot", serve_description)
    application.router.add_get("/concord", session)
    return application


async def main(description_file: str, llm_base_url: str, candidates_dir: str) -> None:
    candidates = {
        path.read_text(encoding="utf-8"): path.name
        for path in pathlib.Path(candidates_dir).glob("provider-*.md")
    }
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    base = "127.0.0.1:%d" % listener.getsockname()[1]
    description = open(description_file, encoding="utf-8").read().replace(PLACEHOLDER, base)
    runner = web.AppRunner(app(description, llm_base_url, candidates))
    await runner.setup()
    await web.SockSite(runner, listener).start()
    print(f"listening http://{base}/", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
