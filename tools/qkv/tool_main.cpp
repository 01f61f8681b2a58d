// qkv::tool_main: the main of a user's tool (qkv_add_tool links it): the qkv commands over
// the graphs the program registered (<qkv/tool.hpp>).
#include <qkv/tool.hpp>

int main(int argc, char **argv) { return qkv::tool::main(argc, argv); }
