"""`rdmadoctor collect`: a bundle must make `check --bundle` say what `check --root` said.

The fake root below is laid out like a real node's sysfs (kernel-style relative symlinks from
/sys/class and /sys/bus into /sys/devices), with the traps a collector must not fall into:
BAR files, an 8 KiB PCI config space, a 2 MiB file, an absolute symlink, a symlink that climbs
out of the root, a secret in /proc/self/environ and in the environment, a hanging tool.
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import check_json, run_cli

SECRET = "hunter2-do-not-ship-me"
PF0, PF1, VF0 = "0000:01:00.0", "0000:01:00.1", "0000:01:00.2"
RP = "0000:00:01.0"
DEV = f"sys/devices/pci0000:00/{RP}"
# Checks whose verdict rests on files and recorded tools only (not on the live process).
FILE_FAMILIES = ("ib.", "roce.", "pci.", "gpu.", "kernel.", "verbs.")


def _w(root: Path, rel: str, data: str | bytes = "") -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)


def _l(root: Path, rel: str, target: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, p)


def _pci(root: Path, bdf: str, cls: str, device: str, *, vf: bool = False) -> str:
    base = f"{DEV}/{bdf}"
    for name, value in {
        "class": cls, "vendor": "0x15b3", "device": device, "subsystem_vendor": "0x15b3",
        "subsystem_device": "0x0041", "numa_node": "0", "local_cpulist": "0-31",
        "current_link_speed": "32.0 GT/s PCIe" if not vf else "Unknown", "current_link_width": "16",
        "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16", "revision": "0x00",
    }.items():
        _w(root, f"{base}/{name}", value + "\n")
    _w(root, f"{base}/config", bytes(range(256)) * 32)  # 8 KiB: the bundle keeps 4 KiB
    _w(root, f"{base}/resource0", b"\xff" * 4096)  # a BAR: never read
    _w(root, f"{base}/resource0_wc", b"\xff" * 4096)
    _w(root, f"{base}/rom", b"\x55\xaa")
    _l(root, f"{base}/driver", "../../../../bus/pci/drivers/mlx5_core")
    _l(root, f"sys/bus/pci/devices/{bdf}", f"../../../devices/pci0000:00/{RP}/{bdf}")
    return base


def _ib(root: Path, base: str, name: str, port: dict[str, str], uverbs: int) -> None:
    ib = f"{base}/infiniband/{name}"
    for f, v in {
        "node_type": "1: CA", "fw_ver": "28.39.2048", "board_id": "MT_0000000838", "hca_type": "MT4129",
        "node_guid": "b83f:d203:00a1:0b2c", "sys_image_guid": "b83f:d203:00a1:0b2c",
    }.items():
        _w(root, f"{ib}/{f}", v + "\n")
    _l(root, f"{ib}/device", "../../../" + posixpath.basename(base))
    for f, v in port.items():
        _w(root, f"{ib}/ports/1/{f}", v + "\n")
    _w(root, f"{ib}/ports/1/counters/symbol_error", "0\n")
    _w(root, f"{ib}/ports/1/counters/link_downed", "1\n")
    _w(root, f"{ib}/ports/1/pkeys/0", "0xffff\n")
    _w(root, f"{ib}/ports/1/pkeys/1", "0x0000\n")
    _l(root, f"sys/class/infiniband/{name}", f"../../devices/pci0000:00/{RP}/{posixpath.basename(base)}/infiniband/{name}")
    uv = f"{base}/infiniband_verbs/uverbs{uverbs}"
    _w(root, f"{uv}/ibdev", name + "\n")
    _w(root, f"{uv}/abi_version", "1\n")
    _l(root, f"sys/class/infiniband_verbs/uverbs{uverbs}", f"../../devices/pci0000:00/{RP}/{posixpath.basename(base)}/infiniband_verbs/uverbs{uverbs}")
    _w(root, f"dev/infiniband/uverbs{uverbs}")


def _netdev(root: Path, base: str, name: str, **attrs: str) -> None:
    nd = f"{base}/net/{name}"
    for f, v in attrs.items():
        _w(root, f"{nd}/{f}", v + "\n")
    _l(root, f"{nd}/device", "../../../" + posixpath.basename(base))
    _l(root, f"sys/class/net/{name}", f"../../devices/pci0000:00/{RP}/{posixpath.basename(base)}/net/{name}")


def make_root(root: Path) -> Path:
    """An IB port (ACTIVE, 400G), a RoCE v2 port with its GID table, and a VF of the first PF."""
    _w(root, f"{DEV}/class", "0x060400\n")
    _w(root, f"{DEV}/vendor", "0x8086\n")
    _w(root, f"{DEV}/current_link_speed", "32.0 GT/s PCIe\n")
    _w(root, f"{DEV}/current_link_width", "16\n")
    _l(root, f"sys/bus/pci/devices/{RP}", f"../../../devices/pci0000:00/{RP}")
    _w(root, "sys/bus/pci/drivers/mlx5_core/uevent", "DRIVER=mlx5_core\n")

    pf0 = _pci(root, PF0, "0x020700", "0x1021")
    _w(root, f"{pf0}/sriov_numvfs", "1\n")
    _w(root, f"{pf0}/sriov_totalvfs", "16\n")
    _l(root, f"{pf0}/virtfn0", f"../{VF0}")
    _ib(root, pf0, "mlx5_0", {
        "state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)",
        "link_layer": "InfiniBand", "lid": "0x12", "sm_lid": "0x1", "gids/0": "fe80:0000:0000:0000:b83f:d203:00a1:0b2c",
        "gids/1": "0000:0000:0000:0000:0000:0000:0000:0000",
    }, 0)
    # A 2 MiB file beside the port files: bigger than any attribute, left out.
    _w(root, f"{pf0}/infiniband/mlx5_0/big_blob", b"x" * (2 * 1024 * 1024))
    _netdev(root, pf0, "ib0", operstate="up", mtu="4092", carrier="1", dev_port="0", type="32")

    pf1 = _pci(root, PF1, "0x020000", "0x1021")
    _ib(root, pf1, "mlx5_1", {
        "state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "200 Gb/sec (4X HDR)", "link_layer": "Ethernet",
        "lid": "0x0", "sm_lid": "0x0",
        "gids/0": "fe80:0000:0000:0000:ba3f:d2ff:fea1:0b2d", "gids/1": "0000:0000:0000:0000:0000:ffff:0a00:0005",
        "gid_attrs/types/0": "IB/RoCE v1", "gid_attrs/types/1": "RoCE v2",
        "gid_attrs/ndevs/0": "ens1f1", "gid_attrs/ndevs/1": "ens1f1",
    }, 1)
    _netdev(root, pf1, "ens1f1", operstate="up", mtu="9000", carrier="1", dev_port="0", type="1", flags="0x1003")

    vf = _pci(root, VF0, "0x020700", "0x101e", vf=True)
    _l(root, f"{vf}/physfn", f"../{PF0}")
    _ib(root, vf, "mlx5_2", {"state": "1: DOWN", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand"}, 2)

    _l(root, "sys/class/net/lo", "../../devices/virtual/net/lo")
    _w(root, "sys/devices/virtual/net/lo/operstate", "unknown\n")
    _w(root, "sys/devices/virtual/net/lo/mtu", "65536\n")
    _w(root, "sys/devices/system/node/node0/cpulist", "0-31\n")
    _w(root, "sys/devices/system/node/online", "0\n")
    _w(root, "sys/module/mlx5_core/version", "24.10-1.1.4\n")
    _w(root, "sys/module/mlx5_core/parameters/prof_sel", "2\n")
    _w(root, "sys/module/ib_core/uevent", "")
    _w(root, "sys/module/nvidia_peermem/initstate", "live\n")

    _w(root, "proc/modules", "mlx5_ib 483328 0 - Live 0x0\nmlx5_core 2322432 1 mlx5_ib, Live 0x0\nib_uverbs 184320 1 mlx5_ib, Live 0x0\nib_core 471040 2 mlx5_ib,ib_uverbs, Live 0x0\n")
    _w(root, "proc/sys/kernel/osrelease", "5.15.0-105-generic\n")
    _w(root, "proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         65536                65536                bytes     \n")
    _w(root, "proc/self/status", "Name:\tpython\nCapEff:\t00000000a80425fb\n")
    _w(root, "proc/self/environ", f"AWS_SECRET_ACCESS_KEY={SECRET}\0NCCL_DEBUG=INFO\0")

    _w(root, "etc/libibverbs.d/mlx5.driver", "driver mlx5\n")
    _w(root, "usr/lib/os-release", 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"\n')
    _l(root, "etc/os-release", "/usr/lib/os-release")  # absolute: resolved inside the root
    _l(root, "etc/libibverbs.d/escape.driver", "../../../../../../../../etc/passwd")  # climbs out
    lib = "usr/lib/x86_64-linux-gnu"
    _w(root, f"{lib}/libibverbs.so.1.14.44.0", b"\x7fELF" + b"\0" * 64 + b"/usr/lib/x86_64-linux-gnu/libibverbs/lib%s-rdmav34.so\0IBVERBS_PRIVATE_34\0" + b"\0" * 4096)
    _l(root, f"{lib}/libibverbs.so.1", "libibverbs.so.1.14.44.0")
    _w(root, f"{lib}/libibverbs/libmlx5-rdmav34.so", b"\x7fELF" + b"\0" * 64 + b"IBVERBS_PRIVATE_34\0" + b"\0" * 8192)
    _w(root, f"{lib}/libibverbs/libmlx4-rdmav34.so", b"\x7fELF" + b"\0" * 1000)
    _w(root, f"{lib}/libunrelated.so.3", b"\x7fELF" + b"\1" * 100000)
    _w(root, "var/lib/dpkg/status", "".join(
        f"Package: {p}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {v}\nDescription: {p}\n\n"
        for p, v in (("libibverbs1", "44.0-2"), ("ibverbs-providers", "44.0-2"), ("rdma-core", "44.0-2"), ("librdmacm1", "44.0-2"))
    ))
    (root / "dev/shm").mkdir(parents=True)
    _w(root, "dev/shm/nccl-secret-segment", SECRET)  # a job's shared memory: never collected
    return root


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    return make_root(tmp_path / "node")


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")


def collect(args: list[str]) -> tuple[int, str, str]:
    return run_cli(["collect", *args])


def members(bundle: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(bundle) as tf:
        return {m.name: m for m in tf.getmembers()}


def read_member(bundle: Path, name: str) -> bytes:
    with tarfile.open(bundle) as tf:
        f = tf.extractfile(name)
        assert f is not None
        return f.read()


def comparable(report: dict, skip: str = "-") -> dict:
    """The file-based verdict: each check's status and findings."""
    return {
        c["id"]: (c["status"], c.get("reason"), c["findings"])
        for c in report["checks"]
        if c["id"].startswith(FILE_FAMILIES) and not c["id"].startswith(skip)
    }


