#!/usr/bin/env python3
"""No function of qkv's libraries is longer than LIMIT lines (from its signature to its
closing brace, blank and comment lines included), as lizard counts them.

Usage: function_length.py SOURCE_DIR LIMIT FOLDER...

lizard is imported from the wheels scripts/fetch-lizard.sh downloads (lizard and the
packages it imports, pinned) where they lie, in the directory that script names. Exits 1 listing every function over the
limit, 2 when the wheels are missing."""
import glob
import os
import subprocess
import sys


def main(root, limit, folders):
    fetch = os.path.join(root, "scripts", "fetch-lizard.sh")
    wheels = subprocess.run(["bash", fetch, "--dir"], check=True, capture_output=True,
                            text=True).stdout.strip()
    found = sorted(glob.glob(os.path.join(wheels, "*.whl")))
    if not any(os.path.basename(w).startswith("lizard-") for w in found):
        print(f"function_length: no lizard wheel in {wheels}: run scripts/fetch-lizard.sh "
              "(./qkv.sh test does)", file=sys.stderr)
        return 2
    sys.path[:0] = found
    import lizard

    paths = [os.path.join(root, f) for f in folders]
    counted, over = 0, []
    for info in lizard.analyze(paths, exclude_pattern=["*/build*"]):
        for fn in info.function_list:
            counted += 1
            if fn.length > limit:
                rel = os.path.relpath(info.filename, root)
                over.append(f"{rel}:{fn.start_line}: {fn.long_name} is {fn.length} lines")
    if counted == 0:
        print(f"function_length: lizard found no function under {', '.join(folders)}",
              file=sys.stderr)
        return 1
    for line in over:
        print(line)
    print(f"function_length: {counted} functions in {', '.join(folders)}, "
          f"{len(over)} over {limit} lines")
    return 1 if over else 0


if __name__ == "__main__":
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3:]))
