"""One reader for one output (issue 30, item 4): a tool's output recorded in a bundle (`check --bundle`,
the node checks over ``cmd/<name>.txt``) and the same output pasted into a log (`diagnose`, the checks'
paste judges and the knowledge base) say the same problems.

For every tool output of the corpus (the outputs pasted in tests/fixtures/logs, frames and silent, the
``cmd/`` files of the fixture bundles, the verbatim samples in ../shared/realworld/samples, the pasted
outputs test_paste.py keeps), both paths run on the same text, and the codes of their errors and
warnings are compared. Where they differ by design the difference is written in DIFFERENCES with its
reason, and each written difference is seen in the corpus (none left stale).

The three outputs the issue names are held one by one first: a headerless `df | grep shm`, libibverbs'
"no userspace driver" warnings before "No IB devices found", an `ibv_devinfo` of `Failed to open device`.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from conftest import FIXTURES

from rdmadoctor.host import logs_only_host
from rdmadoctor.logs import Diagnoser
from rdmadoctor.parsers.outputs import CMD_OF_KIND
from rdmadoctor.runner import Options, diagnose

ROOT = FIXTURES.parent.parent
SAMPLES = ROOT.parent / "shared" / "realworld" / "samples"
HEADER_END = b"\n# ---\n"
PROBLEM = ("error", "warning")
# Codes about the text as a log, not about the node (logs.diagnose's own), and the unknown-error reader's
# (a line no row knows is said by diagnose of any text; a bundle's checks read their own outputs only).
_LOG_ONLY = frozenset({"LOGS_READ", "LOGS_NOTHING_TO_JUDGE", "LOG_UNREADABLE", "LOG_ERROR_UNKNOWN"})

# (kind, code) -> why only one path says it: "bundle" or "paste", and the reason.
DIFFERENCES: dict[tuple[str, str], tuple[str, str]] = {
    ("ibv_devinfo", "IB_PARSE_WARNING"): (
        "bundle", "a bundle's record is the node's only port list: ib.devices says when it is cut or holds names only "
                  "(`ibv_devinfo -l`); a paste is a quote, whose length says nothing of the node"),
    ("ibdev2netdev", "ROCE_NETDEV_DOWN"): (
        "paste", "a bundle's roce.config judges the netdevs of the devices its inventory lists (sys/, or a port list "
                 "beside cmd/ibdev2netdev.txt); `ibdev2netdev` alone lists no device to it, while the paste judge reads "
                 "its rows"),
    ("ulimit", "MEMLOCK_LIMITED"): (
        "paste", "a bundle without the process's capabilities (/proc/self/status) cannot tell whether the limit binds "
                 "(CAPS_UNREADABLE: could not decide); a limit pasted in a job's log is that job's"),
}


def _body(path: Path) -> bytes:
    data = path.read_bytes()
    head, sep, rest = data.partition(HEADER_END)
    return rest if sep and head.startswith(b"# source: ") else data


def _segments(name: str, data: bytes) -> list[tuple[str, str, str, str]]:
    """(id, kind, command, text) of each tool output diagnose finds in ``data`` that a bundle records."""
    reader = Diagnoser()
    reader.feed(data, source=name)
    return [(f"{name}:{s.line}", s.kind, s.command, s.text) for s in reader.finish().segments if s.kind in CMD_OF_KIND]


def _corpus() -> list[tuple[str, str, str, str]]:
    out = []
    for folder in ("logs", "frames", "silent"):
        for path in sorted((FIXTURES / folder).iterdir()):
            out += _segments(f"{folder}/{path.name}", _body(path))
    # The fixture bundles' recorded outputs, pasted after a prompt naming their tool.
    tool_of = {name: kind for kind, name in reversed(list(CMD_OF_KIND.items()))}
    for path in sorted(FIXTURES.glob("*/cmd/*.txt")):
        kind = tool_of.get(path.stem)
        if kind is not None:
            out += [(f"bundle/{path.parent.parent.name}/{path.name}", kind, kind.replace("_", " "), path.read_text())]
    if SAMPLES.is_dir():
        for path in sorted(SAMPLES.glob("*/*.txt")):
            out += _segments(f"samples/{path.parent.name}/{path.name}", _body(path))
    from tests.unit.logs import test_paste

    for name in ("ULIMIT_A", "PIB", "RXE", "_IBDEV2NETDEV"):
        text = getattr(test_paste, name, None)
        if isinstance(text, str):
            out += _segments(f"test_paste/{name}", text.encode())
    return out


CORPUS = _corpus()


def _text(command: str, text: str) -> str:
    return (f"$ {command}\n" if command else "") + text


@functools.lru_cache(maxsize=None)
def paste_codes(kind: str, command: str, text: str) -> frozenset[str]:
    reader = Diagnoser()
    reader.feed(_text(command, text).encode(), source="paste.log")
    reader.end_source()
    rep = diagnose(Options(only=["logs"], logs=["paste.log"], log_diagnosis=reader), host=logs_only_host("paste.log")).report
    return frozenset(f["code"] for c in rep["checks"] for f in c["findings"] if f["severity"] in PROBLEM) - _LOG_ONLY


def bundle_report(tmp: Path, kind: str, command: str, text: str):
    (tmp / "cmd").mkdir(parents=True, exist_ok=True)
    (tmp / "cmd" / f"{CMD_OF_KIND[kind]}.txt").write_text(_text(command, text))
    return diagnose(Options(bundle=str(tmp)))


def bundle_codes(tmp: Path, kind: str, command: str, text: str) -> frozenset[str]:
    d = bundle_report(tmp, kind, command, text)
    return frozenset(f.code for r in d.results for f in r.findings if f.severity in PROBLEM)


def test_the_corpus_holds_every_kind_a_bundle_records() -> None:
    kinds = {kind for _, kind, _, _ in CORPUS}
    assert {"ibstat", "ibstatus", "ibv_devinfo", "ulimit", "df", "ibdev2netdev"} <= kinds, sorted(kinds)
    assert len(CORPUS) >= 20


@pytest.mark.parametrize(("name", "kind", "command", "text"), CORPUS, ids=[c[0] for c in CORPUS])
def test_a_bundle_and_a_paste_say_the_same_problems(tmp_path: Path, name: str, kind: str, command: str, text: str) -> None:
    paste = paste_codes(kind, command, text)
    bundle = bundle_codes(tmp_path, kind, command, text)
    only_paste = {c for c in paste - bundle if DIFFERENCES.get((kind, c), ("",))[0] != "paste"}
    only_bundle = {c for c in bundle - paste if DIFFERENCES.get((kind, c), ("",))[0] != "bundle"}
    assert not only_paste and not only_bundle, (
        f"{kind} `{command}`: diagnose alone says {sorted(only_paste)}, check --bundle alone {sorted(only_bundle)}")


def test_every_written_difference_is_seen(tmp_path: Path) -> None:
    seen = set()
    for i, (_, kind, command, text) in enumerate(CORPUS):
        paste, bundle = paste_codes(kind, command, text), bundle_codes(tmp_path / str(i), kind, command, text)
        seen |= {(kind, c) for c in paste ^ bundle}
    assert set(DIFFERENCES) <= seen, sorted(set(DIFFERENCES) - seen)


# ---- the outputs issue 30 names ------------------------------------------------------------------------

DF_GREP_SHM = "shm              64M     0   64M   0% /dev/shm\n"
# https://github.com/nminoru/pib/issues/2 (as tests/unit/logs/test_paste.py's PIB), with a provider that failed to load
NO_PROVIDER = (
    "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs1\n"
    "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0\n"
    "No IB devices found\n"
)


def _fixture_log(name: str) -> str:
    return _body(FIXTURES / "logs" / name).decode()


def test_a_headerless_df_grep_shm_is_read_in_a_bundle_too(tmp_path: Path) -> None:
    """The issue saw a bundle call this "unreadable" while diagnose read it: both say SHM_TOO_SMALL."""
    d = bundle_report(tmp_path, "df", "df -h | grep shm", DF_GREP_SHM)
    (shm,) = [r for r in d.results if r.id == "shm.size"]
    assert [f.code for f in shm.findings] == ["SHM_TOO_SMALL"]
    assert paste_codes("df", "df -h | grep shm", DF_GREP_SHM) == {"SHM_TOO_SMALL"}


def test_no_userspace_driver_before_an_empty_list_is_one_root_cause_on_both_paths(tmp_path: Path) -> None:
    """The issue saw VERBS_PROVIDER_MISSING in diagnose and IB_NO_DEVICES beside it in a bundle: both say the
    missing provider, and the empty list follows from it (VERBS_NO_DEVICES, caused by it), on both paths."""
    d = bundle_report(tmp_path, "ibv_devinfo", "ibv_devinfo", NO_PROVIDER)
    found = [f for r in d.results for f in r.findings if f.severity in PROBLEM]
    assert "IB_NO_DEVICES" not in {f.code for f in found}
    (listing,) = [f for f in found if f.code == "VERBS_NO_DEVICES"]
    assert listing.cause == "VERBS_PROVIDER_MISSING"
    assert paste_codes("ibv_devinfo", "ibv_devinfo", NO_PROVIDER) == {f.code for f in found}


def test_failed_to_open_device_is_said_in_a_bundle_too(tmp_path: Path) -> None:
    """An `ibv_devinfo` of `Failed to open device` lines only (each device listed, none opened): the issue saw a
    bundle say nothing of it; both paths say DEV_UVERBS_MISSING. Beside a device it did open with an ACTIVE port
    (hustcat/k8s-rdma-device-plugin#8, tests/fixtures/logs/k8srdma-8-ibv-devinfo-failed-to-open.log: a pod given
    one VF of many), the failures are the VFs the pod was not given, on both paths."""
    failed = "Failed to open device\nFailed to open device\n"
    bundle = bundle_codes(tmp_path / "bare", "ibv_devinfo", "ibv_devinfo", failed)
    assert bundle == {"DEV_UVERBS_MISSING"} == paste_codes("ibv_devinfo", "ibv_devinfo", failed)
    (seg,) = [s for s in _segments("k8srdma-8", _fixture_log("k8srdma-8-ibv-devinfo-failed-to-open.log").encode())
              if s[1] == "ibv_devinfo"]
    _, kind, command, text = seg
    assert "Failed to open device" in text and "PORT_ACTIVE" in text
    bundle = bundle_codes(tmp_path / "vf", kind, command, text)
    assert "DEV_UVERBS_MISSING" not in bundle and bundle == paste_codes(kind, command, text), bundle


def test_an_ibstat_that_aborted_is_the_tools_failure_on_both_paths(tmp_path: Path) -> None:
    """Azure/azhpc-images#59 (tests/fixtures/logs/azhpc-59-ibpanic-an0-then-ibstat-init.log): `ibstat mlx5_an0`
    on a name that is no IB device panics. diagnose read it as IB_TOOL_FAILED; a bundle said IB_PARSE_WARNING
    and IB_NO_DEVICES (a node without devices, which the next command of the same paste shows it is not)."""
    text = "ibpanic: [8371] main: stat of IB device 'mlx5_an0' failed: No such file or directory\n"
    d = bundle_report(tmp_path, "ibstat", "ibstat mlx5_an0", text)
    (dev,) = [r for r in d.results if r.id == "ib.devices"]
    assert [f.code for f in dev.findings if f.severity in PROBLEM] == ["IB_TOOL_FAILED"]
    assert paste_codes("ibstat", "ibstat mlx5_an0", text) == {"IB_TOOL_FAILED"}


def test_ibstatus_without_sysfs_is_no_devices_on_both_paths(tmp_path: Path) -> None:
    """clustervision/trinity#219: ibstatus's `Fatal error: device '*': sys files not found` said nothing in a bundle."""
    text = "Fatal error:  device '*': sys files not found (/sys/class/infiniband/*/ports)\n"
    assert bundle_codes(tmp_path, "ibstatus", "ibstatus", text) == {"IB_NO_DEVICES"} == paste_codes("ibstatus", "ibstatus", text)


def test_a_down_roce_port_has_no_mtu_to_judge(tmp_path: Path) -> None:
    """../shared/realworld/samples/ibv_devinfo/asus_esc8000a_cx7_roce_all_port_down.txt: a bundle warned NET_MTU_LOW
    of DOWN ports (whose active_mtu reads 1024), the paste judge (ACTIVE ports only) did not: a port that is not
    ACTIVE has negotiated no MTU, and IB_PORT_DOWN tells what is wrong with it."""
    text = ("hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_DOWN (1)\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t1024 (3)\n"
            "\t\t\tlink_layer:\t\tEthernet\n")
    assert bundle_codes(tmp_path, "ibv_devinfo", "ibv_devinfo", text) == {"IB_PORT_DOWN"} == paste_codes("ibv_devinfo", "ibv_devinfo", text)
