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