def verdicts(report: dict) -> list:
    """Every check's status and what its findings say (not their data: sources differ)."""
    return [
        (c["id"], c["status"], [(f["code"], f["severity"], f["subject"], f["message"]) for f in c["findings"]])
        for c in report["checks"]
    ]


def made(fake_root: Path, tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "x.tar.gz"
    code, stdout, stderr = collect(["--root", str(fake_root), "-o", str(out), *extra])
    assert code == 0, stderr
    assert stdout == ""
    return out


# ---- same verdict ---------------------------------------------------------------------------


def test_bundle_gives_the_verdict_of_the_root(fake_root: Path, tmp_path: Path) -> None:
    out = made(fake_root, tmp_path)
    _, from_root = check_json(["--root", str(fake_root)])
    _, from_bundle = check_json(["--bundle", str(out)])

    devs = {d["name"]: d for d in from_root["inventory"]["rdma_devices"]}
    # The comparison below is only worth something if the root was read as a node with devices.
    assert set(devs) == {"mlx5_0", "mlx5_1", "mlx5_2"}
    assert devs["mlx5_0"]["pci"] == PF0 and devs["mlx5_0"]["driver"] == "mlx5_core"
    assert devs["mlx5_0"]["ports"][0]["state"] == "ACTIVE" and devs["mlx5_0"]["ports"][0]["rate_gbps"] == 400
    assert devs["mlx5_1"]["ports"][0]["link_layer"] == "Ethernet" and devs["mlx5_1"]["ports"][0]["netdev"] == "ens1f1"
    assert devs["mlx5_2"]["is_vf"] and not devs["mlx5_0"]["is_vf"]

    assert from_bundle["inventory"]["rdma_devices"] == from_root["inventory"]["rdma_devices"]
    assert comparable(from_bundle) == comparable(from_root)
    # Not only the file-based ones: this test's process is both the live process of the root
    # check and the one runtime.json and proc/self/* were recorded from, so every check agrees.
    assert verdicts(from_bundle) == verdicts(from_root)


def test_extracted_bundle_reads_like_the_tar(fake_root: Path, tmp_path: Path) -> None:
    out = made(fake_root, tmp_path)
    dest = tmp_path / "unpacked"
    with tarfile.open(out) as tf:
        # The "data" filter refuses absolute links, links leaving the folder and device nodes.
        # Debian 12's Python 3.11.2 predates extraction filters (3.11.4): our own archive, read as is there.
        tf.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") else tf.extractall(dest)
    _, from_tar = check_json(["--bundle", str(out)])
    _, from_dir = check_json(["--bundle", str(dest)])
    for rep in (from_tar, from_dir):
        rep["host"].pop("label")
        rep.pop("time")  # when each ran: the one key that may differ
    assert from_dir == from_tar
    assert (dest / "sys/class/infiniband/mlx5_0").is_symlink()
    assert (dest / "sys/class/infiniband/mlx5_0/ports/1/state").read_text() == "4: ACTIVE\n"


def test_hwloc_snapshot_round_trip(realworld: Path, tmp_path: Path) -> None:
    """A real /sys (QLogic qib0 HCA, 2 NUMA nodes) gathered by hwloc: bundle == root."""
    subprocess.run(
        ["tar", "xjf", str(realworld / "hwloc-sysfs" / "40intel64-2g2n4c+pcilocality.tar.bz2"), "-C", str(tmp_path)],
        check=True,
    )
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]  # the tarball's one top folder
    out = made(root, tmp_path)
    _, from_root = check_json(["--root", str(root)])
    _, from_bundle = check_json(["--bundle", str(out)])
    assert [d["name"] for d in from_root["inventory"]["rdma_devices"]] == ["qib0"]
    assert from_bundle["inventory"]["rdma_devices"] == from_root["inventory"]["rdma_devices"]
    # Not verbs: this root has no /usr and no /dev. A check on a root takes what is missing as
    # absent; on a bundle it cannot tell absent from not collected, and says unknown.
    assert comparable(from_bundle, skip="verbs.") == comparable(from_root, skip="verbs.")


