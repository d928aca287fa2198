#!/usr/bin/env bash
# npm run typecheck: every TypeScript project, two at a time (the longest first); fails when any
# fails. The pure cores (durable-objects/core, worker/*/core, test/chaos/core) are projects of
# their own so that they cannot see the Workers types.
set -euo pipefail
cd "$(dirname "$0")/.."
printf '%s\n' . scripts durable-objects/core worker/smtp/core worker/net/core \
  worker/webhooks/core worker/dashboard/core worker/templates/core worker/receiving/core worker/metrics/core test/chaos/core \
  worker/tls-policy/core worker/compliance/core worker/egress/core worker/inbound/core |
  xargs -P 2 -I{} sh -c 'npx tsc -p "$1" || { echo "typecheck: tsc -p $1 failed" >&2; exit 1; }' _ {}
