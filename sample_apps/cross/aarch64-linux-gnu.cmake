# CMake toolchain file: cross-compile for 64-bit ARM Linux with Debian's gcc-aarch64-linux-gnu,
# and run the package's tests under qemu-user.
#
#   cmake -S pkg -B build -DCMAKE_TOOLCHAIN_FILE=sample_apps/cross/aarch64-linux-gnu.cmake
#   cmake --build build && ctest --test-dir build   # the golden test runs in qemu-aarch64
#
# apt-get install gcc-aarch64-linux-gnu qemu-user   (or run tools/install_system_deps.sh)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)  # the package links its objects/aarch64 kernels

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Libraries and headers come from the target's sysroot; programs from the build machine.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)  # BOTH: find_package also sees your install prefix

# ctest runs target programs through qemu; -L points it at the target's dynamic loader.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
