"""A check plugin that did not load is a check that did not run, never a pass (issue 15, item 1).

The plugins here are real: a module and its ``*.dist-info/entry_points.txt`` on sys.path (or
PYTHONPATH), as pip leaves an installed distribution; rdmadoctor finds them the way it finds its
own built-in checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, run_cli

from rdmadoctor.core import labels as L
from rdmadoctor.engine import registry
from rdmadoctor.output.metrics import snapshot_of
from rdmadoctor.output.npd import npd_line
from rdmadoctor.runner import Options, diagnose

HGX = ["--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr"]

# A plugin broken by an upgrade: it imports a name that is not there.
BROKEN = "from rdmadoctor.core.model import NoSuchName\nCHECKS = []\n"
# A plugin written before the redesign, against the documented path of the time.
OLD_API = '''
from rdmadoctor.model import ERROR, Check, Code, Finding

SITE_OLD_OK = Code("SITE_OLD_OK", "Site rule", "The site's own rule.", "Nothing to do.", kind="info")
CHECKS = [Check(id="siteold.rule", title="Site rule (old API)", probe=lambda ctx: 1,
                judge=lambda facts, expect: [Finding("SITE_OLD_OK", "info", "site", "seen fine, expected fine")],
                codes=(SITE_OLD_OK,))]
assert ERROR == "error"
'''


def make_dist(site: Path, dist: str, module: str, source: str, ep_name: str = "site") -> Path:
    """An installed distribution ``dist`` whose entry point ``ep_name`` loads ``module:CHECKS``."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(source)
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[rdmadoctor.checks]\n{ep_name} = {module}:CHECKS\n")
    return site


@pytest.fixture
def broken_site(tmp_path, monkeypatch):
    """A broken plugin of the distribution ``sitegate`` (entry point ``gate``), installed and autoloaded."""
    module = f"sitegate_{tmp_path.name.replace('-', '_')}"  # fresh per test: nothing cached in sys.modules
    site = make_dist(tmp_path / "site", "sitegate", module, BROKEN, ep_name="gate")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv(registry.AUTOLOAD_ENV, "0")
    return site


def _failed(rep: dict) -> dict:
    (check,) = [c for c in rep["checks"] if c["id"] == registry.PLUGINS_ID]
    (finding,) = check["findings"]
    return finding


def test_a_plugin_that_fails_to_load_makes_the_report_unknown_and_not_ready(broken_site):
    code, out, err = run_cli(["check", *HGX, "--json"])
    rep = json.loads(out)
    assert code == 2 and rep["status"] == "unknown" and rep["exit_code"] == 2
    f = _failed(rep)
    assert f["code"] == "PLUGIN_LOAD_FAILED" and f["severity"] == "unknown" and f["kind"] == "unknown"
    assert f["data"]["plugin"] == "gate" and f["data"]["dist"] == "sitegate" and f["data"]["optional"] is False
    assert "NoSuchName" in f["data"]["error"] and "NoSuchName" in f["message"]
    assert "gate" in f["message"] and "sitegate" in f["message"] and 'optional_plugins = ["sitegate"]' in f["remedy"]
    assert rep["labels"][L.READY] == "false"
    assert any("sitegate" in e for e in rep["plugin_errors"]) and err == ""


def test_without_autoload_the_same_node_is_ready(broken_site, monkeypatch):  # the plugin alone decided it
    monkeypatch.setenv(registry.AUTOLOAD_ENV, "1")
    rep = diagnose(Options(example="hgx-h100-ib", profile="hgx-8gpu-ndr")).report
    assert rep["status"] == "pass" and rep["labels"][L.READY] == "true"
    assert registry.PLUGINS_ID not in {c["id"] for c in rep["checks"]}