def test_generated_node_round_trip(tmp_path: Path) -> None:
    """A generated HGX node with SR-IOV VFs (fixturegen): the bundle keeps every verdict."""
    fixturegen = pytest.importorskip("rdmadoctor.fixturegen")
    root = tmp_path / "hgx"
    fixturegen.write_dir(fixturegen.build(fixturegen.hgx_h100_ib(vfs_total=24)), str(root))
    out = made(root, tmp_path)
    _, from_root = check_json(["--root", str(root)])
    _, from_bundle = check_json(["--bundle", str(out)])
    assert len(from_root["inventory"]["rdma_devices"]) == 10 + 24
    assert from_bundle["inventory"]["rdma_devices"] == from_root["inventory"]["rdma_devices"]
    assert from_bundle["inventory"]["topology"] == from_root["inventory"]["topology"]
    assert from_bundle["labels"] == from_root["labels"]
    assert comparable(from_bundle) == comparable(from_root)


# ---- what is (and is not) in the tar ----------------------------------------------------------


def test_symlinks_stay_relative_links_inside_the_bundle(fake_root: Path, tmp_path: Path) -> None:
    m = members(made(fake_root, tmp_path))
    link = m["sys/class/infiniband/mlx5_0"]
    assert link.issym()
    assert link.linkname == f"../../devices/pci0000:00/{RP}/{PF0}/infiniband/mlx5_0"
    assert m[f"{DEV}/{PF0}/infiniband/mlx5_0/device"].issym()
    assert m[f"{DEV}/{VF0}/physfn"].linkname == f"../{PF0}"
    assert m[f"sys/bus/pci/devices/{PF0}"].issym()
    assert m[f"{DEV}/{PF0}/driver"].linkname == "../../../../bus/pci/drivers/mlx5_core"
    assert m["etc/os-release"].linkname == "../usr/lib/os-release"  # was absolute
    for name, info in m.items():
        assert not name.startswith(("/", "./")), name
        assert name.split("/", 1)[0] in {"sys", "proc", "etc", "dev", "usr", "var", "cmd", "runtime.json", "bundle.json"}, name
        if info.issym():
            assert not info.linkname.startswith("/"), (name, info.linkname)
            landing = posixpath.normpath(posixpath.join(posixpath.dirname(name), info.linkname))
            assert not landing.startswith(".."), (name, info.linkname)
    # The link that climbed out now lands inside the bundle, on nothing: /etc/passwd of the host
    # was never read.
    assert m["etc/libibverbs.d/escape.driver"].issym()
    assert "etc/passwd" not in m


