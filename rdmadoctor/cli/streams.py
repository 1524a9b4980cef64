"""rdmadoctor's own stdin, stdout and stderr, whatever the caller left on fds 0, 1 and 2.

A command started with a closed fd (``>&-``, ``2>&-``) or one that cannot be written to
(``> /dev/full``, a full disk) must not end in a Python traceback, and ``run`` must start the
job whatever happens to its own messages. :func:`install` (the first thing the console entry
point does) sees to three things:

- a closed fd 0, 1 or 2 is filled with /dev/null opened the wrong way round (stdout read-only),
  so that writing to it still fails with EBADF, as on a closed fd, but no file, pipe or socket
  opened later lands on it (a pipe of ``run``'s child on fd 1 would be written with the job's
  output) and the job that ``run`` starts inherits the same "closed" fd;
- stdout raises :class:`OutputError` (an OSError) when a write fails for any reason but a
  reader that left (EPIPE stays BrokenPipeError: :func:`rdmadoctor.cli.errors.pipe_closed`
  keeps the exit code of ``check | head -1``); the entry point turns it into one line,
  ``rdmadoctor: error: cannot write the output: ...``, and exit 2;
- stderr never raises: a message that cannot be written is dropped (there is nowhere to say
  so), and the command goes on to its exit code; ``run`` starts the job.

Imported on the fast paths: it imports nothing but io (already loaded).
"""

from __future__ import annotations

import io
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EPIPE = 32
EBADF = 9


class OutputError(OSError):
    """Writing rdmadoctor's stdout failed (EBADF: it is closed; ENOSPC, EIO, EFBIG, ...)."""


class _Fd(io.FileIO):
    """fd 1 or 2, not closed with the object; ``strict``: failures raise OutputError (stdout),
    else they are dropped (stderr). ``discard``: everything is dropped from now on."""

    strict = True
    discard = False

    def write(self, data: Any) -> int:
        n = len(data) if not isinstance(data, memoryview) else data.nbytes
        if self.discard:
            return n
        while True:
            try:
                return super().write(data)
            except BlockingIOError:  # an inherited O_NONBLOCK fd: wait until it takes more
                import select

                select.select([], [self.fileno()], [], 1.0)
            except BrokenPipeError:
                if self.strict:
                    raise
                return n
            except OSError as e:
                if self.strict:
                    raise OutputError(e.errno, e.strerror or str(e)) from None
                return n


def _fill(fd: int, flags: int) -> bool:
    """Occupy ``fd`` with /dev/null when it is closed; True when it was."""
    try:
        os.fstat(fd)
        return False
    except OSError:
        pass
    try:
        new = os.open(os.devnull, flags)
    except OSError:
        return False
    if new != fd:
        os.dup2(new, fd, inheritable=True)
        os.close(new)
    else:
        os.set_inheritable(fd, True)
    return True


def _wrap(fd: int, old: Any, strict: bool) -> Any:
    raw = _Fd(fd, "w", closefd=False)
    raw.strict = strict
    encoding = getattr(old, "encoding", None) or "utf-8"
    errors = getattr(old, "errors", None) or ("strict" if strict else "backslashreplace")
    line_buffering = bool(getattr(old, "line_buffering", not strict))
    write_through = bool(getattr(old, "write_through", False))
    buffered = io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors, line_buffering=line_buffering,
                            write_through=write_through)


def _ours(stream: Any) -> bool:
    raw = getattr(getattr(stream, "buffer", None), "raw", None)
    return isinstance(raw, _Fd)


def install() -> None:
    """Set up fds 0-2 and sys.stdout / sys.stderr as the module says. Only the process' own
    streams are replaced: a caller's (a test's StringIO, CliRunner's) are left alone."""
    for fd, flags in ((0, os.O_WRONLY), (1, os.O_RDONLY), (2, os.O_RDONLY)):
        if _fill(fd, flags) and fd == 0 and sys.stdin is None:
            try:
                sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
            except (OSError, ValueError):
                pass
    for name, fd, strict in (("stdout", 1, True), ("stderr", 2, False)):
        current = getattr(sys, name)
        if _ours(current) or not (current is None or current is getattr(sys, f"__{name}__")):
            continue
        if current is not None:
            try:
                if current.fileno() != fd:
                    continue
                current.flush()
            except (OSError, ValueError, AttributeError):
                pass
        try:
            setattr(sys, name, _wrap(fd, current, strict))
        except (OSError, ValueError):
            pass


def discard_stdout() -> None:
    """Drop whatever is written to stdout from now on (and what is still buffered): it failed
    and was said to fail; the flush at exit must not fail (and say so) again."""
    raw = getattr(getattr(sys.stdout, "buffer", None), "raw", None)
    if isinstance(raw, _Fd):
        raw.discard = True
    else:
        from rdmadoctor.cli.errors import pipe_closed

        pipe_closed()


def output_failed(e: OSError) -> int:
    """stdout cannot be written: say so on stderr (when it can be written), exit 2. What is still
    buffered is dropped, so that the flush at exit does not fail (and print) again."""
    from rdmadoctor.cli.errors import fail_usage

    discard_stdout()
    if e.errno == EBADF:
        why = "stdout is closed (Bad file descriptor)"
        hint = "give the command a stdout: `>&-` closes it; redirect to a file instead, e.g. > out.txt or > /dev/null"
    else:
        why = e.strerror or str(e)
        hint = "redirect stdout to a file on a disk with space, or to a pipe or terminal"
    return fail_usage(f"cannot write the output: {why}", hint)
