"""``rdmadoctor run``: the gate, then the job as a child process that rdmadoctor supervises.

Unlike ``preflight --exec`` (which becomes the job), ``run`` stays the job's parent:

- the child's stdout and stderr are pipes, copied to rdmadoctor's fd 1 and fd 2 as the bytes
  arrive (no decoding, no line buffering), and fed to a :class:`~rdmadoctor.logs.Diagnoser` on
  a thread of its own (:class:`Diagnosing`: the copy never waits for diagnosis), whose
  ``on_transport`` callback prints what NCCL really uses the moment its init lines say so;
- the child runs in a process group of its own: INT, TERM and HUP sent to rdmadoctor go to that
  group (a second Ctrl-C too: the job decides what it means), and the terminal, when rdmadoctor
  has one, is handed to the child so that a debugger's prompt or Ctrl-C reaches it directly;
- rdmadoctor exits with the child's status (128+N when signal N killed it) and, when the child
  failed, prints the diagnosis of its output on stderr.

Memory is bounded whatever the child prints: each read is copied and dropped, a line longer than
:data:`LINE_LIMIT` reaches the Diagnoser cut (as the Diagnoser cuts its own), and the Diagnoser
keeps bounded state. CPU: reads are coalesced (a few milliseconds' worth of output per wake-up)
so a job printing 50k short lines a second costs a few hundred wake-ups, not 50k
(bench/run_passthrough.py measures it).

One module per job, from the bottom up:

- :mod:`~rdmadoctor.supervise.streams`: the copy to rdmadoctor's fds (:class:`Sink`) and the
  cut into whole lines (:class:`LineFeed`);
- :mod:`~rdmadoctor.supervise.process`: the child itself (:class:`Child`): its process group,
  the signals forwarded, the terminal, the read loop, how it ended (:class:`ChildResult`);
- :mod:`~rdmadoctor.supervise.diagnosis`: what of the output is read (:class:`Watch`) and the
  diagnosis thread behind its bounded queue (:class:`Diagnosing`);
- :mod:`~rdmadoctor.supervise.report`: ``--report-file``, checked before anything runs and
  written at exit;
- :mod:`~rdmadoctor.supervise.job`: the whole command (:func:`run_job`): preflight's gate, the
  child's environment, and the final verdict.

It sits above :mod:`rdmadoctor.preflight` (whose gate it runs) and below the CLI. No typer and no
command-line parsing here (``rdmadoctor.cli.run`` parses the line); usage problems are raised as
PreflightError.
"""

from __future__ import annotations

from rdmadoctor.supervise.diagnosis import Diagnosing, Watch, transport_message
from rdmadoctor.supervise.job import SCHEMA, command_text, run_job
from rdmadoctor.supervise.process import Child, ChildResult, SpawnError
from rdmadoctor.supervise.streams import LINE_LIMIT, PREFIX, LineFeed, Sink

__all__ = [
    "LINE_LIMIT", "PREFIX", "SCHEMA", "Child", "ChildResult", "Diagnosing", "LineFeed", "Sink", "SpawnError", "Watch",
    "command_text", "run_job", "transport_message",
]
