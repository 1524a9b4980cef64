"""The report's JSON Schema ships in the package, `rdmadoctor schema` prints it, and every
report rdmadoctor makes (examples, fixtures, preflight's embedded one) validates against it."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from conftest import check_json, run_cli

from rdmadoctor.examples import EXAMPLES

FIXTURES = sorted(p for p in (Path(__file__).parents[1] / "fixtures").iterdir() if p.is_dir())


def _schema() -> dict:
    return json.loads(files("rdmadoctor.output").joinpath("schema.json").read_text(encoding="utf-8"))


def _validator():
    schema = _schema()
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _errors(report: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator().iter_errors(report)]


def test_the_schema_is_a_valid_draft_2020_12_schema():
    schema = _schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"] == {"const": "rdmadoctor.report/v1"}


def test_rdmadoctor_schema_prints_it():
    code, out, err = run_cli(["schema"])
    assert code == 0 and err == ""
    assert json.loads(out) == _schema()


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("scope", ["all", "node"])
def test_every_example_report_validates(name, scope):
    _, rep = check_json(["--example", name, "--scope", scope])
    assert _errors(rep) == []


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_report_validates(fixture):
    _, rep = check_json(["--bundle", str(fixture)])
    assert _errors(rep) == []


def test_an_empty_root_and_an_empty_bundle_validate(tmp_path):
    (tmp_path / "root/sys").mkdir(parents=True)
    (tmp_path / "bundle").mkdir()
    for args in (["--root", str(tmp_path / "root")], ["--bundle", str(tmp_path / "bundle"), "--only", "ib"]):
        _, rep = check_json(args)
        assert _errors(rep) == [], args


@pytest.mark.parametrize("name", ["broken-pod", "hgx-h100-ib"])
def test_the_report_preflight_embeds_validates(name):
    code, out, err = run_cli(["preflight", "--example", name, "--json"])
    doc = json.loads(out)
    assert code in (0, 1) and "report" in doc
    assert _errors(doc["report"]) == []


def _broken_pod() -> dict:
    return check_json(["--example", "broken-pod"])[1]


def test_the_schema_takes_the_keys_being_added_and_nothing_else():
    rep = _broken_pod()
    # Keys announced for the report (time, checks[].condition, findings[].kind/condition/pod/cause).
    rep["time"] = "2026-11-23T20:34:28Z"
    check = next(c for c in rep["checks"] if c["findings"])
    check["condition"] = "config"
    f = check["findings"][0]
    f.update(kind="problem", condition=None, cause="IB_NO_DEVICES", pod={"whole": True, "capabilities_add": ["IPC_LOCK"]})
    assert _errors(rep) == []
    datetime.fromisoformat(rep["time"].replace("Z", "+00:00"))
    # Anything else at the report, check or finding level is a change of the contract.
    for where, mutate in (
        ("report", lambda r: r.update(timestamp=1)),
        ("check", lambda r: r["checks"][0].update(severity="error")),
        ("finding", lambda r: next(c for c in r["checks"] if c["findings"])["findings"][0].update(fix="x")),
        ("status", lambda r: r.update(status="ok")),
        ("exit code", lambda r: r.update(exit_code=3)),
        ("kind", lambda r: next(c for c in r["checks"] if c["findings"])["findings"][0].update(kind="fatal")),
        ("pod", lambda r: next(c for c in r["checks"] if c["findings"])["findings"][0].update(pod={"whole": True, "hostNetwork": True})),
        ("missing summary", lambda r: r.pop("summary")),
    ):
        bad = copy.deepcopy(rep)
        mutate(bad)
        assert _errors(bad), where


def test_the_schema_names_every_key_the_report_has():
    """report.py's keys and the schema's cannot drift: a new key needs a schema change too."""
    rep = _broken_pod()
    props = _schema()["properties"]
    assert set(rep) <= set(props)
    assert set(_schema()["required"]) == set(rep)
