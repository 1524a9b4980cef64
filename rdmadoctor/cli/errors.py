"""Errors leave through one place: ``rdmadoctor: error: ...`` and a hint on stderr, exit code 2.

That holds for rdmadoctor's own usage errors (a bad --set, a missing bundle) and for the ones
the command-line parser finds (an unknown option, a missing value, a bad choice, no such
command): :func:`parse_error` turns those into the same two lines. Imported on the `check`
fast path, so it imports nothing of typer; it reads the parser's exception by duck typing.
"""

from __future__ import annotations

import os
import sys

from rdmadoctor.options import DRAIN_TIMEOUT_MAX as DRAIN_TIMEOUT_MAX  # a range below (rdmadoctor.supervise's too)

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

USAGE_EXIT = 2


def fail_usage(message: str, hint: str = "") -> int:
    say(f"rdmadoctor: error: {message}")
    if hint:
        say(f"  hint: {hint}")
    return USAGE_EXIT


def say(line: str) -> None:
    """One line of rdmadoctor's on stderr, with the control characters of what it quotes (a file
    name typed with an escape sequence in it) shown as \\x1b, never obeyed by the terminal."""
    from rdmadoctor.output.text import safe

    sys.stderr.write(safe(line) + "\n")


# The ranges of the number options, one place for every command (seconds unless said). A value
# outside is a usage error: `nan` compares false with everything and `inf` overflows a clock or a
# time stamp, so neither may reach the code that waits or writes; the upper bounds are far above
# any real need and far below what overflows (a time_t, an RFC 3339 year, threading's wait).
TOOL_TIMEOUT_MAX = 3600.0  # check/preflight --timeout: one tool's run
EXPIRY_MAX = 365 * 86400.0  # label/agent --expiry: the NFD labels' lifetime
INTERVAL_MIN = 0.1  # agent --interval: below this the agent runs cycle after cycle (busy)
INTERVAL_MAX = 86400.0
MASTER_TIMEOUT_MAX = 86400.0  # preflight --master-timeout
MIN_RATE_MAX = 10000.0  # preflight --min-rate, Gb/s (as min_rate_gbps)
# DRAIN_TIMEOUT_MAX (run --drain-timeout) is imported above from beside its row, where
# rdmadoctor.supervise reads it too.


def _number(value: Any) -> str:
    """A number as typed, short: ints of any size (str() of one over 4300 digits raises)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        if value.bit_length() > 64:
            return f"{'-' if value < 0 else ''}a number of more than 19 digits"
        return str(value)
    if isinstance(value, float):
        if value == value and abs(value) < 1e15 and value == int(value):
            return str(int(value))  # 31536000, not 3.1536e+07
        return f"{value:g}"
    return repr(value)


def check_number(
    option: str,
    value: Any,
    *,
    low: float,
    high: float,
    low_open: bool = True,
    unit: str = "seconds",
    hint: str = "",
) -> int | None:
    """None when ``value`` (None: not given) is a finite number in range; else print the usage
    error and return its exit code. ``low_open``: ``low`` itself is refused (``> 0``: positive).

    Imported on the fast paths (no typer, no math): NaN is the one value not equal to itself.
    """
    if value is None:
        return None
    shown = _number(value)
    units = f" {unit}" if unit else ""
    span = f"more than {_number(low)} and at most {_number(high)}{units}" if low_open else f"{_number(low)}..{_number(high)}{units}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return fail_usage(f"{option} must be a number ({span}), got {shown}", hint)
    if low <= value <= high and not (low_open and value == low):
        return None
    if low_open:
        if value <= low:
            return fail_usage(f"{option} must be {'positive' if low == 0 else f'more than {_number(low)}{units}'}, got {shown}", hint)
        return fail_usage(f"{option} must be at most {_number(high)}{units}, got {shown}", hint)  # inf included
    if value <= 0 < low:
        return fail_usage(f"{option} must be positive ({span}), got {shown}", hint)
    return fail_usage(f"{option} must be {span}, got {shown}", hint)


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
