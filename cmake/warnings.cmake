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

if(QTK_SANITIZE)
  add_compile_options(-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined,float-cast-overflow)
endif()
