"""deploy/examples/mpijob.yaml against the Kubeflow MPI operator's own rules, and the Arena
line of docs/kubernetes.md ("MPIJob and Arena") against the example.

- The CRD's schema: tests/crds/mpijob-v2beta1.json is the MPIJob CRD's v2beta1 openAPIV3Schema from
  kubeflow/mpi-operator (source and commit in the file), made strict here the way
  kubernetes-validate's strict schemas are (an object with listed properties takes no others), so a
  misspelt field fails instead of being pruned by the API server. Each replica's pod template is
  validated with kubernetes-validate's strict PodTemplateSpec, as the PyTorchJob's and the Volcano
  Job's are (tests/contract/test_deploy.py).
- The operator's validation webhook logic (pkg/apis/kubeflow/validation/validation.go, after the
  defaults of pkg/apis/kubeflow/v2beta1/default.go), written here as checks.
- What makes the job work: every NCCL setting of the launcher passed with `mpirun -x`, each rank
  `rdmadoctor run -- ...` with flags `rdmadoctor run` really has, `-np` = slotsPerWorker x workers,
  the workers' init container judging the launcher's NCCL values.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path

import pytest

from contract.test_deploy import EXAMPLES, _flags, _help_flags, _load_all, _versions, containers, validate_as

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
CRD = json.loads((ROOT / "tests" / "crds" / "mpijob-v2beta1.json").read_text())
EXAMPLE = EXAMPLES / "mpijob.yaml"
# `arena submit mpijob --help` (kubeflow/arena docs/cli/arena_submit_mpijob.md and
# pkg/argsbuilder/submit*.go at e30882c143cc2be32b7ed767ae0f78681892741b): the flags docs/kubernetes.md uses
# must be among them.
ARENA_MPIJOB_FLAGS = {
    "--annotation", "--config-file", "--cpu", "--data", "--data-dir", "--device", "--env", "--gang", "--gpus",
    "--image", "--image-pull-secret", "--logdir", "--memory", "--name", "--priority", "--rdma", "--retry",
    "--selector", "--sync-image", "--sync-mode", "--sync-source", "--tensorboard", "--tensorboard-image",
    "--toleration", "--workers", "--working-dir", "--gputopology", "--mounts-on-launcher", "--clean-task-policy",
}


def strict(schema: dict) -> dict:
    """The CRD schema as a strict validator sees it: objects with properties take no other keys; a
    pod template marker becomes an object (validated on its own with PodTemplateSpec)."""
    out = copy.deepcopy(schema)

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(out)
    return out


SCHEMA = strict(CRD["openAPIV3Schema"])


def mpijob() -> dict:
    (doc,) = [d for d in _load_all(EXAMPLE.read_text()) if d.get("kind") == "MPIJob"]
    return doc


def validate(doc: dict) -> None:
    jsonschema.validators.Draft202012Validator(SCHEMA).validate(doc)


def with_defaults(doc: dict) -> dict:
    """The operator's defaults (default.go SetDefaults_MPIJob), as its webhook sees the object."""
    d = copy.deepcopy(doc)
    spec = d["spec"]
    spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", "None")
    spec.setdefault("slotsPerWorker", 1)
    spec.setdefault("sshAuthMountPath", "/root/.ssh")
    spec.setdefault("mpiImplementation", "OpenMPI")
    spec.setdefault("launcherCreationPolicy", "AtStartup")
    for role, policy, replicas in (("Launcher", "OnFailure", 1), ("Worker", "Never", 0)):
        rs = spec["mpiReplicaSpecs"].get(role)
        if rs is not None:
            rs.setdefault("restartPolicy", policy)
            rs.setdefault("replicas", replicas)
    return d


