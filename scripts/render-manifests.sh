#!/usr/bin/env bash
# Renders every kustomization in deploy/ into one plain manifest each, the files a release
# attaches (.github/workflows/release.yml), so that
#   kubectl apply -f https://github.com/OWNER/rdmadoctor/releases/download/vX.Y.Z/rdmadoctor.yaml
# works without a clone:
#   rdmadoctor.yaml                    deploy/base (NFD mode)
#   rdmadoctor-<overlay>.yaml          deploy/overlays/<overlay> (direct, direct-conditions, direct-quarantine, nfd-cleanup)
#   rdmadoctor-npd.yaml                deploy/npd
#   rdmadoctor-monitoring.yaml         deploy/monitoring (prometheus-operator)
#   rdmadoctor-monitoring-networkpolicy.yaml  deploy/monitoring/networkpolicy (optional)
# Usage: scripts/render-manifests.sh OUTDIR   (kubectl, or kustomize where kubectl is absent)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/render-manifests.sh OUTDIR}
mkdir -p "$out"

if command -v kubectl >/dev/null; then
    render() { kubectl kustomize "$1"; }
elif command -v kustomize >/dev/null; then
    render() { kustomize build "$1"; }
else
    echo "render-manifests.sh: neither kubectl nor kustomize is installed" >&2
    exit 2
fi

render deploy/base > "$out/rdmadoctor.yaml"
for d in deploy/overlays/*/; do
    name=$(basename "$d")
    render "$d" > "$out/rdmadoctor-$name.yaml"
done
render deploy/npd > "$out/rdmadoctor-npd.yaml"
render deploy/monitoring > "$out/rdmadoctor-monitoring.yaml"
render deploy/monitoring/networkpolicy > "$out/rdmadoctor-monitoring-networkpolicy.yaml"
ls "$out"/rdmadoctor*.yaml
