// qkv: the command-line tool over the built-in gallery of graphs (gallery.hpp), plus
// `qkv embed` (sentence embeddings with a pretrained model, embed.cpp). The commands are
// qkv::tool::main's (tool.cpp), which a user's tool runs over its own graphs.
#include <qkv/tool.hpp>

#include "cli.hpp"
#include "embed.hpp"
#include "gallery.hpp"

int main(int argc, char **argv) {
  qkv::cli::set_about("compile, inspect and check attention graphs from the built-in "
                      "gallery,\nand embed sentences with a pretrained model.");
  for (const qkv::gallery::Entry &e : qkv::gallery::entries())
    qkv::gallery::add_entry(e);
  qkv::cli::add_command({"embed",
                         "SENTENCE...    sentence embeddings and their cosine similarities "
                         "(all-MiniLM-L6-v2)",
                         qkv::tool::kEmbedHelp, qkv::tool::cmd_embed});
  return qkv::tool::main(argc, argv);
}
