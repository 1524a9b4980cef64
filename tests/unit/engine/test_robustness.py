"""Bad input stays inside its check: break a healthy host tree at random and run every check.

Starting from generated trees (sysfs nodes and a bundle of pasted tool outputs), hypothesis
replaces files with random bytes, non-UTF-8, empty or 1 MiB content, deletes files and whole
folders, turns files into broken links, link loops or links to an ancestor, makes them unreadable
and truncates them. Whatever it does: no exception escapes, no check ends in an internal error,
every status is valid, an unknown says why, the report is strict JSON and the text renders.
"""

from __future__ import annotations

import errno
import io
import json
import posixpath
import traceback

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from rdmadoctor import fixturegen
from rdmadoctor.host import Link, mem_host
from rdmadoctor.runner import Options, diagnose

MIB = 1024 * 1024
STATUSES = {"pass", "warn", "fail", "unknown", "skip"}
SEVERITIES = {"info", "warning", "error", "unknown"}
PROFILES = ["generic", "hgx-8gpu-ndr", "hgx-8gpu-roce-400g"]


def _tools_only() -> dict:
    """A ticket's bundle: pasted tool outputs, no /sys, no runtime.json."""
    ib = fixturegen.scenario_tree("healthy-ib")
    roce = fixturegen.scenario_tree("roce")
    cmds = {
        "ibstat": fixturegen.ibstat_text(roce) + fixturegen.ibstat_text(ib).replace("mlx5_", "mlx5_1"),
        "ibdev2netdev": fixturegen.ibdev2netdev_text(roce),
        "show_gids": fixturegen.show_gids_text(roce),
        "nvidia-smi-topo": fixturegen.nvidia_smi_topo_text(fixturegen.SCENARIOS["healthy-ib"]()),
        "ulimit": "max locked memory       (kbytes, -l) 64\nmax memory size         (kbytes, -m) unlimited\n",
        "df-shm": "Filesystem      Size  Used Avail Use% Mounted on\nshm              64M     0   64M   0% /dev/shm\n",
        "env": "NCCL_IB_HCA=mlx5_0,mlx5_1\nNCCL_SOCKET_IFNAME=eth0\nNCCL_IB_GID_INDEX=3\n",
        "lsmod": "Module                  Size  Used by\nmlx5_ib               466944  0\nib_uverbs             200704  1 mlx5_ib\nib_core               479232  2 ib_uverbs,mlx5_ib\n",
        "dpkg-l": "ii  libibverbs1:amd64  44.0-2  amd64  Library for direct userspace use of RDMA\n"
        "ii  ibverbs-providers:amd64  44.0-2  amd64  User space provider drivers for libibverbs\n",
    }
    return fixturegen.build(fixturegen.Node(sysfs=False, runtime=False, cmds=cmds))


BASES = {
    "healthy-ib": fixturegen.scenario_tree("healthy-ib"),
    "roce": fixturegen.scenario_tree("roce"),
    "sriov": fixturegen.scenario_tree("sriov"),
    "dual-port": fixturegen.scenario_tree("dual-port-port2-down"),
    "tools-only": _tools_only(),
}


def _targets(tree: dict) -> list[str]:
    """The paths a clean run reads, plus every link: where a mutation reaches a probe."""
    host = mem_host(tree)
    diagnose(Options(), host=host)
    return sorted({p for p in host.trace if p in tree} | {k for k, v in tree.items() if isinstance(v, Link)})


TARGETS = {name: _targets(tree) for name, tree in BASES.items()}

TRICKY = [
    b"-1", b"0x", b"4294967296", b"ACTIVE", b"5:", b":", b"nan", b"inf", b"1e309", b"\x00", b" \n",
    b"9" * 40, b"-0", b"0x" + b"f" * 40, b"4: ", b": ACTIVE", b"1e400 GT/s PCIe", b"99999999999 GT/s",
    b"x16", b"255", b"0xffff", b"-1.5 Gb/sec", b"400 Gb/sec (4X NDR)\x00garbage", b"driver", b"{}",
    b"[]", b'{"memlock_soft": -1, "env": {"A": null}, "cap_eff": "0x4000"}', b"null",
    b"[/]", b"[bold red]x[/", b"\x1b[31mred", b"mlx5_0\n\n", b"../../..",  # markup, escapes, paths
]

