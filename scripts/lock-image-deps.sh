#!/usr/bin/env bash
# Writes image-requirements.txt: every Python package the image installs (rdmadoctor[k8s]'s
# dependencies and the setuptools that builds it), pinned, with the sha256 of each wheel for
# linux/amd64 and linux/arm64 on the image's CPython 3.11. The Dockerfile installs from it with
# `pip install --require-hashes --only-binary=:all:`: a file changed on the index, or a version
# that was not reviewed, fails the build. Run it after changing pyproject.toml's dependencies,
# on a machine that reaches PyPI, and commit the result:
#   scripts/lock-image-deps.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for arch in x86_64 aarch64; do
    "$PY" -m pip download -q --disable-pip-version-check -d "$work/$arch" --only-binary=:all: \
        --python-version 3.11 --implementation cp \
        --platform "manylinux2014_$arch" --platform "manylinux_2_28_$arch" \
        '.[k8s]' 'setuptools>=77'
done
"$PY" - "$work" > image-requirements.txt <<'PY'
import hashlib, re, sys
from collections import defaultdict
from pathlib import Path

hashes = defaultdict(set)
for whl in sorted(Path(sys.argv[1]).glob("*/*.whl")):
    name, version = whl.name.split("-")[:2]
    name = re.sub(r"[-_.]+", "-", name).lower()
    if name == "rdmadoctor":
        continue
    hashes[f"{name}=={version}"].add(hashlib.sha256(whl.read_bytes()).hexdigest())
print("# Written by scripts/lock-image-deps.sh: rdmadoctor[k8s]'s dependencies and setuptools, for the image")
print("# (CPython 3.11, linux/amd64 and linux/arm64). The Dockerfile installs them with --require-hashes.")
for req in sorted(hashes):
    print(req + "".join(f" \\\n    --hash=sha256:{h}" for h in sorted(hashes[req])))
PY
echo "image-requirements.txt: $(grep -c '==' image-requirements.txt) packages" >&2
