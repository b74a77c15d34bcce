# CMake toolchain file: bare-metal Cortex-M4F (Thumb-2, single-precision FPU, hard-float ABI)
# with the Arm GNU toolchain from Debian (apt-get install gcc-arm-none-eabi).
#
#   cmake -S sample_apps/firmware -B build -DCMAKE_TOOLCHAIN_FILE=sample_apps/cross/cortex-m4f.cmake \
#         -DMODEL_PACKAGE_DIR=$PWD/pkg
#
# CMAKE_SYSTEM_NAME Generic: the package then builds its library only, with no threads, no
# malloc, no file I/O (its cli and tests need an operating system).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
# No OS to link test programs against while CMake probes the compiler.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(CMAKE_C_FLAGS_INIT "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -ffunction-sections -fdata-sections")
set(CMAKE_CXX_FLAGS_INIT "${CMAKE_C_FLAGS_INIT}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,--gc-sections")
