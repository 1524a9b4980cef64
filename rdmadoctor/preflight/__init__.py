"""``rdmadoctor preflight``: the pre-job gate of an init container or of a training command.

Three steps, one module each, with their own tests:

1. :mod:`~rdmadoctor.preflight.gate` runs the checks that declare ``gate=True`` (whether *this
   pod* can train over RDMA) and turns their findings into problems, warnings and the pod-spec
   YAML that fixes them.
2. :mod:`~rdmadoctor.preflight.master` (``--wait-for-master``): where rank 0 listens, read from
   the live process environment (also when the checks read a bundle), then DNS and a real TCP
   connect until it answers.
3. :mod:`~rdmadoctor.preflight.run` decides (``decide``: the gate, the gang, the wait, as one
   ``Verdict``), then delivers the verdict (``deliver``; :mod:`~rdmadoctor.preflight.render`:
   short plain text that reads well in ``kubectl logs``, or JSON) and, on GO, ``exec``s the
   training command in this same process.

What a run is asked to do travels as one :class:`~rdmadoctor.preflight.request.Request`: the
command line's option record, plus the expectations its option rows set.

``rdmadoctor run`` (the gate, then the job as a watched child rather than ``exec``) is
:mod:`rdmadoctor.supervise`, a layer above this one: it calls this package's gate.

No typer and no command-line parsing here: ``rdmadoctor.cli.preflight`` parses the line (typer
free on the fast path) and prints usage errors, which this package raises as PreflightError.
"""

from __future__ import annotations

from rdmadoctor.preflight.errors import PreflightError
from rdmadoctor.preflight.gate import (
    EXIT,
    GO,
    NO_GO,
    UNKNOWN_VERDICT,
    VERDICT_TEXT,
    Gate,
    gate,
    select_checks,
)
from rdmadoctor.preflight.master import (
    TORCH_MASTER_PORT,
    VOLCANO_PYTORCH_PORT,
    Master,
    WaitResult,
    find_master,
    master_codes,
    own_addresses,
    wait_for_master,
)
from rdmadoctor.preflight.render import render_text
from rdmadoctor.preflight.request import Request
from rdmadoctor.preflight.run import MASTER_TIMEOUT, SCHEMA, Signalled, Verdict, decide, deliver, exec_command, run_preflight

__all__ = [
    "EXIT", "GO", "MASTER_TIMEOUT", "NO_GO", "SCHEMA", "TORCH_MASTER_PORT", "UNKNOWN_VERDICT", "VERDICT_TEXT",
    "VOLCANO_PYTORCH_PORT", "Gate", "Master", "PreflightError", "Request", "Signalled", "Verdict", "WaitResult",
    "decide", "deliver", "exec_command", "find_master", "gate", "master_codes", "own_addresses",
    "render_text", "run_preflight", "select_checks", "wait_for_master",
]
