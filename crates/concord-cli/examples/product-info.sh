#!/bin/sh
# The getProductInfo backend of product-agent.toml: one call per run, the input JSON
# ({"productId": "..."}) on stdin, the output JSON on stdout. Plain POSIX sh and sed.
#
# An unknown product is an application error: a JSON object whose only member is
# `error`, {"error": {"code": 404, "message": "..."}}, printed on stdout (the exit status
# may be 0 or not). The caller gets that code and message. Anything written to stderr goes
# to the agent's log only, never to the caller.
input=$(cat)
id=$(printf '%s' "$input" | sed -n 's/.*"productId"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')
case "$id" in
  P12345)
    printf '%s\n' '{"productId": "P12345", "productName": "Laptop", "productDescription": "A fast 14-inch laptop.", "price": 1299.99, "currency": "USD"}' ;;
  P2)
    printf '%s\n' '{"productId": "P2", "productName": "Mouse", "productDescription": "A quiet wireless mouse.", "price": 19.5, "currency": "EUR"}' ;;
  P3)
    printf '%s\n' '{"productId": "P3", "productName": "Monitor", "productDescription": "A 27-inch 4K monitor.", "price": 349, "currency": "USD"}' ;;
  *)
    # Quote the id in the message only when it needs no JSON escaping.
    case "$id" in
      '' | *[!A-Za-z0-9_.-]*) message="no such product" ;;
      *) message="no product $id" ;;
    esac
    echo "unknown product id: $id" >&2
    printf '{"error": {"code": 404, "message": "%s"}}\n' "$message" ;;
esac
