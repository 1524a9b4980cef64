"""deploy/ hardening (issue 10, items 16-18). Each part failed against the manifests before it:

16. NFD mode: no container the agent runs in may write NFD's features.d. The agent writes its
    feature file to an emptyDir; a relay (its own uid/gid) copies only the expiry line and
    rdmadoctor's own labels into features.d/.rdmadoctor/, which NFD reads through one root-owned
    symlink; the init step that sets this up takes nothing but features.d, and
    overlays/nfd-cleanup undoes it. Checked on the rendered manifests, by running the relay's own
    shell script on honest and hostile files, and in a sandbox where the pod's steps run with the
    pod's uids and no capabilities on a copy of features.d, read back as nfd-worker reads it.
17. overlays/direct: the Node admission policy pins every status field but rdmadoctor's own
    conditions, field by field as the newest Kubernetes schema lists them (and any field a later
    release adds), and still admits what the real agent sends.
18. RBAC has no per-node rule: what can be narrowed elsewhere is (a one-hour token instead of the
    automounted one a year long, Events limited by a policy to the agent's own Node), and the
    grants are exactly the calls the agent makes.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest

from contract import test_deploy as D  # tests/ is on sys.path (pytest's prepend import mode)

yaml = pytest.importorskip("yaml")

FEATURES_DIR = D.FEATURES_DIR
OWN_DIR = FEATURES_DIR + "/.rdmadoctor"
LINK_TARGET = ".rdmadoctor/rdmadoctor"
# NFD's local source skips a file larger than this (source/local/local.go MaxFeatureFileSize).
NFD_MAX = 65536
AGENT_UID = AGENT_GID = 9470
NOBODY = 65534  # the uid NFD's images run nfd-worker as (USER 65534:65534)
DROP = "--inh-caps=-all --bounding-set=-all --no-new-privs --clear-groups"


# ---- the rendered pod ---------------------------------------------------------------------------
def base_pod() -> dict:
    return D.daemonset("base")["spec"]["template"]["spec"]


def container(pod: dict, name: str) -> dict:
    (found,) = [c for c in D.containers(pod) if c["name"] == name]
    return found


def ids(pod: dict, c: dict) -> tuple[int | None, int | None]:
    """(uid, gid) a container runs as: its own securityContext over the pod's."""
    psc, sc = pod.get("securityContext", {}), c.get("securityContext", {})
    return sc.get("runAsUser", psc.get("runAsUser")), sc.get("runAsGroup", psc.get("runAsGroup"))


def host_mounts(pod: dict) -> list[tuple[str, str, bool]]:
    """(container, host path, writable) of every hostPath mount."""
    paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    return [
        (c["name"], paths[m["name"]], not m.get("readOnly"))
        for c in D.containers(pod)
        for m in c.get("volumeMounts", [])
        if m["name"] in paths
    ]


def script_of(c: dict) -> tuple[str, list[str]]:
    """The shell script of a `/bin/sh -c SCRIPT NAME ARGS...` container and its positional args."""
    cmd = list(c["command"]) + list(c.get("args") or [])
    assert cmd[:2] == ["/bin/sh", "-c"], cmd[:2]
    return cmd[2], cmd[3:]


def relay_env(pod: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container(pod, "nfd-relay")["env"]}


