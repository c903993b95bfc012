"""Shared helpers for the anp interop scripts: read one JSON object from stdin, write one to stdout."""
import json
import sys


def read_request():
    return json.loads(sys.stdin.read())


def reply(obj):
    sys.stdout.write(json.dumps(obj))
    sys.stdout.flush()
