#!/usr/bin/env bash
# Installs what gpubatch needs on a Debian 12 machine (idempotent: installs only what is missing)
# and builds the release preset. Run as root, or with sudo available.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake git pkg-config
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
  glslang-tools glslang-dev spirv-tools
  libboost1.81-dev            # Asio with any_completion_handler and deferred (1.74 lacks them)
  libspdlog-dev libtomlplusplus-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-matplotlib
  clang libclang-rt-14-dev     # libFuzzer and sanitizer runtimes
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)"
