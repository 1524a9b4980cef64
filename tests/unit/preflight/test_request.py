"""Every option of `preflight` and `run` reaches what it sets: the checks' expectations for a row
that sets one (``Option(..., sets="min_rate_gbps")``), the gate's request record for every other
row. Driven by the option table itself, so a new row is held to it with no test to edit."""

from __future__ import annotations

import pytest
from conftest import run_cli

from rdmadoctor.cli import options

GATE_COMMANDS = ("preflight", "run")


def _value(row: options.Option) -> tuple[list[str], object]:
    """A value other than the row's default: (the words on the line, the value parsed)."""
    if row.kind == "flag":
        return [row.flag], True
    text = {"str": "x1", "int": "7", "float": "2.5", "list": "x1"}[row.kind]
    parsed: object = {"str": "x1", "int": 7, "float": 2.5, "list": ["x1"]}[row.kind]
    return [row.flag, text], parsed


def _line(command: str, words: list[str]) -> list[str]:
    return [command, *words, "--", "true"] if command == "run" else [command, *words]


@pytest.mark.parametrize(("command", "row"), [(c, r) for c in GATE_COMMANDS for r in options.rows(c) if r.sets is None],
                         ids=lambda x: x if isinstance(x, str) else x.flag)
def test_every_row_reaches_the_request_record(command, row, monkeypatch):
    import rdmadoctor.preflight.run as run
    import rdmadoctor.supervise as supervise

    seen = []
    monkeypatch.setattr(run, "run_preflight", lambda req, **kw: seen.append(req) or 0)
    monkeypatch.setattr(supervise, "run_job", lambda argv, req, **kw: seen.append(req) or 0)
    words, value = _value(row)
    if row.field == "exec_":
        words = [*words, "--", "true"]
    code, out, err = run_cli(_line(command, words))
    assert code == 0 and len(seen) == 1, (command, row, err)
    req = seen[0]
    assert getattr(req, row.field) == value, (command, row)
    if row.field == "exec_":
        assert req.exec_argv == ["true"]


def _spec_example(key: str) -> object:
    from rdmadoctor.engine.expectations import specs

    example = specs()[key].example
    assert example is not None, f"{key} declares no example to try its option with"
    return example


@pytest.mark.parametrize(("command", "row"), [(c, r) for c in GATE_COMMANDS for r in options.rows(c) if r.sets is not None],
                         ids=lambda x: x if isinstance(x, str) else x.flag)
def test_every_row_that_sets_an_expectation_reaches_the_checks(command, row, monkeypatch):
    """The value of --expect-hcas (and every other row with ``sets=``) is what the checks read,
    and wins over a --set of the same key, through the whole command as a user runs it."""
    import rdmadoctor.runner as runner
    import rdmadoctor.supervise.job as job

    expects = []
    real = runner.diagnose

    def spy(opts, host=None):
        diag = real(opts, host)
        expects.append(diag.ctx.expect)
        return diag

    monkeypatch.setattr(runner, "diagnose", spy)
    monkeypatch.setattr(job, "_run_child", lambda *a, **kw: 0)  # `run`: the gate is what is tried, not CMD
    value = _spec_example(row.sets)
    code, out, err = run_cli(_line(command, ["--example", "hgx-h100-ib", "--set", f"{row.sets}=null", row.flag, str(value)]))
    assert code in (0, 1), err
    assert len(expects) == 1, err
    assert expects[0][row.sets] == value, (command, row.flag, expects[0][row.sets])


def test_the_library_keywords_set_what_the_table_says():
    """run_preflight(expect_hcas=8) is --expect-hcas 8: the library's names agree with the rows."""
    from rdmadoctor.preflight.request import KEYWORD_SETS, Request

    table = {r.field: (r.flag, r.sets) for c in GATE_COMMANDS for r in options.rows(c) if r.sets is not None}
    for name, (flag, key) in KEYWORD_SETS.items():  # a new row needs no keyword: a library call can --set it
        assert table.get(name) == (flag, key), name
    req = Request.of(example="x", expect_hcas=8, min_rate=400.0, sets=["job_uid=0"], job_uid=1000)
    assert req.set_items() == ["job_uid=0", "expected_hcas=8", "min_rate_gbps=400", "job_uid=1000"]
    assert req.example == "x" and req.root is None and req.wait is False  # a field not named: its default
    assert req.profile == "generic" and req.sets == ["job_uid=0"] and req.only == []


@pytest.mark.parametrize("call", ["run_preflight", "gate", "run_job", "Request.of", "replace"])
def test_a_misspelt_keyword_is_an_error_naming_the_closest(call):
    """``run_preflight(exampel="roce-node")`` would run the gate on this host as if no bundle had
    been named: a keyword no option sets raises TypeError, with the closest valid name."""
    from rdmadoctor.preflight import gate, run_preflight
    from rdmadoctor.preflight.request import Request
    from rdmadoctor.supervise import run_job

    for wrong, near in (("exampel", "example"), ("min_rat", "min_rate"), ("gang_tiemout", "gang_timeout")):
        calls = {"run_preflight": lambda: run_preflight(**{wrong: "x"}), "gate": lambda: gate(**{wrong: "x"}),
                 "run_job": lambda: run_job(["true"], **{wrong: "x"}), "Request.of": lambda: Request.of({wrong: "x"}),
                 "replace": lambda: Request.of(example="x").replace(**{wrong: "x"})}
        with pytest.raises(TypeError, match=f"unexpected keyword '{wrong}'.*did you mean '{near}'"):
            calls[call]()
    with pytest.raises(AttributeError, match="did you mean 'master_port'"):
        Request.of(example="x").master_prot


def test_every_option_of_the_table_reaches_a_request():
    """Each field a row of the gate's commands sets is a keyword a library call may give, and a
    Request of it carries the value; a field not given reads as the table's default."""
    from rdmadoctor.options import fields
    from rdmadoctor.preflight.request import KEYWORD_SETS, Request, keywords

    gate_rows = [r for r in options.OPTIONS if {"preflight", "run", "slurm prolog"} & set(r.commands)]
    assert {r.field for r in gate_rows} <= set(keywords())
    for r in gate_rows:
        value = _value(r)[1]
        req = Request.of(**{r.field: value})
        if r.field in KEYWORD_SETS:  # --min-rate and the like: an override of the checks' expectation
            assert req.overrides == [(r.flag, r.sets, value)], r
        else:
            assert getattr(req, r.field) == value, r
    # The parsed record itself (every command's fields, `command` too) is taken whole.
    req = Request.of(options.Args(example="x", min_rate=400.0, scope="node", command=["true"]), strict=True)
    assert (req.example, req.strict, req.command) == ("x", True, ["true"])
    assert req.overrides == [("--min-rate", "min_rate_gbps", 400.0)]
    defaults = fields()
    bare = Request.of()
    for name, default in defaults.items():
        assert getattr(bare, name) == default, name


def test_a_flag_out_of_range_is_said_in_its_own_words():
    from rdmadoctor.preflight import PreflightError, gate

    for kw, said in (({"expect_hcas": 0}, "--expect-hcas must be at least 1, got 0"),
                     ({"min_rate": -5.0}, "--min-rate must be a positive rate in Gb/s, got -5"),
                     ({"job_uid": -5}, "--job-uid must be a user id (0 or more), got -5")):
        with pytest.raises(PreflightError, match="^" + said.replace("(", r"\(").replace(")", r"\)") + "$"):
            gate(example="hgx-h100-ib", **kw)
