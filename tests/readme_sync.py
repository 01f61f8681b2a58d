#!/usr/bin/env python3
"""A document's code block must be an example's [readme] region, so the document shows code
that compiles and runs: README.md shows examples/attention_block.cpp, docs/models.md
examples/embed.cpp."""
import sys

example, readme = sys.argv[1], sys.argv[2]
src = open(example, encoding="utf-8").read()
parts = src.split("  // [readme]\n")
if len(parts) != 3:
    sys.exit(f"{example}: expected one region between two '// [readme]' lines")
region = "\n".join(l[2:] if l.startswith("  ") else l for l in parts[1].split("\n"))
if region not in open(readme, encoding="utf-8").read():
    sys.exit(f"{readme} does not show the [readme] region of {example}:\n{region}")
print(readme, "shows", example)
