"""deploy/ and the image: every manifest validates against Kubernetes' own OpenAPI schemas in
strict mode, the kustomize builds render (and validate), the DaemonSet's security settings hold,
its mounts cover what the checks read, its arguments are flags the real CLI has, and the direct
overlay's ValidatingAdmissionPolicy allows exactly what it says (evaluated with cel-python).
tests/contract/test_deploy_harden.py adds what hardening needed (issue 10: the NFD relay, every status
field pinned, the API token and Events) and runs the NFD-mode pod's steps in a sandbox.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BUILDS = {"base": DEPLOY / "base", "direct": DEPLOY / "overlays" / "direct", "direct-conditions": DEPLOY / "overlays" / "direct-conditions",
          "direct-quarantine": DEPLOY / "overlays" / "direct-quarantine"}
EXAMPLES = DEPLOY / "examples"
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
# The relay's own directory in it, the only host path a container of the NFD-mode pod writes
# (tests/contract/test_deploy_harden.py has the rest).
OWN_DIR = FEATURES_DIR + "/.rdmadoctor"
# Kinds kubernetes-validate has no schema for (CRDs); their pod templates are validated instead.
CRD_KINDS = {("kubeflow.org/v1", "PyTorchJob"), ("batch.volcano.sh/v1alpha1", "Job"), ("kubeflow.org/v2beta1", "MPIJob")}
# prometheus-operator's kinds in deploy/monitoring: tests/system/test_monitoring.py checks them.
MONITORING_KINDS = {("monitoring.coreos.com/v1", "PodMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}
# 1.30: the oldest release the direct overlay supports (ValidatingAdmissionPolicy v1, node-name
# claim in pod-bound tokens); and the newest release the installed kubernetes-validate knows.
MIN_K8S = "1.30.0"


# ---- loading ----------------------------------------------------------------------------------
def _load_all(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def manifest_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*.yaml") if p.name != "kustomization.yaml")


def manifest_docs() -> list[tuple[str, dict]]:
    out = []
    for path in manifest_files():
        for i, doc in enumerate(_load_all(path.read_text())):
            # Not every YAML file is a Kubernetes object: deploy/monitoring's Prometheus rule
            # files (rules.yaml, rules.test.yaml) are read by Prometheus and promtool.
            if isinstance(doc, dict) and "kind" in doc and "apiVersion" in doc:
                out.append((f"{path.relative_to(DEPLOY)}#{i}", doc))
    return out


def _versions() -> list[str]:
    kv = pytest.importorskip("kubernetes_validate")
    latest = kv.utils.latest_version()
    return [MIN_K8S, latest] if latest != MIN_K8S else [MIN_K8S]


def validate_strict(doc: dict, version: str) -> None:
    import kubernetes_validate as kv

    kv.validate(doc, version, strict=True)


def validate_as(obj: dict, schema_file: str, version: str) -> None:
    """Validate a fragment (a pod template) against one strict schema file of kubernetes-validate,
    the way kubernetes_validate.validate does for whole objects."""
    import jsonschema
    from kubernetes_validate import utils as u
    from referencing import Registry, Resource

    have = [v for v in u.all_versions() if u.Version(v) <= u.Version(version)]
    folder = f"kubernetes-json-schema/v{have[-1]}-local-strict"
    schema = u.schema_contents(f"{folder}/{schema_file}", version)
    defs = u.schema_contents(f"{folder}/_definitions.json", version)
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    jsonschema.validators.Draft202012Validator(schema, registry=registry).validate(obj)


def kustomize(path: Path) -> list[dict]:
    if shutil.which("kubectl"):
        argv = ["kubectl", "kustomize", str(path)]
    elif shutil.which("kustomize"):
        argv = ["kustomize", "build", str(path)]
    else:
        pytest.skip("neither kubectl nor kustomize is installed: the kustomize builds cannot be rendered")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return _load_all(proc.stdout)


_rendered: dict[str, list[dict]] = {}


def rendered(name: str) -> list[dict]:
    if name not in _rendered:
        _rendered[name] = kustomize(BUILDS[name])
    return _rendered[name]


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def daemonset(name: str) -> dict:
    return one(rendered(name), "DaemonSet", "rdmadoctor")


def agent(pod: dict) -> dict:
    return next(c for c in pod["containers"] if c["name"] == "agent")


def pod_templates(doc: dict) -> Iterator[tuple[str, dict]]:
    """(where, template) of every pod a manifest makes, CRDs included."""
    kind = doc["kind"]
    if kind == "Pod":
        yield "pod", {"metadata": doc.get("metadata", {}), "spec": doc["spec"]}
    elif kind == "PyTorchJob":
        for role, spec in doc["spec"]["pytorchReplicaSpecs"].items():
            yield role, spec["template"]
    elif (doc["apiVersion"], kind) == ("batch.volcano.sh/v1alpha1", "Job"):
        for task in doc["spec"]["tasks"]:
            yield task["name"], task["template"]
    elif kind == "MPIJob":
        for role, spec in doc["spec"]["mpiReplicaSpecs"].items():
            yield role, spec["template"]
    elif "template" in doc.get("spec", {}):
        yield kind, doc["spec"]["template"]


def containers(pod: dict) -> list[dict]:
    return list(pod.get("initContainers") or []) + list(pod["containers"])


def runs_no_rank(doc: dict, where: str) -> bool:
    """An MPIJob's launcher only runs mpirun: no GPU, no HCA, no gate of its own (the ranks it
    starts on the workers run `rdmadoctor run`; tests/contract/test_mpijob.py checks that)."""
    return doc["kind"] == "MPIJob" and where == "Launcher"


# ---- every manifest, strict, against real Kubernetes schemas -----------------------------------
def test_deploy_tree_is_complete() -> None:
    names = {str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*") if p.is_file()}
    for need in (
        "README.md", "base/kustomization.yaml", "base/daemonset.yaml", "overlays/direct/kustomization.yaml",
        "overlays/direct/admission-policy.yaml", "examples/pytorchjob.yaml", "examples/volcano-job.yaml", "examples/pod.yaml",
        "examples/mpijob.yaml",
    ):
        assert need in names
    for path in DEPLOY.rglob("kustomization.yaml"):
        k = yaml.safe_load(path.read_text())
        for res in k.get("resources", []):
            assert (path.parent / res).exists(), f"{path}: resource {res} does not exist"


@pytest.mark.parametrize("where,doc", manifest_docs(), ids=[w for w, _ in manifest_docs()])
def test_manifest_validates_strict(where: str, doc: dict) -> None:
    if (doc.get("apiVersion"), doc.get("kind")) in CRD_KINDS:
        pytest.skip("a CRD: its pod templates are validated by test_crd_examples")
    if (doc.get("apiVersion"), doc.get("kind")) in MONITORING_KINDS:
        pytest.skip("a prometheus-operator object: tests/system/test_monitoring.py checks it")
    for version in _versions():
        validate_strict(doc, version)


def test_strict_validation_rejects_a_typo() -> None:
    """The validation above would catch a misspelt field (strict mode really is strict)."""
    import kubernetes_validate as kv

    doc = yaml.safe_load((DEPLOY / "base" / "daemonset.yaml").read_text())
    doc["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kv.ValidationError):
        validate_strict(doc, _versions()[-1])
    tpl = {"metadata": {}, "spec": {"containers": [{"name": "x", "image": "y", "comand": ["z"]}]}}
    import jsonschema

    with pytest.raises(jsonschema.ValidationError):
        validate_as(tpl, "podtemplatespec-v1.json", _versions()[-1])


def test_crd_examples() -> None:
    """PyTorchJob and the Volcano Job: their shape checked by hand, every pod template strictly."""
    docs = {d["kind"]: d for p in EXAMPLES.glob("*.yaml") for d in _load_all(p.read_text())}
    ptj = docs["PyTorchJob"]
    assert ptj["apiVersion"] == "kubeflow.org/v1"
    specs = ptj["spec"]["pytorchReplicaSpecs"]
    assert set(specs) == {"Master", "Worker"}
    assert specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] >= 1
    for role, spec in specs.items():
        assert spec["restartPolicy"] in ("Always", "OnFailure", "Never", "ExitCode")
        # The training-operator finds the trainer by this container name.
        assert any(c["name"] == "pytorch" for c in spec["template"]["spec"]["containers"]), role
    vc = docs["Job"]
    assert vc["apiVersion"] == "batch.volcano.sh/v1alpha1"
    assert set(vc["spec"]["plugins"]) >= {"svc", "env"}
    tasks = {t["name"]: t for t in vc["spec"]["tasks"]}
    assert set(tasks) == {"master", "worker"}
    assert vc["spec"]["minAvailable"] == sum(t["replicas"] for t in tasks.values())
    assert vc["spec"]["schedulerName"] == "volcano"
    for doc in (ptj, vc):
        for where, tpl in pod_templates(doc):
            for version in _versions():
                validate_as(tpl, "podtemplatespec-v1.json", version)


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_kustomize_build_renders_and_validates(build: str) -> None:
    docs = rendered(build)
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "ServiceAccount", "DaemonSet", "ConfigMap", "PriorityClass"} <= kinds
    for doc in docs:
        for version in _versions():
            validate_strict(doc, version)


# ---- security ----------------------------------------------------------------------------------
@pytest.mark.parametrize("build", sorted(BUILDS))
def test_daemonset_security(build: str) -> None:
    pod = daemonset(build)["spec"]["template"]["spec"]
    psc = pod.get("securityContext", {})
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    assert pod.get("priorityClassName") not in ("system-node-critical", "system-cluster-critical")
    for c in containers(pod):
        sc = c.get("securityContext", {})
        assert sc.get("readOnlyRootFilesystem") is True, c["name"]
        assert sc.get("allowPrivilegeEscalation") is False, c["name"]
        assert not sc.get("privileged"), c["name"]
        assert sc.get("capabilities", {}).get("drop") == ["ALL"], c["name"]
        assert not sc.get("capabilities", {}).get("add"), c["name"]
        seccomp = sc.get("seccompProfile") or psc.get("seccompProfile")
        assert seccomp == {"type": "RuntimeDefault"}, c["name"]
    # The agent itself: non-root, as a uid the kubelet can verify.
    a = agent(pod)
    uid = a.get("securityContext", {}).get("runAsUser", psc.get("runAsUser"))
    assert isinstance(uid, int) and uid != 0
    assert a["securityContext"].get("runAsNonRoot", psc.get("runAsNonRoot")) is True
    # An init step running as uid 0 may touch nothing but the features directory.
    for c in pod.get("initContainers") or []:
        if c.get("securityContext", {}).get("runAsUser", psc.get("runAsUser")) == 0:
            assert [m["mountPath"] for m in c.get("volumeMounts", [])] == [FEATURES_DIR], c["name"]


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_host_mounts_read_only_except_features_dir(build: str) -> None:
    pod = daemonset(build)["spec"]["template"]["spec"]
    host_volumes = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    writable = []
    for c in containers(pod):
        for m in c.get("volumeMounts", []):
            if m["name"] in host_volumes and not m.get("readOnly"):
                writable.append((c["name"], host_volumes[m["name"]]))
    if build == "base":
        # NFD mode: the init step sets up features.d, the relay writes its own directory there.
        assert sorted(writable) == [("features-dir", FEATURES_DIR), ("nfd-relay", OWN_DIR)]
    else:
        assert not writable  # direct mode writes only through the API
        assert not [p for p in host_volumes.values() if p.startswith(FEATURES_DIR)]
    # /sys: its submounts (cgroupfs, debugfs ...) read-only too where the runtime can.
    sys_mount = next(m for m in agent(pod)["volumeMounts"] if host_volumes.get(m["name"]) == "/sys")
    assert sys_mount.get("recursiveReadOnly") in ("IfPossible", "Enabled")


def test_no_api_token_in_base() -> None:
    docs = rendered("base")
    assert one(docs, "ServiceAccount", "rdmadoctor")["automountServiceAccountToken"] is False
    assert daemonset("base")["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")]


def test_direct_overlay_least_privilege() -> None:
    docs = rendered("direct")
    sa = one(docs, "ServiceAccount", "rdmadoctor")
    pod = daemonset("direct")["spec"]["template"]["spec"]
    # The API token is a projected one of at most an hour (tests/contract/test_deploy_harden.py).
    assert [v["name"] for v in pod["volumes"] if "projected" in v] == ["api-token"]
    roles = [d for d in docs if d["kind"] == "ClusterRole"]
    rules = [(tuple(r["apiGroups"]), tuple(r["resources"]), tuple(sorted(r["verbs"]))) for role in roles for r in role["rules"]]
    assert rules == [(("",), ("nodes",), ("get", "patch"))]
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == roles[0]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}]
    # With --conditions: nodes/status patch and events create, nothing more.
    cdocs = rendered("direct-conditions")
    crules = {
        (g, res, v)
        for d in cdocs
        if d["kind"] == "ClusterRole"
        for r in d["rules"]
        for g in r["apiGroups"]
        for res in r["resources"]
        for v in r["verbs"]
    }
    assert crules == {("", "nodes", "get"), ("", "nodes", "patch"), ("", "nodes/status", "patch")}
    # Events: create only, core group only, only in "default" (where node events go).
    (role,) = [d for d in cdocs if d["kind"] == "Role"]
    assert role["metadata"]["namespace"] == "default"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    (rb,) = [d for d in cdocs if d["kind"] == "RoleBinding"]
    assert rb["metadata"]["namespace"] == "default" and rb["roleRef"]["name"] == role["metadata"]["name"]
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "rdmadoctor", "namespace": "rdmadoctor"}]
    assert "--conditions" in agent(daemonset("direct-conditions")["spec"]["template"]["spec"])["args"]
    assert "--conditions" not in agent(pod)["args"]


@pytest.mark.parametrize("build", ["direct", "direct-conditions", "direct-quarantine"])
def test_admission_policy_names_the_agent(build: str) -> None:
    docs = rendered(build)
    sa = one(docs, "ServiceAccount", "rdmadoctor")
    vap = one(docs, "ValidatingAdmissionPolicy", "rdmadoctor-own-node-labels")
    vapb = one(docs, "ValidatingAdmissionPolicyBinding", "rdmadoctor-own-node-labels")
    assert vapb["spec"]["policyName"] == vap["metadata"]["name"]
    assert vapb["spec"]["validationActions"] == ["Deny"]
    assert vap["spec"]["failurePolicy"] == "Fail"
    username = f"system:serviceaccount:{sa['metadata']['namespace']}:{sa['metadata']['name']}"
    assert [m["expression"] for m in vap["spec"]["matchConditions"]] == [f"request.userInfo.username == '{username}'"]
    rules = vap["spec"]["matchConstraints"]["resourceRules"]
    assert [(r["operations"], sorted(r["resources"])) for r in rules] == [(["UPDATE"], ["nodes", "nodes/status"])]
    # The pod tells the agent which node it is on: the one its token is bound to.
    a = agent(daemonset(build)["spec"]["template"]["spec"])
    args = a["args"]
    assert args[args.index("--publish") + 1] == "node" and args[args.index("--node") + 1] == "$(NODE_NAME)"
    env = {e["name"]: e for e in a["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


# ---- the agent's arguments agree with its mounts, and with the real CLI --------------------------
def _arg(args: list[str], flag: str) -> str:
    assert flag in args, f"{flag} not in {args}"
    return args[args.index(flag) + 1]


def test_agent_args_agree_with_the_pod() -> None:
    ds = daemonset("base")
    pod = ds["spec"]["template"]["spec"]
    a = agent(pod)
    args = a["args"]
    assert args[0] == "agent"
    assert _arg(args, "--publish") == "nfd"
    assert _arg(args, "--log-format") == "json"
    assert _arg(args, "--interval") == "60"
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in a["volumeMounts"]}
    # --features-dir is an emptyDir the relay copies into NFD's features.d (tests/contract/test_deploy_harden.py).
    fd = _arg(args, "--features-dir")
    assert "emptyDir" in volumes[mounts[fd]["name"]] and not mounts[fd].get("readOnly")
    # --report-file lives on an emptyDir (the root filesystem is read-only).
    rf = _arg(args, "--report-file")
    assert "emptyDir" in volumes[mounts[posixpath.dirname(rf)]["name"]]
    # --metrics-port is the port named "metrics" that the probes and Prometheus use.
    port = int(_arg(args, "--metrics-port"))
    assert {p["name"]: p["containerPort"] for p in a["ports"]} == {"metrics": port}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert a[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    # --root /host: every other hostPath appears at /host + its path.
    root = _arg(args, "--root")
    for m in a["volumeMounts"]:
        hp = volumes[m["name"]].get("hostPath")
        if hp:
            assert m["mountPath"] == root + hp["path"] and m.get("readOnly") is True, m
    # --config is the ConfigMap's file.
    cfg = _arg(args, "--config")
    cm_mount = mounts[posixpath.dirname(cfg)]
    assert volumes[cm_mount["name"]]["configMap"]["name"] == "rdmadoctor-agent"
    cm = one(rendered("base"), "ConfigMap", "rdmadoctor-agent")
    assert posixpath.basename(cfg) in cm["data"]
    # Modest, and bounded.
    assert a["resources"]["requests"] == {"cpu": "20m", "memory": "64Mi"}
    assert a["resources"]["limits"] == {"memory": "128Mi"}
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}}


def test_node_selection_does_not_depend_on_rdmadoctor_labels() -> None:
    """The agent sets these labels: selecting on them would keep it off every node lacking them."""
    from rdmadoctor.core import labels

    pod = daemonset("base")["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    keys = {e["key"] for t in terms for e in t["matchExpressions"]} | set(pod.get("nodeSelector", {}))
    assert keys and not keys & set(labels.OWNED)
    assert "feature.node.kubernetes.io/pci-15b3.present" in keys
    tolerated = {t.get("key") for t in pod["tolerations"]}
    assert "nvidia.com/gpu" in tolerated


def test_agent_config_judges_the_node_not_the_agent_pod(tmp_path: Path) -> None:
    """node.toml resolves, and the agent's node scope on the broken-pod example skips exactly the
    pod-scope checks (memlock, /dev/shm, userspace, NCCL env) while the node's own problem (a
    port down) still fails and keeps ready=false."""
    from rdmadoctor.runner import Options, diagnose

    cm = one(rendered("base"), "ConfigMap", "rdmadoctor-agent")
    cfg = tmp_path / "node.toml"
    cfg.write_text(cm["data"]["node.toml"])
    pod_scope = {"limits.memlock", "shm.size", "verbs.userspace", "nccl.env", "logs.diagnose"}
    plain = {r.id: r.status for r in diagnose(Options(example="broken-pod")).results}
    diag = diagnose(Options(example="broken-pod", config=str(cfg), scope="node"))
    node = {r.id: r.status for r in diag.results}
    assert plain["limits.memlock"] == "fail" and plain["shm.size"] == "fail"
    # ib.counters is skipped without a counter history (the agent keeps one; a bare diagnose has none).
    assert {k for k, v in node.items() if v == "skip" and k not in ("roce.config", "iwarp.config", "ib.counters")} == pod_scope
    assert node["ib.ports"] == "fail"
    assert {k: v for k, v in node.items() if k not in pod_scope} == {k: v for k, v in plain.items() if k not in pod_scope}
    assert diag.report["labels"]["rdmadoctor.io/ready"] == "false" and diag.report["scope"] == "node"


def _help_flags(command: str) -> set[str]:
    env = {**os.environ, "COLUMNS": "300", "NO_COLOR": "1", "TERM": "dumb"}
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", command, "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    if proc.returncode != 0 and "No such command" in proc.stdout + proc.stderr:
        pytest.skip(f"`rdmadoctor {command}` does not exist yet (being written in parallel)")
    assert proc.returncode == 0, proc.stderr
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", proc.stdout))


def _flags(argv: list[str]) -> list[str]:
    out = []
    for a in argv:
        if a == "--":
            break
        if a.startswith("--"):
            out.append(a.split("=", 1)[0])
    return out


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_agent_args_are_real_flags(build: str) -> None:
    args = agent(daemonset(build)["spec"]["template"]["spec"])["args"]
    assert args[0] == "agent"
    known = _help_flags("agent")
    assert "--features-dir" in known  # the help was parsed, not an empty set
    assert set(_flags(args[1:])) <= known, set(_flags(args[1:])) - known


def _preflight_invocations() -> list[tuple[str, list[str]]]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in _load_all(path.read_text()):
            for where, tpl in pod_templates(doc):
                for c in containers(tpl["spec"]):
                    argv = list(c.get("command") or []) + list(c.get("args") or [])
                    if c.get("image", "").startswith("ghcr.io/rdmadoctor/") and not c.get("command"):
                        argv = ["rdmadoctor", *argv]  # the image's ENTRYPOINT
                    if argv[:2] == ["rdmadoctor", "preflight"]:
                        found.append((f"{path.name}:{where}:{c['name']}", argv[2:]))
    return found


def test_examples_use_preflight_both_ways() -> None:
    calls = dict(_preflight_invocations())
    # An init container in every pod, and the prefix form (--exec -- torchrun) in the workers.
    assert any(k.startswith("pytorchjob.yaml:Worker:") and "--exec" in v and "--wait-for-master" in v for k, v in calls.items())
    assert any(k.startswith("volcano-job.yaml:worker:") and "--exec" in v for k, v in calls.items())
    for path in EXAMPLES.glob("*.yaml"):
        for doc in _load_all(path.read_text()):
            for where, tpl in pod_templates(doc):
                if runs_no_rank(doc, where):
                    continue
                inits = tpl["spec"].get("initContainers") or []
                assert any(f"{path.name}:{where}:{c['name']}" in calls for c in inits), (path.name, where)
    for where, argv in calls.items():
        if "--exec" in argv:
            rest = argv[argv.index("--exec") + 1 :]
            assert rest[0] == "--" and len(rest) > 1, where


def test_preflight_args_are_real_flags() -> None:
    known = _help_flags("preflight")
    assert "--wait-for-master" in known
    for where, argv in _preflight_invocations():
        assert set(_flags(argv)) <= known, (where, set(_flags(argv)) - known)


# ---- the examples: what an RDMA pod needs ------------------------------------------------------
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_example_pods_are_rdma_ready(path: Path) -> None:
    for doc in _load_all(path.read_text()):
        for where, tpl in pod_templates(doc):
            spec = tpl["spec"]
            if runs_no_rank(doc, where):
                assert not any("nvidia.com/gpu" in c.get("resources", {}).get("limits", {}) for c in containers(spec)), where
                continue
            shm = [v for v in spec["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
            assert len(shm) == 1 and shm[0]["emptyDir"].get("sizeLimit"), where
            terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            assert any(
                e == {"key": "feature.node.kubernetes.io/network-rdma.capable", "operator": "In", "values": ["true"]}
                for t in terms
                for e in t["matchExpressions"]
            ), where
            for c in containers(spec):
                name = f"{where}/{c['name']}"
                assert "IPC_LOCK" in c.get("securityContext", {}).get("capabilities", {}).get("add", []), name
                assert any(m["name"] == shm[0]["name"] and m["mountPath"] == "/dev/shm" for m in c.get("volumeMounts", [])), name
                assert "rdma/hca" in c["resources"]["limits"], name
                env = {e["name"]: e.get("value") for e in c.get("env", [])}
                if doc["kind"] == "MPIJob" and c in spec["containers"]:
                    # sshd: the ranks it starts get their env from mpirun -x, not from this container
                    # (tests/contract/test_mpijob.py checks the launcher's env and the init container's).
                    assert not any(k.startswith("NCCL_") for k in env), name
                    continue
                if doc["kind"] != "Pod":  # the NCCL jobs
                    assert re.fullmatch(r"=mlx5_\d+(,mlx5_\d+)*", env["NCCL_IB_HCA"]), name
                    assert env["NCCL_SOCKET_IFNAME"] and "nvidia.com/gpu" in c["resources"]["limits"], name
                    if c in spec["containers"]:
                        assert env["NCCL_DEBUG"] == "INFO", name


def test_image_tag_is_the_package_version() -> None:
    from rdmadoctor import __version__

    images = set()
    for _, doc in manifest_docs():
        for _, tpl in pod_templates(doc):
            images |= {c["image"] for c in containers(tpl["spec"]) if "rdmadoctor" in c["image"]}
    assert images == {f"ghcr.io/rdmadoctor/rdmadoctor:{__version__}"}


# ---- the mounts cover what the checks read ------------------------------------------------------
# Read by the checks but deliberately not mounted, and why.
NOT_MOUNTED = {
    "/cmd": "recorded tool outputs: bundles only",
    "/runtime.json": "bundles only",
    "/proc/self": "the running process' own limits and capabilities (live, not through the root)",
    "/etc/nccl.conf": "the job's NCCL settings live in its own image, not on the host",
}


def _covered(path: str, host_paths: list[str]) -> bool:
    return any(path == h or path.startswith(h.rstrip("/") + "/") for h in host_paths)


def test_mounts_cover_what_the_checks_read() -> None:
    """Run every check on the example bundles with a tracing host: every file or folder a check
    read must sit under a hostPath the DaemonSet mounts at /host (or be listed in NOT_MOUNTED)."""
    from rdmadoctor.checks import verbs
    from rdmadoctor.runner import Options, diagnose, open_target

    pod = daemonset("base")["spec"]["template"]["spec"]
    agent_volumes = {m["name"] for m in agent(pod)["volumeMounts"]}
    host_paths = [v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v and v["name"] in agent_volumes]
    read: set[str] = set()
    for example in ("hgx-h100-ib", "roce-node", "broken-pod"):
        opts = Options(example=example)
        host = open_target(opts)
        diagnose(opts, host=host)
        read |= set(host.trace)
    # Places the checks look in that a bundle may lack.
    read |= {verbs.CONFIG_DIR, verbs.DPKG_STATUS, "/dev/infiniband", "/etc/ld.so.conf.d"}
    read |= {d for d in verbs.LIB_DIRS if d.startswith("/usr/")}
    assert any(p.startswith("/sys/class/infiniband") for p in read)  # the trace saw the checks work
    missing = sorted(p for p in read if not _covered(p, host_paths) and not _covered(p, list(NOT_MOUNTED)))
    assert not missing, f"read by the checks, not mounted: {missing}"
    # And nothing mounted that no check reads.
    unused = [h for h in host_paths if not any(_covered(p, [h]) for p in read)]
    assert not unused, unused


# ---- the ValidatingAdmissionPolicy, evaluated ---------------------------------------------------
AGENT_USER = "system:serviceaccount:rdmadoctor:rdmadoctor"
NODE_CLAIM = "authentication.kubernetes.io/node-name"


def _node(name: str = "gpu-07", **over: Any) -> dict:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "node-role.kubernetes.io/worker": "",
                "feature.node.kubernetes.io/pci-15b3.present": "true",
                "rdmadoctor.io/ready": "true",
                "rdmadoctor.io/gpu-nic": "PIX",
                "feature.node.kubernetes.io/network-rdma.capable": "true",
            },
            "annotations": {"rdmadoctor.io/owned-labels": "ready,gpu-nic", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": "10.0.7.0/24", "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
                {"type": "RDMALinkProblem", "status": "False", "reason": "PortsActive", "message": "8 ports ACTIVE"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.1.0.7"}],
            "capacity": {"cpu": "224", "nvidia.com/gpu": "8"},
            "allocatable": {"cpu": "220", "nvidia.com/gpu": "8"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"kubeletVersion": "v1.31.4"},
        },
    }
    return node


def _policy() -> dict:
    docs = _load_all((DEPLOY / "overlays" / "direct" / "admission-policy.yaml").read_text())
    return one(docs, "ValidatingAdmissionPolicy")


class Verdict:
    def __init__(self, applies: bool, denied: list[str]):
        self.applies, self.denied = applies, denied

    @property
    def allowed(self) -> bool:
        return not self.denied


def evaluate(
    old: dict | None, new: dict, *, user: str = AGENT_USER, node: str | None = "gpu-07", sub: str = "",
    policy: dict | None = None, operation: str = "UPDATE",
) -> Verdict:
    """A ValidatingAdmissionPolicy (the direct overlay's Node policy unless ``policy`` is given) as
    the API server runs it: matchConditions, then variables in order, then every validation (a
    message per failed one). An evaluation error counts as a denial (failurePolicy Fail)."""
    celpy = pytest.importorskip("celpy", reason="cel-python (module celpy) is not installed")
    policy = (policy or _policy())["spec"]
    env = celpy.Environment()
    extra = {NODE_CLAIM: [node]} if node is not None else {}
    request = {"operation": operation, "subResource": sub, "userInfo": {"username": user, "groups": [], "extra": extra}}
    base = {"request": request, "object": new, "oldObject": old}

    def run(expr: str, variables: dict) -> Any:
        act = {k: celpy.json_to_cel(v) for k, v in base.items()}
        act["variables"] = celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in variables.items()})
        return env.program(env.compile(expr)).evaluate(act)

    for cond in policy["matchConditions"]:
        if not bool(run(cond["expression"], {})):
            return Verdict(False, [])
    variables: dict = {}
    for var in policy["variables"]:
        variables[var["name"]] = run(var["expression"], variables)
    denied = []
    for v in policy["validations"]:
        try:
            ok = run(v["expression"], variables)
        except Exception as e:  # noqa: BLE001 - failurePolicy Fail
            denied.append(f"error: {e}")
            continue
        if isinstance(ok, celpy.CELEvalError) or not isinstance(ok, celpy.celtypes.BoolType):
            denied.append(f"error: {ok}")
        elif not bool(ok):
            msg = str(run(v["messageExpression"], variables)) if "messageExpression" in v else v["message"]
            denied.append(msg)
    return Verdict(True, denied)


def _change(fn) -> tuple[dict, dict]:
    import copy

    old = _node()
    new = copy.deepcopy(old)
    fn(new)
    return old, new


def test_policy_expressions_compile() -> None:
    celpy = pytest.importorskip("celpy", reason="cel-python (module celpy) is not installed")
    env = celpy.Environment()
    spec = _policy()["spec"]
    exprs = [c["expression"] for c in spec["matchConditions"]] + [v["expression"] for v in spec["variables"]]
    exprs += [v["expression"] for v in spec["validations"]] + [v["messageExpression"] for v in spec["validations"] if "messageExpression" in v]
    for expr in exprs:
        env.compile(expr)
    assert len(spec["validations"]) >= 5


def test_policy_allows_the_agent_its_own_labels() -> None:
    def relabel(n: dict) -> None:
        n["metadata"]["labels"]["rdmadoctor.io/ready"] = "false"
        del n["metadata"]["labels"]["rdmadoctor.io/gpu-nic"]  # a stale owned label removed
        n["metadata"]["labels"]["rdmadoctor.io/min-rate-gbps"] = "400"
        n["metadata"]["labels"]["feature.node.kubernetes.io/network-rdma.capable"] = "false"
        n["metadata"]["annotations"]["rdmadoctor.io/owned-labels"] = "ready,min-rate-gbps"

    v = evaluate(*_change(relabel))
    assert v.applies and v.allowed, v.denied
    # A no-op write (an unchanged Node) is allowed too.
    assert evaluate(_node(), _node()).allowed
    # A first write to a Node without any labels or annotations yet.
    old = _node()
    del old["metadata"]["labels"], old["metadata"]["annotations"]
    new = _node()
    new["metadata"]["labels"] = {"rdmadoctor.io/ready": "true"}
    del new["metadata"]["annotations"]
    assert evaluate(old, new).allowed


def test_policy_allows_its_own_conditions_on_status() -> None:
    def flip(n: dict) -> None:
        n["status"]["conditions"][1] = {"type": "RDMALinkProblem", "status": "True", "reason": "PortDown", "message": "mlx5_3/1 DOWN"}
        n["status"]["conditions"].append({"type": "GPUDirectRDMAProblem", "status": "False", "reason": "PeermemLoaded", "message": "ok"})

    assert evaluate(*_change(flip), sub="status").allowed


@pytest.mark.parametrize(
    "what,change,sub",
    [
        ("foreign label changed", lambda n: n["metadata"]["labels"].__setitem__("node-role.kubernetes.io/worker", "x"), ""),
        ("foreign label removed", lambda n: n["metadata"]["labels"].pop("feature.node.kubernetes.io/pci-15b3.present"), ""),
        ("foreign label added", lambda n: n["metadata"]["labels"].__setitem__("feature.node.kubernetes.io/other", "true"), ""),
        ("lookalike prefix", lambda n: n["metadata"]["labels"].__setitem__("evil.rdmadoctor.io/x", "1"), ""),
        ("foreign annotation", lambda n: n["metadata"]["annotations"].__setitem__("node.alpha.kubernetes.io/ttl", "30"), ""),
        ("taint added", lambda n: n["spec"]["taints"].append({"key": "rdma", "effect": "NoSchedule"}), ""),
        ("taint removed", lambda n: n["spec"].pop("taints"), ""),
        ("cordon", lambda n: n["spec"].__setitem__("unschedulable", True), ""),
        ("finalizer", lambda n: n["metadata"].__setitem__("finalizers", ["x/block"]), ""),
        ("kubelet condition", lambda n: n["status"]["conditions"][0].__setitem__("status", "False"), "status"),
        ("kubelet condition removed", lambda n: n["status"]["conditions"].pop(0), "status"),
        ("address", lambda n: n["status"]["addresses"][0].__setitem__("address", "6.6.6.6"), "status"),
        ("fake capacity", lambda n: n["status"]["allocatable"].__setitem__("nvidia.com/gpu", "16"), "status"),
        ("kubelet endpoint", lambda n: n["status"]["daemonEndpoints"]["kubeletEndpoint"].__setitem__("Port", 1), "status"),
    ],
)
def test_policy_denies(what: str, change, sub: str) -> None:
    v = evaluate(*_change(change), sub=sub)
    assert v.applies and not v.allowed, what
    assert all(not d.startswith("error:") for d in v.denied), v.denied


def test_policy_only_own_node() -> None:
    def relabel(n: dict) -> None:
        n["metadata"]["labels"]["rdmadoctor.io/ready"] = "false"

    old, new = _change(relabel)
    other = evaluate(old, new, node="gpu-08")
    assert not other.allowed and "(gpu-08), not Node gpu-07" in other.denied[0]
    unbound = evaluate(old, new, node=None)
    assert not unbound.allowed and "names no node" in unbound.denied[0]
    # Others (the kubelet, an admin) are not this policy's business.
    assert not evaluate(old, new, user="system:node:gpu-07", node=None).applies
    assert not evaluate(old, new, user="system:serviceaccount:rdmadoctor:other").applies


# ---- the image ---------------------------------------------------------------------------------
def _dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def test_dockerfile() -> None:
    text = _dockerfile()
    # Every stage on the one base, a build argument (scripts/build-image.sh may pass a local
    # bookworm root) defaulting to the registry image.
    stages = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert stages and all(s == "${BASE}" for s in stages)
    assert re.findall(r"^ARG BASE=(\S+)$", text, re.M) == ["docker.io/library/python:3.11-slim-bookworm"]
    runtime = text[text.rindex("\nFROM ") :]
    assert "apt-get install -y --no-install-recommends" in runtime and "rm -rf /var/lib/apt/lists/*" in runtime
    assert re.search(r'\[k8s\]', text)
    assert re.search(r'^ENTRYPOINT \["rdmadoctor"\]$', runtime, re.M)
    user = re.findall(r"^USER\s+(\d+):(\d+)$", runtime, re.M)
    psc = daemonset("base")["spec"]["template"]["spec"]["securityContext"]
    assert user == [(str(psc["runAsUser"]), str(psc["runAsGroup"]))]
    assert "ENV PYTHONDONTWRITEBYTECODE=1" in runtime


def _apt_packages() -> list[str]:
    text = _dockerfile().replace("\\\n", " ")
    m = re.search(r"apt-get install -y --no-install-recommends((?:\s+[a-z0-9][a-z0-9.+-]+)+)", text)
    assert m
    return m.group(1).split()


def test_dockerfile_packages_exist_in_debian_bookworm() -> None:
    """The Debian packages the image installs exist under these names (this machine runs the same
    Debian release as the image's base, bookworm); and they bring the tools collect records."""
    pkgs = _apt_packages()
    assert {"libibverbs1", "ibverbs-providers", "ibverbs-utils", "infiniband-diags", "pciutils"} <= set(pkgs)
    if not shutil.which("apt-cache"):
        pytest.skip("no apt-cache here")
    release = Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
    if "bookworm" not in release:
        pytest.skip("this machine is not Debian bookworm: its package lists say nothing about the image's")
    proc = subprocess.run(["apt-cache", "show", "--no-all-versions", *pkgs], capture_output=True, text=True)
    found = set(re.findall(r"^Package: (\S+)$", proc.stdout, re.M))
    if not found:
        pytest.skip("apt has no package lists (run apt-get update)")
    assert set(pkgs) <= found, set(pkgs) - found
    # The tools the checks and collect run come from those packages (where installed here too).
    for pkg, tool in (("ibverbs-utils", "ibv_devinfo"), ("infiniband-diags", "ibstat"), ("pciutils", "lspci")):
        listed = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
        if listed.returncode == 0:
            assert re.search(rf"^/usr/s?bin/{tool}$", listed.stdout, re.M), (pkg, tool)


def _dockerignore_included(root: Path) -> list[str]:
    """Files of the build context after .dockerignore (Docker's rules: patterns in order, the last
    match wins, `!` re-includes, a pattern matching a folder matches what is inside it)."""
    rules = []
    for line in (root / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        pat = posixpath.normpath(line[1:] if neg else line).lstrip("/")
        rx = "".join(
            "(.*/)?" if tok == "**/" else ".*" if tok == "**" else "[^/]*" if tok == "*" else "[^/]" if tok == "?" else re.escape(tok)
            for tok in re.findall(r"\*\*/|\*\*|\*|\?|[^*?]+", pat)
        )
        rules.append((neg, re.compile(rx)))
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
            parts = rel.split("/")
            candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
            excluded = False
            for neg, rx in rules:
                if any(rx.fullmatch(c) for c in candidates):
                    excluded = not neg
            if not excluded:
                out.append(rel)
    return sorted(out)


def test_dockerignore_keeps_what_the_build_needs_and_nothing_else() -> None:
    files = _dockerignore_included(ROOT)
    assert "pyproject.toml" in files and "README.md" in files  # README.md: the package's readme
    for pkg in ("rdmadoctor", "checks", "rdmadoctor/parsers", "rdmadoctor/cli"):
        on_disk = {str(p.relative_to(ROOT)) for p in (ROOT / pkg).glob("*.py")}
        assert on_disk and on_disk <= set(files), on_disk - set(files)
    examples = {str(p.relative_to(ROOT)) for p in (ROOT / "rdmadoctor" / "examples").glob("*.tar.gz")}
    assert examples and examples <= set(files)
    assert not [f for f in files if f.startswith(("tests/", "deploy/", "build/", "bench/")) or "__pycache__" in f or ".egg-info" in f]


def test_build_context_builds_the_package(tmp_path: Path) -> None:
    """What the image's `pip wheel .` sees (the context after .dockerignore) builds a wheel with
    every module and the example bundles."""
    pytest.importorskip("wheel", reason="the `wheel` package is needed to build a wheel without network access")
    pytest.importorskip("setuptools")
    ctx = tmp_path / "ctx"
    for rel in _dockerignore_included(ROOT):
        dst = ctx / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dst)
    out = tmp_path / "wheels"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out), str(ctx)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import zipfile

    (whl,) = out.glob("rdmadoctor-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    assert "rdmadoctor/checks/ib.py" in names and "rdmadoctor/agent/__init__.py" in names
    assert "rdmadoctor/examples/hgx-h100-ib.tar.gz" in names
    assert not [n for n in names if n.startswith("tests/")]
    assert not [n for n in names if n.startswith("rdmadoctor/fixturegen/")]  # it builds test trees: not shipped


# ---- for the DaemonSet's pod, simulated (tests/contract/test_deploy_harden.py runs it) -------------------
def _shims(paths: list[str], base: Path) -> list[str]:
    """Shell lines that make the folders on the way to ``paths`` traversable for a non-root uid
    inside the private mount namespace only (a venv whose Python lives under /root, 0700): a
    0755 shim holding bind mounts of just the entries needed, mounted over the closed folder."""
    lines, needed = [], {}
    for p in paths:
        parts = Path(p).resolve().parts
        for i in range(1, len(parts) - 1):
            d = Path(*parts[: i + 1])
            if d.is_dir() and not d.stat().st_mode & 0o001:
                needed.setdefault(str(d), set()).add(parts[i + 1])
                break
    for n, (d, children) in enumerate(sorted(needed.items())):
        shim = base / f"shim{n}"
        shim.mkdir(mode=0o755)
        os.chmod(shim, 0o755)
        for child in sorted(children):
            src = Path(d) / child
            dst = shim / child
            dst.mkdir() if src.is_dir() else dst.touch()
            lines.append(f"mount --rbind '{src}' '{dst}'")
        lines.append(f"mount --rbind '{shim}' '{d}'")
    return lines