def test_the_report_validates_against_the_schema_and_the_schema_names_the_code(broken_site):
    rep = diagnose(Options(example="hgx-h100-ib", profile="hgx-8gpu-ndr")).report
    schema = json.loads((ROOT / "rdmadoctor" / "output" / "schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(rep)
    assert "PLUGIN_LOAD_FAILED" in json.dumps(schema)
    bad = json.loads(json.dumps(rep))
    del _failed(bad)["data"]["dist"]  # the schema holds the finding to naming the distribution
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)


@pytest.mark.parametrize("selection", [["--only", "ib"], ["--skip", "ib,limits"]])
def test_no_selection_hides_it(broken_site, selection):
    code, out, _ = run_cli(["check", *HGX, "--json", *selection])
    assert code == 2 and _failed(json.loads(out))["code"] == "PLUGIN_LOAD_FAILED"


def test_preflight_the_npd_line_and_the_metrics_say_it(broken_site):
    code, out, err = run_cli(["preflight", *HGX])
    assert code == 2 and "UNKNOWN" in out and "PLUGIN_LOAD_FAILED sitegate:gate" in out, out + err
    code, out, _ = run_cli(["preflight", *HGX, "--only", "ib", "--json"])
    assert code == 2 and json.loads(out)["verdict"] == "unknown"
    code, out, _ = run_cli(["check", *HGX, "--format", "npd"])
    assert code == 2 and out.strip() == "UNKNOWN PLUGIN_LOAD_FAILED sitegate:gate"
    diag = diagnose(Options(example="hgx-h100-ib", profile="hgx-8gpu-ndr", scope="node"))
    assert npd_line(diag.report).startswith("UNKNOWN PLUGIN_LOAD_FAILED")
    snap = snapshot_of(diag.results, 0.0, diag.report)
    assert snap.findings[("PLUGIN_LOAD_FAILED", "unknown")] == 1 and snap.check_ok[registry.PLUGINS_ID] == 0.0


def test_list_checks_and_explain_show_the_code_even_when_every_plugin_loaded():
    code, out, _ = run_cli(["list-checks", "--json"])
    rows = {r["id"]: r for r in json.loads(out)["checks"]}
    codes = {k["code"]: k["kind"] for k in rows[registry.PLUGINS_ID]["codes"]}
    assert codes == {"PLUGIN_LOAD_FAILED": "unknown", "PLUGIN_OPTIONAL_NOT_LOADED": "problem"}
    code, out, _ = run_cli(["explain", "PLUGIN_LOAD_FAILED"])
    assert code == 0 and "could not decide" in out and "optional_plugins" in out
    # ...but a report where every plugin loaded has no plugins.load line.
    rep = diagnose(Options(example="hgx-h100-ib")).report
    assert registry.PLUGINS_ID not in {c["id"] for c in rep["checks"]}


@pytest.mark.parametrize("name", ["sitegate", "gate"])
def test_the_config_can_make_a_plugin_optional(broken_site, tmp_path, name):
    cfg = tmp_path / "pool.toml"
    cfg.write_text(f'optional_plugins = ["{name}"]\n')
    code, out, _ = run_cli(["check", *HGX, "--config", str(cfg), "--json"])
    rep = json.loads(out)
    f = _failed(rep)
    assert f["code"] == "PLUGIN_OPTIONAL_NOT_LOADED" and f["severity"] == "warning" and f["data"]["optional"] is True
    assert code == 0 and rep["status"] == "warn" and rep["labels"][L.READY] == "true"
    code, _, _ = run_cli(["check", *HGX, "--config", str(cfg), "--strict"])
    assert code == 1


@pytest.mark.parametrize("value, why", [("true", "a list of names"), ("[1]", "not a name"), ('[""]', "an empty name")])
def test_optional_plugins_is_validated(tmp_path, value, why):
    cfg = tmp_path / "pool.toml"
    cfg.write_text(f"optional_plugins = {value}\n")
    code, out, err = run_cli(["check", *HGX, "--config", str(cfg)])
    assert code == 2 and out == "" and "optional_plugins" in err and why in err


def test_a_duplicate_check_id_is_a_plugin_that_did_not_load(tmp_path, monkeypatch):
    module = f"dupe_{tmp_path.name.replace('-', '_')}"
    source = "from rdmadoctor.core.model import Check\nCHECKS = [Check(id='ib.ports', title='dup', probe=lambda c: 1, judge=lambda f, e: [])]\n"
    monkeypatch.syspath_prepend(str(make_dist(tmp_path / "site", "dupe", module, source)))
    checks, errors = registry.load_checks(autoload=True)
    assert checks[0].id == registry.PLUGINS_ID and [c.id for c in checks].count("ib.ports") == 1
    assert any("already defined" in e for e in errors)
    monkeypatch.setenv(registry.AUTOLOAD_ENV, "0")
    rep = diagnose(Options(example="hgx-h100-ib", profile="hgx-8gpu-ndr")).report
    f = _failed(rep)
    assert rep["status"] == "unknown" and f["data"]["dist"] == "dupe" and "'ib.ports' is already defined" in f["message"]


def test_plugins_written_against_rdmadoctor_model_still_load(tmp_path, monkeypatch):
    module = f"siteold_{tmp_path.name.replace('-', '_')}"
    monkeypatch.syspath_prepend(str(make_dist(tmp_path / "site", "siteold", module, OLD_API)))
    sys.modules.pop("rdmadoctor.model", None)  # the warning is given when the old path is imported
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checks, errors = registry.load_checks(autoload=True)
    assert errors == [] and "siteold.rule" in [c.id for c in checks] and registry.PLUGINS_ID not in [c.id for c in checks]
    (moved,) = [w for w in caught if issubclass(w.category, DeprecationWarning) and "rdmadoctor.model" in str(w.message)]
    assert "rdmadoctor.core.model" in str(moved.message)
    from rdmadoctor.core.model import Check
    from rdmadoctor.model import Check as OldCheck

    assert OldCheck is Check


def _cli(args: list[str], pythonpath: Path) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (registry.AUTOLOAD_ENV, "PYTHONPATH")}
    env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", *args], capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def test_an_installed_broken_plugin_is_never_published_ready(tmp_path):
    """The whole path, in a fresh interpreter: `label --publish stdout` and an NFD file say ready=false."""
    site = make_dist(tmp_path / "site", "sitegate", "sitegate", BROKEN, ep_name="gate")
    code, out, err = _cli(["label", "--publish", "stdout", *HGX], site)
    assert code == 2 and "rdmadoctor.io/ready=false" in out.splitlines(), out + err
    features = tmp_path / "features.d"
    features.mkdir()
    code, out, err = _cli(["label", "--publish", "nfd", "--features-dir", str(features), *HGX], site)
    assert code == 2 and "rdmadoctor.io/ready=false" in (features / "rdmadoctor").read_text(), out + err
    code, out, err = _cli(["agent", "--once", "--publish", "stdout", "--metrics-port", "0", *HGX], site)
    assert code == 2 and "rdmadoctor.io/ready=false" in out.splitlines(), out + err


