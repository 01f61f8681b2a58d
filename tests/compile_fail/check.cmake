# cmake -DCXX=<compiler> -DSRC=<snippet.cpp> -DINCLUDES=<dir;dir> -P check.cmake
# See CMakeLists.txt in this folder for what a snippet declares.
foreach(var CXX SRC INCLUDES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check.cmake: -D${var}=... is required")
  endif()
endforeach()

file(STRINGS ${SRC} expect_lines REGEX "^// EXPECT: ")
file(STRINGS ${SRC} compiles_lines REGEX "^// EXPECT-COMPILES")

set(args -std=c++20 -fsyntax-only)
foreach(dir IN LISTS INCLUDES)
  list(APPEND args -I${dir})
endforeach()
execute_process(COMMAND ${CXX} ${args} ${SRC}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)

if(compiles_lines)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SRC} must compile, but the compiler said (exit ${rc}):\n${out}")
  endif()
  message(STATUS "${SRC} compiles, as it should")
  return()
endif()

if(NOT expect_lines)
  message(FATAL_ERROR "${SRC} has no `// EXPECT: <regex>` line: a snippet that may fail for "
                      "any reason proves nothing")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "${SRC} compiled, but it must not")
endif()
set(missing "")
foreach(line IN LISTS expect_lines)
  string(REGEX REPLACE "^// EXPECT: " "" re "${line}")
  if(NOT out MATCHES "${re}")
    string(APPEND missing "  ${re}\n")
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "${SRC} failed to compile, but the output does not match:\n${missing}"
                      "The compiler said:\n${out}")
endif()
# One mistake, one error: the rule's message, not a cascade of follow-on errors about the
# failed op's result. A snippet may allow more with `// MAX-ERRORS: <n>`.
file(STRINGS ${SRC} max_lines REGEX "^// MAX-ERRORS: [0-9]+")
set(max_errors 1)
if(max_lines)
  string(REGEX REPLACE "^// MAX-ERRORS: " "" max_errors "${max_lines}")
endif()
string(REGEX MATCHALL "error:" errors "${out}")
list(LENGTH errors n_errors)
if(n_errors GREATER max_errors)
  message(FATAL_ERROR "${SRC} gives ${n_errors} errors; one mistake must give at most "
                      "${max_errors}. The compiler said:\n${out}")
endif()
message(STATUS "${SRC} fails to compile with the expected message")
