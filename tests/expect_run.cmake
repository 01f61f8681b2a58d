# cmake -DEXIT_CODE=<n> -DOUTPUT=<regex> [-DNOT_OUTPUT=<regex>] -P expect_run.cmake --
#       <command> [args...]
#
# Runs the command and fails unless it exits with EXIT_CODE and its output (stdout and
# stderr together) matches OUTPUT (CMake regex syntax), and does not match NOT_OUTPUT
# when given. ctest's PASS_REGULAR_EXPRESSION ignores the exit code and WILL_FAIL ignores
# the message; this checks both.
foreach(var EXIT_CODE OUTPUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "expect_run.cmake: -D${var}=... is required")
  endif()
endforeach()

set(cmd "")
set(after_dashes FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_dashes)
    list(APPEND cmd "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_dashes TRUE)
  endif()
endforeach()
if(NOT cmd)
  message(FATAL_ERROR "expect_run.cmake: no command after --")
endif()

string(JOIN " " shown ${cmd})
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc STREQUAL "${EXIT_CODE}")
  message(FATAL_ERROR "`${shown}` exited with ${rc}, expected ${EXIT_CODE}; it said:\n${out}")
endif()
if(NOT out MATCHES "${OUTPUT}")
  message(FATAL_ERROR "`${shown}` exited with ${rc} as expected, but its output does not match\n"
                      "  ${OUTPUT}\nIt said:\n${out}")
endif()
if(DEFINED NOT_OUTPUT AND out MATCHES "${NOT_OUTPUT}")
  message(FATAL_ERROR "`${shown}` exited with ${rc} as expected, but its output matches\n"
                      "  ${NOT_OUTPUT}\nwhich it must not. It said:\n${out}")
endif()
message(STATUS "`${shown}` exited with ${rc} and said what it should")
