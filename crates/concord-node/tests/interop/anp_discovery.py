"""ANP peers reading a Concord agent's discovery documents with the reference Python SDK
(PyPI `anp` 1.0.7), and an A2A peer reading its agent card with the A2A SDK's types
(PyPI `a2a-sdk`, when installed).

- The SDK's crawler (`anp.anp_crawler.ANPCrawler`, signing each request with a DID it made
  the SDK's way) fetches `/.well-known/agent-descriptions`, follows every item's `@id` and
  the page's `next`, and fetches each `ad.json`; its parser (`ANPDocumentParser`) lists the
  interfaces it finds there.
- Each `ad.json` is read into the SDK's model, `anp.fastanp.models.AgentDescription`
  (pydantic: required fields and types), its `securityDefinitions` into `SecurityDefinition`.
- The agent's DID document (the `did` of its `ad.json`, fetched over http on loopback) is
  checked as the SDK's resolver checks a fetched document: its `id`,
  `validate_did_document_binding` and the proof with `verify_w3c_proof`.
- The agent card is read into `a2a.types.AgentCard` with protobuf's `json_format.Parse`,
  which refuses unknown fields and wrong types.

Usage: anp_discovery.py BASE_URL
Prints one JSON object on its last line: what each reader made of the documents.
"""

import asyncio
import importlib.util
import json
import os
import sys
import tempfile
import urllib.parse
import urllib.request

from anp.anp_crawler import ANPCrawler
from anp.anp_crawler.anp_parser import ANPDocumentParser
from anp.authentication import create_did_wba_document
from anp.authentication import did_wba

import anp


def sdk_models():
    """`anp.fastanp.models`, read from its file: the package `anp.fastanp` imports FastAPI
    (its server side), the models need pydantic only."""
    path = os.path.join(os.path.dirname(anp.__file__), "fastanp", "models.py")
    spec = importlib.util.spec_from_file_location("anp_fastanp_models", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODELS = sdk_models()
AgentDescription = MODELS.AgentDescription
SecurityDefinition = MODELS.SecurityDefinition

MAX_PAGES = 20


def fetch_json(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def document_url(did):
    """The did:wba document URL, over http (the agent is on loopback)."""
    parts = did.split(":", 3)
    host = urllib.parse.unquote(parts[2])
    path = "/" + "/".join(parts[3].split(":")) + "/did.json" if len(parts) > 3 else "/.well-known/did.json"
    return f"http://{host}{path}"


def check_did_document(did):
    document = fetch_json(document_url(did))
    assert document.get("id") == did, (document.get("id"), did)
    binding = did_wba.validate_did_document_binding(document, verify_proof=True)
    proof = document["proof"]
    method = did_wba._find_verification_method(document, proof["verificationMethod"])
    key = did_wba._extract_public_key(method)
    proof_ok = did_wba.verify_w3c_proof(document, key)
    return {"binding": bool(binding), "proof": bool(proof_ok), "service": document.get("service", [])}


async def crawl(base, workdir):
    document, keys = create_did_wba_document(hostname="localhost", path_segments=["agents", "crawler"])
    did_path = os.path.join(workdir, "did.json")
    key_path = os.path.join(workdir, "key-1.pem")
    with open(did_path, "w") as out:
        json.dump(document, out)
    with open(key_path, "wb") as out:
        out.write(keys["key-1"][0])
    crawler = ANPCrawler(did_document_path=did_path, private_key_path=key_path, cache_enabled=False)
    parser = ANPDocumentParser()
    agents = []
    url = base.rstrip("/") + "/.well-known/agent-descriptions"
    pages = 0
    while url and pages < MAX_PAGES:
        pages += 1
        content, _ = await crawler.fetch_text(url)
        page = json.loads(content["content"])
        assert page["@type"] == "CollectionPage", page
        for item in page["items"]:
            assert item["@type"] == "ad:AgentDescription", item
            ad_content, _ = await crawler.fetch_text(item["@id"])
            raw = ad_content["content"]
            ad = AgentDescription.model_validate(json.loads(raw))
            schemes = {name: SecurityDefinition.model_validate(definition.model_dump(by_alias=True)).model_dump(by_alias=True)
                       for name, definition in (ad.securityDefinitions or {}).items()}
            interfaces = parser.parse_document(raw, "application/json", item["@id"])["interfaces"]
            agents.append({
                "name": item["name"],
                "ad": ad.model_dump(by_alias=True, exclude_none=True),
                "securityDefinitions": schemes,
                "interfaces": interfaces,
                "did_document": check_did_document(ad.did),
            })
        url = page.get("next")
    return {"pages": pages, "agents": agents}


def read_card(base):
    try:
        from a2a.types import AgentCard
        from google.protobuf import json_format
    except ImportError as missing:
        return {"skipped": f"a2a-sdk is not installed: {missing}"}
    raw = urllib.request.urlopen(base.rstrip("/") + "/.well-known/agent-card.json", timeout=10).read()
    card = json_format.Parse(raw, AgentCard())
    return {
        "name": card.name,
        "interfaces": [(interface.url, interface.protocol_binding) for interface in card.supported_interfaces],
        "skills": [skill.id for skill in card.skills],
        "streaming": card.capabilities.streaming,
        "schemes": sorted(card.security_schemes.keys()),
    }


def main():
    base = sys.argv[1]
    with tempfile.TemporaryDirectory() as workdir:
        report = asyncio.run(asyncio.wait_for(crawl(base, workdir), 60))
    report["card"] = read_card(base)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
