"""The option table (:mod:`rdmadoctor.options`) as typer options: the commands' signatures.

The table itself, its record (:class:`Args`) and the typer-free fast parser live in
rdmadoctor.options, below the gate, so that a library call's :class:`~rdmadoctor.preflight.request.Request`
knows the same fields the command line does; they are named here too, for the CLI. This module
adds what needs typer, imported only when called:

- :func:`command`: a whole command made of its rows (`check`, `preflight`, `run`);
- :func:`with_rows`: a command whose own options are declared by hand in its typer signature
  (`agent`, `label`, `slurm health`, `slurm prolog`) and that takes the rows naming it (the
  check options: what to read, what to expect, which checks) as one :class:`Args` record, its
  first parameter; :func:`rdmadoctor.runner.options_of` turns that record into the checks' options;
- ``RootOpt``, ``BundleOpt``, ``ExampleOpt``, ``ProfileOpt``, ``ConfigOpt``, ``PoolOpt`` and
  ``JsonOpt``: single rows for the commands that read a node but judge nothing alike (diagnose,
  topo, collect, fleet), built from the table on first use.

This module imports nothing at import time but the table (no typer, no typing): the fast path imports it.
"""

from __future__ import annotations

from rdmadoctor.options import (
    CHECK,
    GATE,
    KINDS,
    NODE,
    OPTIONS,
    SHARED,
    Args,
    Option,
    defaults,
    fast_table,
    fields,
    overrides,
    parse,
    row,
    rows,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["CHECK", "GATE", "KINDS", "NODE", "OPTIONS", "SHARED", "Args", "Option", "annotation", "command", "defaults",
           "fast_table", "fields", "overrides", "parse", "row", "rows", "typer_option",
           "typer_parameters", "with_rows"]


def typer_option(o: Option) -> Any:
    """Row ``o`` as a ``typer.Option`` (imports typer and, for completion, cli.complete)."""
    import typer

    extra: dict[str, Any] = {}
    if o.metavar is not None:
        extra["metavar"] = o.metavar
    if o.complete is not None:
        from rdmadoctor.cli import complete

        extra["autocompletion"] = getattr(complete, o.complete)
    text = o.help if isinstance(o.help, str) else o.help()
    default = list(o.default) if isinstance(o.default, list) else o.default
    return typer.Option(default, *o.aliases, o.flag, help=text, **extra)


def annotation(o: Option) -> Any:
    """The Python type typer reads for row ``o``."""
    from typing import List, Optional

    if o.kind == "flag":
        return bool
    if o.kind == "list":
        return List[str]
    base = {"str": str, "int": int, "float": float}[o.kind]
    return base if o.default is not None else Optional[base]


def typer_parameters(command: str) -> list[Any]:
    """The keyword-only parameters of the typer function of ``command``, one per row."""
    import inspect

    kind = inspect.Parameter.KEYWORD_ONLY
    return [inspect.Parameter(o.field, kind, annotation=annotation(o), default=typer_option(o)) for o in rows(command)]


def command(name: str, body: Callable[[Any], int], extra: list[Any] | tuple[Any, ...] = ()) -> Callable[..., None]:
    """A function for ``app.command(...)``: its parameters are ``name``'s rows (then ``extra``,
    e.g. a ``typer.Argument`` named ``command``), and it exits with ``body(Args(...))``."""
    import inspect

    import typer

    params = typer_parameters(name) + list(extra)

    def run(**given: Any) -> None:
        raise typer.Exit(body(Args(**given)))

    run.__name__ = run.__qualname__ = name.replace("-", "_")
    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    return run


def with_rows(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a typer command declared by hand, ``def agent(args, *, publish: str = typer.Option(...), ...)``:
    its signature becomes ``name``'s rows of the table, then its own options, and it is called
    with the rows' values as one :class:`Args` (``args``) and its own options by name. A row added
    for ``name`` (or for :data:`~rdmadoctor.options.NODE`) reaches it with nothing here to edit."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        import inspect
        import typing

        hints = typing.get_type_hints(fn)
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints.get(p.name, p.annotation))
               for p in list(inspect.signature(fn).parameters.values())[1:]]
        table = typer_parameters(name)
        clash = {p.name for p in table} & {p.name for p in own}
        if clash:
            raise TypeError(f"{fn.__name__} declares {', '.join(sorted(clash))} by hand and the option table gives it too")
        params = table + own
        mine = {p.name for p in table}

        def run(**given: Any) -> Any:
            args = Args(**{k: given.pop(k) for k in list(given) if k in mine})
            return fn(args, **given)

        run.__name__, run.__qualname__, run.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return wrap


# The shared rows as single typer options, for the commands that declare theirs by hand.
_SINGLE = {"RootOpt": ("--root", "check"), "BundleOpt": ("--bundle", "check"), "ExampleOpt": ("--example", "check"),
           "ProfileOpt": ("--profile", "check"), "ConfigOpt": ("--config", "check"), "PoolOpt": ("--pool", "check"),
           "JsonOpt": ("--json", "check")}


def __getattr__(name: str) -> Any:
    if name not in _SINGLE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    opt = typer_option(row(*_SINGLE[name]))
    globals()[name] = opt
    return opt
