"""rdmadoctor.core.report: the typed read model of `rdmadoctor.report/v1`.

Every shipped example reads back whole (no notes, nothing left over); an older report (before
conditions, kinds, the fingerprint, host notes...) reads with defaults; a damaged one (a field of
the wrong type) reads that field as missing and says so, and nothing that reads reports through it
(text, NPD, conditions, the gate, the gang's facts) raises. Arbitrary JSON never raises.
"""

from __future__ import annotations

import copy
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdmadoctor.core.report import Check, Finding, Host, Pool, Report, Summary, read
from rdmadoctor.examples import EXAMPLES
from rdmadoctor.gang.facts import gang_facts, rails
from rdmadoctor.output import conditions as C
from rdmadoctor.output import text as T
from rdmadoctor.output.npd import npd_line
from rdmadoctor.preflight.gate import Gate
from rdmadoctor.runner import Options, diagnose

_CACHE: dict[str, dict] = {}


def _example(name: str) -> dict:
    """The example's report as `check --json` prints it (a JSON round trip: no tuples, no objects)."""
    if name not in _CACHE:
        _CACHE[name] = json.loads(json.dumps(diagnose(Options(example=name)).report))
    return copy.deepcopy(_CACHE[name])


def _consumers(doc: dict) -> None:
    """Everything that reads a report through the model: none of them may raise."""
    out = io.StringIO()
    T.write_lines(T.report_lines(doc, verbose=True), stream=out)
    T.summary_line(doc)
    npd_line(doc)
    C.compute(doc)
    Gate(doc, {}, strict=True)
    gang_facts(doc)
    rails(doc)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_reads_back_whole(name):
    doc = _example(name)
    rep = Report.from_json(doc)
    assert rep.notes == () and rep.extra == {}
    assert rep.schema == "rdmadoctor.report/v1" and rep.status == doc["status"] and rep.exit_code == doc["exit_code"]
    assert rep.host == Host(label=doc["host"]["label"], kind=doc["host"]["kind"], hostname=doc["host"]["hostname"],
                            notes=tuple(doc["host"]["notes"]))
    s = doc["summary"]
    assert rep.summary == Summary(checks=s["checks"], passed=s["pass"], warn=s["warn"], fail=s["fail"], unknown=s["unknown"],
                                  skip=s["skip"], errors=s["errors"], warnings=s["warnings"])
    assert [c.id for c in rep.checks] == [c["id"] for c in doc["checks"]]
    for c, raw in zip(rep.checks, doc["checks"]):
        assert c.raw is raw and c.status == raw["status"] and c.declares_condition and c.condition == raw["condition"]
        for f, fraw in zip(c.findings, raw["findings"], strict=True):
            assert f.raw is fraw
            assert (f.code, f.severity, f.subject, f.message, f.remedy, f.kind) == (
                fraw["code"], fraw["severity"], fraw["subject"], fraw["message"], fraw["remedy"], fraw["kind"])
            assert f.cause == fraw.get("cause") and f.condition == fraw.get("condition") and f.data == fraw.get("data", {})
    assert rep.labels == doc["labels"] and rep.inventory is doc["inventory"] and rep.fingerprint is doc["fingerprint"]
    assert rep.nccl == doc["nccl"] and list(rep.plugin_errors) == doc["plugin_errors"]
    assert rep.raw is doc and read(rep) is rep
    assert len(rep.findings()) == sum(len(c["findings"]) for c in doc["checks"])


def test_a_report_read_or_a_dict_renders_the_same():
    doc = _example("broken-pod")
    rep = Report.from_json(doc)
    assert T.report_lines(rep, True) == T.report_lines(doc, True)
    assert npd_line(rep) == npd_line(doc) and C.compute(rep) == C.compute(doc) and gang_facts(rep) == gang_facts(doc)
    g, h = Gate(rep, {}, False), Gate(doc, {}, False)
    assert g.report is doc and (g.problems, g.unknown, g.verdict) == (h.problems, h.unknown, h.verdict)
    # folding of a dict hands back the report's own finding dicts; of a Report, its records
    by_dict = T.folding(doc)
    by_model = T.folding(rep)
    assert by_dict.keys() == by_model.keys()
    assert all([f.raw for f in by_model[k]] == by_dict[k] for k in by_dict)
    assert all(isinstance(f, dict) for fs in by_dict.values() for f in fs)


