#!/usr/bin/env bash
# Make sure a Docker engine answers, and that the base images the sample tasks need exist.
#
# Idempotent and fast when everything is already in place. On Debian as root it installs
# docker.io and starts dockerd in the background; elsewhere it stops with the command to run.
# Base images that cannot be pulled (no registry reachable) are seeded from Debian's archive
# with debootstrap, which is also what an air-gapped user needs.
set -euo pipefail

LOG_DIR=${PACKAGER_STATE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/packager}
mkdir -p "$LOG_DIR"
BASE_IMAGES=${PACKAGER_BASE_IMAGES:-debian:bookworm-slim}

say() { printf 'ensure-docker: %s\n' "$*" >&2; }

engine_up() { timeout 10 docker info >/dev/null 2>&1; }

is_debian_root() { [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null; }

apt_updated=0
apt_install() {
  if [ $apt_updated = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$LOG_DIR/apt-update.log" 2>&1 || true
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$LOG_DIR/apt-install.log" 2>&1
}

start_engine() {
  if ! command -v dockerd >/dev/null; then
    if ! is_debian_root; then
      say "no Docker engine is reachable. Start Docker (e.g. 'sudo systemctl start docker' or Docker Desktop) and retry."
      exit 1
    fi
    say "installing docker.io (log: $LOG_DIR/apt-install.log)"
    apt_install docker.io
  fi
  if ! is_debian_root; then
    say "dockerd is installed but not running. Start it with 'sudo systemctl start docker' and retry."
    exit 1
  fi
  # A dockerd killed with its session leaves a pid file behind that blocks the next start.
  for pidfile in /var/run/docker.pid /var/run/docker/containerd/containerd.pid; do
    if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile" 2>/dev/null)" 2>/dev/null; then rm -f "$pidfile"; fi
  done
  say "starting dockerd in the background (log: $LOG_DIR/dockerd.log)"
  nohup dockerd >"$LOG_DIR/dockerd.log" 2>&1 &
  for _ in $(seq 1 60); do
    engine_up && return 0
    sleep 1
  done
  say "dockerd did not answer within 60 s; see $LOG_DIR/dockerd.log"
  exit 1
}

seed_debian_image() {
  local tag=$1 suite=${1#debian:}
  suite=${suite%-slim}
  if ! is_debian_root; then
    say "image $tag is missing and cannot be pulled; run 'docker pull $tag' where a registry is reachable."
    exit 1
  fi
  command -v debootstrap >/dev/null || apt_install debootstrap
  local mirror rootfs
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  rootfs=$(mktemp -d)
  say "seeding $tag from Debian's archive with debootstrap (log: $LOG_DIR/debootstrap.log)"
  debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$LOG_DIR/debootstrap.log" 2>&1
  # debootstrap leaves the apt lists and caches behind; the slim image does not carry them.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
  tar -C "$rootfs" -c . | docker import -c 'CMD ["bash"]' - "$tag" >/dev/null
  rm -rf "$rootfs"
}

engine_up || start_engine

for image in $BASE_IMAGES; do
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    timeout 60 docker pull -q "$image" >/dev/null 2>&1 || seed_debian_image "$image"
  fi
done
say "engine ready ($(docker version --format '{{.Server.Version}}')); base images: $BASE_IMAGES"
