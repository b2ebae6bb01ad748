# Warnings every qtk target is built with (errors unless QTK_WERROR=OFF), and sanitizers.
function(qtk_warnings target)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
      -Wpointer-arith -Wcast-qual -Wformat=2 -Wundef -Wvla -Wwrite-strings
      -Wmissing-declarations -Wold-style-definition -Wnull-dereference)
    if(QTK_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()

# QTK_SANITIZE: AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer at run time).
# With clang the undefined group also has array-bounds, and a few checks GCC lacks are added:
# float-divide-by-zero, implicit integer truncation and sign changes, nullability, unsigned
# shifts, and local-bounds. cmake/ubsan-ignore.txt lists known findings with their issue.
set(QTK_SANITIZE_CLANG_EXTRA ",float-divide-by-zero,implicit-conversion,nullability,unsigned-shift-base,local-bounds"
    CACHE STRING "Checks added to QTK_SANITIZE builds with clang (a leading comma)")
set(QTK_SANITIZE_CHECKS address,undefined,float-cast-overflow)
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  set(QTK_SANITIZE_CHECKS "${QTK_SANITIZE_CHECKS}${QTK_SANITIZE_CLANG_EXTRA}")
endif()
# QTK_FUZZ: everything is instrumented for libFuzzer's coverage (the harnesses link the
# fuzzer itself), under the sanitizers.
if(QTK_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "QTK_FUZZ needs clang (libFuzzer): configure with -DCMAKE_C_COMPILER=clang")
  endif()
  set(QTK_SANITIZE ON)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(QTK_SANITIZE)
  set(qtk_san_flags -fsanitize=${QTK_SANITIZE_CHECKS} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    list(APPEND qtk_san_flags -fsanitize-ignorelist=${CMAKE_CURRENT_LIST_DIR}/ubsan-ignore.txt)
  endif()
  add_compile_options(${qtk_san_flags})
  add_link_options(-fsanitize=${QTK_SANITIZE_CHECKS})
endif()
# QTK_SANITIZE_BODY_OPTIONS: for the translation units of the portable matmul body (the library's
# mm_portable.c, the tests' mm_body_w8.c and mm_body_w16.c). At -O0 GCC's use-after-scope
# instrumentation grows with the vector temporaries of a function, and the body's always-inlined
# kernels have thousands: on Zen 3 each of the tests' two took 1035 s to compile (so the
# sanitizer build waited 17 minutes for them), mm_portable.c 214 s; without it 161 s and 68 s.
# These files still have every other check (heap, globals, stack buffers' bounds, UBSan), and
# clang (68 s with it) keeps use-after-scope everywhere.
set(QTK_SANITIZE_BODY_OPTIONS "")
if(QTK_SANITIZE AND CMAKE_C_COMPILER_ID STREQUAL "GNU")
  set(QTK_SANITIZE_BODY_OPTIONS -fno-sanitize-address-use-after-scope)
endif()
