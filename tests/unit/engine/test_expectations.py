"""Typed expectations: a mistyped value is a usage error (exit 2), never a silent PASS.

Before, ``--set min_rate_gbps=abc``, ``--set min_rate_gbps=-400`` and ``min_rate_gbps = "800"``
in a config all passed a 400 Gb/s node: the rate check skips a minimum it cannot compare.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, check_json, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdmadoctor.core.expect import Expect, ExpectError, infer
from rdmadoctor.engine import expectations
from rdmadoctor.engine.expectations import BASE, PROFILES, SPEC, ConfigError, describe, parse_set, resolve, specs

GIB = 1024**3
CHECKS_DIR = Path(__file__).resolve().parents[3] / "checks"


# ---- the issue, through the real command line ------------------------------------------


def _config(tmp_path, text: str, name: str = "config.toml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize(
    "args, shown",
    [
        (["--set", "min_rate_gbps=abc"], "'abc' is not a number"),
        (["--set", "min_rate_gbps=-400"], "-400 is not > 0"),
        (["--config", 'min_rate_gbps = "800"\n'], "'800' is a string (in quotes), not a number"),
    ],
    ids=["set-abc", "set-negative", "config-string"],
)
def test_a_mistyped_rate_is_a_usage_error_not_a_pass(tmp_path, args, shown):
    if args[0] == "--config":
        args = ["--config", _config(tmp_path, args[1])]
    code, out, err = run_cli(["check", "--example", "hgx-h100-ib", *args])
    assert code == 2, err
    assert out == ""
    assert err.startswith("rdmadoctor: error: ")
    assert "min_rate_gbps" in err and shown in err
    assert "expected a number > 0" in err and "Gb/s" in err
    if args[0] == "--config":
        assert args[1] in err  # the layer: which file


def test_the_same_node_passes_and_fails_on_well_typed_rates(tmp_path):
    # The values the typos meant are read and judged: the example's ports run at 400 Gb/s.
    assert run_cli(["check", "--example", "hgx-h100-ib", "--set", "min_rate_gbps=400"])[0] == 0
    assert run_cli(["check", "--example", "hgx-h100-ib", "--config", _config(tmp_path, "min_rate_gbps = 800\n")])[0] == 1


def test_a_subprocess_run_exits_2_with_only_stderr():
    # The installed entry point, not only main(): what an init container sees.
    r = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "check", "--example", "hgx-h100-ib", "--set", "expected_hcas=true", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert "--set expected_hcas: true is a boolean, not an integer" in r.stderr


def test_preflight_refuses_a_mistyped_set_too():
    r = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "preflight", "--example", "hgx-h100-ib", "--set", "link_layer=OmniPath"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert "link_layer: 'OmniPath' is not one of the choices; expected one of InfiniBand, Ethernet" in r.stderr


def test_a_bad_pool_value_names_the_pool(tmp_path):
    cfg = _config(tmp_path, 'profile = "hgx-8gpu-ndr"\n[pools.gw]\nshm_min_bytes = -1\n')
    code, out, err = run_cli(["check", "--example", "hgx-h100-ib", "--config", cfg, "--pool", "gw"])
    assert (code, out) == (2, "")
    assert f"shm_min_bytes in {cfg} [pools.gw]: -1 is negative" in err


# ---- the layers -------------------------------------------------------------------------


def test_every_layer_is_checked_and_named(tmp_path):
    cfg = _config(tmp_path, 'expected_hcas = "8"\n[pools.gw]\nexpected_hcas = 0\n[pools.ok]\nexpected_hcas = 4\n')
    with pytest.raises(ConfigError) as e:
        resolve({}, config=cfg)
    assert (e.value.key, e.value.value, e.value.where) == ("expected_hcas", "8", f"in {cfg}")
    assert e.value.expected.startswith("an integer 1..1024")
    assert e.value.hint.startswith("write it without quotes: expected_hcas = 8")

    good = _config(tmp_path, "[pools.gw]\nexpected_hcas = 2\n[pools.ok]\nexpected_hcas = 4\n", "good.toml")
    assert resolve({}, config=good, pool="ok")["expected_hcas"] == 4
    # Every pool is checked on load, the one selected or not (issue 21): a bad pool fails everywhere.
    bad = _config(tmp_path, "[pools.gw]\nexpected_hcas = 0\n[pools.ok]\nexpected_hcas = 4\n", "bad.toml")
    for pool in ("gw", "ok", None):
        with pytest.raises(ConfigError, match=re.escape(f"expected_hcas in {bad} [pools.gw]: 0 is below the minimum 1")):
            resolve({}, config=bad, pool=pool)
    with pytest.raises(ConfigError, match=r"--set expected_hcas: 8\.5 is not an integer") as e:
        resolve({}, overrides={"expected_hcas": 8.5})
    assert e.value.where == "--set" and e.value.hint.startswith("for example: --set expected_hcas=8")


def test_config_structure_errors(tmp_path):
    with pytest.raises(ConfigError, match="is not a profile name"):
        resolve({}, config=_config(tmp_path, "profile = 3\n"))
    with pytest.raises(ConfigError, match=r"\[pools.gw\]: expected a table of expectations"):
        resolve({}, config=_config(tmp_path, '{"pools": {"gw": [1]}}', "c.json"), pool="gw")
    with pytest.raises(ConfigError, match="node pool 'gw' is not in") as e:
        resolve({}, config=_config(tmp_path, "[pools.ok]\n"), pool="gw")
    assert "pools in the config: ok" in e.value.hint
    with pytest.raises(ConfigError, match="pools in .*: 3 is not a table of node pools"):
        resolve({}, config=_config(tmp_path, "pools = 3\n"), pool="gw")
    with pytest.raises(ConfigError, match="not valid JSON"):
        resolve({}, config=_config(tmp_path, "[" * 100_000, "deep.json"))


def test_unknown_keys_still_fail_with_a_suggestion():
    with pytest.raises(ConfigError, match="unknown expectation 'min_rate' \\(--set\\)") as e:
        resolve({}, overrides={"min_rate": 400})
    assert "did you mean 'min_rate_gbps'" in e.value.hint
    with pytest.raises(ConfigError, match="unknown expectation '_profile'"):
        resolve({}, overrides={"_profile": "x"})


def test_profile_from_the_config_file_and_the_profile_key(tmp_path):
    e = resolve({}, config=_config(tmp_path, 'profile = "hgx-8gpu-roce-400g"\n'))
    assert e["_profile"] == "hgx-8gpu-roce-400g" and e["link_layer"] == "Ethernet"
    # The command line's --profile wins over the file's.
    assert resolve({}, profile="hgx-8gpu-ndr", config=_config(tmp_path, 'profile = "hgx-8gpu-roce-400g"\n'))["_profile"] == "hgx-8gpu-ndr"


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_built_in_profile_passes_its_own_types(name):
    e = resolve({}, profile=name)
    for key, spec in SPEC.items():
        assert spec.validate(key, e[key]) == e[key]
    assert set(PROFILES[name]) - {"_description"} <= set(SPEC)


def test_every_key_a_built_in_check_reads_has_a_type():
    read = set()
    for path in CHECKS_DIR.glob("*.py"):
        read |= set(re.findall(r"""expect\.get\(\s*["'](\w+)["']""", path.read_text()))
    assert read and read <= set(SPEC), read - set(SPEC)
    from rdmadoctor.engine import registry

    checks, errors = registry.load_checks()
    for c in checks:
        for key, default in c.defaults.items():
            assert key in SPEC and SPEC[key] == infer(default), (c.id, key)  # declared once, by a check


def test_a_checks_own_default_is_the_default_and_changes_the_verdict(monkeypatch):
    """The table is built from the checks' own typed defaults: editing gpu_nic_max in checks/gpu.py
    (not some central table) changes what a far GPU means."""
    from rdmadoctor.checks import gpu
    from rdmadoctor.core.expect import Expect

    assert SPEC["gpu_nic_max"] is gpu.EXPECT["gpu_nic_max"] and resolve({})["gpu_nic_max"] == "PXB"
    far = ["--bundle", str(FIXTURES / "gpu-far"), "--only", "gpu.topology"]
    code, rep = check_json(far)
    before = {f["code"] for c in rep["checks"] for f in c["findings"]}
    monkeypatch.setitem(gpu.EXPECT, "gpu_nic_max", Expect("SYS", "enum", choices=gpu.RELATION_ORDER, nullable=False))
    monkeypatch.setattr(expectations, "_SPEC", None)
    assert resolve({})["gpu_nic_max"] == "SYS"
    code, rep = check_json(far)
    after = {f["code"] for c in rep["checks"] for f in c["findings"]}
    monkeypatch.undo()
    expectations._SPEC = None
    assert "GPU_NIC_FAR" in before and "GPU_NIC_FAR" not in after, (before, after)


def test_a_key_declared_twice_differently_is_refused():
    from rdmadoctor.core.expect import Expect
    from rdmadoctor.core.model import Check

    a = Check(id="a.one", title="a", probe=lambda ctx: None, judge=lambda f, e: [], defaults={"k": Expect(1, "int", min=0, max=9)})
    b = Check(id="b.two", title="b", probe=lambda ctx: None, judge=lambda f, e: [], defaults={"k": Expect(2, "int", min=0, max=9)})
    same = Check(id="c.three", title="c", probe=lambda ctx: None, judge=lambda f, e: [], defaults={"k": 1})
    assert expectations.declared([a, same])["k"].default == 1
    with pytest.raises(ConfigError, match="declared by a.one and again, differently, by b.two"):
        expectations.declared([a, b])


def test_the_relations_are_the_pci_checks_relations():
    from rdmadoctor.checks._pci import RELATION_ORDER
    from rdmadoctor.core.labels import RELATIONS

    assert expectations.GPU_NIC_RELATIONS is RELATION_ORDER is RELATIONS  # one list, not three equal ones


def test_resolved_lists_are_copies():
    e = resolve({})
    e["required_modules"].append("mutated")
    assert "mutated" not in resolve({})["required_modules"] and "mutated" not in BASE["required_modules"]


# ---- --set ------------------------------------------------------------------------------


def test_set_values_are_json_when_they_parse():
    assert parse_set(["min_rate_gbps=abc", "a=400", "b=true", "c=null", 'd=["x"]', "e= 2.5"]) == {
        "min_rate_gbps": "abc", "a": 400, "b": True, "c": None, "d": ["x"], "e": 2.5,
    }
    # Nested too deep to read is refused, not taken as a string (a list key would take it as a name).
    with pytest.raises(ConfigError, match="nested too deeply"):
        parse_set(["deep=" + "[" * 100_000])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_set(["=3"])


def test_set_spellings_a_person_types():
    e = resolve({}, overrides=parse_set([
        "memlock_min_bytes=unlimited", "shm_min_bytes=16Gi", "link_layer=infiniband",
        "ignore_ports=mlx5_8/1,mlx5_9", "compute_hcas=null", "roce_min_mtu=2048",
    ]))
    assert e["memlock_min_bytes"] is None and e["shm_min_bytes"] == 16 * GIB
    assert e["link_layer"] == "InfiniBand" and e["ignore_ports"] == ["mlx5_8/1", "mlx5_9"]
    assert e["compute_hcas"] is None and e["roce_min_mtu"] == 2048
    assert resolve({}, overrides={"link_layer": "RoCE"})["link_layer"] == "Ethernet"
    assert resolve({}, overrides={"link_layer": "either"})["link_layer"] is None
    with pytest.raises(ConfigError) as err:
        resolve({}, overrides=parse_set(["ignore_vfs=True"]))
    assert err.value.hint.startswith("write --set ignore_vfs=true")
    with pytest.raises(ConfigError, match="9000 is not one of the choices; expected one of 256, 512"):
        resolve({}, overrides=parse_set(["roce_min_mtu=9000"]))


# ---- the types --------------------------------------------------------------------------


def _ok(spec: Expect, value):
    return spec.validate("k", value)


def _bad(spec: Expect, value) -> str:
    with pytest.raises(ExpectError) as e:
        spec.validate("k", value)
    return e.value.problem


def test_int():
    s = Expect(None, "int", min=1, max=1024)
    assert _ok(s, 8) == 8 and _ok(s, 8.0) == 8 and type(_ok(s, 8.0)) is int and _ok(s, None) is None
    assert _bad(s, True) == "true is a boolean, not an integer"
    assert _bad(s, "8") == "'8' is a string (in quotes), not an integer"
    assert _bad(s, 0) == "0 is below the minimum 1"
    assert _bad(s, 10**30) == f"{10**30} is above the maximum 1024"
    assert _bad(s, float("inf")) == "inf is not a finite number"
    assert _bad(s, 1.5) == "1.5 is not an integer"
    assert _bad(Expect(3, "int", nullable=False), None) == "null is not allowed"


def test_number():
    s = Expect(None, "number", "Gb/s", above=0, max=10000)
    assert _ok(s, 400) == 400 and _ok(s, 0.5) == 0.5
    for v, problem in [(0, "0 is not > 0"), (-400, "-400 is not > 0"), (False, "false is a boolean, not a number"),
                       (float("nan"), "nan is not a finite number"), (-math.inf, "-inf is not a finite number"),
                       ("abc", "'abc' is not a number"), ([400], "[400] is not a number"), (10**400, None)]:
        got = _bad(s, v)
        assert problem is None or got == problem
    assert s.expected() == "a number > 0, <= 10000 (Gb/s), or null"


def test_bool_str_enum_list():
    b = Expect(True, "bool", nullable=False)
    assert _ok(b, False) is False
    assert _bad(b, 1) == "1 is not true or false" and _bad(b, "true") == "'true' is not true or false"
    s = Expect("", "str")
    assert _ok(s, "x") == "x" and _bad(s, 3) == "3 is not a string"
    e = Expect("PXB", "enum", choices=("PIX", "PXB"), nullable=False)
    assert _ok(e, "pix") == "PIX" and _bad(e, "NV12") == "'NV12' is not one of the choices"
    m = Expect(4096, "enum", choices=(1024, 4096))
    assert _ok(m, 4096.0) == 4096 and _bad(m, True) == "true is not one of the choices" and _bad(m, "4096")
    lst = Expect([], "list", nullable=False)
    assert _ok(lst, ("a", " b ")) == ["a", "b"] and _ok(lst, "a, b,") == ["a", "b"] and _ok(lst, "") == []
    assert _bad(lst, ["a", 3]) == "['a', 3] holds 3, not a name"
    assert _bad(lst, ["a", " "]) == "['a', ' '] holds an empty name"
    assert _bad(lst, {"a": 1}) == "a table {a} is not a list of names"


@pytest.mark.parametrize(
    "text, n",
    [("16Gi", 16 * GIB), ("16GiB", 16 * GIB), ("16 gib", 16 * GIB), ("1.5GiB", 3 * GIB // 2), ("512M", 512 * 10**6),
     ("8GB", 8 * 10**9), ("4096B", 4096), ("64Ki", 65536), (".5Ki", 512)],
)
def test_bytes_sizes(text, n):
    assert _ok(Expect(0, "bytes", min=0, max=1 << 60), text) == n


@pytest.mark.parametrize("text", ["800", "16 Qi", "Gi", "1.3B", "-1Gi", "1e9", "1..2G", "16iB", "١٦Gi", ""])
def test_bytes_refuses_what_is_not_a_size(text):
    assert _bad(Expect(0, "bytes", min=0, max=1 << 60), text)


def test_numbers_too_long_to_print_are_refused_not_crashed_on():
    with pytest.raises(ConfigError, match="more than 77 digits is above the maximum 1024"):
        resolve({}, overrides={"expected_hcas": 10**5000})
    with pytest.raises(ConfigError, match="is not a size"):
        resolve({}, overrides=parse_set(["shm_min_bytes=" + "9" * 5000 + "Gi"]))


def test_bytes_numbers_and_null_means():
    s = SPEC["memlock_min_bytes"]
    assert _ok(s, GIB) == GIB and _ok(s, 1e9) == 10**9 and _ok(s, "Unlimited") is None
    assert _bad(s, -1) == "-1 is negative"
    assert _bad(s, 2**64 - 1) == f"{2**64 - 1} is above the maximum 1 EiB"  # RLIM_INFINITY: say "unlimited"
    assert _bad(s, 0.5) == "0.5 is not a whole number of bytes"
    assert _bad(SPEC["shm_min_bytes"], None) == "null is not allowed"


def test_any():
    s = Expect(None, "any")
    assert _ok(s, {"a": [1, "x", None, 2.5]}) == {"a": [1, "x", None, 2.5]}
    import datetime

    assert _bad(s, datetime.date(2024, 1, 1))  # TOML dates
    assert _bad(s, [float("nan")]) == "nan is not a finite number"


def test_plain_python_types_and_bad_specs():
    assert Expect(5, int).type == "int" and Expect(0.5, float).type == "number" and Expect([], list).type == "list"
    with pytest.raises(ValueError):
        Expect(None, "float")
    with pytest.raises(ValueError):
        Expect(None, "enum")


# ---- keys that checks add ---------------------------------------------------------------


def test_check_defaults_add_typed_keys():
    defaults = {
        "nccl_min_channels": Expect(4, "int", "channels", min=1, max=64, nullable=False, doc="x"),
        "probe_timeout_s": 2.5,
        "strict_numa": False,
        "vendor": "mlx5",
        "extra_modules": ["nvme_rdma"],
        "anything": None,
        "gpu_nic_max": "SYS",  # a built-in key: its built-in type and default stand
    }
    e = resolve(defaults, overrides={"nccl_min_channels": 8, "probe_timeout_s": 3, "anything": [1, "a"]})
    assert e["nccl_min_channels"] == 8 and e["probe_timeout_s"] == 3 and e["strict_numa"] is False
    assert e["vendor"] == "mlx5" and e["extra_modules"] == ["nvme_rdma"] and e["anything"] == [1, "a"]
    assert e["gpu_nic_max"] == "PXB"
    for key, value, problem in [
        ("nccl_min_channels", 0, "0 is below the minimum 1"),
        ("probe_timeout_s", "2s", "'2s' is not a number"),
        ("strict_numa", 1, "1 is not true or false"),
        ("vendor", 5, "5 is not a string"),
        ("extra_modules", [1], "[1] holds 1, not a name"),
        ("anything", float("nan"), "nan is not a finite number"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(f"--set {key}: {problem}")):
            resolve(defaults, overrides={key: value})
    with pytest.raises(ConfigError, match="a check, has a default its own type refuses") as err:
        resolve({"bad": Expect("x", "int")})
    assert err.value.where == "check defaults"
    assert infer(3) == Expect(3, "int", nullable=False)


def test_describe_lists_every_key_as_json():
    rows = describe({"nccl_min_channels": Expect(4, "int", "channels", min=1)})
    assert [r["key"] for r in rows] == [*SPEC, "nccl_min_channels"]
    by = {r["key"]: r for r in rows}
    assert by["min_rate_gbps"] == {
        "key": "min_rate_gbps", "type": "number", "unit": "Gb/s", "default": None, "range": "> 0, <= 10000",
        "choices": None, "nullable": True, "null_means": "no minimum", "doc": SPEC["min_rate_gbps"].doc,
    }
    assert by["shm_min_bytes"]["range"] == "0..1 EiB" and by["gpu_nic_max"]["choices"] == ["PIX", "PXB", "PHB", "NODE", "SYS"]
    assert all(r["doc"] for r in rows if r["key"] in SPEC)
    json.dumps(rows)


# ---- anything a config or --set can hold: a checked value or a ConfigError ---------------

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers() | st.integers(min_value=-(10**400), max_value=10**400), st.floats(),
    st.text(max_size=12), st.sampled_from(["16Gi", "unlimited", "Ethernet", "pix", "400", "a,b", "1.5GiB", ""]),
)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)
_keys = st.sampled_from(sorted(SPEC) + ["plugin_int", "plugin_any", "plugin_list", "nope"])
_layers = st.dictionaries(_keys, _values, max_size=5)
PLUGIN = {"plugin_int": Expect(1, "int", min=0, max=9, nullable=False), "plugin_any": None, "plugin_list": ["a"]}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.lists(_layers, min_size=1, max_size=3), profile=st.sampled_from(sorted(PROFILES)))
def test_resolve_returns_checked_values_or_config_error(layers, profile):
    *files, sets = layers
    try:
        out = resolve(PLUGIN, profile=profile, overrides=sets)
    except ConfigError as e:
        assert str(e)
        return
    known = specs(PLUGIN)
    assert set(out) == set(known) | {"_profile"}
    for key, spec in known.items():
        assert spec.validate(key, out[key]) == out[key], key
    for key, value in sets.items():
        assert out[key] == known[key].validate(key, value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(top=_layers, pool=_layers)
def test_config_files_with_pools_never_crash(tmp_path, top, pool):
    cfg = tmp_path / "c.json"
    try:
        cfg.write_text(json.dumps({**top, "pools": {"gw": pool}}))
    except ValueError:
        return
    try:
        out = resolve(PLUGIN, config=str(cfg), pool="gw")
    except ConfigError:
        return
    for key, spec in specs(PLUGIN).items():
        assert spec.validate(key, out[key]) == out[key]


def test_core_expect_stays_import_cheap():
    # What importing it adds (site may have loaded `re` already in this venv).
    code = (
        "import sys; before = set(sys.modules); import rdmadoctor.core.expect; "
        "new = set(sys.modules) - before; "
        "print(sorted(m for m in ('typing', 're', 'json', 'dataclasses', 'rdmadoctor.engine') if m in new))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr
