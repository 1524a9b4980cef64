#!/usr/bin/env bash
# Moves the version everywhere it is written, for a release:
#   scripts/bump-version.sh 0.2.0
# - rdmadoctor/__init__.py's __version__ (the package, `rdmadoctor --version`, the report, the
#   sdist and wheel, the image's /metrics build_info);
# - the image tag: deploy/base/kustomization.yaml's images: newTag, and every
#   ghcr.io/rdmadoctor/rdmadoctor:<old> in deploy/, README.md, docs/ (docs/image.md) and the
#   Dockerfile's comment;
# - the alerts' runbook URLs (deploy/monitoring: .../blob/v<old>/docs/...);
# - CHANGELOG.md: what is under [Unreleased] becomes the section [0.2.0] - today.
# Then: review `git diff`, commit, `git tag v0.2.0`, push the tag (.github/workflows/release.yml
# builds and publishes it). tests/contract/test_release.py fails while any of these disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
new=${1:?usage: scripts/bump-version.sh X.Y.Z}
if ! [[ $new =~ ^[0-9]+\.[0-9]+\.[0-9]+([a-z0-9.+-]*)$ ]]; then
    echo "bump-version.sh: '$new' is not a version (X.Y.Z)" >&2
    exit 2
fi
old=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' rdmadoctor/__init__.py)
if [ -z "$old" ] || [ "$old" = "$new" ]; then
    echo "bump-version.sh: the version is '$old' already (rdmadoctor/__init__.py)" >&2
    exit 2
fi
if grep -q "^## \[$new\]" CHANGELOG.md; then
    echo "bump-version.sh: CHANGELOG.md has a section for $new already" >&2
    exit 2
fi
oldre=${old//./\\.}

sed -i "s/^__version__ = \"$oldre\"$/__version__ = \"$new\"/" rdmadoctor/__init__.py
sed -i "s/^\(    newTag: \)$oldre$/\1$new/" deploy/base/kustomization.yaml
mapfile -t files < <(grep -rlE "rdmadoctor:$oldre([^0-9A-Za-z.]|$)" deploy README.md docs Dockerfile || true)
for f in "${files[@]}"; do
    sed -i -E "s/(rdmadoctor:)$oldre([^0-9A-Za-z.]|$)/\1$new\2/g" "$f"
done
# The alerts' runbook URLs name the release's docs (deploy/monitoring: blob/vX.Y.Z/docs/...).
mapfile -t pinned < <(grep -rlE "/blob/v$oldre/docs/" deploy || true)
for f in "${pinned[@]}"; do
    sed -i "s#/blob/v$oldre/docs/#/blob/v$new/docs/#g" "$f"
done
today=$(date -u +%Y-%m-%d)
awk -v v="$new" -v d="$today" '
    !done && /^## \[Unreleased\]/ { print; print ""; print "## [" v "] - " d; done = 1; next }
    { print }
    END { if (!done) { print "bump-version.sh: CHANGELOG.md has no ## [Unreleased] section" > "/dev/stderr"; exit 1 } }
' CHANGELOG.md > CHANGELOG.md.new
mv CHANGELOG.md.new CHANGELOG.md
echo "rdmadoctor $old -> $new: rdmadoctor/__init__.py, deploy/base/kustomization.yaml, CHANGELOG.md and ${#files[@]} files naming the image"
