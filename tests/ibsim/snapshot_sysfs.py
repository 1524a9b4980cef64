"""Copy the sysfs tree that umad2sim fakes for this process into DEST/sys.

Run with LD_PRELOAD=libumad2sim.so and SIM_HOST=<node>. umad2sim builds the tree on the first
open()/opendir() of /sys/class/infiniband, under ./sys-<pid>/sys in the current directory, as a
snapshot of the port at that moment, and deletes it when the process exits: so the copy must be
taken from inside a preloaded process, which is what this script is.
"""

import os
import shutil
import sys


def main() -> int:
    dest = sys.argv[1]
    # CPython's os.listdir calls opendir(), which umad2sim intercepts: this builds the tree.
    names = os.listdir("/sys/class/infiniband")
    tree = f"sys-{os.getpid()}/sys"
    if not os.path.isdir(tree):
        print(f"no ./{tree}: is libumad2sim.so preloaded? /sys/class/infiniband lists {names}", file=sys.stderr)
        return 2
    shutil.copytree(tree, os.path.join(dest, "sys"), symlinks=True)
    print(" ".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