# ---- 16: what may write where -------------------------------------------------------------------
def test_nfd_mode_only_the_relay_writes_a_host_path_and_only_its_own_directory() -> None:
    pod = base_pod()
    writable = sorted((c, p) for c, p, w in host_mounts(pod) if w)
    # The init step opens features.d (and is the only one that mounts it); the relay writes its
    # own directory in it; the agent no host path at all.
    assert writable == [("features-dir", FEATURES_DIR), ("nfd-relay", OWN_DIR)]
    assert [(c, p) for c, p, _ in host_mounts(pod) if p == FEATURES_DIR] == [("features-dir", FEATURES_DIR)]
    assert not [p for c, p, w in host_mounts(pod) if c == "agent" and w]
    volumes = {v["name"]: v for v in pod["volumes"]}
    own = next(v for v in volumes.values() if v.get("hostPath", {}).get("path") == OWN_DIR)
    assert own["hostPath"]["type"] == "DirectoryOrCreate"  # the kubelet makes it before the init step runs

    agent, relay, init = container(pod, "agent"), container(pod, "nfd-relay"), container(pod, "features-dir")
    # The agent's --features-dir is an emptyDir the relay mounts read-only.
    fd = D._arg(agent["args"], "--features-dir")
    staging = next(m for m in agent["volumeMounts"] if m["mountPath"] == fd)
    assert "emptyDir" in volumes[staging["name"]] and not staging.get("readOnly")
    rmount = next(m for m in relay["volumeMounts"] if m["name"] == staging["name"])
    assert rmount["readOnly"] is True
    _, args = script_of(relay)
    assert args[1:3] == [rmount["mountPath"], next(m["mountPath"] for m in relay["volumeMounts"] if m["name"] == own["name"])]

    # Identities: the relay is neither the agent's uid nor its gid, and the init step gives the
    # directory to the relay's group, running as root with no capability at all.
    a_uid, a_gid = ids(pod, agent)
    r_uid, r_gid = ids(pod, relay)
    i_uid, i_gid = ids(pod, init)
    assert (a_uid, a_gid) == (AGENT_UID, AGENT_GID) and r_uid not in (0, a_uid) and r_gid not in (0, a_gid)
    assert i_uid == 0 and i_gid == r_gid and init["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # Nothing puts the agent in the relay's group.
    psc = pod.get("securityContext", {})
    assert "fsGroup" not in psc and r_gid not in (psc.get("supplementalGroups") or [])
    assert relay["securityContext"]["runAsNonRoot"] is True and relay["securityContext"]["readOnlyRootFilesystem"] is True


def test_relay_allows_exactly_the_keys_the_agent_writes() -> None:
    """ALLOWED_KEYS agrees with the agent's default --prefix and its fixed key (checked with grep,
    the relay's own matcher), and lets nothing else through."""
    from rdmadoctor.core import labels as L

    allowed = relay_env(base_pod())["ALLOWED_KEYS"]
    args = D.agent(base_pod())["args"]
    assert "--prefix" not in args and L.PREFIX == "rdmadoctor.io/"
    good = [*L.OWNED, L.PREFIX + "x", L.PREFIX + "a" * 63, L.PREFIX + "gpu-nic.mlx5_0"]
    bad = [
        "kubernetes.io/hostname", "node-role.kubernetes.io/control-plane", "feature.node.kubernetes.io/pci-10de.present",
        "nvidia.com/gpu.present", "evil.rdmadoctor.io/ready", "rdmadoctor.io/", "rdmadoctor.io/a/b", "rdmadoctor.io/-x",
        L.PREFIX + "a" * 64, "rdmadoctorXio/ready", "feature.node.kubernetes.io/network-rdma.capable2", "ready",
    ]
    text = "".join(f"{k}\n" for k in good + bad)
    proc = subprocess.run(["grep", "-aEx", f"({allowed})"], input=text, capture_output=True, text=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
    assert proc.stdout.splitlines() == good


# ---- 16: the relay's script, run ----------------------------------------------------------------
def nfd_read(features_dir: Path, now: float | None = None) -> dict[str, str]:
    """The labels nfd-worker's local source takes from ``features_dir`` (source/local/local.go):
    every top-level entry whose name does not start with '.', followed if a symlink, read if it
    is then a regular file of at most 64 KiB, in name order; '# +expiry-time=' applies to the
    lines after it (lines before any expiry are kept); other '#' lines are comments; 'key=value',
    a bare key meaning 'true'; a later file overrides an earlier one."""
    now = datetime.now(timezone.utc).timestamp() if now is None else now
    labels: dict[str, str] = {}
    for name in sorted(os.listdir(features_dir)):
        if name.startswith("."):
            continue
        try:
            st = (features_dir / name).stat()
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_size > NFD_MAX:
            continue
        expires = now
        for raw in (features_dir / name).read_bytes().split(b"\n"):
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            if line.startswith("#"):
                if line.startswith("# +expiry-time="):
                    expires = datetime.fromisoformat(line.split("=", 1)[1].strip().replace("Z", "+00:00")).timestamp()
                continue
            if expires < now:
                continue
            key, sep, value = line.partition("=")
            labels[key] = value if sep else "true"
    return labels


class Relay:
    """The relay container's script, run once (interval 0) with /bin/sh, on a features.d laid out
    as the init step leaves it: ``fd/rdmadoctor -> .rdmadoctor/rdmadoctor``."""

    def __init__(self, root: Path):
        self.script, self.args = script_of(container(base_pod(), "nfd-relay"))
        self.env = {"PATH": "/usr/bin:/bin", **relay_env(base_pod())}
        self.staging = root / "staging"
        self.fd = root / "features.d"
        self.own = self.fd / ".rdmadoctor"
        for d in (self.staging, self.own):
            d.mkdir(parents=True)
        (self.fd / "rdmadoctor").symlink_to(LINK_TARGET)
        self.src = self.staging / "rdmadoctor"
        self.dst = self.own / "rdmadoctor"

    def run(self) -> subprocess.CompletedProcess:
        argv = ["/bin/sh", "-c", self.script, self.args[0], str(self.staging), str(self.own), "0"]
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert sorted(p.name for p in self.own.iterdir()) == (["rdmadoctor"] if self.dst.exists() else [])  # no temp left
        return proc

    def feed(self, data: bytes | str) -> dict[str, str]:
        self.src.write_bytes(data.encode() if isinstance(data, str) else data)
        self.run()
        return nfd_read(self.fd)


@pytest.fixture
def relay(tmp_path: Path) -> Relay:
    if not shutil.which("cmp"):
        pytest.skip("cmp (diffutils, Essential in Debian and so in the image) is not installed")
    return Relay(tmp_path)


def _honest_files() -> Iterator[tuple[str, str]]:
    from rdmadoctor.publish.nfd import NfdPublisher
    from rdmadoctor.runner import Options, diagnose

    for example in ("hgx-h100-ib", "roce-node", "broken-pod"):
        report = diagnose(Options(example=example, scope="node")).report
        yield example, NfdPublisher("/nonexistent", expiry=600).content(report)


def test_relay_passes_the_agents_real_files_unchanged(relay: Relay) -> None:
    for example, text in _honest_files():
        labels = relay.feed(text)
        assert relay.dst.read_text() == text, example
        assert labels and labels["feature.node.kubernetes.io/network-rdma.capable"] == "true", example
        assert oct(relay.dst.stat().st_mode & 0o777) == oct(0o644)  # nfd-worker runs as nobody


def test_relay_keeps_only_rdmadoctors_labels_from_a_hostile_file(relay: Relay) -> None:
    """A compromised agent writes whatever it likes to its staging file: what reaches NFD is its
    expiry line and rdmadoctor's own keys with valid values, nothing else."""
    expiry = "# +expiry-time=2999-01-01T00:00:00Z"
    hostile = "\n".join([
        expiry,
        "rdmadoctor.io/ready=true",
        "feature.node.kubernetes.io/network-rdma.capable=true",
        "kubernetes.io/hostname=other-node",
        "node-role.kubernetes.io/control-plane=",
        "feature.node.kubernetes.io/pci-10de.present=true",
        "nvidia.com/gpu.present=true",
        "evil.rdmadoctor.io/ready=true",
        "rdmadoctor.io/gpudirect",  # a bare key: NFD would make it "true"
        "rdmadoctor.io/link-layer=a=b",
        "rdmadoctor.io/min-rate-gbps=" + "9" * 64,
        " rdmadoctor.io/active-ports=8",  # NFD trims spaces; the relay does not pass them
        "rdmadoctor.io/active-ports=8\r",
        "rdmadoctor.io/gpu-nic=PIX\x00nvidia.com/gpu=1",
        "# +no-label",
        "# +expiry-time=3999-01-01T00:00:00Z",
        "rdmadoctor.io/link-layer=InfiniBand",
    ]) + "\n"
    labels = relay.feed(hostile)
    assert relay.dst.read_text() == "\n".join([
        expiry, "rdmadoctor.io/ready=true", "feature.node.kubernetes.io/network-rdma.capable=true", "rdmadoctor.io/link-layer=InfiniBand",
    ]) + "\n"
    assert labels == {
        "rdmadoctor.io/ready": "true", "feature.node.kubernetes.io/network-rdma.capable": "true", "rdmadoctor.io/link-layer": "InfiniBand",
    }


@pytest.mark.parametrize(
    "what,data",
    [
        ("labels before the expiry line (they would never expire)", "rdmadoctor.io/ready=true\n# +expiry-time=2999-01-01T00:00:00Z\n"),
        ("no expiry line", "rdmadoctor.io/ready=true\n"),
        ("an expiry that is not RFC 3339", "# +expiry-time=tomorrow\nrdmadoctor.io/ready=true\n"),
        ("larger than NFD reads", "# +expiry-time=2999-01-01T00:00:00Z\n" + "rdmadoctor.io/ready=true\n" * 3000),
        ("binary", b"\x00\xff" * 100),
        ("empty", ""),
    ],
)
def test_relay_publishes_nothing_from_a_malformed_file(relay: Relay, what: str, data) -> None:
    relay.feed("# +expiry-time=2999-01-01T00:00:00Z\nrdmadoctor.io/ready=true\n")
    assert nfd_read(relay.fd) == {"rdmadoctor.io/ready": "true"}
    assert relay.feed(data) == {}, what
    assert relay.dst.read_bytes() == b"", what


def test_relay_follows_no_trick_of_the_agent(relay: Relay, tmp_path: Path) -> None:
    """The staging file as a symlink to another file: read, but it is not a feature file, so
    nothing passes. The relay's own file stays a regular file it wrote (never a link the agent
    made), replaced by rename, and left alone when the agent has written nothing yet."""
    secret = tmp_path / "secret"
    secret.write_text("token-abc.def\nkey=value\n")
    relay.run()  # nothing staged yet: nothing written
    assert not relay.dst.exists()
    relay.src.symlink_to(secret)
    relay.run()
    assert relay.dst.read_bytes() == b"" and not relay.dst.is_symlink()
    relay.src.unlink()
    text = next(t for _, t in _honest_files())
    relay.feed(text)
    before = relay.dst.stat()
    relay.run()  # unchanged: not rewritten
    assert relay.dst.stat().st_ino == before.st_ino
    relay.feed(text.replace("rdmadoctor.io/ready=true", "rdmadoctor.io/ready=false"))
    assert relay.dst.stat().st_ino != before.st_ino  # a new file renamed over, never rewritten in place
    relay.src.unlink()
    relay.run()  # the agent restarted and has not written yet: NFD keeps the labels until they expire
    assert "rdmadoctor.io/ready=false" in relay.dst.read_text()


# ---- 16: the pod's steps in a sandbox -----------------------------------------------------------
def _sandbox(base: Path, writable: list[Path], steps: list[str]) -> subprocess.CompletedProcess:
    """Run ``steps`` (shell lines) in a private mount namespace where every filesystem is
    read-only except ``writable`` (the kernel's /proc, /sys, /dev aside), the venv and the
    project reachable by non-root uids (test_deploy._shims)."""
    shims = Path(tempfile.mkdtemp(prefix="shims", dir=base))
    os.chmod(shims, 0o755)
    script = [
        "set -e",
        "mount --make-rprivate /",
        *D._shims([sys.executable, sys.prefix, sys.base_prefix, str(D.ROOT)], shims),
        *[f"mount --bind '{w}' '{w}'" for w in writable],
        "findmnt -rno TARGET | while read -r m; do case \"$m\" in /proc*|/sys*|/dev*) continue;; esac; "
        + " ".join(f'[ "$m" = "{w}" ] && continue;' for w in writable)
        + ' mount -o remount,bind,ro "$m" 2>/dev/null || true; done',
        f"! touch '{base}/probe' 2>/dev/null",
        *steps,
    ]
    return subprocess.run(["unshare", "-m", "sh", "-c", "\n".join(script)], capture_output=True, text=True, timeout=300)


def _as(uid: int, gid: int, argv: list[str], env: dict[str, str] | None = None) -> str:
    prefix = f"setpriv --reuid {uid} --regid {gid} {DROP}"
    if env is not None:
        prefix += " env -i " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    return f"{prefix} {shlex.join(argv)}"


def _step(c: dict, pod: dict, replace: dict[str, str], env: dict[str, str] | None = None) -> str:
    """A container's command, paths moved by ``replace``, run as its uid/gid with no capabilities."""
    uid, gid = ids(pod, c)
    script, args = script_of(c)
    return _as(uid, gid, ["/bin/sh", "-c", script, *[replace.get(a, a) for a in args]], env)


@pytest.fixture
def sandbox_base() -> Iterator[Path]:
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "setpriv", "findmnt", "cmp")):
        pytest.skip("needs root, unshare, setpriv, findmnt and cmp to build the pod's sandbox")
    base = Path(tempfile.mkdtemp(prefix="rdmadoctor-nfd-"))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _tree(d: Path) -> dict[str, tuple]:
    """name -> (kind, uid, gid, mode, link target) of the top of ``d``."""
    out = {}
    for p in sorted(d.iterdir()):
        st = p.lstat()
        kind = "link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "file"
        out[p.name] = (kind, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), os.readlink(p) if kind == "link" else None)
    return out