def test_an_older_report_reads_with_defaults():
    """Before checks carried `condition` and findings `kind`, before the fingerprint, the NCCL
    block, host notes, `scope`, `time` and `plugin_errors`: read with defaults, nothing noted."""
    doc = _example("broken-pod")
    for key in ("fingerprint", "nccl", "scope", "time", "plugin_errors"):
        doc.pop(key)
    doc["host"].pop("notes")
    for c in doc["checks"]:
        c.pop("condition")
        for f in c["findings"]:
            f.pop("kind")
            f.pop("condition", None)
    rep = Report.from_json(doc)
    assert rep.notes == ()
    assert rep.fingerprint is None and rep.nccl is None and rep.time is None and rep.plugin_errors == () and rep.host.notes == ()
    assert not any(c.declares_condition for c in rep.checks) and all(f.kind is None for f in rep.findings())
    # the conditions then come from the installed checks' declarations, as before
    assert C.compute(doc) == C.compute(_example("broken-pod"))
    _consumers(doc)


def test_the_pool_is_typed_and_the_headline_names_it():
    """The pool a report was judged for (`[pools.NAME]`, by --pool or by its match) is a typed
    field, not a raw section: the headline reads its name; a report without one has none."""
    doc = _example("hgx-h100-ib")
    assert Report.from_json(doc).pool is None and ", pool " not in T.summary_line(doc)
    doc["pool"] = {"name": "h100", "chosen_by": "match", "why": "gpu_model 10de:2330"}
    rep = Report.from_json(doc)
    assert rep.pool == Pool(name="h100", chosen_by="match", why="gpu_model 10de:2330") and "pool" not in rep.extra
    assert ", pool h100)" in T.summary_line(rep) and T.summary_line(rep) == T.summary_line(doc)
    doc["pool"] = {"name": None, "chosen_by": "match", "why": "no pool's match fits"}  # none fit: no pool named
    assert Report.from_json(doc).pool.name is None and ", pool " not in T.summary_line(doc)


def test_unknown_sections_are_kept_raw():
    doc = _example("hgx-h100-ib")
    doc["gang"] = {"verdict": "go"}
    doc["quarantine"] = {"mode": "dry-run", "action": "keep"}
    doc["hangs"] = {"ranks": []}
    doc["from_the_future"] = {"x": [1, 2]}
    rep = Report.from_json(doc)
    assert rep.gang == {"verdict": "go"} and rep.quarantine["action"] == "keep" and rep.hangs == {"ranks": []}
    assert rep.extra == {"from_the_future": {"x": [1, 2]}} and rep.notes == ()


DAMAGE = [
    # (where, value, the note)
    (("status",), 3, "status is a number, expected a string"),
    (("exit_code",), "1", "exit_code is a string, expected a whole number"),
    (("host",), [], "host is a list, expected an object"),
    (("host", "hostname"), {"a": 1}, "host.hostname is an object, expected a string"),
    (("host", "notes"), "cut", "host.notes is a string, expected a list"),
    (("summary",), None, None),
    (("summary", "errors"), "4", "summary.errors is a string, expected a whole number"),
    (("summary", "pass"), True, "summary.pass is a boolean, expected a whole number"),
    (("checks",), {"id": "x"}, "checks is an object, expected a list"),
    (("checks", 0), "ib.ports", "checks[0] is a string, expected an object"),
    (("checks", 1, "findings"), None, None),
    (("checks", 1, "findings", 0), 7, "checks[1].findings[0] is a number, expected an object"),
    (("checks", 1, "findings", 0, "severity"), ["error"], "checks[1].findings[0].severity is a list, expected a string"),
    (("checks", 1, "findings", 0, "data"), [1], "checks[1].findings[0].data is a list, expected an object"),
    (("checks", 1, "findings", 0, "code"), None, None),
    (("labels",), ["a"], "labels is a list, expected an object"),
    (("inventory",), "none", "inventory is a string, expected an object"),
    (("fingerprint",), 1.5, "fingerprint is a number, expected an object"),
    (("nccl",), [], "nccl is a list, expected an object"),
    (("plugin_errors",), [None], "plugin_errors[0] is null, expected a string"),
    (("quarantine",), "held", "quarantine is a string, expected an object"),
    (("pool",), "h100", "pool is a string, expected an object"),
    (("pool", "name"), 7, "pool.name is a number, expected a string"),
]


