"""The core: Host, engine, registry, expectations."""

from __future__ import annotations

import json
import os
import re
import tarfile
from pathlib import Path

import pytest
from conftest import ROOT

from rdmadoctor.core.model import ERROR, UNKNOWN, Check, Finding, Need
from rdmadoctor.engine import execute as engine
from rdmadoctor.engine import expectations, registry
from rdmadoctor.host import HostError, Link, mem_host, open_host

# ---- Host -------------------------------------------------------------------------------


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    dev = root / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    (dev / "infiniband/mlx5_0/ports/1").mkdir(parents=True)
    (dev / "infiniband/mlx5_0/ports/1/state").write_text("4: ACTIVE\n")
    (dev / "numa_node").write_text("1\n")
    (root / "sys/class/infiniband").mkdir(parents=True)
    os.symlink("../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/infiniband/mlx5_0", root / "sys/class/infiniband/mlx5_0")
    os.symlink("../../../0000:01:00.0", dev / "infiniband/mlx5_0/device")
    # An absolute link, as some tools leave them: it must resolve inside the root, not on this machine.
    os.symlink("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", root / "sys/abs")
    os.symlink("loop2", root / "sys/loop1")
    os.symlink("loop1", root / "sys/loop2")
    os.symlink("missing", root / "sys/broken")
    (root / "sys/bad").write_bytes(b"\xff\xfe4: ACTIVE\x00\n")
    return root


def test_dir_host_resolves_links_inside_the_root(tmp_path):
    host = open_host(root=str(_tree(tmp_path)))
    assert host.kind == "root" and host.live_process
    assert host.read_value("/sys/class/infiniband/mlx5_0/ports/1/state") == "4: ACTIVE"
    assert host.realpath("/sys/class/infiniband/mlx5_0/device") == "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    assert host.read_value("/sys/abs/numa_node") == "1"
    assert host.read_value("/sys/loop1") is None and host.realpath("/sys/loop1") is None
    assert host.read_value("/sys/broken") is None
    assert host.readlink("/sys/broken") == "missing"
    assert host.listdir("/sys/class/infiniband") == ["mlx5_0"]
    assert host.listdir("/nope") == []
    assert "\ufffd" in host.read_text("/sys/bad")
    assert host.glob("/sys/class/infiniband/*/ports/*/state") == ["/sys/class/infiniband/mlx5_0/ports/1/state"]


@pytest.mark.parametrize("top", ["", "bundle-node1/"])
def test_tar_bundle_reads_like_the_directory(tmp_path, top):
    root = _tree(tmp_path)
    tar = tmp_path / "b.tar.gz"
    with tarfile.open(tar, "w:gz") as tf:
        for p in sorted(root.rglob("*")):
            tf.add(p, arcname=top + str(p.relative_to(root)), recursive=False)
    host = open_host(bundle=str(tar))
    assert host.kind == "bundle" and not host.live_process
    assert host.read_value("/sys/class/infiniband/mlx5_0/ports/1/state") == "4: ACTIVE"
    assert host.realpath("/sys/class/infiniband/mlx5_0/device") == "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    assert host.read_value("/sys/loop1") is None
    assert host.listdir("/sys/class/infiniband") == ["mlx5_0"]
    # No runtime.json: the runtime facts are unknown, not this process's.
    assert host.runtime.memlock_soft == "unknown" and host.runtime.env is None


def test_bad_bundles_are_usage_errors(tmp_path):
    with pytest.raises(HostError):
        open_host(bundle=str(tmp_path / "nope.tar.gz"))
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar at all")
    with pytest.raises(HostError):
        open_host(bundle=str(junk))
    with pytest.raises(HostError):
        open_host(root=str(tmp_path / "missing"))


def test_runtime_json_garbage_gives_unknowns():
    host = mem_host({"/runtime.json": b'{"memlock_soft": "lots", "shm_size": -5, "env": [1]}'})
    rt = host.runtime
    assert rt.memlock_soft == "unknown" and rt.shm_size is None and rt.env is None
    host = mem_host({"/runtime.json": b"\xff{"})
    assert host.runtime.cap_eff is None
    host = mem_host({"/runtime.json": json.dumps({"memlock_soft": None, "memlock_hard": 65536}).encode()})
    assert host.runtime.memlock_soft is None and host.runtime.memlock_hard == 65536


