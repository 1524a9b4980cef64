"""nccl-tests' result table (all_reduce_perf, all_gather_perf, ...): bus bandwidth per size.

NVIDIA/nccl-tests src/common.cu prints a header naming the columns, a units line, then one row
per size::

    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
       536870912     134217728     float     sum      -1    10052   53.41   93.46      0   9676.9   55.48   97.09      0

The columns differ between tests and versions (broadcast has ``root`` and no ``redop``, older
versions ``error`` for ``#wrong``), so rows are read by the header's names: ``busbw`` twice
(out-of-place, then in-place). busbw is the bandwidth normalised so that it compares with the
hardware's: for a run across nodes it approaches what each node's NICs carry together.
"""

from __future__ import annotations

import re

from rdmadoctor.core.facts import Parsed
from rdmadoctor.core.record import record
from rdmadoctor.core.words import count

_HEADER = r"^\s*#?\s*size\s+count\s+type\b.*\bbusbw\b"
_NUM = r"^\d{1,19}(?:\.\d{1,19})?$"
MAX_ROWS = 4096


@record
class BusbwRow:
    size_bytes: int
    busbw_gbs: tuple[float, ...]  # out-of-place, in-place (GB/s); the ones the row gives
    wrong: int = 0  # the `#wrong` columns summed: elements that differed from the expected values


@record
class BusbwTable:
    rows: tuple[BusbwRow, ...]

    @property
    def peak_gbs(self) -> float | None:
        values = [v for r in self.rows for v in r.busbw_gbs]
        return max(values) if values else None

    @property
    def largest(self) -> BusbwRow | None:
        return max(self.rows, key=lambda r: r.size_bytes) if self.rows else None


def is_header(line: str) -> bool:
    return re.match(_HEADER, line) is not None


def parse_busbw(text: str) -> Parsed[BusbwTable | None]:
    """The rows of an nccl-tests table (header line first); None when there is no header."""
    columns: list[str] | None = None
    rows: list[BusbwRow] = []
    skipped = 0
    for line in text.splitlines():
        if columns is None:
            if is_header(line):
                columns = line.replace("#", " ", 1).split() if line.lstrip().startswith("#") else line.split()
            continue
        words = line.split()
        if not words or words[0].startswith("#") or not words[0].isdigit():
            continue
        if len(words) != len(columns) or len(rows) >= MAX_ROWS:
            skipped += 1
            continue
        values = tuple(float(words[i]) for i, name in enumerate(columns) if name == "busbw" and re.match(_NUM, words[i]))
        # (`N/A` with validation off; older versions print a max error in `error`, not a count)
        wrong = sum(int(words[i]) for i, name in enumerate(columns)
                    if name == "#wrong" and words[i].isdigit() and len(words[i]) <= 19)
        if values and len(words[0]) <= 19:
            rows.append(BusbwRow(int(words[0]), values, wrong))
    if columns is None:
        return Parsed(None, ("no nccl-tests header (size count type ... busbw)",), ok=False)
    warnings = (f"{count(skipped, 'row')} with another number of columns than the header",) if skipped else ()
    return Parsed(BusbwTable(tuple(rows)), warnings, ok=bool(rows))
