#!/usr/bin/env python3
"""The README's code block must be examples/attention_block.cpp's [readme] region, so the
README shows code that compiles and runs."""
import sys

example, readme = sys.argv[1], sys.argv[2]
src = open(example, encoding="utf-8").read()
parts = src.split("  // [readme]\n")
if len(parts) != 3:
    sys.exit(f"{example}: expected one region between two '// [readme]' lines")
region = "\n".join(l[2:] if l.startswith("  ") else l for l in parts[1].split("\n"))
if region not in open(readme, encoding="utf-8").read():
    sys.exit(f"README.md does not show the [readme] region of {example}:\n{region}")
print("README shows", example)
