"""The whole ``rdmadoctor preflight`` run: deciding (gate, gang, wait for rank 0: a :class:`Verdict`),
then delivering it (text or JSON on stdout, exec the job on GO).

Usage problems are raised (:class:`~rdmadoctor.preflight.errors.PreflightError`, a
``UsageError``) before anything is printed; ``rdmadoctor.cli.preflight`` prints them.
"""

from __future__ import annotations

import os
import sys

from rdmadoctor.core.words import count
from rdmadoctor.preflight.errors import PreflightError
from rdmadoctor.preflight.gate import EXIT, GO, NO_GO, gate
from rdmadoctor.preflight.master import WaitResult, find_master, wait_for_master
from rdmadoctor.preflight.render import render_text, tty_colour
from rdmadoctor.preflight.request import Request

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

SCHEMA = "rdmadoctor.preflight/v1"
# How long --wait-for-master waits for rank 0 unless --master-timeout says otherwise.
MASTER_TIMEOUT = 300.0


class Signalled(BaseException):
    """SIGTERM while waiting: leave at once (exit 128 + signum)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def exec_command(argv: list[str]) -> int:
    """Replace this process with ``argv`` (same PID: the pod's process tree does not change)."""
    import signal

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe must not keep the job from starting
            pass
    if not argv[0]:
        return _cannot_run(*cannot_start(argv[0], None, os.environ.get("PATH", "")))
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec:
    # give the job the defaults it would have had without us (subprocess' restore_signals).
    for name in ("SIGPIPE", "SIGXFSZ"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in an argument
        return _cannot_run(*cannot_start(argv[0], e, os.environ.get("PATH", "")))
    return 126  # not reached: execvp returns only by raising


def _cannot_run(message: str, hint: str, code: int) -> int:
    from rdmadoctor.output.text import safe

    try:
        sys.stderr.write(safe(f"rdmadoctor preflight: {message}\n" + (f"  hint: {hint}\n" if hint else "")))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return code


def cannot_start(cmd: str, error: BaseException | None, path_env: str) -> tuple[str, str, int]:
    """Why CMD could not be started, as a shell would say it: (message, hint, exit code 127 when
    there is nothing to run, 126 when there is but it cannot be executed). ``error``: what exec
    raised (None: not tried, ``cmd`` is empty). One wording for `preflight --exec` and `run`."""
    shown = repr(cmd)
    if not cmd:
        return ("command not found: '' (an empty command name)",
                "the first word after -- is empty: an unset shell variable expanded to nothing? "
                "(e.g. -- \"$TRAIN_CMD\" with TRAIN_CMD unset); give the command itself", 127)
    if isinstance(error, ValueError):
        return (f"cannot run {shown}: {error}", "", 126)
    if isinstance(error, FileNotFoundError):
        found = cmd if "/" in cmd else _which(cmd, path_env)
        if found and os.path.exists(found):
            # The file is there: what exec did not find is the interpreter of its #! line (or, for
            # a binary, its dynamic loader), and a shell says the same (exit 127).
            interp = _interpreter(found)
            where = "" if found == cmd else f" ({found})"
            if interp:
                return (f"cannot run {shown}{where}: the file exists but its interpreter (#! line: {interp}) is missing",
                        f"install {interp}, fix the #! line of {found}, or run it through an interpreter that exists "
                        f"(e.g. bash {found})", 127)
            return (f"cannot run {shown}{where}: the file exists but its program loader is missing "
                    "(a binary built for another system or architecture?)",
                    f"check it with `file {found}`; rebuild it for this image", 127)
        if "/" in cmd:
            where = "" if os.path.isabs(cmd) else f" (relative to {os.getcwd()})"
            return (f"cannot run {shown}: no such file{where}", "", 127)
        return (f"cannot run {shown}: command not found", f"is it installed in this image? PATH={path_env}", 127)
    if isinstance(error, PermissionError):
        target = cmd if "/" in cmd else (_which(cmd, path_env, executable=False) or cmd)
        if os.path.isdir(target):
            return (f"cannot run {shown}: it is a directory", "give the program inside it, e.g. -- ./dir/train.sh", 126)
        return (f"cannot run {shown}: {error.strerror or error}",
                f"make it executable (chmod +x {target}) or run it through its interpreter", 126)
    if isinstance(error, OSError):  # ENOEXEC (a script without #!), ENOTDIR, E2BIG, ...
        return (f"cannot run {shown}: {error.strerror or error}", "", 126)
    return (f"cannot start {shown}: {error}", "", 126)


def _which(cmd: str, path_env: str, executable: bool = True) -> str | None:
    """The file PATH finds for ``cmd`` (``executable``: only one with an x bit), or None."""
    for d in path_env.split(os.pathsep):
        candidate = os.path.join(d or ".", cmd)
        if os.path.exists(candidate) and (not executable or (os.path.isfile(candidate) and os.access(candidate, os.X_OK))):
            return candidate
    return None


def _interpreter(path: str) -> str | None:
    """The interpreter named on the #! line of ``path``, or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    return words[0].decode("utf-8", "replace") if words else None


def _write_verdict(out: Any, err: Any, text: str, exec_: bool) -> None:
    """The verdict on stdout. A reader that left (``| head -1``) leaves the exit code as it is,
    as with `check`. Any other failure (stdout closed or full) is the CLI's to report (exit 2),
    unless the job is to follow (--exec): then the verdict is the exit code or the job itself,
    and rdmadoctor's own output failing must not keep the job from starting."""
    try:
        out.write(text)
        if exec_:
            out.flush()
    except BrokenPipeError:
        _drop_stdout(out, devnull=not exec_)  # the job inherits fd 1 as it is
    except OSError as e:
        if not exec_:
            raise
        err.write(f"rdmadoctor preflight: note: the verdict could not be written to stdout ({e.strerror or e})\n")
        _drop_stdout(out, devnull=False)


def _drop_stdout(out: Any, devnull: bool) -> None:
    """Drop what stdout still buffers, so the flush at exit does not fail again. ``devnull``:
    also point fd 1 at /dev/null (its reader left); otherwise the fd stays as it is, for the job
    that --exec starts to inherit. (rdmadoctor.cli.streams' stdout has a ``discard`` switch.)"""
    raw = getattr(getattr(out, "buffer", None), "raw", None)
    if raw is not None and hasattr(raw, "discard"):
        raw.discard = True
    if devnull:
        try:
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, out.fileno())
            os.close(fd)
        except (OSError, ValueError, AttributeError):  # a test's StringIO: nothing to flush
            pass


def shell_join(argv: list[str]) -> str:
    """CMD shell-quoted for a message, its control characters shown (\\x1b), never obeyed."""
    import shlex

    from rdmadoctor.output.text import safe

    return safe(" ".join(shlex.quote(a) for a in argv))


def _master_problem(master: Any, result: WaitResult, wait_s: float) -> dict[str, Any]:
    ips = ", ".join(result.resolved) or "nothing"
    unresolved = not result.resolved
    return {
        "check": "master",
        "code": "MASTER_UNRESOLVED" if unresolved else "MASTER_UNREACHABLE",
        "severity": "error",
        "subject": master.endpoint,
        "message": (
            f"no TCP connection to {master.endpoint} within {wait_s:g} s "
            f"({count(result.attempts, 'attempt')}); resolved to: {ips}; last error: "
            f"{result.last_error or 'none'}. Expected rank 0 to accept connections on "
            "MASTER_PORT."
        ),
        "remedy": (
            "DNS never answered: check the name (a headless Service named like the "
            "pod's subdomain must exist; PyTorchJob and Volcano's svc plugin create one), "
            "or that the master pod exists at all (kubectl get pods)."
            if unresolved
            else "Is the master pod running, and its training process started and listening "
            "on this port (kubectl logs of rank 0)? A NetworkPolicy may drop the traffic; "
            "MASTER_PORT must be the port rank 0 listens on. Raise --master-timeout if rank 0 "
            "starts slowly (image pull, its own preflight)."
        ),
        "pod_fix": None,
    }


class Verdict:
    """What the gate decided for one request, before anything is said: the checks (``gate``), the
    verdict after the wait for rank 0 (``verdict``, ``code``), where rank 0 is and what the wait
    saw (``master``, ``wait``, ``rank0``, ``note``) and the gang's section (``gang``)."""

    def __init__(self, g: Any, verdict: str, master: Any = None, wait: WaitResult | None = None,
                 rank0: str | None = None, note: str = "", gang: dict[str, Any] | None = None):
        self.gate, self.verdict, self.master, self.wait = g, verdict, master, wait
        self.rank0, self.note, self.gang = rank0, note, gang
        self.plan: Any = None

    def close(self) -> None:
        if self.plan is not None:
            self.plan.close()
            self.plan = None

    @property
    def code(self) -> int:
        return EXIT[self.verdict]

    def to_json(self, exec_argv: list[str] | None = None) -> dict[str, Any]:
        """The document of ``preflight --json`` (schema rdmadoctor.preflight/v1)."""
        g, master = self.gate, self.master
        return {
            "schema": SCHEMA,
            "verdict": self.verdict,
            "exit_code": self.code,
            "checks": [c.id for c in g.rep.checks],
            "problems": g.problems,
            "warnings": g.warnings,
            "unknown": g.unknown,
            "pod_spec": g.fix.to_json() if g.fix and g.problems else None,
            "pod_spec_yaml": g.fix.yaml() if g.fix and g.problems else None,
            "master": None
            if master is None
            else {
                "host": master.host,
                "port": master.port,
                "host_source": master.host_source,
                "port_source": master.port_source,
                "rank0": self.rank0,
                "note": self.note,
                "wait": self.wait.to_json() if self.wait else None,
            },
            "gang": self.gang,
            "exec": list(exec_argv) if exec_argv else None,
            "report": g.report,
        }

    def text(self, colour: bool, verbose: bool, exec_argv: list[str] | None = None) -> str:
        """The text verdict (what ``kubectl logs`` shows), with the ``exec:`` line on GO."""
        text = render_text(self.gate, self.verdict, master=self.master, master_note=self.note, colour=colour,
                           verbose=verbose, gang=self.gang)
        if exec_argv and self.code == 0:
            text += f"exec: {shell_join(exec_argv)}\n"
        return text


def _log(err: Any, prefix: str) -> Callable[[str], None]:
    def log(msg: str) -> None:
        from rdmadoctor.output.text import safe

        err.write(safe(f"{prefix}{msg}") + "\n")
        err.flush()

    return log


def decide(req: Request, err: Any) -> Verdict:
    """Deciding: the checks, the gang, the wait for rank 0 (its progress on ``err``); nothing on
    stdout. Raises PreflightError on a usage problem found on the way (rank 0 not named, ...)."""
    env = dict(os.environ if req.env is None else req.env)
    wait_s = MASTER_TIMEOUT if req.master_timeout is None else req.master_timeout
    plan = None
    try:
        master = find_master(env, req.master_addr, req.master_port) if req.wait else None
        if req.gang:  # the membership, and rank 0's port, before the checks: usage errors come first
            from rdmadoctor.preflight import gang as G

            sets, share = G.take_share(list(req.sets or []))
            req = req.replace(sets=sets)
            plan = G.prepare(env, rank=req.gang_rank, size=req.gang_size, master=req.gang_master, port=req.gang_port,
                             timeout=req.gang_timeout, token=req.gang_token, bandwidth=bool(req.bandwidth), share=share)
        g = gate(req)
        gang_section = None
        if plan is not None:
            from rdmadoctor.preflight.master import _resolve

            gang_section = G.meet(plan, g, env, strict=bool(req.strict), log=_log(err, "rdmadoctor preflight: gang: "),
                                  resolve=_resolve)
        elif req.gang:
            gang_section = {"role": "none", "verdict": g.verdict, "members": [], "mismatches": [], "slow": [],
                            "missing": [], "note": "another process of this node takes part in the gang (local rank 0)"}
    except BaseException:
        if plan is not None:
            plan.close()
        raise
    out = Verdict(g, g.verdict, master, gang=gang_section, rank0=master.self_reason if master is not None else None)
    out.plan = plan  # rank 0 of the gang keeps listening until the verdict is said (run_preflight closes it)
    if master is None:
        return out
    if out.verdict != GO:
        out.note = "not waited for: the checks did not pass"
    elif master.self_reason:
        out.note = f"this pod is rank 0 ({master.self_reason}): not waiting for itself"
    else:
        err.write(
            f"rdmadoctor preflight: checks passed; waiting up to {wait_s:g} s for the master "
            f"{master.endpoint} to accept a TCP connection\n"
        )
        err.flush()
        result = out.wait = wait_for_master(master, wait_s, log=_log(err, "rdmadoctor preflight: "))
        ips = ", ".join(result.resolved) or "nothing"
        if result.is_self:
            out.rank0 = f"the master resolves to this pod's own address ({ips})"
            out.note = f"this pod is rank 0 (the master resolves to its own address {ips}): not waiting for itself"
        elif result.ok:
            out.note = f"accepted a TCP connection after {result.seconds:.1f} s (resolved to {ips})"
        else:
            out.verdict = NO_GO
            g.problems.append(_master_problem(master, result, wait_s))
            out.note = "never accepted a connection"
    return out


def deliver(verdict: Verdict, req: Request, out: Any, err: Any, before_exec: Callable[[], None] = lambda: None) -> int:
    """Delivering: the verdict as text or JSON (``req.as_json``) on ``out``; with
    ``req.exec_argv``, the command exec'd on GO (``before_exec`` first), not run on NO-GO.
    Returns the exit code (or does not return: exec)."""
    import json

    argv = req.exec_argv
    if req.as_json:
        text = json.dumps(verdict.to_json(argv), indent=2) + "\n"
    else:
        text = verdict.text(tty_colour(out), bool(req.verbose), argv)
    _write_verdict(out, err, text, bool(argv))
    if not argv:
        return verdict.code
    if verdict.code != 0:
        err.write(f"rdmadoctor preflight: not running {shell_join(argv)}\n")
        return verdict.code
    before_exec()
    return exec_command(list(argv))


def run_preflight(request: Any = None, *, say: Callable[[Verdict], int] | None = None, **fields: Any) -> int:
    """The whole command for ``request`` (a :class:`~rdmadoctor.preflight.request.Request` built
    from the command line's option record, or a library call's keywords:
    ``run_preflight(example="roce-node", as_json=True)``): :func:`decide`, then ``say`` the
    verdict (default :func:`deliver`: text, JSON, exec). Returns the exit code (or does not return:
    exec).

    ``timeout`` bounds each tool the checks run (as in ``check``); ``master_timeout`` bounds the
    wait for rank 0. Raises PreflightError/UsageError on a usage problem, before any output.
    """
    import signal

    req = Request.of(request, **fields)
    exec_argv = req.exec_argv
    wait_s = MASTER_TIMEOUT if req.master_timeout is None else req.master_timeout
    if not wait_s >= 0:
        raise PreflightError(f"--master-timeout must be zero or more seconds, got {wait_s:g}")
    if exec_argv is not None and not exec_argv:
        raise PreflightError("--exec needs a command after --", "rdmadoctor preflight --exec -- torchrun --nproc_per_node=8 train.py")
    if exec_argv and not exec_argv[0]:  # nothing could run it: said before the gate (127, as a shell)
        return _cannot_run(*cannot_start("", None, ""))
    out, err = sys.stdout, sys.stderr
    if not req.gang:
        given = [o for o, v in (("--gang-rank", req.gang_rank), ("--gang-size", req.gang_size), ("--gang-master", req.gang_master),
                                ("--gang-port", req.gang_port), ("--gang-timeout", req.gang_timeout),
                                ("--gang-token", req.gang_token), ("--bandwidth", req.bandwidth or None)) if v is not None]
        if given:
            raise PreflightError(f"{given[0]} needs --gang", f"rdmadoctor preflight --gang {given[0]} ...")
    if req.wait and req.timeout is not None and req.master_timeout is None:
        # --timeout bounds each tool, as in `check`; one who meant the wait for rank 0 is told its option.
        err.write(
            f"rdmadoctor preflight: note: --timeout {req.timeout:g} bounds each tool the checks run; "
            f"the wait for rank 0 is --master-timeout (now {wait_s:g} s)\n"
        )

    # As a container's PID 1 (an init container's command), the kernel ignores SIGTERM unless a
    # handler is installed: the kubelet would wait the whole grace period for us.
    def on_term(signum: int, frame: Any) -> None:
        raise Signalled(signum)

    old_term = None
    try:
        old_term = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (an embedding caller): keep its handling
        pass

    def restore_term() -> None:
        nonlocal old_term
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
            old_term = None

    verdict = None
    try:
        verdict = decide(req, err)
        if say is not None:
            return say(verdict)
        return deliver(verdict, req, out, err, before_exec=restore_term)
    except Signalled as e:
        err.write(f"rdmadoctor preflight: stopped by signal {e.signum} (SIGTERM)\n")
        return 128 + e.signum
    except KeyboardInterrupt:
        err.write("rdmadoctor preflight: interrupted\n")
        return 130
    finally:
        if verdict is not None:
            verdict.close()
        if old_term is not None:
            try:
                signal.signal(signal.SIGTERM, old_term)
            except ValueError:
                pass
