"""The typer-free parser of the commands' options (see rdmadoctor.cli); its table is
rdmadoctor.cli.options.OPTIONS, the one typer's signatures are built from."""

from __future__ import annotations

from rdmadoctor.cli import options as O

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any


def parse(args: list[str], command: str = "check", rest: bool = False) -> Any:
    """The :class:`~rdmadoctor.cli.options.Args` of ``command``'s line, or None to let typer
    handle (and explain) it. With ``rest``, everything after a ``--`` is ``Args.command``."""
    # option -> (field of Args, kind): "str"/"int"/"float" take a value, "list" may repeat, "flag" none.
    options = O.fast_table(command)
    out: dict[str, Any] = O.defaults(command)
    i = 0
    while i < len(args):
        arg = args[i]
        if rest and arg == "--":
            out["command"] = list(args[i + 1 :])
            break
        opt, eq, inline = arg.partition("=")
        spec = options.get(opt)
        if spec is None:
            return None
        name, kind = spec
        if kind == "flag":
            if eq:
                return None
            out[name] = True
            i += 1
            continue
        if eq:
            value = inline
            i += 1
        else:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                return None
            value = args[i + 1]
            i += 2
        try:
            if kind == "list":
                out[name].append(value)
            elif kind == "int":
                out[name] = int(value)
            elif kind == "float":
                out[name] = float(value)
            else:
                out[name] = value
        except ValueError:
            return None
    return O.Args(**out)
