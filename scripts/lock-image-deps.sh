#!/usr/bin/env bash
# Writes image-requirements.txt: every Python package the image installs (rdmadoctor[k8s]'s
# dependencies and the setuptools that builds it), pinned, with the sha256 of each wheel for
# linux/amd64 and linux/arm64 on the image's CPython 3.11 (the platforms release.yml builds), and
# above each package a comment naming the file of every hash, so tests/contract/test_release.py can tell
# offline that each platform has its wheel. The Dockerfile installs from it with
# `pip install --require-hashes --only-binary=:all:`: a file changed on the index, or a version
# that was not reviewed, fails the build. Run it after changing pyproject.toml's dependencies,
# on a machine that reaches PyPI, and commit the result:
#   scripts/lock-image-deps.sh [--upgrade] [PYTHON]
# The versions already locked are kept (passed to pip as constraints) unless --upgrade is given,
# so a run only adds what is missing: a new dependency, a platform's hash. pip reads its usual
# configuration: to lock from PyPI itself past a local mirror, run it with
# PIP_CONFIG_FILE=/dev/null PIP_INDEX_URL=https://pypi.org/simple.
set -euo pipefail
cd "$(dirname "$0")/.."
upgrade=
if [ "${1:-}" = "--upgrade" ]; then upgrade=1; shift; fi
PY=${1:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$work/constraints.txt"
if [ -z "$upgrade" ] && [ -f image-requirements.txt ]; then
    grep -E '^[A-Za-z0-9][A-Za-z0-9._-]*==[^ ]+' image-requirements.txt | sed -E 's/ .*//' > "$work/constraints.txt" || true
fi
for arch in x86_64 aarch64; do
    "$PY" -m pip download -q --disable-pip-version-check -d "$work/$arch" --only-binary=:all: \
        --python-version 3.11 --implementation cp \
        --platform "manylinux2014_$arch" --platform "manylinux_2_28_$arch" \
        -c "$work/constraints.txt" '.[k8s]' 'setuptools>=77'
done
"$PY" - "$work" > "$work/image-requirements.txt" <<'PY'
import hashlib, re, sys
from collections import defaultdict
from pathlib import Path

files = defaultdict(dict)
for whl in sorted(Path(sys.argv[1]).glob("*/*.whl")):
    name, version = whl.name.split("-")[:2]
    name = re.sub(r"[-_.]+", "-", name).lower()
    if name == "rdmadoctor":
        continue
    files[f"{name}=={version}"][whl.name] = hashlib.sha256(whl.read_bytes()).hexdigest()
print("# Written by scripts/lock-image-deps.sh: rdmadoctor[k8s]'s dependencies and setuptools, for the image")
print("# (CPython 3.11, linux/amd64 and linux/arm64). The Dockerfile installs them with --require-hashes.")
print("# Above each package, the file each hash is of.")
for req in sorted(files):
    for filename, digest in sorted(files[req].items()):
        print(f"# {filename} sha256:{digest}")
    print(req + "".join(f" \\\n    --hash=sha256:{h}" for h in sorted(set(files[req].values()))))
PY
mv "$work/image-requirements.txt" image-requirements.txt
echo "image-requirements.txt: $(grep -c '==' image-requirements.txt) packages" >&2