def _broken_pod_with_findings() -> dict:
    doc = _example("broken-pod")
    doc["pool"] = {"name": "h100", "chosen_by": "match", "why": "gpu_model 10de:2330"}
    # checks[1] must have a finding for the paths above
    with_findings = [c for c in doc["checks"] if c["findings"]]
    doc["checks"] = [doc["checks"][0], with_findings[0], *doc["checks"][1:]]
    return doc


@pytest.mark.parametrize("path, value, note", DAMAGE, ids=[".".join(map(str, d[0])) for d in DAMAGE])
def test_a_damaged_field_is_read_as_missing_and_noted(path, value, note):
    doc = _broken_pod_with_findings()
    where = doc
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    rep = Report.from_json(doc)
    if note is None:  # null: the field is missing, which an older report may be; nothing to say
        assert rep.notes == ()
    else:
        assert note in rep.notes
    _consumers(doc)


@pytest.mark.parametrize("doc", [None, [], "report", 3, [{"schema": "rdmadoctor.report/v1"}]])
def test_not_an_object_reads_as_an_empty_report(doc):
    rep = Report.from_json(doc)
    assert rep.checks == () and rep.status == "unknown" and rep.exit_code == 2 and len(rep.notes) == 1
    assert rep.notes[0].startswith("the report is ")


def test_records_are_frozen_and_compare_by_value():
    f = Finding(code="IB_PORT_DOWN", severity="error", subject="mlx5_0/1")
    assert f == Finding(code="IB_PORT_DOWN", severity="error", subject="mlx5_0/1", raw={"other": 1})
    with pytest.raises(AttributeError):
        f.code = "X"  # type: ignore[misc]
    assert Check(id="ib.ports", findings=(f,)).findings[0] is f


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
_KEYS = ("schema", "status", "exit_code", "host", "profile", "summary", "checks", "labels", "nccl", "fingerprint",
         "inventory", "plugin_errors", "quarantine")
_FINDING_KEYS = ("code", "severity", "subject", "message", "remedy", "cause", "kind", "condition", "data", "pod")
_finding = st.dictionaries(st.sampled_from(_FINDING_KEYS), _json | st.sampled_from(["error", "warning", "info", "unknown", "IB_X"]))
_check = st.fixed_dictionaries(
    {}, optional={"id": _json | st.just("ib.ports"), "title": _json, "status": _json | st.sampled_from(["unknown", "fail", "skip"]),
                  "reason": _json, "condition": _json | st.sampled_from(["link", "config"]),
                  "findings": st.lists(_finding | _json, max_size=4) | _json},
)
_report = st.fixed_dictionaries(
    {}, optional={"schema": st.just("rdmadoctor.report/v1"), "status": _json | st.sampled_from(["pass", "fail", "unknown"]),
                  "exit_code": _json | st.sampled_from([0, 1, 2]), "host": _json | st.dictionaries(st.sampled_from(["label", "kind", "hostname", "notes"]), _json),
                  "summary": _json | st.dictionaries(st.sampled_from(["checks", "pass", "errors", "warnings"]), _json),
                  "checks": st.lists(_check | _json, max_size=4) | _json, "labels": _json, "plugin_errors": _json, "profile": _json,
                  "quarantine": _json},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_json | st.dictionaries(st.sampled_from(_KEYS), _json))
def test_arbitrary_json_never_raises(doc):
    rep = Report.from_json(doc)
    assert isinstance(rep.notes, tuple) and all(isinstance(n, str) for n in rep.notes)
    assert all(isinstance(getattr(f, k), str) for f in rep.findings() for k in ("code", "severity", "subject", "message", "remedy"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_report)
def test_a_damaged_report_renders_without_a_traceback(doc):
    """What the model types (checks, findings, host, summary, labels, status) cannot break the
    renderers; inventory, nccl and the fingerprint are left out here: their keys are the checks' own."""
    out = io.StringIO()
    T.write_lines(T.report_lines(doc, verbose=True), stream=out)
    npd_line(doc)
    C.compute(doc)
    Gate(doc, {}, strict=True)
