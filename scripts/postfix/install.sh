#!/usr/bin/env bash
# install.sh - make Postfix (with smtp-sink and smtp-source) available for the e2e harness.
#
# What it does:
#   - If the `postfix` Debian package is already installed (and its binaries are where the
#     harness expects them), it only makes sure the system instance is not running and exits:
#     this path is quick (no apt).
#   - Otherwise it installs `postfix` from the configured Debian repositories,
#     non-interactively ("No configuration", no recommended packages), with service starts
#     suppressed during the install by a temporary policy-rc.d (restored afterwards).
#   - In both cases it stops a running system Postfix (default config directory), so nothing
#     listens on port 25; the harness runs its own private, loopback-only instances.
#
# Usage: install.sh [--unless-not-root]
#   --unless-not-root  when not run as root, say so and exit 0 without doing anything (for
#                      `npm run test:postfix` on a developer machine, where the suite then
#                      skips); without it, a non-root run with Postfix missing is an error.
#
# Assumptions: Debian (apt, dpkg, debconf); runs as root (CI does). Quiet on success; on
# failure it prints the apt/dpkg log and exits non-zero. Safe to run any number of times.
set -euo pipefail

if [[ "${1:-}" == "--unless-not-root" ]]; then
  if [[ "$(id -u)" != "0" ]]; then
    echo "scripts/postfix/install.sh: not root, leaving Postfix alone (the Postfix suite will skip)" >&2
    exit 0
  fi
elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--unless-not-root]" >&2
  exit 2
fi

log="$(mktemp -t cohort-postfix-install.XXXXXX)"
policy=/usr/sbin/policy-rc.d
policy_backup=""
cleanup() {
  # Restore whatever policy-rc.d was there before (or remove the one we created).
  if [[ -n "$policy_backup" ]]; then
    if [[ "$policy_backup" == "none" ]]; then rm -f "$policy"; else mv -f "$policy_backup" "$policy"; fi
  fi
  rm -f "$log"
}
trap cleanup EXIT

fail() {
  echo "scripts/postfix/install.sh: $*" >&2
  if [[ -s "$log" ]]; then tail -n 60 "$log" >&2; fi
  exit 1
}

installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' postfix 2>/dev/null || true)" == "installed" ]] &&
    [[ -x /usr/sbin/postfix && -x /usr/sbin/smtp-sink && -x /usr/sbin/smtp-source ]]
}

# Stops the system instance if it runs; never touches private instances (they use -c <dir>).
stop_system_postfix() {
  if [[ -f /etc/postfix/main.cf ]] && /usr/sbin/postfix status >/dev/null 2>&1; then
    /usr/sbin/postfix stop >>"$log" 2>&1 || fail "could not stop the system postfix"
    local i
    for i in $(seq 1 50); do
      /usr/sbin/postfix status >/dev/null 2>&1 || return 0
      sleep 0.1
    done
    fail "system postfix still running after stop"
  fi
}

if ! installed; then
  [[ "$(id -u)" == "0" ]] || fail "postfix is not installed and installing it needs root"
  export DEBIAN_FRONTEND=noninteractive
  # No service may start during the install: a temporary policy-rc.d that denies everything.
  if [[ -e "$policy" ]]; then
    policy_backup="$(mktemp -t cohort-policy-rc.XXXXXX)"
    cp -p "$policy" "$policy_backup"
  else
    policy_backup="none"
  fi
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 0755 "$policy"
  echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  apt-get update -qq >>"$log" 2>&1 || fail "apt-get update failed"
  apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    postfix >>"$log" 2>&1 || fail "apt-get install postfix failed"
  installed || fail "postfix installed but its binaries are missing"
fi

stop_system_postfix
