# qkv_add_tool(NAME SOURCES file.cpp...): an executable NAME that is the qkv command line
# (list, dump, run, bench, show, cache) over the graphs its sources register with
# QKV_TOOL_GRAPH (<qkv/tool.hpp>). Part of the qkv package (find_package(qkv CONFIG)
# includes it); qkv's own build uses it too.
function(qkv_add_tool name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "qkv_add_tool(${name}): unexpected arguments ${arg_UNPARSED_ARGUMENTS} "
                        "(qkv_add_tool(NAME SOURCES file.cpp ...))")
  endif()
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "qkv_add_tool(${name}): no SOURCES; give the files that register its "
                        "graphs (QKV_TOOL_GRAPH)")
  endif()
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE qkv::qkv qkv::cli qkv::tool_main)
endfunction()
