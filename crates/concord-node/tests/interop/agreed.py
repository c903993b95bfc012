"""An agreed protocol as a peer reading its markdown sees it: the JSON Schemas of its
request and response messages, and Draft 2020-12 validation of messages against them.

The schemas are the first ```json block under a heading that names requests and the first
under a heading that names responses (`## Request Message Format`, `## Response Message
Format`, as the reference SDK's drafting prompt lays a protocol out); blocks under other
headings (examples, say) and blocks that are not schemas are skipped. Shared by
`anp_requester.py` and `anp_provider.py`.
"""

import json
import re

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([A-Za-z0-9_-]*)")
SCHEMA_KEYWORDS = ("$schema", "properties", "type", "$defs", "$ref", "allOf", "oneOf", "anyOf")


def json_blocks(markdown: str) -> list:
    """(heading, text) of every fenced block labelled json, in order: the heading is the
    nearest one above the block."""
    blocks = []
    heading = ""
    fence = None
    for line in markdown.splitlines():
        if fence is not None:
            marker, label, lines = fence
            if line.strip().startswith(marker) and line.strip().strip(marker[0]) == "":
                if label == "json":
                    blocks.append((heading, "\n".join(lines)))
                fence = None
            else:
                lines.append(line)
            continue
        opening = FENCE.match(line)
        if opening:
            fence = (opening.group(1), opening.group(2).lower(), [])
            continue
        found = HEADING.match(line)
        if found:
            heading = found.group(2)
    return blocks


def schemas(markdown: str) -> dict:
    """{"request": schema or None, "response": schema or None}."""
    found = {"request": None, "response": None}
    for heading, text in json_blocks(markdown):
        title = heading.lower()
        side = "request" if "request" in title else "response" if "response" in title else None
        if side is None or found[side] is not None:
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and any(keyword in value for keyword in SCHEMA_KEYWORDS):
            found[side] = value
    return found


def message_id(message) -> object:
    """The value of a message's id field (`messageId`, `message_id`, …), if it has one."""
    if not isinstance(message, dict):
        return None
    for name, value in message.items():
        if name.replace("_", "").replace("-", "").lower() == "messageid":
            return value
    return None


class Checker:
    """Validates messages against an agreed protocol's schemas, collecting violations."""

    def __init__(self, markdown: str, who: str):
        self.who = who
        self.violations = []
        self.validators = {}
        for side, schema in schemas(markdown).items():
            if schema is None:
                self.violations.append(f"{who}: the agreed protocol has no {side} JSON Schema")
                continue
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as error:
                self.violations.append(f"{who}: the {side} schema is not a valid Draft 2020-12 "
                                       f"schema: {error.message}")
                continue
            self.validators[side] = Draft202012Validator(
                schema, format_checker=Draft202012Validator.FORMAT_CHECKER)

    def check(self, side: str, message, label: str) -> list:
        """Validates `message` as a `side` ("request" or "response") message; returns the
        violations found (also kept in `self.violations`)."""
        validator = self.validators.get(side)
        if validator is None:
            return []
        found = []
        for error in sorted(validator.iter_errors(message), key=lambda e: list(e.absolute_path)):
            at = "/" + "/".join(str(part) for part in error.absolute_path)
            rule = "/".join(str(part) for part in error.absolute_schema_path)
            found.append(f"{self.who}: {label} {json.dumps(message)} breaks the {side} schema "
                         f"at {at}: {error.message} (schema {rule})")
        self.violations.extend(found)
        return found

    def check_echo(self, request, response, label: str) -> list:
        """A response must carry its request's message id."""
        found = []
        if message_id(request) != message_id(response):
            found.append(f"{self.who}: {label}: the response's message id "
                         f"{message_id(response)!r} is not the request's {message_id(request)!r}")
        self.violations.extend(found)
        return found
