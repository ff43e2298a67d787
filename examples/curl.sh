#!/usr/bin/env bash
# The API with curl: create a pet (safe to retry with the same Idempotency-Key), read the first page,
# follow the next link. Needs PETSTORE_URL (e.g. http://127.0.0.1:8080) and PETSTORE_KEY.
set -euo pipefail
: "${PETSTORE_URL:?set PETSTORE_URL}" "${PETSTORE_KEY:?set PETSTORE_KEY}"

idem=$(cat /proc/sys/kernel/random/uuid 2>/dev/null || date +%s%N)
curl -sS --fail-with-body -X POST "$PETSTORE_URL/v1/pets" \
  -H "Authorization: Bearer $PETSTORE_KEY" -H 'Content-Type: application/json' \
  -H "Idempotency-Key: $idem" \
  -d '{"name":"Biscuit","categoryId":1,"status":"available"}'
echo

# The first page, with headers: X-RateLimit-*, and Link: <...>; rel="next" when there is more.
headers=$(mktemp)
curl -sS --fail-with-body -D "$headers" "$PETSTORE_URL/v1/pets?limit=2" -H "Authorization: Bearer $PETSTORE_KEY"
echo
next=$(grep -i '^link:' "$headers" | sed -E 's/.*<([^>]+)>.*/\1/' | tr -d '\r' || true)
rm -f "$headers"
if [ -n "$next" ]; then
  curl -sS --fail-with-body "$PETSTORE_URL$next" -H "Authorization: Bearer $PETSTORE_KEY"
  echo
fi