def operator_errors(doc: dict) -> list[str]:
    """validation.go ValidateMPIJob, on the defaulted object."""
    d = with_defaults(doc)
    spec, errs = d["spec"], []
    workers = spec["mpiReplicaSpecs"].get("Worker") or {}
    n = workers.get("replicas") or 1
    host = f"{d['metadata']['name']}-worker-{max(n, 1) - 1}"
    if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", host) or len(host) > 63:
        errs.append(f"metadata.name: {host} is not a DNS-1035 label")
    if spec["slotsPerWorker"] < 0:
        errs.append("spec.slotsPerWorker: negative")
    if spec["runPolicy"]["cleanPodPolicy"] not in ("None", "Running", "All"):
        errs.append("spec.runPolicy.cleanPodPolicy: not supported")
    for key in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        if spec["runPolicy"].get(key, 0) < 0:
            errs.append(f"spec.runPolicy.{key}: negative")
    if spec["mpiImplementation"] not in ("OpenMPI", "Intel", "MPICH"):
        errs.append("spec.mpiImplementation: not supported")
    replicas = spec["mpiReplicaSpecs"]
    if "Launcher" not in replicas:
        errs.append("spec.mpiReplicaSpecs[Launcher]: required")
    for role, rs in replicas.items():
        if rs.get("restartPolicy") not in ("Never", "OnFailure"):
            errs.append(f"spec.mpiReplicaSpecs[{role}].restartPolicy: not supported")
        if not rs["template"].get("spec", {}).get("containers"):
            errs.append(f"spec.mpiReplicaSpecs[{role}].template.spec.containers: required")
    if replicas.get("Launcher", {}).get("replicas") != 1:
        errs.append("spec.mpiReplicaSpecs[Launcher].replicas: must be 1")
    if "Worker" in replicas and replicas["Worker"]["replicas"] <= 0:
        errs.append("spec.mpiReplicaSpecs[Worker].replicas: must be greater than or equal to 1")
    return errs


