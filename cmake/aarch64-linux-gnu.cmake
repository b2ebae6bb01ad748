# Cross-compiling qtk for 64-bit ARM Linux with Debian's gcc-aarch64-linux-gnu, the arm64
# libcbor/jansson -dev packages (dpkg --add-architecture arm64) and qemu-user-static, which
# ctest runs the test programs under (scripts/test.sh's aarch64 stage):
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config answers for arm64 (libcbor, jansson)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} /)
find_program(QTK_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(QTK_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${QTK_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