def test_a_built_in_check_module_that_fails_to_import_is_plugin_load_failed(tmp_path, monkeypatch):
    """A module dropped in checks/ (or one broken by an upgrade) that does not import: its checks
    did not run either."""
    import rdmadoctor.checks as pkg

    name = f"zzbroken_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("raise ImportError('needs a module this node lacks')\n")
    monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, str(tmp_path)])
    rep = diagnose(Options(example="hgx-h100-ib", profile="hgx-8gpu-ndr")).report
    f = _failed(rep)
    assert rep["status"] == "unknown" and rep["labels"][L.READY] == "false"
    assert f["data"]["dist"] == "rdmadoctor" and f["data"]["entry_point"] == f"rdmadoctor.checks.{name}"
    assert "needs a module this node lacks" in f["data"]["error"]


# A plugin that registers its own codes (rdmadoctor.core.codes.register) when its module loads.
REGISTERING = '''
from rdmadoctor.core import codes
from rdmadoctor.core.model import Check, Code, Finding

SITE_FABRIC_OK = codes.register(Code("SITE_FABRIC_OK", "Site fabric rule", "The site's own rule.", "Nothing to do.", kind="info"))
CHECKS = [Check(id="sitefabric.rule", title="Site fabric rule", probe=lambda ctx: 1,
                judge=lambda facts, expect: [Finding(SITE_FABRIC_OK.code, "info", "site", "seen fine, expected fine")],
                codes=(SITE_FABRIC_OK,))]
'''
# ... and one that gives a built-in code's string a meaning of its own.
CLASHING = '''
from rdmadoctor.core import codes
from rdmadoctor.core.model import Check, Code

IB_PORT_DOWN = codes.register(Code("IB_PORT_DOWN", "Our own port rule", "m", "f", kind="problem"))
CHECKS = []
'''


def test_a_plugins_registered_codes_are_known_by_string_and_a_clash_does_not_load(tmp_path, monkeypatch):
    site = make_dist(tmp_path / "site", "sitefabric", f"sitefabric_{tmp_path.name.replace('-', '_')}", REGISTERING)
    make_dist(site, "siteclash", f"siteclash_{tmp_path.name.replace('-', '_')}", CLASHING, ep_name="clash")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    env.pop(registry.AUTOLOAD_ENV, None)
    code = (
        "import json, sys\n"
        "from rdmadoctor.core import codes\n"
        "from rdmadoctor.engine import registry\n"
        "checks, errors = registry.load_checks(autoload=True)\n"
        "print(json.dumps({'ids': [c.id for c in checks], 'errors': errors,\n"
        "                  'site': codes.get('SITE_FABRIC_OK').title, 'port': codes.get('IB_PORT_DOWN').title}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert "sitefabric.rule" in out["ids"] and out["site"] == "Site fabric rule"
    # The clash is refused where it was made: that plugin did not load (PLUGIN_LOAD_FAILED), the
    # built-in code keeps its meaning.
    assert out["port"] != "Our own port rule" and registry.PLUGINS_ID in out["ids"]
    (err,) = [e for e in out["errors"] if "siteclash" in e]
    assert "CodeConflict" in err and "IB_PORT_DOWN" in err and "already defined by rdmadoctor.core.codes.ib" in err