def _cleanup_step(replace: dict[str, str]) -> str:
    docs = D.kustomize(D.DEPLOY / "overlays" / "nfd-cleanup")
    pod = D.one(docs, "DaemonSet", "rdmadoctor")["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    return _step(init, pod, replace)


def test_nfd_mode_upgrade_run_and_uninstall_on_a_sandboxed_host(sandbox_base: Path) -> None:
    """A node upgraded from a version that gave features.d to the agent's group: the init step
    (uid 0, no capabilities) sets up the relay's directory and the symlink and takes the group
    write back; the agent (uid 9470) runs one cycle into its staging directory; the relay (uid
    9471) copies it; nfd-worker (uid 65534) reads the labels through the symlink, next to another
    tool's file left untouched; the agent's uid can write neither features.d nor the relay's
    directory. Then overlays/nfd-cleanup's step leaves features.d as it was before rdmadoctor."""
    import json
    import tarfile

    base = sandbox_base
    pod = base_pod()
    host, fd, staging, run, tmp, out = (base / n for n in ("host", "features.d", "staging", "run", "tmp", "out"))
    for d in (host, fd, staging, run, tmp, out):
        d.mkdir()
    own = fd / ".rdmadoctor"
    own.mkdir(mode=0o755)  # the kubelet's DirectoryOrCreate for the relay's volume: root:root 0755
    os.chmod(own, 0o755)
    # What versions <= 0.1.0 left: features.d group 9470 with group write, the agent's own file.
    os.chown(fd, 0, AGENT_GID)
    os.chmod(fd, 0o775)
    (fd / "rdmadoctor").write_text("# +expiry-time=2999-01-01T00:00:00Z\nrdmadoctor.io/ready=stale\n")
    os.chown(fd / "rdmadoctor", AGENT_UID, AGENT_GID)
    (fd / "vendor-gpu").write_text("vendor.example.com/gpu=true\n")
    os.chmod(fd / "vendor-gpu", 0o644)
    for d, mode in ((staging, 0o777), (run, 0o777), (tmp, 0o1777), (out, 0o755)):
        os.chmod(d, mode)  # emptyDirs are world-writable
    with tarfile.open(D.ROOT / "rdmadoctor" / "examples" / "hgx-h100-ib.tar.gz") as tf:
        tf.extractall(host, filter="tar") if hasattr(tarfile, "data_filter") else tf.extractall(host)
    for dirpath, _, _ in os.walk(host):
        os.chmod(dirpath, 0o755)
    cfg = base / "node.toml"
    cfg.write_text(D.one(D.rendered("base"), "ConfigMap", "rdmadoctor-agent")["data"]["node.toml"])
    os.chmod(cfg, 0o644)

    agent = container(pod, "agent")
    moved = {"--root": str(host), "--features-dir": str(staging), "--report-file": str(run / "report.json"), "--config": str(cfg), "--metrics-port": "0"}
    args = list(agent["args"])
    for flag, value in moved.items():
        args[args.index(flag) + 1] = value
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "TMPDIR": str(tmp), "PYTHONDONTWRITEBYTECODE": "1", "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    replace = {FEATURES_DIR: str(fd), OWN_DIR: str(own), D._arg(agent["args"], "--features-dir"): str(staging), "5": "0"}
    probes = [str(fd / "agent-probe"), str(own / "agent-probe")]
    steps = [
        _step(container(pod, "features-dir"), pod, replace),
        "cd / && " + _as(AGENT_UID, AGENT_GID, [sys.executable, "-m", "rdmadoctor", *args, "--once"], env) + " || [ $? -eq 1 ]",
        _step(container(pod, "nfd-relay"), pod, replace, {"PATH": "/usr/bin:/bin", **relay_env(pod)}),
        _as(NOBODY, NOBODY, ["cat", str(fd / "rdmadoctor")]) + f" > '{out}/nfd-view'",
        # The agent's uid, even with the host's features.d in reach, may create, replace or
        # remove nothing there.
        *[f"{_as(AGENT_UID, AGENT_GID, ['touch', p])} 2>/dev/null && echo '{p}' >> '{out}/agent-wrote' || true" for p in probes],
        f"{_as(AGENT_UID, AGENT_GID, ['rm', '-f', str(own / 'rdmadoctor'), str(fd / 'rdmadoctor'), str(fd / 'vendor-gpu')])} 2>/dev/null || true",
    ]
    proc = _sandbox(base, [fd, staging, run, tmp, out], steps)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (base / "probe").exists()

    # features.d: root's, the group write of the old version taken back, another tool's file as it was.
    tree = _tree(fd)
    assert tree == {
        ".rdmadoctor": ("dir", 0, 9471, 0o775, None),
        "rdmadoctor": ("link", 0, 9471, 0o777, LINK_TARGET),
        "vendor-gpu": ("file", 0, 0, 0o644, None),
    }
    st = fd.stat()
    assert (st.st_uid, st.st_mode & 0o022) == (0, 0)
    assert (fd / "vendor-gpu").read_text() == "vendor.example.com/gpu=true\n"
    assert _tree(own) == {"rdmadoctor": ("file", 9471, 9471, 0o644, None)}
    assert not (out / "agent-wrote").exists()
    # What NFD publishes: the agent's labels (through the relay, unchanged) and the other tool's.
    staged = (staging / "rdmadoctor").read_text()
    assert (out / "nfd-view").read_text() == staged == (own / "rdmadoctor").read_text()
    labels = nfd_read(fd)
    assert labels["vendor.example.com/gpu"] == "true" and labels["rdmadoctor.io/ready"] == "true"
    assert {k for k in labels if k != "vendor.example.com/gpu"} <= {
        k for k in labels if re.fullmatch(relay_env(pod)["ALLOWED_KEYS"], k)
    }
    # The cycle itself judged the node, as the DaemonSet runs it.
    report = json.loads((run / "report.json").read_text())
    status = {c["id"]: c["status"] for c in report["checks"]}
    assert report["scope"] == "node" and status["ib.ports"] == "pass" and status["kernel.modules"] == "pass"
    failing = {f["code"]: f["message"] for c in report["checks"] for f in c["findings"] if f["severity"] == "error"}
    assert not failing
    assert {k for k in ("limits.memlock", "shm.size", "verbs.userspace", "nccl.env") if status[k] == "skip"} == {
        "limits.memlock", "shm.size", "verbs.userspace", "nccl.env"
    }

    # Uninstall: rdmadoctor's entries gone, features.d back to root:root 0755.
    proc = _sandbox(base, [fd], [_cleanup_step({FEATURES_DIR: str(fd)})])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _tree(fd) == {"vendor-gpu": ("file", 0, 0, 0o644, None)}
    st = fd.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o755)
    assert nfd_read(fd) == {"vendor.example.com/gpu": "true"}