def test_mem_host_unreadable_file():
    host = mem_host({"/sys/x": PermissionError(13, "Permission denied"), "/sys/l": Link("x")})
    assert host.read_value("/sys/x") is None and host.read_value("/sys/l") is None
    assert host.exists("/sys/x")


def test_bundle_cmd_missing_and_present():
    host = mem_host({"/cmd/ibstat.txt": b"CA 'mlx5_0'\n"})
    assert host.cmd("ibstat").text == "CA 'mlx5_0'\n"
    res = host.cmd("ibv_devinfo")
    assert res.text is None and "absent" in res.error


# ---- engine -----------------------------------------------------------------------------


def _check(cid, probe, judge=lambda f, e: [], **kw):
    return Check(id=cid, title=cid, probe=probe, judge=judge, **kw)


def test_a_crashing_check_is_unknown_and_the_others_run():
    def boom(ctx):
        raise ValueError("bad sysfs")

    checks = [
        _check("a.crash", boom),
        _check("b.ok", lambda ctx: 1, lambda f, e: [Finding("X", ERROR, "s", "seen 1, expected 2")]),
        _check("c.skip", lambda ctx: 1, needs=(Need("thing", lambda ctx: "no thing here"),)),
        _check("d.badjudge", lambda ctx: 1, lambda f, e: ["not a finding"]),
    ]
    ctx = engine.Context(host=mem_host({}), expect={})
    res = {r.id: r for r in engine.run(checks, ctx)}
    assert res["a.crash"].status == UNKNOWN and "ValueError: bad sysfs" in res["a.crash"].reason
    assert res["b.ok"].status == "fail"
    assert res["c.skip"].status == "skip" and res["c.skip"].reason == "no thing here"
    assert res["d.badjudge"].status == UNKNOWN
    assert engine.overall(list(res.values())) == "fail"


def test_probe_unknown_reason_is_kept():
    def probe(ctx):
        raise engine.ProbeUnknown("ibstat did not finish within 5 s")

    ctx = engine.Context(host=mem_host({}), expect={})
    (r,) = engine.run([_check("x.y", probe)], ctx)
    assert r.status == UNKNOWN and r.reason == "ibstat did not finish within 5 s"


def test_shared_probe_runs_once_and_after_orders():
    calls = []

    def shared(ctx):
        calls.append(1)
        return 42

    seen = []
    checks = [
        _check("z.last", lambda ctx: seen.append("z") or ctx.get(shared), after=("a.first",)),
        _check("a.first", lambda ctx: seen.append("a") or ctx.get(shared)),
    ]
    ctx = engine.Context(host=mem_host({}), expect={})
    engine.run(checks, ctx)
    assert seen == ["a", "z"] and calls == [1]
    only = engine.run(checks, engine.Context(host=mem_host({}), expect={}), only=["z"])
    assert [r.id for r in only] == ["z.last"]


# ---- registry ---------------------------------------------------------------------------


def test_entry_point_parsing():
    text = "[console_scripts]\nx = y:z\n\n[rdmadoctor.checks]\nib = rdmadoctor.checks.ib:CHECKS\n  extra=pkg.mod  \n"
    eps = registry._parse_entry_points(text, "d")
    assert [(e.name, e.value) for e in eps] == [("ib", "rdmadoctor.checks.ib:CHECKS"), ("extra", "pkg.mod")]


def test_plugins_load_refuse_duplicates_and_survive_breakage(tmp_path, monkeypatch):
    pkg = tmp_path / "site"
    (pkg / "myplug").mkdir(parents=True)
    (pkg / "myplug/__init__.py").write_text(
        "from rdmadoctor.core.model import Check\n"
        "CHECKS = [Check(id='site.custom', title='t', probe=lambda c: 1, judge=lambda f, e: []),\n"
        "          Check(id='ib.ports', title='dup', probe=lambda c: 1, judge=lambda f, e: [])]\n"
    )
    (pkg / "broken.py").write_text("raise RuntimeError('plugin is broken')\n")
    di = pkg / "myplug-1.0.dist-info"
    di.mkdir()
    (di / "entry_points.txt").write_text("[rdmadoctor.checks]\nmine = myplug\nbad = broken:CHECKS\n")
    monkeypatch.syspath_prepend(str(pkg))
    checks, errors = registry.load_checks(autoload=True)
    ids = [c.id for c in checks]
    assert "site.custom" in ids and ids.count("ib.ports") == 1
    assert any("already defined" in e for e in errors)
    assert any("plugin is broken" in e for e in errors)
    checks, errors = registry.load_checks(autoload=False)
    assert "site.custom" not in [c.id for c in checks] and errors == []


def test_builtin_checks_are_complete():
    checks, errors = registry.load_checks(autoload=False)
    assert errors == []
    ids = [c.id for c in checks]
    for want in ("ib.devices", "ib.ports"):
        assert want in ids
    # A code has one definition: checks that can emit the same code (logs.diagnose reuses the node
    # checks' codes for what a log shows) declare the same Code object, never a second one.
    defined: dict[str, object] = {}
    for c in checks:
        for k in c.codes:
            assert defined.setdefault(k.code, k) is k, f"{k.code} is defined twice ({c.id} has its own)"
    for c in checks:
        for k in c.codes:
            assert re.fullmatch(r"[A-Z][A-Z0-9_]+", k.code) and k.meaning and k.fix


# ---- expectations -----------------------------------------------------------------------


def test_expectations_layering(tmp_path):
    cfg = tmp_path / "pool.toml"
    cfg.write_text('profile = "hgx-8gpu-ndr"\nmin_rate_gbps = 200\n[pools.old]\nmin_rate_gbps = 100\n')
    e = expectations.resolve({}, config=str(cfg))
    assert e["_profile"] == "hgx-8gpu-ndr" and e["min_rate_gbps"] == 200 and e["expected_gpus"] == 8
    e = expectations.resolve({}, config=str(cfg), pool="old", overrides={"shm_min_bytes": 5})
    assert e["min_rate_gbps"] == 100 and e["shm_min_bytes"] == 5
    j = tmp_path / "c.json"
    j.write_text('{"link_layer": "Ethernet"}')
    assert expectations.resolve({}, config=str(j))["link_layer"] == "Ethernet"


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        ({"profile": "nope"}, "unknown profile"),
        ({"overrides": {"min_rate": 1}}, "unknown expectation 'min_rate'"),
        ({"pool": "x"}, "node pool 'x'"),
    ],
)
def test_expectation_errors(kwargs, msg):
    with pytest.raises(expectations.ConfigError, match=msg):
        expectations.resolve({}, **kwargs)


def test_bad_config_files(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("min_rate_gbps = = 3")
    with pytest.raises(expectations.ConfigError, match="not valid TOML"):
        expectations.resolve({}, config=str(bad))
    with pytest.raises(expectations.ConfigError, match="cannot read"):
        expectations.resolve({}, config=str(tmp_path / "none.toml"))
    assert expectations.parse_set(["min_rate_gbps=200", "link_layer=Ethernet"]) == {"min_rate_gbps": 200, "link_layer": "Ethernet"}
    with pytest.raises(expectations.ConfigError):
        expectations.parse_set(["nonsense"])


# ---- the house rule: checks read through the Host only ----------------------------------


def test_checks_read_only_through_the_host():
    forbidden = re.compile(r"(?<![\w.])open\(|\bos\.(listdir|scandir|walk|stat|lstat|readlink|path\.)|\bsubprocess\b|\bPath\(|\bglob\.glob")
    offenders = []
    for path in sorted((ROOT / "checks").glob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if forbidden.search(code):
                offenders.append(f"{path.name}:{n}: {line.strip()}")
    assert offenders == []


def test_json_report_round_trips():
    from rdmadoctor.runner import Options, diagnose

    diag = diagnose(Options(), host=mem_host({"/sys/class/net/lo/operstate": b"unknown\n"}))
    rep = json.loads(json.dumps(diag.report))
    assert rep["schema"] == "rdmadoctor.report/v1"
    assert rep["status"] in ("pass", "warn", "fail", "unknown")
    for key in ("rdma_devices", "gpus", "topology", "memlock_bytes", "shm_bytes"):
        assert key in rep["inventory"]
