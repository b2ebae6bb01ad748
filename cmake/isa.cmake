# Per-ISA kernel files. Each file under src/**/avx2*.c or avx512*.c is compiled with that
# level's flags only; the portable code never sees intrinsics. On AArch64 the neon*.c files
# need no flag (Advanced SIMD is part of the architecture); the dot product (sdot) is enabled
# per function with target("+dotprod") and chosen at run time from HWCAP. Features beyond the base of a
# level (AVX-512 VBMI, VNNI, BF16) are enabled per function with target attributes and chosen
# at run time from cpuid, so the binary runs on every CPU of the level.
include(CheckCCompilerFlag)

set(QTK_X86 OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|x64)$" AND CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
  set(QTK_X86 ON)
endif()

set(QTK_ARM64 OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$" AND CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
  set(QTK_ARM64 ON)
endif()
option(QTK_ENABLE_NEON "Build the NEON kernels (AArch64)" ${QTK_ARM64})

set(QTK_AVX2_FLAGS -mavx2 -mfma -mf16c -mbmi2)
set(QTK_AVX512_FLAGS -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -mf16c -mbmi2)

option(QTK_ENABLE_AVX2 "Build the AVX2 kernels (x86-64)" ${QTK_X86})
option(QTK_ENABLE_AVX512 "Build the AVX-512 kernels (x86-64)" ${QTK_X86})
if(QTK_ENABLE_AVX2)
  check_c_compiler_flag("-mavx2 -mfma -mf16c" QTK_CC_AVX2)
  if(NOT QTK_CC_AVX2)
    set(QTK_ENABLE_AVX2 OFF)
  endif()
endif()
if(QTK_ENABLE_AVX512)
  check_c_compiler_flag("-mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512vbmi -mavx512vnni" QTK_CC_AVX512)
  if(NOT QTK_CC_AVX512 OR NOT QTK_ENABLE_AVX2)
    set(QTK_ENABLE_AVX512 OFF)
  endif()
endif()

# qtk_isa_sources(<target> AVX2 files... AVX512 files... NEON files...): adds the files to the
# target with their level's flags, when that level is enabled, and defines QTK_HAVE_<LEVEL>.
function(qtk_isa_sources target)
  cmake_parse_arguments(A "" "" "AVX2;AVX512;NEON" ${ARGN})
  if(QTK_ENABLE_NEON AND A_NEON)
    target_sources(${target} PRIVATE ${A_NEON})
    target_compile_definitions(${target} PRIVATE QTK_HAVE_NEON=1)
  endif()
  if(QTK_ENABLE_AVX2 AND A_AVX2)
    target_sources(${target} PRIVATE ${A_AVX2})
    set_source_files_properties(${A_AVX2} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${QTK_AVX2_FLAGS}")
  endif()
  if(QTK_ENABLE_AVX512 AND A_AVX512)
    target_sources(${target} PRIVATE ${A_AVX512})
    set_source_files_properties(${A_AVX512} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${QTK_AVX512_FLAGS}")
  endif()
  if(QTK_ENABLE_AVX2)
    target_compile_definitions(${target} PRIVATE QTK_HAVE_AVX2=1)
  endif()
  if(QTK_ENABLE_AVX512)
    target_compile_definitions(${target} PRIVATE QTK_HAVE_AVX512=1)
  endif()
endfunction()