def test_bounded_and_careful(fake_root: Path, tmp_path: Path) -> None:
    out = made(fake_root, tmp_path)
    m = members(out)
    assert m[f"{DEV}/{PF0}/config"].size == 4096
    assert f"{DEV}/{PF0}/resource0" not in m and f"{DEV}/{PF0}/resource0_wc" not in m
    assert f"{DEV}/{PF0}/rom" not in m
    assert f"{DEV}/{PF0}/infiniband/mlx5_0/big_blob" not in m
    assert f"{DEV}/{PF0}/infiniband/mlx5_0/ports/1/gids/0" in m
    assert f"{DEV}/{PF0}/infiniband/mlx5_0/ports/1/counters/link_downed" in m
    # Unused table slots (all zeros) are left out; used ones kept.
    assert f"{DEV}/{PF0}/infiniband/mlx5_0/ports/1/pkeys/0" in m
    assert f"{DEV}/{PF0}/infiniband/mlx5_0/ports/1/pkeys/1" not in m
    assert "proc/self/environ" not in m
    assert "dev/shm/nccl-secret-segment" not in m
    assert m["dev/infiniband/uverbs0"].isfile() and m["dev/infiniband/uverbs0"].size == 0
    # The checks read libibverbs and the mlx5 provider (for IBVERBS_PRIVATE_34): kept. A library
    # nobody read is only a name.
    assert b"IBVERBS_PRIVATE_34" in read_member(out, "usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so")
    assert m["usr/lib/x86_64-linux-gnu/libunrelated.so.3"].size == 0
    assert m["usr/lib/x86_64-linux-gnu/libibverbs.so.1"].issym()
    assert b"Package: rdma-core" in read_member(out, "var/lib/dpkg/status")
    manifest = json.loads(read_member(out, "bundle.json"))
    assert manifest["host"]["kind"] == "root"
    assert manifest["skipped"][f"/{DEV}/{PF0}/infiniband/mlx5_0/big_blob"].startswith("larger than")
    assert "env" in manifest["commands"]


