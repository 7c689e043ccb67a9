#!/usr/bin/env bash
# The pinned HUD SDK: hud==0.6.21 (with typer<0.29: hud's 0.6.21 CLI crashes on typer 0.29) in
# its own Python 3.11/3.12 virtualenv at .hud/venv. Nothing is added to the project's venv.
# Idempotent: a stamp file marks a finished install. The HUD end-to-end tests drive rollouts
# through this interpreter (tests/integration/hud_rollout.py).
set -euo pipefail
cd "$(dirname "$0")/.."
HUD_DIR=${HUD_DIR:-.hud}
VENV="$HUD_DIR/venv"
STAMP="$VENV/.packager-hud-0.6.21"
if [ ! -f "$STAMP" ]; then
  py=${HUD_PYTHON:-}
  if [ -z "$py" ]; then
    for candidate in python3.11 python3.12 python3; do
      if command -v "$candidate" >/dev/null \
        && "$candidate" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 13))' 2>/dev/null; then
        py=$(command -v "$candidate")
        break
      fi
    done
  fi
  if [ -z "$py" ]; then
    echo "ensure-hud: hud 0.6.21 needs Python 3.11 or 3.12; install one and retry (or set HUD_PYTHON)" >&2
    exit 1
  fi
  echo "ensure-hud: installing hud==0.6.21 into $VENV (with $py)" >&2
  rm -rf "$VENV"
  "$py" -m venv "$VENV"
  # (A host pip config may name file:// indexes that do not exist: drop pip's notes on them.)
  quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
  quiet "$VENV/bin/pip" install -q --upgrade pip
  quiet "$VENV/bin/pip" install -q 'hud==0.6.21' 'typer<0.29'
  touch "$STAMP"
fi
export HUD_CLI_ANALYTICS_ENABLED=0 HUD_SKIP_VERSION_CHECK=1 HUD_TELEMETRY_ENABLED=0
echo "ensure-hud: $("$VENV/bin/hud" version 2>/dev/null | tr -s '[:space:]' ' ' | head -c 200) ready in $VENV" >&2
