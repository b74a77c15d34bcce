#!/usr/bin/env bash
# The system tools the tests compile with: a C/C++ compiler pair other than gcc (clang),
# ninja, binutils' nm, an AArch64 cross compiler with qemu to run what it builds, and the
# Arm bare-metal toolchain (Cortex-M builds). Installs what is missing when run as root on Debian/Ubuntu;
# otherwise says what to install (the tests that need it are then skipped, with a reason).
set -euo pipefail
missing=()
command -v clang >/dev/null || missing+=(clang)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v nm >/dev/null || missing+=(binutils)
command -v g++ >/dev/null || missing+=(g++)
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
command -v arm-none-eabi-gcc >/dev/null || missing+=(gcc-arm-none-eabi)
command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
command -v valgrind >/dev/null || missing+=(valgrind)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing ${missing[*]} with apt-get" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "warning: please install ${missing[*]}; tests that need them will be skipped" >&2
fi
