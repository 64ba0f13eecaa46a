#!/usr/bin/env bash
# The checks this repository's changes pass before they are applied, locally and in CI:
# the policies lint clean, their golden tests pass, and webhook.yaml is what graft
# generates from them. Run it with the graft of the release kustomization.yaml installs
# (graft @VERSION@) on PATH, or name it in GRAFT=/path/to/graft. Exits non-zero on any
# failure.
set -euo pipefail
cd "$(dirname "$0")"
graft=${GRAFT:-graft}

echo "== graft lint --strict policies"
"$graft" lint --strict policies

echo "== graft test tests"
"$graft" test tests

echo "== webhook.yaml is current"
fresh=$(mktemp)
trap 'rm -f "$fresh"' EXIT
"$graft" webhook-config --policies policies --out "$fresh"
if ! diff -u webhook.yaml "$fresh"; then
  echo "webhook.yaml is stale: the policies match other requests than it sends to graft." >&2
  echo "Regenerate it and commit the result:" >&2
  echo "  graft webhook-config --policies policies --out webhook.yaml" >&2
  exit 1
fi
echo "webhook.yaml is current"
