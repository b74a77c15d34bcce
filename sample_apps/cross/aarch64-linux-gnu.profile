# Conan 2 host profile: 64-bit ARM Linux with Debian's gcc-aarch64-linux-gnu; the package's
# golden test (conan create) and test_package run under qemu-user.
#
#   conan create pkg/ -pr:h sample_apps/cross/aarch64-linux-gnu.profile -pr:b default
#
# apt-get install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user
[settings]
os=Linux
arch=armv8
compiler=gcc
compiler.version=12
compiler.libcxx=libstdc++11
build_type=Release

[conf]
tools.build:compiler_executables={"c": "aarch64-linux-gnu-gcc", "cpp": "aarch64-linux-gnu-g++"}
# qemu-user can run the target's programs, so the tests run while cross-building.
tools.build.cross_building:can_run=True
tools.cmake.cmaketoolchain:extra_variables={"CMAKE_CROSSCOMPILING_EMULATOR": "qemu-aarch64;-L;/usr/aarch64-linux-gnu"}
