#!/usr/bin/env bash
# Installs what a fresh Debian 12 (bookworm) machine needs to build and test decodebench:
#   - g++ and make (the emulated kernels library, cgo)
#   - Debian's nvidia-cuda-toolkit (nvcc, CUDA 11.8) from the non-free component, for the
#     CUDA kernels library (compiled and linked everywhere, run only on a GPU box)
#   - Debian's chromium, the headless browser the report test renders report.html in
#   - Debian's slurm-wlm and munge (scripts/slurm-test.sh runs the Slurm recipe on a one-node
#     cluster) and python3-yaml (the Kubernetes recipes' YAML is parsed in a test)
#   - Go is expected on PATH (Go 1.26 or newer); the script says so when it is missing.
# Idempotent: when everything is present it returns in well under a second.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_pkgs=()
command -v g++ >/dev/null 2>&1 || need_pkgs+=(g++)
command -v make >/dev/null 2>&1 || need_pkgs+=(make)
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)
command -v slurmctld >/dev/null 2>&1 || need_pkgs+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need_pkgs+=(munge)
python3 -c 'import yaml' >/dev/null 2>&1 || need_pkgs+=(python3-yaml)
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/lib/nvidia-cuda-toolkit/bin/nvcc ]; then
  need_pkgs+=(nvidia-cuda-toolkit)
fi

if [ "${#need_pkgs[@]}" -gt 0 ]; then
  # nvidia-cuda-toolkit lives in non-free; add the component to the Debian sources if absent.
  if printf '%s\n' "${need_pkgs[@]}" | grep -qx nvidia-cuda-toolkit; then
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      if ! grep -qE '^Components:.*\bnon-free\b' /etc/apt/sources.list.d/debian.sources; then
        log "adding contrib non-free non-free-firmware to /etc/apt/sources.list.d/debian.sources"
        $SUDO sed -i -E '/^Components:/ { /non-free/! s/$/ contrib non-free non-free-firmware/ }' \
          /etc/apt/sources.list.d/debian.sources
      fi
    elif [ -f /etc/apt/sources.list ] && ! grep -qE '^deb .* non-free( |$)' /etc/apt/sources.list; then
      log "adding contrib non-free to /etc/apt/sources.list"
      $SUDO sed -i -E '/^deb / { / non-free( |$)/! s/$/ contrib non-free non-free-firmware/ }' /etc/apt/sources.list
    fi
  fi
  log "installing: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  log "Go is not installed: install Go 1.26 or newer (https://go.dev/dl) and put it on PATH"
  exit 1
fi
log "ok: g++ $(g++ -dumpversion), nvcc $( (command -v nvcc >/dev/null && nvcc --version || /usr/lib/nvidia-cuda-toolkit/bin/nvcc --version) | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
