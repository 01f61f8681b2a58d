# cmake -DQKV=<qkv binary> -DDIR=<scratch folder> -P cli_cache.cmake
#
# `qkv cache info|clear` on a folder of the test's own: empty, one entry after `qkv run`,
# a hit on the second run, the size cap (QKV_CACHE_MAX_MB), disabled by QKV_CACHE=0, clear
# removing the entry and not a file of the user's, and usage errors.
function(run expect_rc pattern)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env QKV_CACHE_DIR=${DIR} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(JOIN " " shown ${ARGN})
  if(NOT rc STREQUAL "${expect_rc}")
    message(FATAL_ERROR "`${shown}` exited with ${rc}, expected ${expect_rc}; it said:\n${out}")
  endif()
  if(NOT out MATCHES "${pattern}")
    message(FATAL_ERROR "`${shown}` said:\n${out}\nwhich does not match: ${pattern}")
  endif()
  message(STATUS "ok: ${shown}")
endfunction()

file(REMOVE_RECURSE ${DIR})
run(0 "folder   [^\n]*cli-cache-test \\(does not exist yet\\).*entries  0" ${QKV} cache info)
run(0 "compiled in [0-9.]+ ms\n" QKV_CACHE=1 ${QKV} run seed)
run(0 "compiled in [0-9.]+ ms \\(from the kernel cache\\)" QKV_CACHE=1 ${QKV} run seed)
file(WRITE ${DIR}/notes.txt "not the cache's")
run(0 "status   enabled\nentries  1\nsize     [0-9.]+ KiB\ncap      [0-9.]+ [KMG]iB" QKV_CACHE=1 ${QKV} cache info)
run(0 "cap      64.0 MiB \\(QKV_CACHE_MAX_MB\\)" QKV_CACHE_MAX_MB=64 ${QKV} cache info)
run(1 "QKV_CACHE_MAX_MB='0': the kernel cache's size cap must be a positive whole number"
    QKV_CACHE_MAX_MB=0 ${QKV} cache info)
run(0 "status   disabled by QKV_CACHE=0" QKV_CACHE=0 ${QKV} cache info)
run(0 "compiled in [0-9.]+ ms\n" QKV_CACHE=0 ${QKV} run seed)
run(0 "removed 1 file\\(s\\) from [^\n]*cli-cache-test" ${QKV} cache clear)
if(NOT EXISTS ${DIR}/notes.txt)
  message(FATAL_ERROR "qkv cache clear removed a file the cache did not write")
endif()
run(0 "entries  0" ${QKV} cache info --dir ${DIR})
run(0 "usage: qkv cache info.*QKV_CACHE_DIR.*QKV_CACHE=0.*QKV_CACHE_MAX_MB" ${QKV} cache --help)
run(2 "unknown subcommand 'purge'" ${QKV} cache purge)
run(2 "info or clear\\?" ${QKV} cache)
run(1 "unknown option --bogus" ${QKV} cache info --bogus 1)
file(REMOVE_RECURSE ${DIR})
