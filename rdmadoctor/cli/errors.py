"""Errors leave through one place: ``rdmadoctor: error: ...`` and a hint on stderr, exit code 2.

That holds for rdmadoctor's own usage errors (a bad --set, a missing bundle) and for the ones
the command-line parser finds (an unknown option, a missing value, a bad choice, no such
command): :func:`parse_error` turns those into the same two lines. Imported on the `check`
fast path, so it imports nothing of typer; it reads the parser's exception by duck typing.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

USAGE_EXIT = 2


def fail_usage(message: str, hint: str = "") -> int:
    sys.stderr.write(f"rdmadoctor: error: {message}\n")
    if hint:
        sys.stderr.write(f"  hint: {hint}\n")
    return USAGE_EXIT


def _close(word: str, choices: list[str], cutoff: float) -> list[str]:
    from difflib import get_close_matches

    # Compare the names without their dashes: "--jsno" is near "--json", not near "--scope".
    bare = {c.lstrip("-"): c for c in choices}
    return [bare[m] for m in get_close_matches(word.lstrip("-"), list(bare), n=3, cutoff=cutoff)]


def _options_of(ctx: Any) -> list[str]:
    """The long options the command of ``ctx`` really takes (hidden ones and --help aside)."""
    out = []
    for p in getattr(ctx.command, "params", ()):
        if getattr(p, "hidden", False):
            continue
        out += [o for o in list(p.opts) + list(getattr(p, "secondary_opts", ())) if o.startswith("--")]
    return out


def parse_error(e: Any, command: str = "rdmadoctor") -> int:
    """Report a parser usage error (typer's / click's ``UsageError``) in rdmadoctor's voice.

    ``command``: the command line's command path, for errors the parser raises without a context.
    """
    ctx = getattr(e, "ctx", None)
    path = getattr(ctx, "command_path", "") or command
    see = f"see `{path} --help`"
    kind = type(e).__name__
    message = str(getattr(e, "message", "") or "")
    if kind == "NoArgsIsHelpError" or message.startswith("Missing command"):
        # `rdmadoctor` alone: the command list is what the person needs, then the error line;
        # all on stderr, since stdout carries only what was asked for.
        if ctx is not None and kind != "NoArgsIsHelpError":  # that one printed the help already
            import contextlib

            with contextlib.redirect_stdout(sys.stderr):  # typer's rich help prints as it renders
                sys.stderr.write(ctx.get_help())
        return fail_usage("no command given", "start with `rdmadoctor check`; `rdmadoctor --help` lists the commands")
    if kind == "NoSuchOption":
        name = getattr(e, "option_name", "") or ""
        close = _close(name, _options_of(ctx), 0.7) if ctx is not None else []
        hint = f"did you mean {' or '.join(close)}? {see}" if close else see
        return fail_usage(f"no such option: {name}", hint)
    if message.startswith("No such command"):
        name = message.split("'")[1] if message.count("'") >= 2 else ""
        commands = sorted(getattr(ctx.command, "commands", {}) or {}) if ctx is not None else []
        close = _close(name, commands, 0.7)
        hint = f"did you mean {' or '.join(f'`{path} {c}`' for c in close)}? {see}" if close else see
        return fail_usage(f"no such command {name!r}", hint)
    text = e.format_message() if hasattr(e, "format_message") else message
    text = text.strip().rstrip(".")
    if text[:1].isupper() and not text[1:2].isupper():
        text = text[0].lower() + text[1:]
    return fail_usage(text, see)


def pipe_closed() -> None:
    """The reader of stdout went away (``| head -1``, a closed ``less``): it had what it wanted.

    Point stdout at /dev/null so the final flush cannot fail again; the command's exit code
    stands (a PASS stays 0).
    """
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError):  # not a real file (a test's StringIO): nothing to flush
        pass