_content = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(TRICKY),
    st.binary(min_size=1, max_size=16).map(lambda b: b"\xff\xfe" + b),  # never valid UTF-8
    st.just(b""),
    st.sampled_from([b"4: ACTIVE\n", b"0", b"\xff", b"mlx5_0 port 1 ==> ib0 (Up)\n"]).map(
        lambda s: (s * (MIB // len(s) + 1))[:MIB]
    ),
)
OPS = ["content", "delete", "broken", "loop", "loop2", "uplink", "perm", "eio", "truncate", "dir2file", "rmdir"]


def _drop_under(tree: dict, folder: str) -> None:
    for k in [k for k in tree if k.startswith(folder + "/")]:
        del tree[k]


@st.composite
def broken_trees(draw):
    base = draw(st.sampled_from(sorted(BASES)))
    tree = dict(BASES[base])
    ops = []
    for _ in range(draw(st.integers(1, 6))):
        pool = [k for k in TARGETS[base] if k in tree] if draw(st.integers(0, 4)) else sorted(tree)
        if not pool:
            break
        path = draw(st.sampled_from(pool))
        op = draw(st.sampled_from(OPS))
        if op == "content":
            tree[path] = draw(_content)
        elif op == "delete":
            tree.pop(path, None)
        elif op == "broken":
            tree[path] = Link("../no/such/file")
        elif op == "loop":
            tree[path] = Link(posixpath.basename(path))
        elif op == "loop2":
            other = path + ".other"
            tree[path], tree[other] = Link(posixpath.basename(other)), Link(posixpath.basename(path))
        elif op == "uplink":
            tree[path] = Link("../..")  # a walker that follows links would go round forever
        elif op == "perm":
            tree[path] = PermissionError(errno.EACCES, "Permission denied")
        elif op == "eio":
            tree[path] = OSError(errno.EIO, "Input/output error")
        elif op == "truncate":
            value = tree[path]
            if isinstance(value, bytes):
                tree[path] = value[: draw(st.integers(0, max(0, len(value) - 1)))]
        elif op == "dir2file":
            folder = posixpath.dirname(path)
            _drop_under(tree, folder)
            tree[folder] = draw(_content)
        elif op == "rmdir":
            _drop_under(tree, posixpath.dirname(path))
        ops.append((op, path))
    return base, tree, ops


def _traceback_of(check_id: str, tree: dict, profile: str) -> str:
    """Re-run one check outside the engine's guard, for a report with the real traceback."""
    from rdmadoctor.engine import execute as engine
    from rdmadoctor.engine import expectations, registry

    checks, _ = registry.load_checks()
    defaults = {k: v for c in checks for k, v in c.defaults.items()}
    ctx = engine.Context(mem_host(tree), expectations.resolve(defaults, profile))
    for c in engine.order_checks(checks):
        try:
            if c.id != check_id:
                ctx.results[c.id] = engine.run_check(c, ctx)
                continue
            c.judge(c.probe(ctx), ctx.expect)
        except Exception:  # noqa: BLE001
            return traceback.format_exc()
    return "(not reproduced outside the engine)"


def assert_survives(tree: dict, profile: str = "generic") -> dict:
    from rich.console import Console

    from rdmadoctor.output.text import render_report, render_topology

    diag = diagnose(Options(profile=profile), host=mem_host(tree))
    rep = diag.report
    for r in diag.results:
        assert r.status in STATUSES, (r.id, r.status)
        if r.status == "unknown":
            assert r.reason, f"{r.id} is unknown without a reason"
        assert not (r.reason or "").startswith("internal error"), (
            f"{r.id} crashed: {r.reason}\n{_traceback_of(r.id, tree, profile)}"
        )
        for f in r.findings:
            assert f.severity in SEVERITIES, (r.id, f)
            assert f.code and isinstance(f.code, str) and isinstance(f.subject, str) and isinstance(f.message, str)
    assert rep["status"] in STATUSES - {"skip"}
    assert rep["exit_code"] in (0, 1, 2)
    assert "errors" not in rep["inventory"], rep["inventory"].get("errors")  # an inventory function crashed
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in rep["labels"].items())
    json.loads(json.dumps(rep, allow_nan=False))
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=False)
    render_report(rep, verbose=True, console=console)
    render_topology(rep["inventory"].get("topology"), console=console)
    assert out.getvalue().startswith(rep["status"].upper())
    return rep


