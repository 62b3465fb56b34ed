#!/usr/bin/env bash
# Installs what hcasim builds with (Debian 12 packages only). Safe to re-run:
# it installs nothing when everything is present.
set -euo pipefail
packages=(g++ cmake ninja-build pkg-config libsystemc-dev verilator libboost-dev libboost-program-options-dev
          catch2 libibverbs-dev librdmacm-dev nlohmann-json3-dev zlib1g-dev
          ibverbs-utils perftest rdmacm-utils time)
# objdump: hcasim run finds the TSC reads of programs where rdtsc does not trap.
packages+=(binutils)
# hcasim sweep across machines (MPI) and hcasim plot (matplotlib for /usr/bin/python3).
packages+=(openmpi-bin libopenmpi-dev python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