def launcher(doc: dict) -> dict:
    (c,) = doc["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    return c


def mpirun_argv(doc: dict) -> list[str]:
    c = launcher(doc)
    return list(c.get("command") or []) + list(c.get("args") or [])


def split_mpirun(argv: list[str]) -> tuple[list[str], list[str]]:
    """(mpirun's own arguments, the rank's command): the rank starts at `rdmadoctor`."""
    assert argv[0] == "mpirun", argv
    i = argv.index("rdmadoctor")
    return argv[1:i], argv[i:]


def env_of(c: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c.get("env", [])}


# ---- the CRD's schema and the operator's rules -------------------------------------------------


def test_schema_file_names_its_source_and_is_the_v2beta1_mpijob():
    assert "kubeflow/mpi-operator" in CRD["$comment"] and re.search(r"commit [0-9a-f]{40}", CRD["$comment"])
    assert CRD["crd"] == {"group": "kubeflow.org", "kind": "MPIJob", "version": "v2beta1", "served": True, "storage": True,
                          "scope": "Namespaced"}
    assert CRD["openAPIV3Schema"]["properties"]["spec"]["required"] == ["mpiReplicaSpecs"]


def test_mpijob_validates_against_the_crd_schema_strictly():
    doc = mpijob()
    assert (doc["apiVersion"], doc["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
    validate(doc)
    for role, rs in doc["spec"]["mpiReplicaSpecs"].items():
        for version in _versions():
            validate_as(rs["template"], "podtemplatespec-v1.json", version)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["spec"].__setitem__("slotPerWorker", 8),  # misspelt: the API server would drop it
        lambda d: d["spec"]["mpiReplicaSpecs"]["Worker"].__setitem__("replicas", "2"),
        lambda d: d["spec"].__setitem__("mpiImplementation", "OpenMPI5"),
        lambda d: d["spec"]["runPolicy"].__setitem__("cleanPodPolicies", "Running"),
        lambda d: d["spec"].pop("mpiReplicaSpecs"),
    ],
    ids=["typo", "string-replicas", "bad-enum", "typo-in-runPolicy", "no-replica-specs"],
)
def test_schema_rejects_what_the_api_server_would_refuse_or_drop(change):
    doc = mpijob()
    change(doc)
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_mpijob_passes_the_operators_validation():
    doc = mpijob()
    assert operator_errors(doc) == []
    assert set(doc["spec"]["mpiReplicaSpecs"]) == {"Launcher", "Worker"}


@pytest.mark.parametrize(
    "change,error",
    [
        (lambda d: d["spec"]["mpiReplicaSpecs"]["Launcher"].__setitem__("replicas", 2), "Launcher].replicas: must be 1"),
        (lambda d: d["spec"]["mpiReplicaSpecs"]["Worker"].__setitem__("replicas", 0), "greater than or equal to 1"),
        (lambda d: d["spec"]["mpiReplicaSpecs"]["Worker"].__setitem__("restartPolicy", "Always"), "restartPolicy: not supported"),
        (lambda d: d["metadata"].__setitem__("name", "LLM_job"), "DNS-1035"),
        (lambda d: d["spec"]["runPolicy"].__setitem__("cleanPodPolicy", "Some"), "cleanPodPolicy"),
    ],
)
def test_operator_rules_would_catch_a_broken_job(change, error):
    doc = mpijob()
    change(doc)
    assert any(error in e for e in operator_errors(doc)), operator_errors(doc)


# ---- what makes the job work -------------------------------------------------------------------


def test_launcher_passes_every_nccl_setting_to_the_ranks_with_x():
    doc = mpijob()
    own, rank = split_mpirun(mpirun_argv(doc))
    exported = {own[i + 1].split("=", 1)[0] for i, a in enumerate(own) if a == "-x"}
    nccl = {k for k in env_of(launcher(doc)) if k.startswith("NCCL_")}
    assert nccl and nccl <= exported, nccl - exported
    assert {"NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"} <= nccl


def test_np_is_slots_per_worker_times_workers():
    doc = mpijob()
    own, _ = split_mpirun(mpirun_argv(doc))
    np_ = int(own[own.index("-np") + 1])
    spec = doc["spec"]
    assert np_ == spec["slotsPerWorker"] * spec["mpiReplicaSpecs"]["Worker"]["replicas"]


def test_each_rank_is_rdmadoctor_run_with_real_flags():
    _, rank = split_mpirun(mpirun_argv(mpijob()))
    assert rank[:2] == ["rdmadoctor", "run"]
    assert "--" in rank and rank[rank.index("--") + 1 :][0] == "python"
    known = _help_flags("run")
    assert "--expect-hcas" in known  # the help was parsed
    assert set(_flags(rank[2:])) <= known, set(_flags(rank[2:])) - known


def test_workers_are_gated_with_the_launchers_nccl_values():
    doc = mpijob()
    worker = doc["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    (init,) = worker["initContainers"]
    assert init["args"][0] == "preflight"
    launcher_env = {k: v for k, v in env_of(launcher(doc)).items() if k in ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME")}
    assert env_of(init) == launcher_env
    # The gate judges what the ranks will get: the same expectations as each rank's own gate.
    _, rank = split_mpirun(mpirun_argv(doc))
    gate = rank[2 : rank.index("--")]
    # less the gang's options: the init container is not a rank (no OMPI_COMM_WORLD_*), it gates its pod alone
    assert "--gang" in gate
    gate = [a for i, a in enumerate(gate) if a != "--gang" and a != "--gang-master" and gate[i - 1] != "--gang-master"]
    assert init["args"][1:] == gate
    (main,) = worker["containers"]
    assert main["command"][0].endswith("sshd")
    for c in containers(worker):
        assert "rdma/hca" in c["resources"]["limits"] and "IPC_LOCK" in c["securityContext"]["capabilities"]["add"]


def test_launcher_asks_for_no_gpu_and_no_hca():
    limits = launcher(mpijob())["resources"]["limits"]
    assert not {"nvidia.com/gpu", "rdma/hca"} & set(limits)


# ---- docs/kubernetes.md's Arena line is the same job --------------------------------------------


def arena_line() -> list[str]:
    text = (ROOT / "docs" / "kubernetes.md").read_text()
    m = re.search(r"```sh\n(arena submit mpijob .*?)\n```", text, re.S)
    assert m, "docs/kubernetes.md has no ```sh block with `arena submit mpijob`"
    return shlex.split(m.group(1).replace("\\\n", " "))


def test_arena_line_uses_arenas_flags_and_matches_the_example():
    argv = arena_line()
    assert argv[:3] == ["arena", "submit", "mpijob"]
    flags = {a.split("=", 1)[0]: a.split("=", 1)[1] if "=" in a else True for a in argv[3:-1]}
    assert set(flags) <= ARENA_MPIJOB_FLAGS, set(flags) - ARENA_MPIJOB_FLAGS
    doc = mpijob()
    worker = doc["spec"]["mpiReplicaSpecs"]["Worker"]
    assert flags["--name"] == doc["metadata"]["name"]
    assert int(flags["--workers"]) == worker["replicas"]
    assert int(flags["--gpus"]) == worker["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    assert flags["--image"] == launcher(doc)["image"]
    # --env NAME=VALUE (arena splits at the first "="): the launcher's env, value for value.
    envs = dict(a.split("=", 2)[1:] for a in argv[3:-1] if a.startswith("--env="))
    assert envs == env_of(launcher(doc))
    # The command arena runs is the launcher's, word for word.
    assert shlex.split(argv[-1]) == mpirun_argv(doc)
