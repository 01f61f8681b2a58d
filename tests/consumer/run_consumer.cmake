# Builds the consumer project (project/) against a qkv package and runs it, as a user
# would: its program (the C++ API) and its tool (qkv_add_tool: the qkv command line over
# its own graphs), each subcommand once.
#
#   cmake -DQKV_BUILD_DIR=<qkv build> -DPROJECT_DIR=... -DWORK_DIR=... -DCXX=...
#         [-DPACKAGE=install|build-tree] -P run_consumer.cmake
#
# PACKAGE=install (the default) installs the built tree into a fresh prefix and finds the
# package there; build-tree finds it in the build tree itself (CMAKE_PREFIX_PATH=build),
# builds the program alone and runs it. Neither rebuilds qkv.
if(NOT DEFINED PACKAGE)
  set(PACKAGE install)
endif()
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
# expect(REGEX command...): runs the command, which must exit 0 and print REGEX.
function(expect regex)
  run(${ARGN})
  if(NOT last_output MATCHES "${regex}")
    string(JOIN " " shown ${ARGN})
    message(FATAL_ERROR "`${shown}` does not say\n  ${regex}\nIt said:\n${last_output}")
  endif()
  message(STATUS "ok: ${ARGN}")
endfunction()

if(PACKAGE STREQUAL "install")
  run(${CMAKE_COMMAND} --install ${QKV_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
  set(prefix ${WORK_DIR}/prefix)
else()
  set(prefix ${QKV_BUILD_DIR})
endif()
run(${CMAKE_COMMAND} -S ${PROJECT_DIR} -B ${WORK_DIR}/build -G Ninja
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_PREFIX_PATH=${prefix}
    # The sanitize build's libraries are instrumented: the program must link the
    # sanitizer runtimes too (SANITIZE_FLAGS is empty in a normal build).
    "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
if(PACKAGE STREQUAL "install")
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
else()
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/build --target consumer)
endif()
expect("output 'y' f32.5, 8.: ok .rule f32.*consumer: compiled kernel agrees with the interpreter.*SafeTensors says: .*/nonexistent/model.safetensors.*qkv show consumer: D=8 L=5"
       ${WORK_DIR}/build/consumer)
if(NOT PACKAGE STREQUAL "install")
  return()
endif()

# The tool over the project's graphs: every subcommand.
set(tool ${WORK_DIR}/build/consumer_tool)
set(ENV{QKV_CACHE_DIR} ${WORK_DIR}/kernels)
expect("sink_window +sliding window of 24 plus 4 sink tokens  .B=1 L=64 Dh=16 H=4.\nsoftcap_gqa "
       ${tool} list)
foreach(stage graph qkv linalg loops llvm llvm-ir asm)
  expect("." ${tool} dump softcap_gqa --stage=${stage})
endforeach()
expect("softcap_gqa .B=2,L=50. compiled.*out: max_abs_err=.* ok" ${tool} run softcap_gqa --check)
expect("sink_window .B=1,L=99. compiled.*out: max_abs_err=.* ok"
       ${tool} run sink_window --check --seq 99)
expect("\"name\": \"sink_window\".*\"baselines\": {.*\"reference\": {.*\"ok\": true"
       ${tool} bench sink_window --threads 2 --repeat 1 --json)
expect("qkv bench softcap_gqa: .*baselines not run: they compute attention alone .*.softcap_gqa. is neither"
       ${tool} bench softcap_gqa --threads 2 --repeat 1)
expect("mask_mod: kv <= q && .q - kv < 24 .. kv < 4.*wrote .*sink.png"
       ${tool} show sink_window --png ${WORK_DIR}/sink.png)
if(NOT EXISTS ${WORK_DIR}/sink.png)
  message(FATAL_ERROR "consumer_tool show --png wrote no ${WORK_DIR}/sink.png")
endif()
expect("graph softcap_gqa exported to .*bundle for host-cpu.*kernel.so"
       ${tool} export softcap_gqa -o ${WORK_DIR}/bundle)
expect("folder   ${WORK_DIR}/kernels\nstatus   enabled\nentries  [1-9]" ${tool} cache info)
expect("removed [1-9][0-9]* file.s. from ${WORK_DIR}/kernels" ${tool} cache clear)
