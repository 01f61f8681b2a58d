# cmake -DLDD=<ldd> -DLIB=<shared library> -DEXPECT=absent|present [-DPATTERN=<regex>]
#       -P links_no_mlir.cmake
#
# Lists every shared library LIB loads, directly or through other libraries (ldd), and
# fails when an MLIR or LLVM library is among them (EXPECT=absent) or when none is
# (EXPECT=present, the control that proves the check can see one). PATTERN replaces
# "MLIR|LLVM" to look for other libraries (libcuda). Fails too when ldd fails or cannot
# resolve a library: a check that cannot look must not pass.
if(NOT DEFINED PATTERN)
  set(PATTERN "MLIR|LLVM")
endif()
foreach(var LDD LIB EXPECT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "links_no_mlir.cmake: -D${var}=... is required")
  endif()
endforeach()
execute_process(COMMAND ${LDD} ${LIB} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${LIB} failed (${rc}):\n${out}${err}")
endif()
if(NOT out MATCHES "libc\\.so")
  message(FATAL_ERROR "ldd ${LIB} does not list libc, so its output cannot be trusted:\n${out}")
endif()
if(out MATCHES "not found")
  message(FATAL_ERROR "ldd ${LIB} cannot resolve a library:\n${out}")
endif()
string(REGEX MATCHALL "[^\n]*(${PATTERN})[^\n]*" found "${out}")
if(EXPECT STREQUAL "absent" AND found)
  message(FATAL_ERROR "${LIB} loads ${PATTERN}:\n${found}")
elseif(EXPECT STREQUAL "present" AND NOT found)
  message(FATAL_ERROR "${LIB} loads no ${PATTERN} library, but it should:\n${out}")
elseif(NOT EXPECT MATCHES "^(absent|present)$")
  message(FATAL_ERROR "links_no_mlir.cmake: EXPECT must be absent or present, got '${EXPECT}'")
endif()
message(STATUS "${LIB}: ${PATTERN} ${EXPECT}, as expected")
