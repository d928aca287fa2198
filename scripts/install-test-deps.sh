#!/usr/bin/env bash
# install-test-deps.sh - the Debian packages the test suite runs against, installed when missing.
#
# The SOCKS5 tests run Dante (dante-server), a real SOCKS5 server, with libnss-wrapper for a
# throw-away user/password account; the browser test runs Chromium. When all are present this
# exits at once, quietly. When
# missing and running as root (CI, these machines), it installs them non-interactively with no
# service started. When missing and not root, it prints the command to run and exits 0, so
# that the tests themselves fail with the same instruction.
set -euo pipefail

need=()
dpkg-query -W -f='${Status}' dante-server 2>/dev/null | grep -q "install ok installed" || need+=(dante-server)
dpkg-query -W -f='${Status}' libnss-wrapper 2>/dev/null | grep -q "install ok installed" || need+=(libnss-wrapper)
# The dashboard's browser test drives Debian's Chromium through playwright-core (never a
# downloaded browser); skipped when /usr/bin/chromium is already there.
[[ -x /usr/bin/chromium ]] || need+=(chromium)
[[ ${#need[@]} -eq 0 ]] && exit 0

if [[ "$(id -u)" != "0" ]]; then
  echo "scripts/install-test-deps.sh: missing ${need[*]}; as root run: apt-get update && apt-get install -y --no-install-recommends ${need[*]}" >&2
  exit 0
fi

log="$(mktemp -t cohort-test-deps.XXXXXX)"
policy=/usr/sbin/policy-rc.d
backup=""
if [[ -e "$policy" ]]; then backup="$(mktemp)"; cp -p "$policy" "$backup"; fi
restore() {
  if [[ -n "$backup" ]]; then mv -f "$backup" "$policy"; else rm -f "$policy"; fi
  rm -f "$log"
}
trap restore EXIT
# Keep the package's own danted service from starting: tests run private instances.
printf '#!/bin/sh\nexit 101\n' > "$policy"
chmod +x "$policy"
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update && apt-get install -y --no-install-recommends "${need[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
