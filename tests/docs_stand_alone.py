#!/usr/bin/env python3
"""The repository stands on its own: no file under version control points a reader at
notes outside it (the planning folder next to the checkout, its architecture page or its
MLIR notes). Usage: docs_stand_alone.py SOURCE_DIR. Exits 1 listing every hit."""
import os
import re
import sys

# Spelled in pieces so that this file does not match itself.
PATTERNS = [re.compile(p) for p in (r"\.\./" + "shared", "MLIR-" + "NOTES", r"\bARCHITECTURE\.md")]
SKIP_DIRS = {".git", "build", "__pycache__"}
TEXT = (".md", ".cpp", ".hpp", ".h", ".td", ".txt", ".cmake", ".py", ".sh", ".mlir", ".test",
        ".in", ".json", "")


def main(root):
    hits = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
        for f in files:
            if os.path.splitext(f)[1] not in TEXT:
                continue
            path = os.path.join(d, f)
            try:
                lines = open(path, encoding="utf-8").read().splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            for i, line in enumerate(lines, 1):
                if any(p.search(line) for p in PATTERNS):
                    hits.append(f"{os.path.relpath(path, root)}:{i}: {line.strip()}")
    for h in hits:
        print(h)
    print(f"{len(hits)} reference(s) to files outside the repository")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
