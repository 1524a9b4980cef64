"""The image, built with scripts/build-image.sh and run with podman, as the pods run it.

- the DaemonSet's pod, taken from the rendered deploy/base (command, user, read-only root,
  dropped capabilities, read-only host mounts, emptyDirs, the ConfigMap): the init step opens
  features.d, the agent writes a valid NFD feature file there and answers /healthz;
- `check` with podman's defaults reports SHM_TOO_SMALL, CAP_IPC_LOCK_MISSING and MEMLOCK_LIMITED;
  started with what `preflight`'s pod-spec YAML prescribes, translated to podman flags, none;
- `preflight --exec -- CMD`: the command runs as the same process (PID 1), its status comes out;
- `collect -o -` inside streams a bundle that `check --bundle` outside reads with the same verdict;
- the image's RDMA userspace passes `verbs.userspace`; the NPD rule runs in it.

Skipped with the reason where podman cannot run (not root, not installed, no runtime). The image
is tagged by a hash of what goes into it (Dockerfile, build script, build context) and built only
when that tag is missing, so a run after the first costs seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "build-image.sh"
EXAMPLES = ROOT / "rdmadoctor" / "examples"
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
THE_PROBLEMS = {"SHM_TOO_SMALL", "CAP_IPC_LOCK_MISSING", "MEMLOCK_LIMITED"}
NODE_NAME = "gpu-test-07"
# Errors that say podman cannot run a container on this machine (not a fault of the project).
RUNTIME_TROUBLE = re.compile(r"OCI runtime|runc|crun|cgroup|rlimit|user namespace|newuidmap|operation not permitted", re.I)


# ---- podman, and the image ----------------------------------------------------------------------
def source_files() -> list[Path]:
    """What the image is made of: the Dockerfile, the build script, and the build context the
    .dockerignore allowlist lets in (its `!` lines), less bytecode and build leftovers."""
    roots = [ln.strip()[1:].strip("/") for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln.strip().startswith("!")]
    out = [ROOT / "Dockerfile", ROOT / ".dockerignore", BUILD]
    for r in roots:
        p = ROOT / r
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += [f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc" and ".egg-info" not in str(f)]
    return sorted(set(out))


def source_hash() -> str:
    h = hashlib.sha256()
    for f in source_files():
        h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _podman_env(tmp: Path) -> dict[str, str]:
    """podman's settings for this machine (what scripts/build-image.sh does when
    CONTAINERS_CONF is unset): runc and cgroupfs on a cgroup v1/hybrid host, no raised
    RLIMIT_NOFILE where this process may not raise it."""
    env = dict(os.environ)
    if env.get("CONTAINERS_CONF"):
        return env
    conf = ""
    if not Path("/sys/fs/cgroup/cgroup.controllers").exists() and shutil.which("runc"):
        conf += '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'
    if subprocess.run(["sh", "-c", "ulimit -Hn 1048576"], capture_output=True).returncode != 0:
        conf = "[containers]\ndefault_ulimits = []\n" + conf
    if conf:
        (tmp / "containers.conf").write_text(conf)
        env["CONTAINERS_CONF"] = str(tmp / "containers.conf")
    return env


class Podman:
    def __init__(self, env: dict[str, str], image: str = ""):
        self.env = env
        self.image = image

    def __call__(self, *args: str, timeout: float = 180, check: bool = False, text: bool = True, input: Any = None) -> subprocess.CompletedProcess:
        proc = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=text, timeout=timeout, input=input)
        if check:
            assert proc.returncode == 0, f"podman {' '.join(args)}: {proc.stderr}"
        return proc

    def run(self, *args: str, flags: list[str] | tuple[str, ...] = (), **kw: Any) -> subprocess.CompletedProcess:
        """`podman run --rm` of the image with no network (nothing here needs one)."""
        return self("run", "--rm", "--network", "none", *flags, self.image, *args, **kw)


@pytest.fixture(scope="session")
def podman(tmp_path_factory) -> Podman:
    if os.geteuid() != 0:
        pytest.skip("the container tests run rootful podman: not root here")
    if not shutil.which("podman"):
        pytest.skip("podman is not installed (apt-get install podman runc; scripts/test.sh does it as root)")
    env = _podman_env(tmp_path_factory.mktemp("podman"))
    info = subprocess.run(["podman", "info"], env=env, capture_output=True, text=True, timeout=120)
    if info.returncode != 0:
        pytest.skip(f"podman cannot run here: {info.stderr.strip()[-300:]}")
    return Podman(env)


@pytest.fixture(scope="session")
def image(podman: Podman) -> Podman:
    """The image of this tree: reused when its tag exists, else built once (a few minutes cold)."""
    tag = f"localhost/rdmadoctor:test-{source_hash()}"
    if podman("image", "exists", tag).returncode != 0:
        proc = subprocess.run([str(BUILD), tag], env=podman.env, capture_output=True, text=True, timeout=1800, cwd=ROOT)
        if proc.returncode != 0:
            trouble = [ln for ln in proc.stderr.splitlines() if RUNTIME_TROUBLE.search(ln)]
            if trouble and "build-image.sh: podman build failed" in proc.stderr:
                pytest.skip(f"podman cannot run the build's containers here: {trouble[0][:300]}")
            pytest.fail(f"scripts/build-image.sh failed:\n{proc.stderr[-4000:]}")
        assert proc.stdout.strip().splitlines()[-1] == tag, "build-image.sh must print the image reference on its last line"
    img = Podman(podman.env, tag)
    probe = img.run("--version")
    if probe.returncode != 0 and RUNTIME_TROUBLE.search(probe.stderr):
        pytest.skip(f"podman cannot run a container here: {probe.stderr.strip()[-300:]}")
    return img


def _json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def _codes(report: dict, severities: tuple[str, ...] = ("error", "warning", "unknown")) -> set[str]:
    return {f["code"] for c in report["checks"] for f in c["findings"] if f["severity"] in severities}


def _unpack(name: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(EXAMPLES / f"{name}.tar.gz") as tf:
        tf.extractall(dest, filter="tar") if hasattr(tarfile, "data_filter") else tf.extractall(dest)
    return dest


# ---- the image itself ------------------------------------------------------------------------------
def test_image_is_what_the_dockerfile_says(image: Podman) -> None:
    from rdmadoctor import __version__

    out = image.run("--version", check=True)
    assert out.stdout.strip() == f"rdmadoctor {__version__}"
    cfg = json.loads(image("image", "inspect", image.image, check=True).stdout)[0]["Config"]
    assert cfg["User"] == "9470:9470" and cfg["Entrypoint"] == ["rdmadoctor"]
    assert "PYTHONDONTWRITEBYTECODE=1" in cfg["Env"]
    # The tools collect records and the rdma-core userspace; no pip left in rdmadoctor's venv.
    tools = image.run("-c", "for t in ibstat ibv_devinfo lspci ib_write_bw; do command -v $t; done; ls /opt/rdmadoctor/bin", flags=["--entrypoint", "sh"], check=True)
    assert len([ln for ln in tools.stdout.splitlines() if ln.startswith("/")]) == 4, tools.stdout
    assert "pip" not in tools.stdout.split() and "rdmadoctor" in tools.stdout.split()
    size = int(image("image", "inspect", "--format", "{{.Size}}", image.image, check=True).stdout)
    print(f"image {image.image}: {size / 1e6:.0f} MB")
    assert size < 400e6, f"the image grew to {size / 1e6:.0f} MB"


def _rdma_node_view(tmp: Path) -> list[str]:
    """podman flags that show the container an RDMA node: the hgx-h100-ib example's sysfs over
    /sys/class, /sys/devices and /sys/bus (10 mlx5 devices and their uverbs), and a device node
    per uverbs and rdma_cm (stand-ins that open read-write: /dev/null, as the device plugin
    would pass the real ones)."""
    host = _unpack("hgx-h100-ib", tmp / "hgx")
    flags = []
    for d in ("class", "devices", "bus"):
        flags += ["-v", f"{host / 'sys' / d}:/sys/{d}:ro"]
    uverbs = sorted(p.name for p in (host / "sys" / "class" / "infiniband_verbs").iterdir())
    assert uverbs
    for name in [*uverbs, "rdma_cm"]:
        flags += ["--device", f"/dev/null:/dev/infiniband/{name}:rw"]
    return flags


def test_rdma_userspace_in_the_image_passes_verbs_userspace(image: Podman, tmp_path: Path) -> None:
    """libibverbs, the mlx5 provider for mlx5_core, the recommended packages: the image passes its
    own check. Hiding the provider list makes it fail, so the check did read the image."""
    view = _rdma_node_view(tmp_path)
    rep = _json(image.run("check", "--only", "ib.devices,verbs.userspace", "--json", "--verbose", flags=view))
    status = {c["id"]: c["status"] for c in rep["checks"]}
    assert status == {"ib.devices": "pass", "verbs.userspace": "pass"}, rep["checks"]
    empty = tmp_path / "empty"
    empty.mkdir()
    rep = _json(image.run("check", "--only", "ib.devices,verbs.userspace", "--json", flags=[*view, "-v", f"{empty}:/etc/libibverbs.d:ro"]))
    assert "VERBS_PROVIDER_MISSING" in _codes(rep)


# ---- the DaemonSet's pod ------------------------------------------------------------------------------
def _rendered_base() -> list[dict]:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl is not installed: deploy/base cannot be rendered")
    proc = subprocess.run([kubectl, "kustomize", str(ROOT / "deploy" / "base")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def _size(limit: str) -> str:
    """A Kubernetes quantity (16Mi, 16Gi) as a podman size (16m, 16g)."""
    m = re.fullmatch(r"(\d+)([KMGT]i?)?", limit)
    assert m, limit
    return m.group(1) + (m.group(2) or "b")[0].lower()


class PodRunner:
    """A pod spec's container as `podman run` flags, every field it has translated or refused."""

    HANDLED_CONTAINER = {"name", "image", "imagePullPolicy", "command", "args", "env", "ports", "resources", "securityContext", "volumeMounts",
                         "startupProbe", "readinessProbe", "livenessProbe"}

    def __init__(self, pod: dict, sources: dict[str, Path]):
        self.pod = pod
        self.sources = sources  # volume name -> what stands in for it on this machine

    def flags(self, c: dict) -> list[str]:
        assert set(c) <= self.HANDLED_CONTAINER, set(c) - self.HANDLED_CONTAINER
        psc, sc = self.pod.get("securityContext", {}), c.get("securityContext", {})
        uid, gid = sc.get("runAsUser", psc.get("runAsUser")), sc.get("runAsGroup", psc.get("runAsGroup"))
        flags = ["--user", f"{uid}:{gid}"]
        if sc.get("readOnlyRootFilesystem"):
            flags += ["--read-only", "--read-only-tmpfs=false"]
        caps = sc.get("capabilities", {})
        flags += [f"--cap-drop={x}" for x in caps.get("drop", [])] + [f"--cap-add={x}" for x in caps.get("add", [])]
        if sc.get("allowPrivilegeEscalation") is False:
            flags += ["--security-opt", "no-new-privileges"]
        assert not sc.get("privileged") and (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type", "RuntimeDefault") == "RuntimeDefault"
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        for m in c.get("volumeMounts", []):
            v = volumes[m["name"]]
            assert "hostPath" in v or "configMap" in v or "emptyDir" in v, v
            assert not m.get("subPath"), m
            flags += ["-v", f"{self.sources[m['name']]}:{m['mountPath']}" + (":ro" if m.get("readOnly") else "")]
        for e in c.get("env", []):
            if "value" in e:
                flags += ["-e", f"{e['name']}={e['value']}"]
            else:
                assert e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
                flags += ["-e", f"{e['name']}={NODE_NAME}"]
        if "command" in c:
            flags += ["--entrypoint", json.dumps(c["command"][:1])]
        return flags

    def argv(self, c: dict) -> list[str]:
        """What follows the image: the rest of `command` (after its first word), then `args`."""
        return list(c.get("command", [])[1:]) + list(c.get("args", []))


@pytest.fixture
def pod_host(tmp_path: Path) -> Iterator[tuple[dict, dict[str, Path], Path]]:
    """deploy/base's DaemonSet pod with what the kubelet would give it on this machine: the host
    paths read-only as mounted, NFD's features.d (and any hostPath inside it) as a folder of its
    own created root:root 0755 the way the kubelet creates DirectoryOrCreate paths, every
    emptyDir a folder the pod's containers share, the ConfigMap's keys as files."""
    docs = _rendered_base()
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    pod = ds["spec"]["template"]["spec"]
    sources: dict[str, Path] = {}
    fd = tmp_path / "features.d"
    fd.mkdir()
    os.chmod(fd, 0o755)
    for v in pod["volumes"]:
        name = v["name"]
        if "hostPath" in v:
            path, kind = v["hostPath"]["path"], v["hostPath"].get("type", "")
            if path == FEATURES_DIR or path.startswith(FEATURES_DIR + "/"):
                src = fd / os.path.relpath(path, FEATURES_DIR)
                src.mkdir(mode=0o755, exist_ok=True)
                os.chmod(src, 0o755)
            elif Path(path).exists():
                src = Path(path)
            else:
                # Absent on this machine (no /lib/modules or /proc/modules in a VM sandbox, no
                # rdma-core): an empty stand-in reads like the absent path to every check. The
                # kubelet would create the DirectoryOrCreate ones; this test leaves the host alone.
                src = tmp_path / "absent" / name
                src.parent.mkdir(parents=True, exist_ok=True)
                src.write_text("") if kind == "File" else src.mkdir()
        elif "emptyDir" in v:
            src = tmp_path / "emptydir" / name
            src.mkdir(parents=True)
            os.chmod(src, 0o777)  # as the kubelet makes an emptyDir
        else:
            assert "configMap" in v and v["configMap"]["name"] == cm["metadata"]["name"], v
            src = tmp_path / "configmap"
            src.mkdir()
            for key, text in cm["data"].items():
                (src / key).write_text(text)
        sources[name] = src
    for d in (tmp_path, tmp_path / "absent", tmp_path / "emptydir"):
        if d.exists():
            os.chmod(d, 0o755)
    yield pod, sources, fd


LABEL_KEY = re.compile(r"(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def test_daemonset_pod_runs_in_the_image(image: Podman, pod_host) -> None:
    """deploy/base's pod, every container with its exact command, user, read-only root, dropped
    capabilities and mounts: the init step(s) succeed, then, with all containers running side by
    side, the NFD feature file appears in the mounted features.d, valid and written by one of
    the pod's own uids, and the agent answers its probes' /healthz with 200."""
    pod, sources, fd = pod_host
    runner = PodRunner(pod, sources)
    for init in pod.get("initContainers", []):
        proc = image.run(*runner.argv(init), flags=runner.flags(init))
        assert proc.returncode == 0, f"init container {init['name']}: {proc.stderr}"

    tag = uuid.uuid4().hex[:8]
    names = {c["name"]: f"rdmadoctor-{c['name']}-{tag}" for c in pod["containers"]}
    try:
        for c in pod["containers"]:
            started = image("run", "-d", "--name", names[c["name"]], "--network", "none", *runner.flags(c), image.image, *runner.argv(c))
            assert started.returncode == 0, f"{c['name']}: {started.stderr}"

        def logs() -> str:
            return "\n".join(f"--- {n}:\n" + image("logs", n).stderr[-2000:] for n in names.values())

        feature = fd / "rdmadoctor"
        deadline = time.monotonic() + 120
        while not (feature.exists() and feature.stat().st_size) and time.monotonic() < deadline:
            for n in names.values():
                state = image("inspect", "--format", "{{.State.Status}}", n).stdout.strip()
                assert state == "running", f"{n} stopped ({state}):\n{logs()}"
            time.sleep(0.5)
        assert feature.exists() and feature.stat().st_size, f"no feature file within 120 s:\n{logs()}"
        assert feature.resolve().is_relative_to(fd.resolve())
        uids = {pod["securityContext"]["runAsUser"]} | {c.get("securityContext", {}).get("runAsUser") for c in pod["containers"]}
        assert feature.stat().st_uid in uids
        lines = feature.read_text().splitlines()
        m = re.fullmatch(r"# \+expiry-time=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)", lines[0])
        assert m and time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) < m.group(1), lines[0]
        labels = dict(ln.split("=", 1) for ln in lines[1:])
        assert len(labels) == len(lines) - 1
        for k, v in labels.items():
            assert LABEL_KEY.fullmatch(k) and len(k.rsplit("/", 1)[-1]) <= 63 and LABEL_VALUE.fullmatch(v), (k, v)
        assert labels["feature.node.kubernetes.io/network-rdma.capable"] in ("true", "false")
        assert labels["rdmadoctor.io/ready"] in ("true", "false")

        agent = next(c for c in pod["containers"] if c["name"] == "agent")
        a = names["agent"]
        # Its probes' endpoint, from inside the pod's network namespace; the report file on its emptyDir.
        port = int(agent["args"][agent["args"].index("--metrics-port") + 1])
        probe = agent["livenessProbe"]["httpGet"]["path"]
        health = image("exec", a, "/opt/rdmadoctor/bin/python", "-c",
                       f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}{probe}').status)")
        assert health.stdout.strip() == "200", health.stderr
        report_file = agent["args"][agent["args"].index("--report-file") + 1]
        report = json.loads(image("exec", a, "cat", report_file, check=True).stdout)
        assert report["scope"] == "node"
        # Nothing else can be written: the root filesystem is read-only.
        assert image("exec", a, "touch", "/probe").returncode != 0
    finally:
        for n in names.values():
            image("rm", "-f", "-t", "0", n)


# ---- check, and the fix preflight prescribes ------------------------------------------------------------
AS_ROOT = ["--user", "0"]  # as the example pods run their trainer (deploy/examples: runAsUser 0)


def _podman_flags_for(pod_spec_yaml: str) -> list[str]:
    """preflight's pod-spec YAML as podman flags: capabilities.add -> --cap-add, a memory
    emptyDir mounted at /dev/shm -> --shm-size, env -> -e. Anything else it prescribes fails."""
    spec = yaml.safe_load(pod_spec_yaml)["spec"]
    (c,) = spec["containers"]
    flags = []
    for cap in c.get("securityContext", {}).get("capabilities", {}).get("add", []):
        flags.append(f"--cap-add={cap}")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        v = volumes[m["name"]]
        assert m["mountPath"] == "/dev/shm" and v["emptyDir"]["medium"] == "Memory", m
        flags.append(f"--shm-size={_size(v['emptyDir']['sizeLimit'])}")
    for e in c.get("env", []):
        flags += ["-e", f"{e['name']}={e['value']}"]
    assert set(c) <= {"name", "securityContext", "volumeMounts", "env", "resources"}, c
    return flags


def test_check_with_podman_defaults_and_with_the_prescribed_fix(image: Podman) -> None:
    """62.5 MiB /dev/shm, no IPC_LOCK, the runtime's memlock limit: the three problems. The
    settings preflight prescribes, as podman flags: none of them."""
    before = _json(image.run("check", "--json", flags=AS_ROOT))
    assert THE_PROBLEMS <= _codes(before, ("error",)), _codes(before)
    gate = _json(image.run("preflight", "--only", "limits,shm", "--json", flags=AS_ROOT))
    assert gate["verdict"] == "no-go" and {p["code"] for p in gate["problems"]} == THE_PROBLEMS
    fix = _podman_flags_for(gate["pod_spec_yaml"])
    assert "--cap-add=IPC_LOCK" in fix and any(f.startswith("--shm-size=") for f in fix), fix

    after = _json(image.run("check", "--json", flags=[*AS_ROOT, *fix]))
    assert not THE_PROBLEMS & _codes(after), _codes(after)
    status = {c["id"]: c["status"] for c in after["checks"]}
    assert status["limits.memlock"] == "pass" and status["shm.size"] == "pass"
    # The memlock limit itself is still low (a container cannot raise it here): IPC_LOCK lifted it.
    assert "MEMLOCK_BYPASSED_BY_IPC_LOCK" in _codes(after, ("info",))
    assert _json(image.run("preflight", "--only", "limits,shm", "--json", flags=[*AS_ROOT, *fix]))["verdict"] == "go"


def test_preflight_exec_runs_the_command_as_the_same_process(image: Podman) -> None:
    """On GO the command replaces rdmadoctor: it is PID 1 of the container, as rdmadoctor was,
    and its exit status is the container's. On NO-GO it does not run."""
    gate = _json(image.run("preflight", "--only", "limits,shm", "--json", flags=AS_ROOT))
    fix = _podman_flags_for(gate["pod_spec_yaml"])
    cmd = ["preflight", "--only", "limits,shm", "--exec", "--", "sh", "-c", 'echo "trainer pid=$$"; exit 7']
    go = image.run(*cmd, flags=[*AS_ROOT, *fix])
    assert go.returncode == 7, go.stdout + go.stderr
    assert "trainer pid=1\n" in go.stdout
    nogo = image.run(*cmd, flags=AS_ROOT)
    assert nogo.returncode == 1 and "trainer pid" not in nogo.stdout


def test_run_child_status_comes_out(image: Podman) -> None:
    """`rdmadoctor run -- CMD` (issue 8) in the image: on GO the job runs as a child, its stdout
    passes through untouched, and its exit status is the container's; on NO-GO it never starts."""
    if not (ROOT / "rdmadoctor" / "cli" / "run.py").exists():
        pytest.skip("`rdmadoctor run` is not in this tree (issue 8): its container test waits for it")
    gate = _json(image.run("preflight", "--only", "limits,shm", "--json", flags=AS_ROOT))
    fix = _podman_flags_for(gate["pod_spec_yaml"])
    cmd = ["run", "--only", "limits,shm", "--", "sh", "-c", 'echo "from the child, pid $$"; exit 3']
    proc = image.run(*cmd, flags=[*AS_ROOT, *fix])
    assert proc.returncode == 3, proc.stdout + proc.stderr
    m = re.fullmatch(r"from the child, pid (\d+)\n", proc.stdout)
    assert m and int(m.group(1)) != 1, proc.stdout  # a child: rdmadoctor stays PID 1 and waits
    nogo = image.run(*cmd, flags=AS_ROOT)
    assert nogo.returncode == 1 and nogo.stdout == ""


def test_collect_inside_check_outside_same_verdict(image: Podman, tmp_path: Path) -> None:
    """`collect -o -` streams the container's view; `check --bundle` here reads the same
    verdict as `check` inside (the same container settings)."""
    inside = _json(image.run("check", "--json", flags=AS_ROOT))
    proc = image.run("collect", "-o", "-", flags=AS_ROOT, text=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout[:2] == b"\x1f\x8b", "not a gzip stream"
    bundle = tmp_path / "pod.tar.gz"
    bundle.write_bytes(proc.stdout)
    out = subprocess.run([sys.executable, "-m", "rdmadoctor", "check", "--bundle", str(bundle), "--json"], capture_output=True, text=True, timeout=120)
    outside = _json(out)
    assert out.returncode == inside["exit_code"] == outside["exit_code"]
    assert outside["status"] == inside["status"]
    assert {c["id"]: c["status"] for c in outside["checks"]} == {c["id"]: c["status"] for c in inside["checks"]}

    def problems(rep: dict) -> set[tuple[str, str, str]]:
        return {(f["code"], f["severity"], f["subject"]) for c in rep["checks"] for f in c["findings"] if f["severity"] != "info"}

    assert problems(outside) == problems(inside) and THE_PROBLEMS <= {p[0] for p in problems(outside)}


# ---- Node Problem Detector's rule, in the image ----------------------------------------------------------
def test_npd_rule_runs_in_the_image(image: Podman, tmp_path: Path) -> None:
    """deploy/npd's rule path exists in the image, and its args, run there against a node's
    files mounted at /host, give NPD its one line and exit status."""
    rule = json.loads((ROOT / "deploy" / "npd" / "rdmadoctor-plugin-monitor.json").read_text())["rules"][0]
    cm = yaml.safe_load((ROOT / "deploy" / "base" / "configmap.yaml").read_text())
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "node.toml").write_text(cm["data"]["node.toml"])
    cfg_dir = str(Path(rule["args"][rule["args"].index("--config") + 1]).parent)
    for example, code, line in (("hgx-h100-ib", 0, "OK ready for RDMA"), ("broken-pod", 1, "FAIL IB_PORT_DOWN mlx5_3/1")):
        host = _unpack(example, tmp_path / example)
        proc = image.run(*rule["args"], flags=["--entrypoint", rule["path"], "-v", f"{host}:/host:ro", "-v", f"{cfg}:{cfg_dir}:ro"])
        assert proc.returncode == code, proc.stderr
        assert proc.stdout.startswith(line) and proc.stdout.count("\n") == 1 and len(proc.stdout.strip()) < 80


# ---- the build script's own errors (no podman needed) --------------------------------------------------
@pytest.mark.parametrize(
    "args,said",
    [
        (["--arch", "sparc"], "--arch sparc: expected amd64 or arm64"),
        (["--bogus"], "unknown option --bogus"),
        (["a:1", "b:2"], "one TAG only"),
    ],
)
def test_build_script_refuses_bad_arguments(args: list[str], said: str) -> None:
    proc = subprocess.run([str(BUILD), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and said in proc.stderr and proc.stdout == ""


def test_build_script_help_is_its_header() -> None:
    proc = subprocess.run([str(BUILD), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "scripts/build-image.sh [TAG]" in proc.stdout and "--arch" in proc.stdout
    assert not [ln for ln in proc.stdout.splitlines() if ln.startswith("#") or ln.startswith("set -")]
