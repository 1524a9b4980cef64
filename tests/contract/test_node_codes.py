"""One code, one meaning, in every built-in check (found through the registry, not a list) and every pattern.

Alerts and dashboards key on codes (rdmadoctor_finding{code=...}): a problem's code appears only
when the problem was seen; "could not decide" and "looks fine" have codes of their own. And one
root cause is one headline: what follows from it names it in ``cause``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, check_json

from rdmadoctor import fixturegen
from rdmadoctor.checks._rdma import RdmaInventory
from rdmadoctor.checks.ib import judge_devices, judge_ports
from rdmadoctor.checks.kernel import KernelFacts, judge_kernel
from rdmadoctor.core.facts import Port, RdmaDevice
from rdmadoctor.core.model import ERROR, INFO, KIND_SEVERITIES, KINDS, UNKNOWN, WARNING
from rdmadoctor.engine import registry
from rdmadoctor.logs import kb


# Every module that declares a loaded built-in check (a new check module is covered without a list).
# Its judge may live in a private helper module (checks/_nccl_judge.py for nccl.py): the module
# that declares CHECKS is the one listed, its helpers are read with it (_parts).
def _builtin_modules() -> tuple:
    checks, errors = registry.load_checks(autoload=False)
    assert not errors, errors
    mods = {sys.modules[c.judge.__module__] for c in checks}
    ids = {c.id for c in checks}
    declaring = {m for _, m in registry.builtin_modules() if any(c.id in ids for c in m.CHECKS)}
    return tuple(sorted({m for m in mods if hasattr(m, "CHECKS")} | declaring, key=lambda m: m.__name__))


def _parts(module) -> list:
    """The module and its private helpers, named ``_<module>_<job>`` beside it (_nccl_rules, ...),
    found on disk: a helper the module imports only when its check runs (logs.py's) is read too."""
    package, _, name = module.__name__.rpartition(".")
    here = Path(module.__file__).parent
    return [module] + [importlib.import_module(f"{package}.{p.stem}") for p in sorted(here.glob(f"_{name}_*.py"))]


MODULES = _builtin_modules()
SEVERITY_NAMES = {"ERROR": ERROR, "WARNING": WARNING, "INFO": INFO, "UNKNOWN": UNKNOWN}


def _declared(module) -> dict:
    return {c.code: c for check in module.CHECKS for c in check.codes}


def _finding_calls(module):
    """(code, severities or None when computed, "module:line") of every Finding(...) written in the
    module (and its helpers)."""
    for module, node in ((m, node) for m in _parts(module) for node in ast.walk(ast.parse(inspect.getsource(m)))):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding"):
            continue
        code, sev = node.args[0], node.args[1]
        # Codes are named by their Code object (IB_NO_DEVICES.code): read the object's code.
        assert (
            isinstance(code, ast.Attribute) and code.attr == "code" and isinstance(code.value, ast.Name)
        ), f"{module.__name__}:{node.lineno}: a code is not named by its Code object"
        code_value = getattr(module, code.value.id).code
        if isinstance(sev, ast.Name) and sev.id in SEVERITY_NAMES:
            sevs = {SEVERITY_NAMES[sev.id]}
        elif isinstance(sev, ast.IfExp) and all(isinstance(b, ast.Name) and b.id in SEVERITY_NAMES for b in (sev.body, sev.orelse)):
            sevs = {SEVERITY_NAMES[sev.body.id], SEVERITY_NAMES[sev.orelse.id]}
        else:
            sevs = None  # a variable: the scenarios below see what it takes
        yield code_value, sevs, f"{module.__name__}:{node.lineno}"


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__.rsplit(".", 1)[-1] for m in MODULES])
def test_every_code_is_declared_with_its_kind_and_used_with_its_severity(module):
    declared = _declared(module)
    for code in declared.values():
        assert code.kind in KINDS and code.meaning and code.fix, code.code
    # kind= written on every Code(...) of the module, so nobody reads a problem code out of a default.
    for part, node in ((m, node) for m in _parts(module) for node in ast.walk(ast.parse(inspect.getsource(m)))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Code":
            assert any(k.arg == "kind" for k in node.keywords), f"{part.__name__}:{node.lineno}: Code without kind="
    used = set()
    for code, sevs, line in _finding_calls(module):
        assert code in declared, f"{line}: {code} is not in its check's codes"
        used.add(code)
        if sevs is not None:
            allowed = KIND_SEVERITIES[declared[code].kind]
            assert sevs <= set(allowed), f"{line}: {code} ({declared[code].kind}) emitted as {sevs}"
    # A code declared again by a check that re-judges another's facts (logs.diagnose judges pasted
    # tool output with the node checks' judges) is emitted by that other module, the log scanner,
    # or a knowledge-base row.
    used |= _emitted_anywhere()
    assert set(declared) <= used, f"declared but never emitted: {set(declared) - used}"


def _emitted_anywhere() -> set:
    import importlib
    import pkgutil

    from rdmadoctor.logs import scan

    out = {p.code for p in kb.patterns()}
    for m in MODULES:
        out |= {code for code, _, _ in _finding_calls(m)}
    # The scanner (a package: its router and its parts) names a row's code through the row (p.code),
    # and a few codes by their object.
    parts = [scan] + [importlib.import_module(f"{scan.__name__}.{m.name}") for m in pkgutil.iter_modules(scan.__path__)]
    for node in (node for part in parts for node in ast.walk(ast.parse(inspect.getsource(part)))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding":
            arg = node.args[0]
            if isinstance(arg, ast.Attribute) and arg.attr == "code" and isinstance(arg.value, ast.Name) and arg.value.id.isupper():
                out.add(arg.value.id)
    # NCCL's RAS report, judged whole (rdmadoctor.logs.ras), and the hang `run` sees (supervise.hang).
    import rdmadoctor.logs.ras
    import rdmadoctor.supervise.hang

    for mod in (rdmadoctor.logs.ras, rdmadoctor.supervise.hang):
        for node in ast.walk(ast.parse(inspect.getsource(mod))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding":
                arg = node.args[0]
                if isinstance(arg, ast.Attribute) and arg.attr == "code" and isinstance(arg.value, ast.Name):
                    out.add(arg.value.id)
    # ... and the scanner's own rows: an error line no row knows (LOG_ERROR_UNKNOWN), run's kill.
    out |= {v.code for v in vars(scan).values() if isinstance(v, kb.Pattern)}
    return out


def test_every_pattern_code_is_declared_by_a_loaded_check_with_its_severity():
    declared = {c.code: c for check in registry.load_checks(autoload=False)[0] for c in check.codes}
    for p in kb.patterns():
        assert p.code in declared, f"{p.id}: {p.code} is declared by no loaded check (add it to the kb module's CODES)"
        assert p.severity in KIND_SEVERITIES[declared[p.code].kind], f"{p.id}: {p.severity} for a {declared[p.code].kind} code"


EVERY_CODE = {c.code: c for m in MODULES for c in _declared(m).values()}


@pytest.mark.parametrize("name", list(fixturegen.SCENARIOS))
def test_scenario_findings_have_the_severity_their_code_allows(name):
    code, rep = check_json(["--bundle", str(FIXTURES / name)])
    for c in rep["checks"]:
        for f in c["findings"]:
            if f["code"] in EVERY_CODE:
                assert f["severity"] in KIND_SEVERITIES[EVERY_CODE[f["code"]].kind], f


# ---- ib.devices, ib.ports ----------------------------------------------------------------------


def _dev(name: str, *ports: Port) -> RdmaDevice:
    return RdmaDevice(name, driver="mlx5_core", pci=None, ports=ports)


ACTIVE = dict(state="ACTIVE", phys_state="LinkUp", rate_gbps=400.0, link_layer="InfiniBand")


def test_no_inventory_is_unknown_not_no_devices():
    # A bundle without /sys and without any tool output: the evidence is missing, the node may be fine.
    fs = judge_devices(RdmaInventory((), "none", sysfs=False), {})
    assert [(f.code, f.severity) for f in fs] == [("RDMA_INVENTORY_UNKNOWN", UNKNOWN)]
    assert "collect" in fs[0].remedy


def test_no_rdma_device_keeps_its_pod_change():
    (f,) = judge_devices(RdmaInventory((), "sysfs", sysfs=True), {})
    assert (f.code, f.severity) == ("IB_NO_DEVICES", ERROR)
    assert f.pod is not None and f.pod.rdma_device and not f.pod.whole


def test_fewer_hcas_than_expected_is_its_own_code():
    inv = RdmaInventory((_dev("mlx5_0", Port(1, **ACTIVE)), _dev("mlx5_1", Port(1, **ACTIVE))), "sysfs", sysfs=True)
    (f,) = judge_devices(inv, {"expected_hcas": 12})
    assert (f.code, f.severity) == ("IB_DEVICE_COUNT_LOW", ERROR) and "expects 12" in f.message
    assert f.pod is None  # a node repair: no rdma/hca request in the pod spec
    assert judge_devices(inv, {"expected_hcas": 2}) == []


def test_unreadable_port_state_is_unknown_not_port_down():
    inv = RdmaInventory((_dev("mlx5_0", Port(1)), _dev("mlx5_1")), "ibstat", sysfs=False)
    fs = judge_ports(inv, {})
    assert {(f.code, f.severity, f.subject) for f in fs} == {
        ("IB_PORT_STATE_UNKNOWN", UNKNOWN, "mlx5_0/1"),
        ("IB_PORT_STATE_UNKNOWN", UNKNOWN, "mlx5_1"),
    }


def test_too_few_active_ports_follows_from_the_port_down():
    down = Port(2, state="DOWN", phys_state="Polling", link_layer="InfiniBand")
    inv = RdmaInventory((_dev("mlx5_0", Port(1, **ACTIVE), down),), "sysfs", sysfs=True)
    fs = judge_ports(inv, {"expected_active_ports": 2})
    got = {(f.code, f.severity, f.subject, f.cause) for f in fs}
    assert got == {
        ("IB_PORT_DOWN", ERROR, "mlx5_0/2", None),
        ("IB_ACTIVE_PORTS_LOW", ERROR, "host", "IB_PORT_DOWN"),
    }
    # Every port up, but an HCA missing: the shortfall follows from the missing HCA.
    inv = RdmaInventory((_dev("mlx5_0", Port(1, **ACTIVE)),), "sysfs", sysfs=True)
    (f,) = judge_ports(inv, {"expected_active_ports": 2, "expected_hcas": 2})
    assert (f.code, f.cause) == ("IB_ACTIVE_PORTS_LOW", "IB_DEVICE_COUNT_LOW")


# ---- kernel.modules ----------------------------------------------------------------------------


def kfacts(**over) -> KernelFacts:
    base = dict(
        modules=frozenset({"nvidia"}),
        builtin=frozenset(),
        source="/proc/modules",
        gpus_present=True,
        gpu_count=8,
        osrelease="5.15.0-91-generic",
        nvidia_open=False,
        rdma_devices=True,
    )
    base.update(over)
    return KernelFacts(**base)


REQUIRED = {"required_modules": ["ib_core", "ib_uverbs", "rdma_ucm"]}


def test_unreadable_modules_are_unknown_not_mod_missing():
    fs = judge_kernel(kfacts(modules=None), REQUIRED)
    assert [(f.code, f.severity) for f in fs] == [("MODULES_UNKNOWN", UNKNOWN)]


def test_modules_missing_on_a_host_without_rdma_follow_from_it():
    fs = judge_kernel(kfacts(rdma_devices=False), REQUIRED)
    got = {(f.code, f.severity, f.subject, f.cause) for f in fs}
    # Still errors, still their own fixes: folded under IB_NO_DEVICES, not hidden.
    assert got == {
        ("MOD_MISSING", ERROR, "ib_core", "IB_NO_DEVICES"),
        ("MOD_MISSING", ERROR, "ib_uverbs", "IB_NO_DEVICES"),
        ("MOD_MISSING", ERROR, "rdma_ucm", "IB_NO_DEVICES"),
        ("GDR_PEERMEM_MISSING", WARNING, "GPUDirect RDMA", "IB_NO_DEVICES"),
    }
    # With RDMA devices present the same findings are root causes.
    assert {f.cause for f in judge_kernel(kfacts(), REQUIRED)} == {None}
    # Unknown inventory: nothing to follow from.
    assert {f.cause for f in judge_kernel(kfacts(rdma_devices=None), REQUIRED)} == {None}


def test_an_hca_waiting_for_its_ib_driver_is_a_root_cause():
    # mlx5_core bound, mlx5_ib not loaded: that is why there is no RDMA device, not a consequence.
    f = kfacts(rdma_devices=False, hca_needs=(("mlx5_ib", "the IB driver of 0000:17:00.0 (bound to mlx5_core)"),))
    by = {x.subject: x for x in judge_kernel(f, REQUIRED)}
    assert by["mlx5_ib"].cause is None and by["mlx5_ib"].severity == ERROR
    assert by["ib_uverbs"].cause == "IB_NO_DEVICES"


def test_too_few_active_ports_behind_a_down_netdev_follow_from_it():
    # A RoCE port down because its netdev is down: both the port and the shortfall fold under it.
    down = Port(1, state="DOWN", phys_state="Disabled", link_layer="Ethernet", netdev="eth2", netdev_up=False)
    inv = RdmaInventory((_dev("mlx5_0", down),), "sysfs", sysfs=True)
    got = {(f.code, f.cause) for f in judge_ports(inv, {"expected_active_ports": 1})}
    assert got == {("IB_PORT_DOWN", "ROCE_NETDEV_DOWN"), ("IB_ACTIVE_PORTS_LOW", "ROCE_NETDEV_DOWN")}


def test_verbs_userspace_declares_what_the_kbs_verbs_rows_introduce():
    # checks/verbs.py names the kb's verbs codes itself (importing the kb would put it on the check path).
    from rdmadoctor.checks import verbs
    from rdmadoctor.logs.kb import verbs as kb_verbs

    declared = {c.code for check in verbs.CHECKS for c in check.codes}
    assert {c.code for c in kb_verbs.CODES} <= declared
