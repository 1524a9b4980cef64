"""A check declares the tool outputs pasted into a job's log it judges (``Check.pastes``), and
logs.diagnose hands each paste to the loaded checks that declare it: the built-in ones, and a
plugin's as well. The status-file and dpkg parsers live in parsers/ with the others."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES

from rdmadoctor.checks import logs as logs_check
from rdmadoctor.engine import registry
from rdmadoctor.parsers.outputs import CMD_OF_KIND
from rdmadoctor.parsers.packages import parse_dpkg_status
from rdmadoctor.parsers.system import parse_status_caps, parse_status_uid
from rdmadoctor.runner import Options, diagnose

# A site's own rule on a pasted `ibv_devices`: a ConnectX-3 (mlx4) is not fit for its fabric.
SITE_PLUGIN = '''
from rdmadoctor.core.model import ERROR, Check, Code, Finding, Paste

SITE_OLD_HCA = Code("SITE_OLD_HCA", "A ConnectX-3 HCA", "The site trains on ConnectX-6 or newer.",
                    "Move the job to a pool with ConnectX-6 or newer.")


def judge_ibv_devices(seg, expect, node, layers):
    return [Finding("SITE_OLD_HCA", ERROR, word, f"{word} is a ConnectX-3 (mlx4); expected ConnectX-6 or newer.",
                    SITE_OLD_HCA.fix) for line in seg.text.splitlines() for word in line.split()[:1] if word.startswith("mlx4_")]


def judge_broken(seg, expect, node, layers):
    raise RuntimeError("a plugin's judge that breaks")


CHECKS = [Check(id="site.hca", title="Site HCA generation", probe=lambda ctx: None, judge=lambda facts, expect: [],
                codes=(SITE_OLD_HCA,), pastes=(Paste("ibv_devices", judge_broken), Paste("ibv_devices", judge_ibv_devices)))]
'''

def make_dist(site: Path, dist: str, module: str, source: str) -> Path:
    """An installed distribution ``dist`` whose entry point loads ``module:CHECKS`` (as tests/test_plugins.py)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(source)
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[rdmadoctor.checks]\nsite = {module}:CHECKS\n")
    return site


LOG = """\
job-0:1234:1234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>
root@pod:/# ibv_devices
    device                 node GUID
    ------              ----------------
    mlx4_0              0002c90300a1b2c3
    mlx5_0              b8cef6030012a4c0
root@pod:/# exit
"""


def _findings(log: Path) -> dict:
    d = diagnose(Options(bundle=str(FIXTURES / "healthy-ib"), logs=[str(log)], only=["logs"]))
    (logs,) = [r for r in d.results if r.id == "logs.diagnose"]
    return {(f.code, f.subject): f for f in logs.findings}


def test_a_plugin_check_judges_a_pasted_output(tmp_path, monkeypatch):
    """A real plugin (a module and its dist-info on sys.path, as pip leaves it) declares `ibv_devices`;
    its finding comes out of logs.diagnose as a built-in paste judge's does, under `--only logs` too, and
    its other judge raising takes nothing from it."""
    log = tmp_path / "rank0.log"
    log.write_text(LOG)
    without = _findings(log)
    assert not any(c == "SITE_OLD_HCA" for c, _ in without)
    assert "ibv_devices" not in without[("LOGS_READ", "logs")].message

    module = f"sitehca_{tmp_path.name.replace('-', '_')}"  # fresh per test: nothing cached in sys.modules
    monkeypatch.syspath_prepend(str(make_dist(tmp_path / "site", "sitehca", module, SITE_PLUGIN)))
    monkeypatch.setenv(registry.AUTOLOAD_ENV, "0")
    by = _findings(log)
    f = by[("SITE_OLD_HCA", "mlx4_0")]
    assert f.severity == "error" and f.message == "pasted `ibv_devices` output: mlx4_0 is a ConnectX-3 (mlx4); expected ConnectX-6 or newer."
    assert f.data["pasted"] == "ibv_devices" and f.data["evidence"][0]["file"] == str(log)
    assert f.data["evidence"][0]["line"] == 3  # the paste's first line: the judge's code has no quote of its own
    assert "Judged the pasted output of ibv_devices" in by[("LOGS_READ", "logs")].message
    assert [c for c, _ in by].count("SITE_OLD_HCA") == 1


def test_the_built_in_checks_declare_the_outputs_logs_diagnose_judged():
    """Every pasted kind that names a cmd/ file, a /proc/<pid>/limits table and `ls /dev/infiniband`: each
    judged by the check that judges that output in a bundle (a port list by ib.ports and roce.config)."""
    checks, errors = registry.load_checks(autoload=False)
    assert errors == []
    owners = {kind: [c.id for c in checks for p in c.pastes if p.kind == kind] for kind in logs_check.pastes_of(checks)}
    assert set(owners) == set(CMD_OF_KIND) | {"limits", "dev_infiniband"}
    assert owners["ibstat"] == owners["rdma_link"] == ["ib.ports", "roce.config"]
    assert owners["ulimit"] == owners["limits"] == ["limits.memlock"]
    assert owners["df"] == ["shm.size"] and owners["lsmod"] == ["kernel.modules"]
    assert owners["dev_infiniband"] == ["verbs.userspace"] and owners["nvidia-smi"] == ["gpu.topology"]
    assert owners["show_gids"] == owners["ibdev2netdev"] == ["roce.config"]
    # The checks own the codes their paste judges emit; logs.diagnose declares them as well (one meaning, one code).
    declared = {c.code for c in logs_check.CHECKS[0].codes}
    assert {"IB_PORT_DOWN", "MEMLOCK_LIMITED", "SHM_TOO_SMALL", "MOD_MISSING", "DEV_UVERBS_MISSING", "ROCE_NETDEV_DOWN",
            "ROCE_NO_V2_GID", "GPU_NIC_FAR"} <= declared


STATUS = """\
Name:\tpython3
Uid:\t1000\t1001\t1000\t1000
CapEff:\t00000000a80425fb
CapBnd:\t000001ffffffffff
"""


def test_the_status_file_parsers_read_the_effective_uid_and_the_capability_sets():
    assert parse_status_uid(STATUS) == 1001  # the effective uid, second of four
    assert parse_status_caps(STATUS, "CapEff") == 0xA80425FB and parse_status_caps(STATUS, "CapBnd") == 0x1FFFFFFFFFF
    assert parse_status_uid(None) is None and parse_status_uid("Uid:\tx y\n") is None
    assert parse_status_caps("CapEff:\tnot-hex\n", "CapEff") is None and parse_status_caps(STATUS, "CapPrm") is None


def test_the_dpkg_status_parser_reads_versions_and_states():
    text = ("Package: libibverbs1\nStatus: install ok installed\nVersion: 44.0-2\n\n"
            "Package: librdmacm1\nStatus: install ok half-installed\nVersion: 44.0-2\n")
    assert parse_dpkg_status(text) == {"libibverbs1": ("44.0-2", "installed"), "librdmacm1": ("44.0-2", "half-installed")}
    assert parse_dpkg_status(text, only={"librdmacm1"}) == {"librdmacm1": ("44.0-2", "half-installed")}
