"""The typer-free parser of ``rdmadoctor check`` options (see rdmadoctor.cli)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

# option -> (parameter name, kind): "str" takes a value, "list" may repeat, "flag" takes none.
OPTIONS: dict[str, tuple[str, str]] = {
    "--root": ("root", "str"),
    "--bundle": ("bundle", "str"),
    "--example": ("example", "str"),
    "--profile": ("profile", "str"),
    "--config": ("config", "str"),
    "--pool": ("pool", "str"),
    "--set": ("sets", "list"),
    "--only": ("only", "list"),
    "--skip": ("skip", "list"),
    "--timeout": ("timeout", "float"),
    "--sample": ("sample", "float"),
    "--scope": ("scope", "str"),
    "--json": ("as_json", "flag"),
    "--format": ("output_format", "str"),
    "--strict": ("strict", "flag"),
    "--verbose": ("verbose", "flag"),
}


def defaults() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kind in OPTIONS.values():
        out[name] = [] if kind == "list" else False if kind == "flag" else None
    out["profile"] = "generic"
    out["scope"] = "all"
    return out


def parse(
    args: list[str],
    options: dict[str, tuple[str, str]] | None = None,
    start: dict[str, Any] | None = None,
    rest: bool = False,
) -> dict[str, Any] | None:
    """Keyword arguments for the command, or None to let typer handle (and explain) the line.

    ``options``/``start``: another command's table and defaults (default: `check`'s). With
    ``rest``, everything after a ``--`` is returned untouched under the key ``"--"``.
    """
    options = OPTIONS if options is None else options
    out = defaults() if start is None else {k: (list(v) if isinstance(v, list) else v) for k, v in start.items()}
    i = 0
    while i < len(args):
        arg = args[i]
        if rest and arg == "--":
            out["--"] = list(args[i + 1 :])
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
    return out
