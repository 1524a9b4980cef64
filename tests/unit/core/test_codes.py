"""The code registry (rdmadoctor.core.codes): lookup by string, every code, a plugin's own codes.

Each test that registers uses a registry of its own (the process-wide one stays as the package
defines it), loaded from the same built-in families.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rdmadoctor.core import codes
from rdmadoctor.core.codes import CodeConflict, Registry
from rdmadoctor.core.codes.nccl import NCCL_SOCKET_FALLBACK
from rdmadoctor.core.codes.pytorch import JOB_KILLED
from rdmadoctor.core.model import Code

SITE = Code("SITE_OLD_HCA", "A ConnectX-3 HCA", "The site trains on ConnectX-6 or newer.", "Replace it.", kind="problem")


def test_a_code_is_found_by_its_string_and_an_unknown_string_is_none():
    assert codes.get("NCCL_SOCKET_FALLBACK") is NCCL_SOCKET_FALLBACK
    assert codes.get("JOB_KILLED") is JOB_KILLED
    assert codes.get("NO_SUCH_CODE") is None
    assert codes.get("") is None
    names = [c.code for c in codes.all_codes()]
    assert len(names) == len(set(names)) and "IB_PORT_DOWN" in names and "GANG_PROTOCOL" in names


def test_roles_are_attributes_of_the_codes():
    assert JOB_KILLED.one_per_subject and JOB_KILLED.kill and JOB_KILLED.explained_by_errors_only
    assert codes.get("NCCL_TIMEOUT").slow_symptom  # type: ignore[union-attr]
    assert codes.get("IB_LINK_FLAP").from_counters  # type: ignore[union-attr]
    # Off unless the definition turns it on.
    plain = Code("X_PLAIN", "t", "m", "f")
    assert not (plain.one_per_subject or plain.kill or plain.explained_by_errors_only or plain.slow_symptom or plain.from_counters)
    assert not NCCL_SOCKET_FALLBACK.slow_symptom


def test_a_plugin_registers_its_own_codes_once():
    reg = Registry()
    assert reg.get("SITE_OLD_HCA") is None
    assert reg.register(SITE, "site_checks") is SITE
    assert reg.get("SITE_OLD_HCA") is SITE
    # Loading its module again (an equal Code) changes nothing.
    reg.register(Code("SITE_OLD_HCA", "A ConnectX-3 HCA", "The site trains on ConnectX-6 or newer.", "Replace it.", kind="problem"))
    assert reg.all_codes()[-1] is SITE and reg.get("IB_PORT_DOWN") is not None


def test_a_second_different_code_of_one_string_is_refused_with_what_to_do():
    reg = Registry()
    other = Code("IB_PORT_DOWN", "Our port rule", "m", "f", kind="problem")
    with pytest.raises(CodeConflict) as e:
        reg.register(other, "site_checks")
    msg = str(e.value)
    assert "IB_PORT_DOWN from site_checks is already defined by rdmadoctor.core.codes.ib" in msg
    assert "SITE_IB_PORT_DOWN" in msg and "reuse the existing Code object" in msg
    assert reg.get("IB_PORT_DOWN") is codes.get("IB_PORT_DOWN")  # the built-in one stays
    # The same object a plugin reuses is no conflict.
    reg.register(codes.get("IB_PORT_DOWN"), "site_checks")  # type: ignore[arg-type]
    with pytest.raises(CodeConflict):
        reg.register(Code("SITE_OLD_HCA", "t", "m", "f"), "a")
        reg.register(Code("SITE_OLD_HCA", "t2", "m", "f"), "b")
    with pytest.raises(TypeError):
        reg.register("SITE_OLD_HCA", "a")  # type: ignore[arg-type]


def test_the_module_level_register_names_its_caller():
    reg_before = codes.REGISTRY
    try:
        codes.REGISTRY = Registry()
        codes.register(SITE)
        with pytest.raises(CodeConflict) as e:
            codes.register(Code("SITE_OLD_HCA", "another", "m", "f"))
        assert f"from {__name__} is already defined by {__name__}" in str(e.value)
    finally:
        codes.REGISTRY = reg_before


def test_a_registry_without_families_holds_only_what_was_registered():
    reg = Registry(package=None)
    assert reg.all_codes() == () and reg.get("IB_PORT_DOWN") is None
    reg.register(SITE, "x")
    assert reg.all_codes() == (SITE,)


def test_the_families_load_on_the_first_lookup_not_at_import():
    code = (
        "import sys\n"
        "import rdmadoctor.core.codes as c\n"
        "fams = lambda: sorted(m for m in sys.modules if m.startswith('rdmadoctor.core.codes.'))\n"
        "print(fams())\n"
        "c.get('GANG_PROTOCOL')\n"
        "print(len(fams()) == len(c._families()) > 5, 'rdmadoctor.core.codes.gang' in fams())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["[]", "True True"]
