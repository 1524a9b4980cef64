"""One request to the gate: what `preflight`, `run` and the Slurm Prolog ask of it, as one record.

The command line's option record (:class:`rdmadoctor.options.Args`) travels as it is: a
:class:`Request` reads each of its fields as an attribute, so an option added to the table
(rdmadoctor/options.py) reaches the gate, ``run_preflight`` and ``run_job`` with no signature
to extend; it is read where it is used (``req.<field>``). What the CLI works out from the table,
once, rides along:

- ``overrides``: the expectations set by option rows that say so (``Option(..., sets="min_rate_gbps")``),
  as ``(flag, key, value)``, applied after the user's ``--set`` items so that the flag wins;
- ``exec_argv``: the command ``preflight --exec`` runs on GO (None: none);
- ``env``: the environment rank 0 and the gang are read from (None: this process').

A library call names only the fields it sets (``run_preflight(example="roce-node", gang=True)``);
a field it does not name reads as the option's default (the table's). A name that is no field of
the gate's commands (:func:`keywords`: `preflight`'s, `run`'s and `slurm prolog`'s rows), nor
``overrides``, ``exec_argv`` or ``env``, is a TypeError that names the closest one: ``run_preflight(exampel=...)`` must not run the gate on
this host as if the bundle had been given.
"""

from __future__ import annotations

from rdmadoctor.options import OPTIONS, Args
from rdmadoctor.options import fields as _fields

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A library call's keywords for the options that set an expectation: the rows of the option
# table that say so (`sets=`), field -> (flag, expectation).
KEYWORD_SETS = {o.field: (o.flag, o.sets) for o in OPTIONS if o.sets is not None}
# What a Request carries besides the record's fields.
_OWN = ("overrides", "exec_argv", "env")

# The flag's own words for a value out of range, said before any check runs. An option that sets
# another expectation needs no entry: its value is checked against the expectation's declaration
# (engine.expectations), as a --set item is.
_RANGES: dict[str, tuple[Any, str, str]] = {
    "expected_hcas": (lambda v: v >= 1, "{flag} must be at least 1, got {value}", ""),
    "min_rate_gbps": (lambda v: v > 0, "{flag} must be a positive rate in Gb/s, got {value:g}", ""),
    "job_uid": (lambda v: v >= 0, "{flag} must be a user id (0 or more), got {value}", "e.g. {flag} 1000 (`id -u` in the job's image)"),
}


class Request:
    """The option record's fields as attributes, plus ``overrides``, ``exec_argv`` and ``env``."""

    def __init__(self, record: Any = None, *, overrides: Any = (), exec_argv: list[str] | None = None,
                 env: dict[str, str] | None = None, **fields: Any):
        if record is not None:
            given = record if isinstance(record, dict) else vars(record)
            if not isinstance(record, Args):  # a parsed record is the table's: a dict is a caller's
                _known(given)
            self.__dict__.update(given)
        _known(fields)
        self.__dict__.update(fields)
        self.overrides: list[tuple[str, str, Any]] = list(overrides)
        self.exec_argv = exec_argv
        self.env = env

    @classmethod
    def of(cls, request: Any = None, **fields: Any) -> Request:
        """``request`` itself when it is one; else a Request of a record (an ``Args``, a dict) or
        of a library call's keywords, whose ``expect_hcas``, ``min_rate`` and ``job_uid`` become
        overrides as their flags' do."""
        if isinstance(request, Request):
            return request.replace(**fields) if fields else request
        _known(fields)
        if isinstance(request, Args):  # the table's own record: every field is one (`command` too)
            values = dict(vars(request))
        else:
            values = dict(request if isinstance(request, dict) else vars(request)) if request is not None else {}
            _known(values)
        values.update(fields)
        overrides = list(values.pop("overrides", ()))
        for name, (flag, key) in KEYWORD_SETS.items():
            value = values.pop(name, None)
            if value is not None:
                overrides.append((flag, key, value))
        exec_argv, env = values.pop("exec_argv", None), values.pop("env", None)
        new = cls(overrides=overrides, exec_argv=exec_argv, env=env)
        new.__dict__.update(values)  # checked above
        return new

    def replace(self, **fields: Any) -> Request:
        """A copy with ``fields`` changed (the gang takes its own --set item out of ``sets``)."""
        _known(fields)
        new = Request.__new__(Request)
        new.__dict__.update(vars(self), **fields)
        return new

    def __getattr__(self, name: str) -> Any:
        # Only for a field the record does not carry (a library call's): the option's default.
        defaults = _fields()
        if name in defaults:
            return defaults[name]
        raise AttributeError(f"a Request has no field {name!r}{_closest(name)}")

    def __repr__(self) -> str:
        return "Request(" + ", ".join(f"{k}={v!r}" for k, v in vars(self).items()) + ")"

    def set_items(self) -> list[str]:
        """The ``--set`` items the checks get: the user's, then each override's ``key=value``."""
        return list(self.sets or []) + [f"{key}={_shown(value)}" for _, key, value in self.overrides]

    def check_overrides(self) -> None:
        """Raise PreflightError for an override out of its flag's range (before anything runs)."""
        from rdmadoctor.preflight.errors import PreflightError

        for flag, key, value in self.overrides:
            rule = _RANGES.get(key)
            if rule is not None and not rule[0](value):
                raise PreflightError(rule[1].format(flag=flag, value=value), rule[2].format(flag=flag))


def _shown(value: Any) -> str:
    """A flag's value as a --set item reads it: an int as written, a rate without a trailing .0."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(int(value))
    return str(value)


def _known(given: Any) -> None:
    """Raise TypeError for a name no option sets: a library call's typo, said with the closest name."""
    known = keywords()
    for name in given:
        if name not in known:
            raise TypeError(f"unexpected keyword {name!r}: no option of preflight, run or the Slurm Prolog sets it{_closest(name, known)}")


def keywords() -> list[str]:
    """The names a library call may give: the fields of the rows of `preflight`, `run` and `slurm
    prolog` (the gate's commands), then ``overrides``, ``exec_argv`` and ``env``."""
    out = {o.field: None for o in OPTIONS if {"preflight", "run", "slurm prolog"} & set(o.commands)}
    return [*out, *_OWN]


def _closest(name: str, known: list[str] | None = None) -> str:
    import difflib

    near = difflib.get_close_matches(name, known or [*_fields(), *_OWN], n=1)
    return f"; did you mean {near[0]!r}?" if near else f" (it takes {', '.join(known or keywords())})"
