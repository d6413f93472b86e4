# Writes a C source holding a file's bytes, at build time (ranks/CMakeLists.txt):
#
#   cmake -DIN=FILE -DOUT=SOURCE.c -DNAME=SYMBOL -P embed_file.cmake
#
# SOURCE.c defines `const unsigned char SYMBOL[]` (the bytes of FILE) and
# `const size_t SYMBOL_bytes`. It is rewritten only when its text changes,
# so an unchanged FILE recompiles nothing.
foreach(_v IN ITEMS IN OUT NAME)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "embed_file.cmake: -D${_v}=... is required")
  endif()
endforeach()
file(READ "${IN}" _hex HEX)
string(LENGTH "${_hex}" _digits)
math(EXPR _bytes "${_digits} / 2")
if(_bytes EQUAL 0)
  message(FATAL_ERROR "embed_file.cmake: ${IN} is empty")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _body "${_hex}")
# twelve bytes a line
string(REPEAT "0x[0-9a-f][0-9a-f]," 12 _line)
string(REGEX REPLACE "(${_line})" "\\1\n  " _body "${_body}")
get_filename_component(_name "${IN}" NAME)
file(WRITE "${OUT}.tmp"
     "/* The bytes of ${_name}, written at build time by ranks/text/embed_file.cmake. */\n"
     "#include <stddef.h>\n\n"
     "extern const unsigned char ${NAME}[];\n"
     "extern const size_t ${NAME}_bytes;\n"
     "const unsigned char ${NAME}[${_bytes}] = {\n  ${_body}\n};\n"
     "const size_t ${NAME}_bytes = ${_bytes};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
