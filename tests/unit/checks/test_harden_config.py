"""Issue 10, item 15: numbers and nesting people type into NCCL settings, --config and --set.

- An integer of more than 4300 digits (Python's int() limit, CVE-2020-10735) in NCCL_IB_GID_INDEX,
  NCCL_IB_DISABLE or an NCCL_IB_HCA port is read the way NCCL reads it (strtoll: out of range, the
  default; atoi: glibc's (int)strtol) and said in a finding, never an internal error.
- A value nested thousands deep in --config, --set or the bundle's cmd/node.json is a usage
  error (or, in a bundle, a finding), never a traceback and never a name taken as written.
- A config error stops `label` and the agent before anything is published; and `label` never
  publishes an empty label set.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from rdmadoctor import fixturegen
from rdmadoctor.checks import nccl
from rdmadoctor.host import mem_host
from rdmadoctor.runner import Options, diagnose

HUGE = "9" * 4301  # int() refuses it; strtoll/atoi saturate


def nccl_env(env: dict[str, str]) -> dict:
    tree = fixturegen.scenario_tree("roce")
    rt = json.loads(tree["/runtime.json"])
    rt["env"].update(env)
    tree["/runtime.json"] = json.dumps(rt).encode()
    rep = diagnose(Options(), host=mem_host(tree)).report
    (check,) = [c for c in rep["checks"] if c["id"] == "nccl.env"]
    assert not (check.get("reason") or "").startswith("internal error"), check["reason"]
    for f in check["findings"]:
        assert len(f["message"]) < 600, f["message"][:200]  # the 4301 digits are not pasted whole
    return check


def by_code(check: dict, code: str) -> list[dict]:
    return [f for f in check["findings"] if f["code"] == code]


@pytest.mark.parametrize("text", [HUGE, "-" + HUGE, "0x" + "f" * 5000, "0" + "7" * 5000])
def test_strtoll_overflow_of_any_length_is_none(text):
    assert nccl.c_strtoll(text) is None  # ERANGE: NCCL keeps its default
    assert nccl.numeric_exact(text)


@pytest.mark.parametrize(
    "text, value",
    [
        ("1", 1),
        ("", 0),
        ("x", 0),
        ("4294967297", 1),  # glibc atoi is (int)strtol: the low 32 bits
        ("2147483648", -2147483648),
        (HUGE, -1),  # strtol saturates at LONG_MAX, whose low 32 bits are -1
        ("-" + HUGE, 0),  # LONG_MIN: low 32 bits 0
        ("  +12abc", 12),
    ],
)
def test_c_atoi_reads_as_glibc_does(text, value):
    assert nccl.c_atoi(text) == value


def test_gid_index_out_of_range_is_a_finding():
    check = nccl_env({"NCCL_IB_HCA": "=mlx5_0", "NCCL_IB_GID_INDEX": HUGE})
    (f,) = by_code(check, "NCCL_ENV_INVALID")
    assert f["severity"] == "warning" and f["subject"] == "NCCL_IB_GID_INDEX"
    assert "4301 digits" in f["message"] and "out of range" in f["message"] and "default" in f["message"]


def test_ib_disable_out_of_range_is_a_finding_and_ib_stays_on():
    check = nccl_env({"NCCL_IB_DISABLE": HUGE})
    (f,) = by_code(check, "NCCL_ENV_INVALID")
    assert f["subject"] == "NCCL_IB_DISABLE" and "out of range" in f["message"] and "IB enabled" in f["message"]
    assert not by_code(check, "NCCL_IB_DISABLED_BY_ENV")


def test_hca_port_out_of_range_is_a_finding_and_read_as_nccl_reads_it():
    check = nccl_env({"NCCL_IB_HCA": "=mlx5_0:" + HUGE, "NCCL_IB_GID_INDEX": "3"})
    (f,) = by_code(check, "NCCL_ENV_INVALID")
    assert f["subject"] == "NCCL_IB_HCA" and "atoi" in f["message"] and "any port" in f["message"]
    # atoi gives -1, NCCL's "any port": mlx5_0's ACTIVE port is used, as NCCL would.
    assert not by_code(check, "NCCL_IB_HCA_NO_MATCH")
    assert any("NCCL will use mlx5_0/1" in i["message"] for i in by_code(check, "NCCL_ENV_INFO"))


def test_hca_port_that_wraps_is_said():
    check = nccl_env({"NCCL_IB_HCA": "=mlx5_0:4294967297", "NCCL_IB_GID_INDEX": "3"})
    (f,) = by_code(check, "NCCL_ENV_INVALID")
    assert "4294967297" in f["message"] and "as 1" in f["message"]
    assert not by_code(check, "NCCL_IB_HCA_NO_MATCH")


# ---- nesting -----------------------------------------------------------------------------------


def test_deep_node_json_in_a_bundle_is_a_finding(tmp_path):
    tree = fixturegen.scenario_tree("healthy-ib")
    tree["/cmd/node.json"] = b"[" * 100_000 + b"]" * 100_000
    rep = diagnose(Options(only=["node.labels"]), host=mem_host(tree)).report
    (check,) = [c for c in rep["checks"] if c["id"] == "node.labels"]
    assert check["status"] == "unknown" and not (check.get("reason") or "").startswith("internal error")
    (f,) = check["findings"]
    assert f["code"] == "NODE_OBJECT_UNREADABLE" and "nested" in f["message"]


@pytest.mark.parametrize("depth", [2000, 100_000])
def test_deep_set_value_is_a_usage_error_not_a_name(depth):
    code, out, err = run_cli(["check", "--example", "roce-node", "--set", "compute_hcas=" + "[" * depth + "]" * depth])
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("rdmadoctor: error: --set compute_hcas: ")
    # Whether 2000 levels can be read depends on the recursion limit (tests/contract/test_layers.py raises
    # it to 10000 for the whole session): read, the list holds no name; unreadable, it is too deep.
    assert "nested too deeply" in err if depth > 10_000 else ("nested too deeply" in err or "not a name" in err), err


DEEP = 100_000  # beyond any recursion limit a process would set


@pytest.mark.parametrize("suffix, body", [
    (".json", '{"compute_hcas": ' + "[" * DEEP + "]" * DEEP + "}"),
    (".toml", "compute_hcas = " + "[" * DEEP + "]" * DEEP + "\n"),
    (".toml", "compute_hcas = " + "{a=" * DEEP + "1" + "}" * DEEP + "\n"),
])
def test_deep_config_is_a_usage_error(suffix, body, tmp_path):
    path = tmp_path / ("c" + suffix)
    path.write_text(body)
    code, out, err = run_cli(["check", "--example", "roce-node", "--config", str(path)])
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith(f"rdmadoctor: error: config {path} ") and "nested too deeply" in err, err


# ---- a config error publishes nothing ---------------------------------------------------------


@pytest.mark.parametrize("config", ["ignore_ports = 5\n", "[pools.gw]\nignore_ports = 5\n"])
def test_label_with_a_config_error_publishes_nothing(config, tmp_path):
    (tmp_path / "c.toml").write_text(config)
    features = tmp_path / "features.d"
    features.mkdir()
    args = ["label", "--example", "roce-node", "--config", str(tmp_path / "c.toml"), "--features-dir", str(features)]
    if "pools" in config:
        args += ["--pool", "gw"]
    code, out, err = run_cli(args)
    assert code == 2 and "rdmadoctor: error: ignore_ports in " in err and "Traceback" not in err
    assert list(features.iterdir()) == []


def test_agent_with_a_config_error_publishes_nothing(tmp_path):
    (tmp_path / "c.toml").write_text("ignore_ports = 5\n")
    features = tmp_path / "features.d"
    features.mkdir()
    code, out, err = run_cli(["agent", "--once", "--example", "roce-node", "--config", str(tmp_path / "c.toml"),
                              "--features-dir", str(features), "--metrics-port", "0"])
    assert code == 2 and "rdmadoctor: error: ignore_ports in " in err
    assert list(features.iterdir()) == []


def test_label_never_publishes_an_empty_set(tmp_path, monkeypatch):
    """A report with no labels (whatever broke upstream) is not published: an empty NFD file or
    node patch would take every label off the node. The report here is a real one, labels dropped."""
    import rdmadoctor.runner as runner

    real = runner.diagnose

    def without_labels(opts, **kw):
        diag = real(opts, **kw)
        diag.report["labels"] = {}
        return diag

    monkeypatch.setattr(runner, "diagnose", without_labels)
    features = tmp_path / "features.d"
    features.mkdir()
    code, out, err = run_cli(["label", "--example", "roce-node", "--features-dir", str(features)])
    assert code == 2 and "no labels" in err and "Traceback" not in err
    assert list(features.iterdir()) == []


@pytest.mark.parametrize(
    "value, said",
    [
        ("=mlx5_0\u00a0", "U+00A0 (no-break space)"),  # pasted from a web page
        ("=mlx5_\ufffd0", "a byte that is not UTF-8"),  # a bundle's env decoded with replacement
        ("=mlx5_0\udcff", "the byte 0xFF, not UTF-8"),  # os.environ's surrogateescape
        ("=mlx5_0\t", "U+0009"),  # a tab from a YAML block scalar
    ],
)
def test_a_stray_character_in_an_hca_name_is_named(value, said):
    check = nccl_env({"NCCL_IB_HCA": value})
    (f,) = by_code(check, "NCCL_IB_HCA_NO_MATCH")
    assert said in f["message"] and "retype the value" in f["message"], f["message"]
    # A plain typo gets no such words.
    (f,) = by_code(nccl_env({"NCCL_IB_HCA": "=mlx5_9"}), "NCCL_IB_HCA_NO_MATCH")
    assert "retype" not in f["message"] and "matches no device" in f["message"]