def test_nfd_mode_fresh_install_and_uninstall_leave_features_d_as_it_was(sandbox_base: Path) -> None:
    """On a node that never ran rdmadoctor: features.d keeps its owner, group and mode; the init
    step refuses a planted symlink in place of its directory; uninstall restores the exact tree."""
    base = sandbox_base
    pod = base_pod()
    fd, staging = base / "features.d", base / "staging"
    fd.mkdir(mode=0o755)
    staging.mkdir(mode=0o777)
    os.chmod(staging, 0o777)
    (fd / "other").write_text("other.example.com/x=1\n")
    before = _tree(fd), stat.S_IMODE(fd.stat().st_mode), fd.stat().st_gid
    own = fd / ".rdmadoctor"
    replace = {FEATURES_DIR: str(fd), OWN_DIR: str(own), D._arg(D.agent(pod)["args"], "--features-dir"): str(staging), "5": "0"}
    text = next(t for _, t in _honest_files())
    (staging / "rdmadoctor").write_text(text)

    # A planted symlink where the relay's directory goes (what a compromised agent of a version
    # that could write features.d might leave): refused, removed, and the pod fails visibly.
    (fd / ".rdmadoctor").symlink_to("/etc")
    proc = _sandbox(base, [fd], [_step(container(pod, "features-dir"), pod, replace)])
    assert proc.returncode != 0 and "not the directory the kubelet creates" in proc.stderr
    assert not os.path.lexists(own) and stat.S_IMODE(Path("/etc").stat().st_mode) == 0o755

    own.mkdir(mode=0o755)
    os.chmod(own, 0o755)
    steps = [
        _step(container(pod, "features-dir"), pod, replace),
        _step(container(pod, "features-dir"), pod, replace),  # idempotent: a restarted pod
        _step(container(pod, "nfd-relay"), pod, replace, {"PATH": "/usr/bin:/bin", **relay_env(pod)}),
    ]
    proc = _sandbox(base, [fd, staging], steps)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (stat.S_IMODE(fd.stat().st_mode), fd.stat().st_gid) == before[1:]
    assert set(_tree(fd)) == {".rdmadoctor", "rdmadoctor", "other"}
    assert nfd_read(fd)["rdmadoctor.io/ready"] == "true"

    proc = _sandbox(base, [fd], [_cleanup_step({FEATURES_DIR: str(fd)})])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (_tree(fd), stat.S_IMODE(fd.stat().st_mode), fd.stat().st_gid) == before


