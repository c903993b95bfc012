#!/bin/sh
# The getProductInfo backend of product-agent.toml: one call per run, the input JSON
# ({"productId": "..."}) on stdin, the output JSON on stdout. Plain POSIX sh and sed.
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
    echo "no product ${id:-(no productId given)}" >&2
    exit 1 ;;
esac
