#!/usr/bin/env bash
# Make sure a container registry binary is available for the publish tests (they start their
# own registry on loopback; nothing is left running). On Debian as root it installs Debian's
# docker-registry package; elsewhere it stops with the command to run.
set -euo pipefail

LOG_DIR=${PACKAGER_STATE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/packager}
mkdir -p "$LOG_DIR"
say() { printf 'ensure-registry: %s\n' "$*" >&2; }

if command -v docker-registry >/dev/null || command -v registry >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null; then
  say "installing docker-registry (log: $LOG_DIR/apt-install.log)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$LOG_DIR/apt-update.log" 2>&1 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >>"$LOG_DIR/apt-install.log" 2>&1
  exit 0
fi
say "no registry binary: install one, e.g. 'sudo apt-get install docker-registry', and retry."
exit 1