def test_cleanup_overlay_renders_and_reaches_the_same_nodes() -> None:
    docs = D.kustomize(D.DEPLOY / "overlays" / "nfd-cleanup")
    for doc in docs:
        for version in D._versions():
            D.validate_strict(doc, version)
    ds = D.one(docs, "DaemonSet", "rdmadoctor")
    pod = ds["spec"]["template"]["spec"]
    base = base_pod()
    assert pod["affinity"] == base["affinity"] and pod["tolerations"] == base["tolerations"]
    assert ds["metadata"]["namespace"] == D.daemonset("base")["metadata"]["namespace"]
    # It mounts features.d and no other host path (not the relay's directory, which the kubelet
    # would create again).
    assert [(c, p, w) for c, p, w in host_mounts(pod)] == [("nfd-cleanup", FEATURES_DIR, True)]
    assert [v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v] == [FEATURES_DIR]
    (init,) = pod["initContainers"]
    assert ids(pod, init) == (0, 0) and init["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    for c in pod["containers"]:
        uid, _ = ids(pod, c)
        assert uid not in (None, 0) and c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert not c.get("volumeMounts")
    assert {c["image"] for c in D.containers(pod)} == {D.agent(base)["image"]}


@pytest.mark.parametrize("build", ["direct", "direct-conditions"])
def test_direct_mode_has_no_nfd_parts(build: str) -> None:
    pod = D.daemonset(build)["spec"]["template"]["spec"]
    assert [c["name"] for c in D.containers(pod)] == ["agent"]
    assert not [p for _, p, _ in host_mounts(pod) if p.startswith(FEATURES_DIR)]
    assert not [v for v in pod["volumes"] if v["name"].startswith("nfd-")]


# ---- 17: every status field pinned --------------------------------------------------------------
def _status_fields() -> list[str]:
    """NodeStatus' fields in the newest Kubernetes schema kubernetes-validate has."""
    from kubernetes_validate import utils as u

    version = D._versions()[-1]
    defs = u.schema_contents(f"kubernetes-json-schema/v{version}-local-strict/_definitions.json", version)
    defs = defs.get("$defs") or defs["definitions"]
    return sorted(defs["io.k8s.api.core.v1.NodeStatus"]["properties"])


# A value a kubelet really reports for each field, and a change of it a stolen token might make.
SAMPLE: dict[str, tuple[Any, Any]] = {
    "addresses": ([{"type": "InternalIP", "address": "10.1.0.7"}, {"type": "Hostname", "address": "gpu-07"}],
                  [{"type": "InternalIP", "address": "6.6.6.6"}, {"type": "Hostname", "address": "gpu-07"}]),
    "allocatable": ({"cpu": "220", "memory": "1900Gi", "nvidia.com/gpu": "8", "rdma/hca": "8"},
                    {"cpu": "220", "memory": "1900Gi", "nvidia.com/gpu": "16", "rdma/hca": "8"}),
    "capacity": ({"cpu": "224", "memory": "2015Gi", "nvidia.com/gpu": "8", "rdma/hca": "8"},
                 {"cpu": "224", "memory": "2015Gi", "nvidia.com/gpu": "8", "rdma/hca": "64"}),
    "config": ({"active": {"configMap": {"name": "kubelet", "namespace": "kube-system", "kubeletConfigKey": "kubelet"}}},
               {"active": {"configMap": {"name": "evil", "namespace": "kube-system", "kubeletConfigKey": "kubelet"}}}),
    "daemonEndpoints": ({"kubeletEndpoint": {"Port": 10250}}, {"kubeletEndpoint": {"Port": 1}}),
    "declaredFeatures": (["InPlacePodVerticalScaling"], ["InPlacePodVerticalScaling", "UserNamespacesSupport"]),
    "features": ({"supplementalGroupsPolicy": True}, {"supplementalGroupsPolicy": False}),
    "images": ([{"names": ["nvcr.io/nvidia/pytorch:24.05-py3"], "sizeBytes": 9876543210}],
               [{"names": ["nvcr.io/nvidia/pytorch:24.05-py3"], "sizeBytes": 9876543210},
                {"names": ["registry.example.com/not/really/here:latest"], "sizeBytes": 1}]),
    "nodeInfo": ({"kubeletVersion": "v1.31.4", "containerRuntimeVersion": "containerd://1.7.22", "architecture": "amd64",
                  "bootID": "b", "kernelVersion": "6.8.0", "kubeProxyVersion": "", "machineID": "m", "operatingSystem": "linux",
                  "osImage": "Ubuntu 24.04", "systemUUID": "s"},
                 {"kubeletVersion": "v1.99.0", "containerRuntimeVersion": "containerd://1.7.22", "architecture": "amd64",
                  "bootID": "b", "kernelVersion": "6.8.0", "kubeProxyVersion": "", "machineID": "m", "operatingSystem": "linux",
                  "osImage": "Ubuntu 24.04", "systemUUID": "s"}),
    "phase": ("Running", "Terminated"),
    "runtimeHandlers": ([{"name": "", "features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}}],
                        [{"name": "", "features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}},
                         {"name": "evil", "features": {"recursiveReadOnlyMounts": False, "userNamespaces": False}}]),
    "volumesAttached": ([{"name": "kubernetes.io/csi/csi.example.com^vol-1", "devicePath": ""}], []),
    "volumesInUse": (["kubernetes.io/csi/csi.example.com^vol-1"], []),
}


def full_node() -> dict:
    """test_deploy's Node with every status field of the newest schema filled in."""
    node = D._node()
    for field in _status_fields():
        if field != "conditions":
            node["status"][field] = copy.deepcopy(SAMPLE[field][0]) if field in SAMPLE else {"future": "value"}
    return node


def _own_condition_change(n: dict) -> None:
    n["status"]["conditions"][1] = {"type": "RDMALinkProblem", "status": "True", "reason": "PortDown", "message": "mlx5_3/1 DOWN"}


def test_full_node_is_a_valid_node_and_covers_every_status_field() -> None:
    fields = set(_status_fields())
    assert {"images", "volumesInUse", "volumesAttached", "config", "runtimeHandlers", "features", "addresses"} <= fields
    node = full_node()
    assert set(node["status"]) == fields
    if set(SAMPLE) >= fields - {"conditions"}:  # every sample is a value the real schema accepts
        D.validate_strict(node, D._versions()[-1])


def test_policy_admits_rdmadoctors_own_condition_on_a_full_node() -> None:
    old = full_node()
    new = copy.deepcopy(old)
    _own_condition_change(new)
    new["status"]["conditions"].append({"type": "GPUDirectRDMAProblem", "status": "False", "reason": "PeermemLoaded", "message": "ok"})
    v = D.evaluate(old, new, sub="status")
    assert v.applies and v.allowed, v.denied
    assert D.evaluate(full_node(), full_node(), sub="status").allowed


@pytest.mark.parametrize("field", [f for f in _status_fields() if f != "conditions"])
@pytest.mark.parametrize("how", ["changed", "removed", "added", "changed with an own condition"])
def test_policy_pins_every_other_status_field(field: str, how: str) -> None:
    old = full_node()
    new = copy.deepcopy(old)
    if how == "removed":
        del new["status"][field]
    elif how == "added":
        del old["status"][field]
    else:
        new["status"][field] = copy.deepcopy(SAMPLE[field][1]) if field in SAMPLE else {"future": "changed"}
        if how == "changed with an own condition":
            _own_condition_change(new)
    assert old != new
    for sub in ("status", ""):
        v = D.evaluate(old, new, sub=sub)
        assert v.applies and not v.allowed, (field, how, sub)
        assert not [d for d in v.denied if d.startswith("error:")], v.denied
        assert any(f"changes status.{field}" in d for d in v.denied), v.denied


def test_policy_pins_a_status_field_no_kubernetes_has_yet() -> None:
    old = full_node()
    new = copy.deepcopy(old)
    new["status"]["someFieldOfKubernetes2"] = {"schedulable": True}
    new["status"]["another"] = "x"
    v = D.evaluate(old, new, sub="status")
    assert not v.allowed and any("changes status." in d and "and 1 more status field" in d for d in v.denied), v.denied


# ---- 17 and 18: the real agent's traffic against the policies and the RBAC ------------------------
def _rbac_grants(docs: list[dict]) -> set[tuple[str, str, str, str]]:
    """(namespace or '*', apiGroup, resource, verb) that the agent's ServiceAccount holds."""
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs if d["kind"] in ("ClusterRole", "Role")}
    out = set()
    for b in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        if {"kind": "ServiceAccount", "name": "rdmadoctor", "namespace": "rdmadoctor"} not in b["subjects"]:
            continue
        ns = b["metadata"].get("namespace") or "*"
        role = roles[(b["roleRef"]["kind"], None if b["roleRef"]["kind"] == "ClusterRole" else ns, b["roleRef"]["name"])]
        for r in role["rules"]:
            assert not r.get("resourceNames") and "*" not in r["verbs"] + r["resources"] + r["apiGroups"]
            out |= {(ns, g, res, v) for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}
    return out


def _agent_traffic() -> tuple[list[tuple[str, str, str, str]], list[tuple[str, dict, dict]], list[dict]]:
    """One agent with --conditions against FakeKubeAPI over a node whose status has every field:
    a healthy cycle, a port going down, and back. Returns (namespace, group, resource, verb) of
    each request, (subresource, node before, node after) of each write, and the Events created."""
    kubeapi = pytest.importorskip("kubeapi")
    from urllib.parse import urlsplit

    from rdmadoctor.publish import make_publisher

    node_name = "gpu-07"
    writes: list[tuple[str, dict, dict]] = []

    class Recording(kubeapi.FakeKubeAPI):
        def _handle(self, method, raw_path, headers, body):
            parts = urlsplit(raw_path).path.strip("/").split("/")
            name = parts[3] if parts[:3] == ["api", "v1", "nodes"] and len(parts) > 3 else None
            before = copy.deepcopy(self.nodes.get(name)) if name else None
            code, answer = super()._handle(method, raw_path, headers, body)
            if method == "PATCH" and code == 200 and name:
                writes.append(("status" if len(parts) == 5 else "", before, copy.deepcopy(self.nodes[name])))
            return code, answer

    labels = {"feature.node.kubernetes.io/network-rdma.capable": "true", "rdmadoctor.io/ready": "true"}
    ok = {"id": "ib.ports", "status": "pass", "findings": []}
    down = {"id": "ib.ports", "status": "fail", "findings": [
        {"code": "IB_PORT_DOWN", "severity": "error", "subject": "mlx5_3/1", "message": "state DOWN"}]}
    tmp = Path(tempfile.mkdtemp(prefix="rdmadoctor-kube-"))
    try:
        with Recording() as api:
            node = api.add_node(node_name, labels=dict(full_node()["metadata"]["labels"]))
            node["status"] = {k: v for k, v in full_node()["status"].items() if k != "conditions"}
            node["status"]["conditions"] = [full_node()["status"]["conditions"][0]]  # the kubelet's Ready only
            node["spec"] = copy.deepcopy(full_node()["spec"])
            clock = [1_700_000_000.0]
            pub = make_publisher("node", node=node_name, kubeconfig=api.kubeconfig(tmp / "kubeconfig"), conditions=True,
                                 backoff=0.01, clock=lambda: clock[0], prefix="rdmadoctor.io/")
            for checks, ready in (([ok], "true"), ([down], "false"), ([ok], "true")):
                pub.publish({"labels": {**labels, "rdmadoctor.io/ready": ready}, "checks": checks})
                clock[0] += 60
            requests = []
            for r in api.requests:
                parts = r.path.strip("/").split("/")
                if parts[2] == "namespaces":
                    requests.append((parts[3], "", parts[4], {"POST": "create"}[r.method]))
                else:
                    res = "nodes/status" if len(parts) == 5 else "nodes"
                    requests.append(("*", "", res, {"GET": "get", "PATCH": "patch"}[r.method]))
            return requests, writes, list(api.events)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _event_policy() -> dict:
    return D.one(D._load_all((D.DEPLOY / "overlays" / "direct-conditions" / "event-policy.yaml").read_text()), "ValidatingAdmissionPolicy")


def test_the_agents_real_traffic_is_exactly_what_rbac_grants_and_the_policies_admit() -> None:
    requests, writes, events = _agent_traffic()
    # Every grant is used, and nothing is used that is not granted.
    assert set(requests) == _rbac_grants(D.rendered("direct-conditions"))
    assert _rbac_grants(D.rendered("direct")) == {("*", "", "nodes", "get"), ("*", "", "nodes", "patch")}
    # Label patches, condition patches and the Events of both transitions.
    assert {sub for sub, _, _ in writes} == {"", "status"} and len(events) == 2
    for sub, before, after in writes:
        v = D.evaluate(before, after, sub=sub)
        assert v.applies and v.allowed, (sub, v.denied)
    for ev in events:
        v = D.evaluate(None, ev, policy=_event_policy(), operation="CREATE")
        assert v.applies and v.allowed, v.denied


# ---- 18: the token, and the Events -------------------------------------------------------------
@pytest.mark.parametrize("build", ["direct", "direct-conditions"])
def test_direct_mode_token_is_short_lived_pod_bound_and_only_the_agents(build: str, tmp_path: Path, monkeypatch) -> None:
    """Not the automounted token: the API server stretches that one (3607 s asked) to a year. A
    projected token of at most an hour, where in-cluster clients look, in the agent only."""
    docs = D.rendered(build)
    pod = D.daemonset(build)["spec"]["template"]["spec"]
    assert D.one(docs, "ServiceAccount", "rdmadoctor")["automountServiceAccountToken"] is False
    assert pod["automountServiceAccountToken"] is False
    tokens = [v for v in pod["volumes"] for s in v.get("projected", {}).get("sources", []) if "serviceAccountToken" in s]
    (vol,) = tokens
    sources = vol["projected"]["sources"]
    (sat,) = [s["serviceAccountToken"] for s in sources if "serviceAccountToken" in s]
    assert 600 <= sat["expirationSeconds"] <= 3600 and "audience" not in sat
    files = {sat["path"]}
    for s in sources:
        for item in s.get("configMap", {}).get("items", []):
            assert s["configMap"]["name"] == "kube-root-ca.crt" and item["key"] == "ca.crt"
            files.add(item["path"])
        for item in s.get("downwardAPI", {}).get("items", []):
            assert item["fieldRef"]["fieldPath"] == "metadata.namespace"
            files.add(item["path"])
    assert files == {"token", "ca.crt", "namespace"}
    mounts = [(c["name"], m) for c in D.containers(pod) for m in c.get("volumeMounts", []) if m["name"] == vol["name"]]
    assert [(c, m["mountPath"], m.get("readOnly")) for c, m in mounts] == [("agent", "/var/run/secrets/kubernetes.io/serviceaccount", True)]
    # The client the agent uses finds it there (lightkube's in-cluster default directory), and
    # reads those three files.
    from lightkube.config import kubeconfig as lk

    assert lk.SERVICE_ACCOUNT == mounts[0][1]["mountPath"]
    for name in files:
        (tmp_path / name).write_text({"token": "tok", "namespace": "rdmadoctor"}.get(name, "ca"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    conf = lk.KubeConfig.from_service_account(tmp_path)
    assert conf.get().user.token == "tok" and conf.get().namespace == "rdmadoctor"


def _event(**over: Any) -> dict:
    from rdmadoctor.publish.kube import event_body

    ev = event_body("gpu-07", "uid-7", {"type": "Warning", "reason": "RDMALinkProblem", "message": "mlx5_3/1 DOWN"}, 1_700_000_000.0)
    for path, value in over.items():
        *head, last = path.split(".")
        d = ev
        for k in head:
            d = d.setdefault(k, {})
        if value is None:
            d.pop(last, None)
        else:
            d[last] = value
    return ev


@pytest.mark.parametrize(
    "what,over",
    [
        ("another node", {"involvedObject.name": "gpu-08"}),
        ("a pod", {"involvedObject.kind": "Pod", "involvedObject.namespace": "default", "involvedObject.name": "trainer-0"}),
        ("a field of the node", {"involvedObject.fieldPath": "spec.taints"}),
        ("posing as the kubelet", {"source.component": "kubelet"}),
        ("posing as the scheduler", {"reportingComponent": "default-scheduler"}),
        ("no component", {"source": None}),
        ("another host", {"source.host": "gpu-08"}),
        ("related to a pod", {"related": {"kind": "Pod", "namespace": "default", "name": "trainer-0", "apiVersion": "v1"}}),
    ],
)
def test_event_policy_refuses_forged_events(what: str, over: dict) -> None:
    v = D.evaluate(None, _event(**over), policy=_event_policy(), operation="CREATE")
    assert v.applies and not v.allowed, what
    assert not [d for d in v.denied if d.startswith("error:")], v.denied


def test_event_policy_admits_the_agents_events_only_from_its_own_node() -> None:
    policy = _event_policy()
    assert D.evaluate(None, _event(), policy=policy, operation="CREATE").allowed
    other = D.evaluate(None, _event(), policy=policy, operation="CREATE", node="gpu-08")
    assert not other.allowed and "(gpu-08)" in other.denied[0]
    unbound = D.evaluate(None, _event(), policy=policy, operation="CREATE", node=None)
    assert not unbound.allowed and "names no node" in unbound.denied[0]
    assert not D.evaluate(None, _event(), policy=policy, operation="CREATE", user="system:node:gpu-07").applies
    # Bound and in force where the Role is.
    docs = D.rendered("direct-conditions")
    (binding,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding" and d["spec"]["policyName"] == policy["metadata"]["name"]]
    assert binding["spec"]["validationActions"] == ["Deny"] and policy["spec"]["failurePolicy"] == "Fail"
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert [(r["apiGroups"], r["operations"], r["resources"]) for r in rules] == [([""], ["CREATE"], ["events"])]
    sa = D.one(docs, "ServiceAccount", "rdmadoctor")
    user = f"system:serviceaccount:{sa['metadata']['namespace']}:{sa['metadata']['name']}"
    assert [m["expression"] for m in policy["spec"]["matchConditions"]] == [f"request.userInfo.username == '{user}'"]
    assert not [d for d in D.rendered("direct") if d["kind"].startswith("ValidatingAdmissionPolicy") and "event" in d["metadata"]["name"]]
