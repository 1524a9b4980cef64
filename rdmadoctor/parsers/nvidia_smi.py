"""``nvidia-smi topo -m`` / ``topo -mp`` output -> TopoMatrix.

A header row names the columns (GPU0.. then NIC0.. or, before the NIC Legend existed, the
RDMA device names such as mlx5_0), then ``CPU Affinity``, ``NUMA Affinity`` and, on newer
drivers, ``GPU NUMA ID``. Cells are tab- or space-separated; NIC rows leave the affinity cells
empty. A wrong column count would silently pair a GPU with the wrong NIC, so any GPU row
that does not hold exactly one known relation per device column rejects the whole matrix.
"""

from __future__ import annotations

import re

from rdmadoctor.core.facts import Parsed, TopoMatrix
from rdmadoctor.parsers.common import clean_lines

_TAIL_NAMES = r"CPU Affinity|NUMA Affinity|GPU NUMA ID"
_GPU = r"^GPU\d{1,4}$"
_NV = r"^NV\d{1,3}$"
_LEGEND = r"^\s*(NIC\d{1,4})\s*:\s*(\S+)\s*$"
# Relations as the legend lists them. SOC is what drivers before NODE existed printed for SYS.
_RELATIONS = {"X", "SYS", "NODE", "PHB", "PXB", "PIX", "SOC"}
# A cell that is not a relation: an affinity value ("0-31", "48-63,176-191", "3", "N/A").
_AFFINITY = r"^(?:\d[\d,-]*|N/A)$"


def _is_relation(cell: str) -> bool:
    return cell in _RELATIONS or re.match(_NV, cell) is not None


def _header(line: str) -> tuple[list[str], list[str]] | None:
    """Device columns and trailing column names, when ``line`` is the header row."""
    m = re.search(_TAIL_NAMES, line)
    devices_part = line[: m.start()] if m else line
    tail = re.findall(_TAIL_NAMES, line[m.start():]) if m else []
    columns = devices_part.split()
    if not columns or not any(re.match(_GPU, c) for c in columns):
        return None
    if any(_is_relation(c) for c in columns) or len(set(columns)) != len(columns):
        return None
    return columns, tail


def parse_topo(text: str) -> Parsed[TopoMatrix | None]:
    lines = clean_lines(text)
    header = None
    start = 0
    for i, line in enumerate(lines):
        header = _header(line)
        if header is not None:
            start = i + 1
            break
    if header is None:
        has_rows = any(re.match(_GPU, (line.split() or [""])[0]) for line in lines)
        what = "GPU rows but no header row" if has_rows else "no matrix"
        return Parsed(None, (f"nvidia-smi topo: {what} (expected a line naming GPU0 ... columns)",),
                      ok=False)

    columns, tail_names = header
    n = len(columns)
    gpu_cols = [i for i, c in enumerate(columns) if re.match(_GPU, c)]
    nic_cols = [i for i, c in enumerate(columns) if not re.match(_GPU, c)]
    warnings: list[str] = []
    gpu_errors: list[str] = []
    nic_errors: list[str] = []
    rows: dict[str, tuple[list[str], list[str]]] = {}
    end = len(lines)
    for j in range(start, len(lines)):
        cells = lines[j].split()
        if not cells:
            if rows:
                end = j
                break
            continue
        label = cells[0]
        if label not in columns:
            if rows or _header(lines[j]) is not None:
                end = j
                break
            continue
        relations = []
        for cell in cells[1:]:
            if re.match(_AFFINITY, cell):
                break
            relations.append(cell)
        affinity = cells[1 + len(relations):]
        where = f"row {label}"
        errors = gpu_errors if re.match(_GPU, label) else nic_errors
        if len(relations) != n:
            errors.append(f"{where}: expected {n} relation cells ({columns[0]}..{columns[-1]}), "
                          f"found {len(relations)}")
        else:
            unknown = [f"{columns[k]}={cell!r}" for k, cell in enumerate(relations)
                       if not _is_relation(cell)]
            if unknown:
                errors.append(f"{where}: unknown relation cell {', '.join(unknown)}")
        if label in rows:
            errors.append(f"{where} appears twice")
        rows[label] = (relations, affinity)

    if gpu_errors:
        return Parsed(None, tuple(gpu_errors + nic_errors), ok=False)
    warnings.extend(f"{e} (NIC row not used)" for e in nic_errors)

    gpus = [columns[i] for i in gpu_cols if columns[i] in rows]
    missing = [columns[i] for i in gpu_cols if columns[i] not in rows]
    if not gpus:
        return Parsed(None, ("nvidia-smi topo: header row but no GPU row",), ok=False)
    if missing:
        warnings.append(f"no row for {', '.join(missing)} (output cut off?): "
                        "left out of the matrix")

    gpu_nic = []
    gpu_gpu = []
    gpu_numa: list[int | None] = []
    gpu_cpu: list[str | None] = []
    for gpu in gpus:
        relations, affinity = rows[gpu]
        gpu_nic.append(tuple("SYS" if relations[i] == "SOC" else relations[i] for i in nic_cols))
        gpu_gpu.append(tuple("SYS" if relations[columns.index(g)] == "SOC" else relations[columns.index(g)] for g in gpus))
        values = dict(zip(tail_names, affinity)) if len(affinity) == len(tail_names) else {}
        if affinity and not values:
            warnings.append(f"row {gpu}: {len(affinity)} affinity cells for columns "
                            f"{tail_names}: affinity not read")
        cpu = values.get("CPU Affinity")
        numa = values.get("NUMA Affinity")
        gpu_cpu.append(cpu if cpu and cpu != "N/A" else None)
        numa_ok = numa is not None and numa.isascii() and numa.isdigit() and len(numa) < 6
        gpu_numa.append(int(numa) if numa is not None and numa_ok else None)
        for i in nic_cols:  # the NIC row should say the same about this GPU
            nic = columns[i]
            if nic in rows and len(rows[nic][0]) == n:
                back = rows[nic][0][columns.index(gpu)]
                if back != relations[i]:
                    warnings.append(f"{gpu}-{nic} is {relations[i]} but {nic}-{gpu} is {back}")

    names = {}
    for line in lines[end:]:
        if _header(line) is not None:  # a second matrix (another host) begins
            break
        m = re.match(_LEGEND, line)
        if m is not None:
            names[m.group(1)] = m.group(2)
    nics = []
    unresolved = []
    for i in nic_cols:
        column = columns[i]
        if re.match(r"^NIC\d{1,4}$", column) and column not in names:
            unresolved.append(column)
        nics.append(names.get(column, column))
    if unresolved:
        warnings.append(f"no NIC Legend entry for {', '.join(unresolved)}: RDMA device names "
                        "unknown, NICn names kept")

    value = TopoMatrix(
        gpus=tuple(gpus),
        nics=tuple(nics),
        gpu_nic=tuple(gpu_nic),
        gpu_numa=tuple(gpu_numa),
        gpu_cpu_affinity=tuple(gpu_cpu),
        gpu_gpu=tuple(gpu_gpu),
    )
    return Parsed(value, tuple(warnings), ok=True)
