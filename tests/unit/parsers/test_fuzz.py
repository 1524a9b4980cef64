"""Every parser, fed anything, returns a Parsed and never raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdmadoctor.core.facts import (
    DfRow,
    GidRow,
    Limits,
    LspciDevice,
    NetLink,
    PackageDb,
    Parsed,
    RdmaDevice,
    TopoMatrix,
)
from rdmadoctor.parsers.common import ipv4_of_gid, to_bytes
from rdmadoctor.parsers.ibstat import parse_ibstat
from rdmadoctor.parsers.ibv_devinfo import parse_ibv_devinfo
from rdmadoctor.parsers.lspci import parse_lspci_vvv
from rdmadoctor.parsers.netdev import parse_ibdev2netdev, parse_show_gids
from rdmadoctor.parsers.nvidia_smi import parse_topo
from rdmadoctor.parsers.packages import parse_dpkg_l, parse_ofed_info, parse_rpm_qa
from rdmadoctor.parsers.system import (
    parse_df,
    parse_env,
    parse_lsmod,
    parse_proc_limits,
    parse_proc_status_capeff,
    parse_ulimit,
)

try:  # tests/ is on sys.path under pytest's default "prepend" import mode
    from unit.parsers import test_parsers as inline
except ImportError:  # tests/ became a package
    from tests.unit.parsers import test_parsers as inline

SAMPLES = Path(__file__).resolve().parents[3].parent / "shared" / "realworld" / "samples"


def _is_list_of(kind):
    return lambda v: isinstance(v, list) and all(isinstance(x, kind) for x in v)


def _optional(kind):
    return lambda v: v is None or isinstance(v, kind)


PARSERS = [
    (parse_ibstat, _is_list_of(RdmaDevice)),
    (parse_ibv_devinfo, _is_list_of(RdmaDevice)),
    (parse_topo, _optional(TopoMatrix)),
    (parse_ibdev2netdev, _is_list_of(NetLink)),
    (parse_show_gids, _is_list_of(GidRow)),
    (parse_dpkg_l, lambda v: isinstance(v, PackageDb)),
    (parse_rpm_qa, lambda v: isinstance(v, PackageDb)),
    (parse_ofed_info, lambda v: isinstance(v, PackageDb)),
    (parse_lsmod, lambda v: isinstance(v, set)),
    (parse_ulimit, _optional(Limits)),
    (parse_proc_limits, _optional(Limits)),
    (parse_proc_status_capeff, _optional(int)),
    (parse_df, _is_list_of(DfRow)),
    (parse_env, lambda v: isinstance(v, dict)),
    (parse_lspci_vvv, _is_list_of(LspciDevice)),
]


def _corpus() -> list[str]:
    texts = [value for name, value in vars(inline).items()
             if name.isupper() and isinstance(value, str) and "\n" in value]
    if SAMPLES.is_dir():
        for path in sorted(SAMPLES.rglob("*.txt")):
            text = path.read_text(encoding="utf-8", errors="replace")
            texts.append(text.split("\n# ---\n", 1)[-1])
    return texts


CORPUS = _corpus()
LINES = sorted({line for text in CORPUS for line in text.splitlines()})
TRICKY = ["", " ", "\t", "\r", "X", "port:", "Port 1:", "hca_id:", "GID[", "CA ''", "ACSCtl:",
          "Installed Packages:", "Filesystem", "Filesystem Size", "NIC Legend:", "GPU0", "GPU0 X",
          "1" * 5000, "9" * 30 + "G", "0x" + "f" * 40, "phys_port_cnt: 99999999999", "Rate: 1e999",
          "Number of ports: 1000000", "state: 99: FOO", "LnkSta: Speed 99999999GT/s",
          "active_speed: 1" + "0" * 400 + " Gbps", "==>", "mlx5_0 port 99999999999999 ==> x (Up)",
          "Max locked memory 99999999999999999999999 1 bytes", "CapEff:", "\u0663\u0663", "\x00",
          "libibverbs: Warning: couldn't load driver ''", "ibpanic:", "Fatal error:"]


def _check_all(text: str) -> None:
    for parse, value_ok in PARSERS:
        result = parse(text)
        assert isinstance(result, Parsed), parse.__name__
        assert value_ok(result.value), (parse.__name__, result.value)
        assert isinstance(result.warnings, tuple) and all(isinstance(w, str) for w in result.warnings)
        assert isinstance(result.ok, bool)


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.text(max_size=3000))
def test_random_text(text):
    _check_all(text)


@FUZZ
@given(st.binary(max_size=3000))
def test_random_bytes_decoded(data):
    _check_all(data.decode("utf-8", errors="replace"))


@FUZZ
@given(st.sampled_from(CORPUS), st.data())
def test_truncated_samples(text, data):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    _check_all(text[:end])
    _check_all(text[start:end])


@FUZZ
@given(st.sampled_from(CORPUS).flatmap(lambda t: st.permutations(t.splitlines())))
def test_shuffled_sample_lines(lines):
    _check_all("\n".join(lines))


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(LINES), st.sampled_from(TRICKY), st.text(max_size=40)),
                max_size=60),
       st.sampled_from(["\n", "\r\n", "\r"]))
def test_mixed_tool_lines(lines, newline):
    _check_all(newline.join(lines))


@FUZZ
@given(st.lists(st.sampled_from(LINES + TRICKY), max_size=30).map("\n".join),
       st.sampled_from(["\t", "    ", " "]))
def test_reindented_lines(text, indent):
    _check_all("\n".join(indent + line.strip() for line in text.splitlines()))
    _check_all("\n".join(line.replace("\t", indent) for line in text.splitlines()))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_helpers_on_random_text(text):
    assert to_bytes(text) is None or isinstance(to_bytes(text), int)
    assert ipv4_of_gid(text) is None or isinstance(ipv4_of_gid(text), str)


# ---- long runs: every parser linear in its input (issue 21) -----------------------------------
# A prompt pattern that backtracked between two \s* cost 2 s per 20,000 leading spaces in each
# parser; ibdev2netdev's arrow split took minutes on a megabyte of "=". Bounded by CPU time.

def _long_inputs() -> dict[str, str]:
    picked = LINES[:: max(1, len(LINES) // 50)][:50]
    return {
        "200k spaces": " " * 200_000,
        "env 200k spaces": "KEY=" + " " * 200_000 + "x",
        "1M =": "=" * 1_000_000,
        "ibdev2netdev 1M =": "mlx5_0 port 1 " + "=" * 1_000_000 + "> ib0 (Up)",
        "20k leading spaces": "\n".join(" " * 20_000 + line for line in picked),
        "20k spaces inside": "\n".join(line.replace(" ", " " * 20_000, 1) + " x" for line in picked),
        "20k tabs inside": "\n".join(line.replace(":", ":" + "\t" * 20_000, 1) for line in picked),
    }


LONG = _long_inputs()


@pytest.mark.parametrize("name", sorted(LONG))
@pytest.mark.parametrize("parse", [p for p, _ in PARSERS], ids=lambda p: p.__name__)
def test_long_runs_cost_linear_time(parse, name):
    from adversarial import cpu_budget

    with cpu_budget(10.0):  # well under a second now; minutes for some before
        result = parse(LONG[name])
    assert isinstance(result, Parsed)