@pytest.mark.parametrize("name", sorted(BASES))
def test_bases_are_healthy_enough(name):
    """The starting points run clean, so what the mutations find is theirs."""
    rep = assert_survives(BASES[name])
    assert all(not (c.get("reason") or "").startswith("internal error") for c in rep["checks"])
    assert len(TARGETS[name]) >= min(20, len(BASES[name]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=broken_trees(), profile=st.sampled_from(PROFILES))
def test_broken_tree_never_crashes(case, profile):
    base, tree, ops = case
    note(f"base={base} profile={profile} ops={ops}")
    assert_survives(tree, profile)


# Hand-picked breakages of the files every probe leans on; kept even when hypothesis does not
# draw them. (base, {path: value, or None to delete the folder under it})
IB_DEV = "/sys/class/infiniband/mlx5_0"
PCI_DEV = "/sys/bus/pci/devices"
EXPLICIT = [
    ("healthy-ib", {IB_DEV: Link("mlx5_0")}),
    ("healthy-ib", {IB_DEV: Link("../../no/such/device")}),
    ("healthy-ib", {IB_DEV: b"not a directory"}),
    ("healthy-ib", {"/sys/class/infiniband": b"not a directory"}),
    ("healthy-ib", {f"{PCI_DEV}/0000:14:00.0": Link("../..")}),
    ("healthy-ib", {f"{PCI_DEV}/0000:13:00.0": Link("0000:13:00.0")}),
    ("healthy-ib", {f"{PCI_DEV}/not-a-bdf": Link("../../../devices/pci0000:10")}),
    ("healthy-ib", {"/runtime.json": PermissionError(errno.EACCES, "Permission denied")}),
    ("healthy-ib", {"/runtime.json": b'{"memlock_soft": -5, "memlock_hard": "x", "cap_eff": 1e999, "env": [1], "shm_size": true}'}),
    ("healthy-ib", {"/runtime.json": b"\xff\xfe" * 100}),
    ("healthy-ib", {"/proc/modules": b"\xff" * MIB}),
    ("healthy-ib", {"/proc/self/limits": b"Max locked memory  99999999999999999999999999 -3 bytes\n"}),
    ("healthy-ib", {"/proc/self/status": b"CapEff:\t" + b"f" * 64 + b"\n"}),
    ("healthy-ib", {"/var/lib/dpkg/status": b"Package: libibverbs1\nStatus: install\n\n\n\nPackage:\n"}),
    ("healthy-ib", {"/usr/lib/x86_64-linux-gnu/libibverbs.so.1": Link("libibverbs.so.1")}),
    ("healthy-ib", {"/sys/devices/system/node/node0": b"file where a folder was"}),
    ("roce", {f"{IB_DEV}/ports/1/gid_attrs/types/3": OSError(errno.EINVAL, "Invalid argument")}),
    ("roce", {f"{IB_DEV}/ports/1/gids/3": b"zzzz:zzzz"}),
    ("roce", {f"{IB_DEV}/ports/1/link_layer": b"Ethernet\x00\xff"}),
    ("roce", {"/sys/class/net/enp20s0f0np0/mtu": b"-9000"}),
    ("sriov", {f"{PCI_DEV}/0000:14:00.1/physfn": Link("physfn")}),
    ("sriov", {f"{PCI_DEV}/0000:14:00.0/sriov_numvfs": b"99999999999999999999"}),
    ("tools-only", {"/cmd/ibstat.txt": b"CA 'mlx5_0'\n\tPort 1:\n\t\tRate: 1e999\n\t\tBase lid: 0x" + b"f" * 30 + b"\n"}),
    ("tools-only", {"/cmd/nvidia-smi-topo.txt": b"\tGPU0\tNIC0\nGPU0\t X \tPIX\tPIX\tPIX\nNIC0\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC0: mlx5_1\n"}),
    ("tools-only", {"/cmd/show_gids.txt": b"mlx5_0\t1\t99999999999\tfe80::1\t\tv2\t\n"}),
    ("tools-only", {"/cmd/ibstat.txt": b"CA '[/]'\n\tPort 1:\n\t\tState: Down\n\t\tPhysical state: Polling\n\t\tLink layer: [bold]\n"}),
    ("tools-only", {"/cmd/ibdev2netdev.txt": b"mlx5_0 port 1 ==> [/red] (Up)\n"}),
]


@pytest.mark.parametrize("base,changes", EXPLICIT, ids=[f"{b}:{next(iter(c))}" for b, c in EXPLICIT])
@pytest.mark.parametrize("profile", ["generic", "hgx-8gpu-ndr"])
def test_explicit_breakage(base, changes, profile):
    tree = dict(BASES[base])
    for path, value in changes.items():
        _drop_under(tree, path)
        tree[path] = value
    assert_survives(tree, profile)
