"""Read what a job printed and say why it failed or ran slowly.

Layer: below host and checks, above parsers (pure text in, findings and facts out; no Host).

- :mod:`rdmadoctor.logs.kb`: the knowledge base, pattern tables one module per source.
- :mod:`rdmadoctor.logs.reader`: files, stdin, gzip, directories and their errors, as chunks.
- :mod:`rdmadoctor.logs.prefix`: a line's prefixes removed (kubectl --timestamps/--prefix,
  NCCL's ``[%F %T] host:pid:tid [dev]``, mpirun's ``[1,3]<stderr>:``, torchrun's ``[default3]:``),
  giving host, rank, pid and time; and what a ticket wraps around lines (markdown quotes, inline
  code, autolinked file names, a line a terminal broke in two: ``unwrap``, ``continues``).
- :mod:`rdmadoctor.logs.nccl`: what NCCL did (the report's ``nccl`` section).
- :mod:`rdmadoctor.logs.scan`: :class:`Diagnoser`, streamed and in constant memory.

Use::

    from rdmadoctor.logs import Diagnoser, diagnose_paths

    d = Diagnoser(on_transport=print_line)   # called once, when NCCL's transport is known
    d.feed(chunk, source="rank0.log")        # bytes, any chunking; CRLF, lone CR, ANSI colour, bad UTF-8 ok
    d.end_source()                           # the last line without a newline counts
    diagnosis = d.finish()                   # findings (root causes first), nccl, segments, sources

    diagnosis = diagnose_paths(["job.log.gz", "-"])  # files, gzip/bzip2/xz, stdin; errors per source
"""

from __future__ import annotations

__all__ = ["Diagnoser", "Diagnosis", "Segment", "diagnose_bytes", "diagnose_paths", "transport_line"]


def __getattr__(name: str):  # PEP 562
    # `check` imports rdmadoctor.logs.kb (the checks declare its codes) on every run; the scanner
    # (about 14 ms of imports) loads only when a log is read.
    if name in __all__:
        from rdmadoctor.logs import scan

        return getattr(scan, name)
    raise AttributeError(f"module 'rdmadoctor.logs' has no attribute {name!r}")
