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
# The loader and libc must come from one glibc build. The arm64 -dev packages bring Debian's
# libc6:arm64 into /lib/aarch64-linux-gnu, and the host's ld.so.cache sends the guest there for
# libc.so.6; taking the loader from the cross package (-L /usr/aarch64-linux-gnu) then pairs
# two builds (2.36-8cross1 with 2.36-9+deb12u*), and the first pthread_create spins forever.
# With the multiarch loader present, use it (no -L); otherwise the cross sysroot throughout.
if(QTK_QEMU_AARCH64)
  if(EXISTS /lib/ld-linux-aarch64.so.1)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${QTK_QEMU_AARCH64})
  else()
    set(CMAKE_CROSSCOMPILING_EMULATOR ${QTK_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
  endif()
endif()