def test_secrets_stay_out(fake_root: Path, tmp_path: Path) -> None:
    out = made(fake_root, tmp_path)
    runtime = json.loads(read_member(out, "runtime.json"))
    assert runtime["env"]["NCCL_IB_HCA"] == "mlx5_0"
    assert runtime["env"]["NCCL_DEBUG"] == "WARN"
    assert "AWS_SECRET_ACCESS_KEY" not in runtime["env"]
    env_txt = read_member(out, "cmd/env.txt").decode()
    assert "NCCL_IB_HCA=mlx5_0" in env_txt.splitlines()
    with tarfile.open(out) as tf:
        for info in tf.getmembers():
            if info.isfile():
                data = tf.extractfile(info).read()  # type: ignore[union-attr]
                assert SECRET.encode() not in data, info.name
                assert b"AWS_SECRET_ACCESS_KEY" not in data, info.name


# ---- tools ------------------------------------------------------------------------------------


def test_a_hung_tool_is_killed_and_recorded(fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pidfile = tmp_path / "hung.pid"
    tool = bindir / "ibdev2netdev"
    tool.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 120\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")

    out = tmp_path / "x.tar.gz"
    code, stdout, stderr = collect(["--root", str(fake_root), "-o", str(out), "--timeout", "0.5"])
    assert code == 0, stderr
    assert stdout == ""
    assert "not recorded: ibdev2netdev: timed out" in stderr
    m = members(out)
    assert "cmd/ibdev2netdev.txt" not in m
    errors = json.loads(read_member(out, "cmd/errors.json"))
    assert errors["ibdev2netdev"]["timed_out"] is True
    assert "0.5" in errors["ibdev2netdev"]["error"]
    assert json.loads(read_member(out, "bundle.json"))["commands_failed"]["ibdev2netdev"]["timed_out"] is True
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped, not left behind


def test_tools_that_exist_are_recorded(fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "ibstat"
    tool.write_text("#!/bin/sh\necho \"CA 'mlx5_0'\"\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}/usr/bin:/bin")
    out = made(fake_root, tmp_path)
    assert read_member(out, "cmd/ibstat.txt") == b"CA 'mlx5_0'\n"
    assert b"memory" in read_member(out, "cmd/ulimit.txt")
    manifest = json.loads(read_member(out, "bundle.json"))
    assert "ibstat" in manifest["commands"] and "ulimit" in manifest["commands"]
    assert "nvidia-smi-topo" in manifest["commands_missing"]
    assert "cmd/nvidia-smi-topo.txt" not in members(out)


# ---- the live machine and errors ------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.isdir("/sys/class/net"), reason="needs a Linux /sys")
def test_collect_this_machine(tmp_path: Path) -> None:
    out = tmp_path / "live.tar.gz"
    code, stdout, stderr = collect(["-o", str(out)])
    assert code == 0, stderr
    assert stdout == ""
    assert stderr.startswith(f"wrote {out}: ") and stderr.endswith(" KiB\n") and stderr.count("\n") == 1
    assert out.stat().st_size < 5 * 1024 * 1024
    m = members(out)
    assert "runtime.json" in m and "bundle.json" in m and "cmd/env.txt" in m
    assert m["sys/class/net/lo"].issym()
    assert "proc/modules" in m or not os.path.exists("/proc/modules")
    code, rep = check_json(["--bundle", str(out)])
    _, live = check_json([])
    assert rep["host"]["kind"] == "bundle"
    assert rep["inventory"]["rdma_devices"] == live["inventory"]["rdma_devices"]
    assert comparable(rep) == comparable(live)


@pytest.mark.parametrize("where", ["missing-dir/x.tar.gz", "."])
def test_unwritable_output_is_a_usage_error(fake_root: Path, tmp_path: Path, where: str) -> None:
    target = tmp_path / where
    code, stdout, stderr = collect(["--root", str(fake_root), "-o", str(target)])
    assert code == 2
    assert stdout == ""
    assert stderr.startswith("rdmadoctor: error: cannot write the bundle")
    assert not any(p.name.startswith("x.tar.gz") for p in tmp_path.rglob("*"))


def test_missing_root_is_a_usage_error(tmp_path: Path) -> None:
    code, stdout, stderr = collect(["--root", str(tmp_path / "nope"), "-o", str(tmp_path / "x.tar.gz")])
    assert code == 2 and stdout == ""
    assert "is not a directory" in stderr
    assert not (tmp_path / "x.tar.gz").exists()


# ---- -o -: the bundle on stdout (kubectl exec ... -- rdmadoctor collect -o - > node.tar.gz) ----


def test_dash_streams_the_bundle_to_stdout_and_nothing_else(fake_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "streamed.tar.gz"
    with open(out, "wb") as f:
        proc = subprocess.run(
            [sys.executable, "-m", "rdmadoctor", "collect", "--root", str(fake_root), "-o", "-"], stdout=f, stderr=subprocess.PIPE, text=False
        )
    assert proc.returncode == 0, proc.stderr
    # stdout holds a whole .tar.gz (a stray log line would break gzip), the summary is on stderr.
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    names = members(out)
    assert "bundle.json" in names and "runtime.json" in names
    assert proc.stderr.decode().startswith("wrote the bundle to stdout: ")
    assert f"{max(1, round(out.stat().st_size / 1024))} KiB" in proc.stderr.decode()
    # And it reads back with the verdict a file bundle gives.
    from_file = made(fake_root, tmp_path)
    assert verdicts(check_json(["--bundle", str(out)])[1]) == verdicts(check_json(["--bundle", str(from_file)])[1])
    assert not list(tmp_path.glob("*.tmp*")) and not list(Path.cwd().glob("-*"))


def test_dash_refuses_to_write_a_tar_to_a_terminal(fake_root: Path, tmp_path: Path) -> None:
    import pty

    master, slave = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "collect", "--root", str(fake_root), "-o", "-"],
        stdout=slave, stderr=subprocess.PIPE, text=True, cwd=(tmp_path / "cwd").mkdir() or tmp_path / "cwd",
    )
    os.close(slave)
    os.set_blocking(master, False)
    try:
        shown = os.read(master, 65536)
    except OSError:  # nothing was written to the terminal
        shown = b""
    os.close(master)
    assert proc.returncode == 2 and shown == b""
    assert proc.stderr.startswith("rdmadoctor: error: refusing to write a .tar.gz bundle to a terminal")
    assert "hint: redirect it: rdmadoctor collect -o - > node.tar.gz" in proc.stderr
    assert list((tmp_path / "cwd").iterdir()) == []


# ---- one resolver: what the bundle holds is what the Host saw --------------------------------
LINK_SHAPES = {
    # name: (links to make under sys/, the path read through them)
    "relative": ({"x": "deep/b"}, "x/v"),
    "absolute": ({"x": "/sys/deep/b"}, "x/v"),
    "dotdot through a link": ({"a": "deep/c", "x": "a/../b"}, "x/v"),  # the kernel: /sys/deep/b/v
    "absolute dotdot through a link": ({"a": "/sys/deep/c", "x": "/sys/a/../b"}, "x/v"),
    "chain": ({"x": "y", "y": "z", "z": "deep/b"}, "x/v"),
    "link in the middle": ({"m": "deep"}, "m/b/v"),
    "climbs out": ({"x": "../../../../../sys/deep/b"}, "x/v"),
    "loop": ({"x": "y", "y": "x"}, "x/v"),
    "self": ({"x": "x"}, "x/v"),
    "dangling": ({"x": "nowhere/b"}, "x/v"),
}


@pytest.mark.parametrize("shape", sorted(LINK_SHAPES))
def test_record_then_read_back_equals_the_hosts_view(shape: str, tmp_path: Path) -> None:
    from rdmadoctor.collect import Recorder
    from rdmadoctor.collect.bundle import _write_tar
    from rdmadoctor.host import open_host

    links, read = LINK_SHAPES[shape]
    root = tmp_path / "root"
    _w(root, "sys/deep/b/v", "the right file\n")
    _w(root, "sys/b/v", "the lexical shortcut\n")  # where a lexical `..` would wrongly land
    _w(root, "sys/deep/c/keep", "")
    for name, target in links.items():
        _l(root, f"sys/{name}", target)
    live = open_host(root=str(root))
    want_real, want = live.realpath(f"/sys/{read}"), live.read_text(f"/sys/{read}")

    rec = Recorder(str(root))
    got_real = rec.add(f"/sys/{read}", mode="read")
    assert got_real == want_real
    bundle = tmp_path / "b.tar.gz"
    with open(bundle, "wb") as f:
        _write_tar(f, rec.entries, {"bundle.json": b"{}", "runtime.json": b"{}"}, 0, {})
    back = open_host(bundle=str(bundle))
    assert back.realpath(f"/sys/{read}") == want_real, shape
    assert back.read_text(f"/sys/{read}") == want, shape
    for name, info in members(bundle).items():
        if info.issym():
            landing = posixpath.normpath(posixpath.join(posixpath.dirname(name), info.linkname))
            assert not landing.startswith(".."), (name, info.linkname)
