"""NCCL's RAS report (what ``ncclras`` prints, what its socket answers to ``STATUS``), text or JSON.

Pure and linear: text in, a :class:`RasReport` out; every pattern is anchored, its runs bounded,
and a line is read for at most :data:`MAX_LINE` characters. The formats are NCCL's, read from
its source (NVIDIA/nccl, never copied here):

- the text report: ``src/ras/client_support.cc`` (``rasClientRunInit``: "NCCL version ... compiled
  with CUDA", "Job summary"; ``rasClientRunComms``: "Communicators...", the group table, "Errors"
  with INCOMPLETE / DEAD / ``#g-c (hash) INCOMPLETE|ERROR``, "Warnings" with TIMEOUT and
  ``#g-c (hash) MISMATCH``; ``rasClientBreakDownErrors``: "N ranks reported E"). Versions that
  changed it: 2.24-2.25 "different collective operation counts" (one count for all collectives)
  and "The missing ranks: 1,2"; 2.26 one count per collective ("different AllGather operation
  counts"), missing ranks one per line with GPU, process and node; 2.27 "have not launched any
  operations".
- the JSON report (2.28.7+, ``SET FORMAT json``): ``rasDumpCommsToJSON`` and its ``json*``
  helpers in the same file: ``nccl_version``, ``communicators[]`` with ``ranks[]`` (``status``:
  ``init_state``, ``async_error``, ``abort_flag`` ...; ``collective_counts``) and
  ``missing_ranks[]`` (``status``: ``unresponsive``, ``considered_dead``), ``ras.timeouts_count``.

NCCL's text names a rank or process only when it is an outlier (``rasCountIsOutlier``: a single
one always; a group of at most 10 and at most a quarter of the communicator otherwise): a group
it does not list is kept with its count and no ranks (``OpGroup.ranks == ()``; nccl#1911 shows
30 stragglers unnamed beside the 2 ranks ahead). The JSON lists every rank.
"""

from __future__ import annotations

import re

from rdmadoctor.core.record import record

MAX_LINE = 4096
MAX_ITEMS = 4096  # ranks, processes or groups kept per list: a report of 100k ranks stays bounded

# ncclResult_t (src/nccl.h.in) by number, as RAS's ncclErrorToString words them.
NCCL_RESULTS = {1: "Unhandled CUDA error", 2: "System error", 3: "Internal error", 4: "Invalid argument",
                5: "Invalid usage", 6: "Remote process error", 7: "NCCL operation in progress", 8: "Timeout"}


@record
class RasRank:
    """A rank, or a process, as the report names it; a field the report does not give is None."""

    rank: int | None = None
    gpu: str | None = None  # "3", or "3 (NVML 5)"; a process: "0,1"
    pid: int | None = None
    node: str | None = None  # the IP address of its RAS socket (NCCL resolves no names)
    unresponsive: bool = False  # JSON: it did not answer this query
    dead: bool = False  # JSON: RAS considers it dead

    def where(self) -> str:
        """'rank 3 (GPU 3, process 4567 on node 10.0.0.2)', with what is known."""
        head = f"rank {self.rank}" if self.rank is not None else (f"process {self.pid}" if self.pid is not None else "a process")
        parts = []
        if self.gpu is not None:
            parts.append(f"GPU {self.gpu}")
        if self.rank is not None and self.pid is not None:
            parts.append(f"process {self.pid}" + (f" on node {self.node}" if self.node else ""))
        elif self.node:
            parts.append(f"on node {self.node}")
        return head + (f" ({', '.join(parts)})" if parts else "")


@record
class OpGroup:
    """Ranks of one communicator that agree on one count (of one collective) or one status."""

    value: int | str  # the operation count (0: none launched) or the status ("RUNNING")
    count: int  # how many ranks have it
    ranks: tuple[RasRank, ...] = ()  # those NCCL listed (every one in JSON; only outliers in text)


@record
class RankErrors:
    """Ranks of one communicator that reported one error."""

    kind: str  # "async" | "init"
    error: str  # "Remote process error"
    count: int
    ranks: tuple[RasRank, ...] = ()


@record
class RasComm:
    """One communicator the report has something to say about."""

    id: str  # "#0-0 (fa93daea854b060b)" in text, the hash in JSON
    size: int | None = None
    missing: int = 0  # ranks whose data did not come
    missing_ranks: tuple[RasRank, ...] = ()
    statuses: tuple[OpGroup, ...] = ()  # when the ranks' status differ
    op_counts: tuple[tuple[str, tuple[OpGroup, ...]], ...] = ()  # (collective, its groups) that differ
    errors: tuple[RankErrors, ...] = ()


@record
class RasReport:
    format: str  # "text" | "json"
    nccl_version: str | None = None
    nodes: int | None = None
    processes: int | None = None
    gpus: int | None = None
    communicators: int | None = None  # how many the report covers (None: no table read)
    comm_states: tuple[tuple[str, str], ...] = ()  # (status, errors) of each group of the table
    missing_processes: int = 0  # job processes whose data did not come (INCOMPLETE)
    missing: tuple[RasRank, ...] = ()
    dead_processes: int = 0
    dead: tuple[RasRank, ...] = ()
    comms: tuple[RasComm, ...] = ()
    timeouts: int = 0
    no_comms: bool = False  # "No communicator data collected!"
    complete: bool = False  # read to where NCCL ends it (its Warnings heading, or the whole JSON)

    @property
    def problems(self) -> bool:
        return bool(self.missing_processes or self.dead_processes or self.timeouts
                    or any(c.missing or c.statuses or c.op_counts or c.errors for c in self.comms)
                    or any(e != "OK" or s == "ABORT" for s, e in self.comm_states))

    @property
    def healthy(self) -> bool:
        """NCCL's own report says all is well: read whole, communicators seen, nothing wrong."""
        return self.complete and not self.no_comms and bool(self.communicators) and not self.problems


def looks_like(text: str) -> str | None:
    """"text" or "json" when ``text`` starts like a RAS report, else None."""
    head = text.lstrip()[:2048]
    if head.startswith('"nccl_version"'):
        head = "{" + head
    if head.startswith("{") and '"communicators' in head and '"nccl_version"' in head:
        return "json"
    if _VERSION.match(head.split("\n", 1)[0]) or "\nJob summary\n" in head or head.startswith("Job summary"):
        return "text"
    return None


def parse(text: str) -> RasReport | None:
    """The report in ``text`` (text or JSON, as NCCL wrote it), or None when it is neither."""
    kind = looks_like(text)
    if kind == "json" or (kind is None and '"communicators"' in text[:65536]):
        rep = parse_json(text)
        if rep is not None:
            return rep
    if kind == "text" or "Job summary" in text[:65536] or "Communicators..." in text[:65536]:
        return parse_text(text)
    return None


# ---- text ---------------------------------------------------------------------------------------

_VERSION = re.compile(r"^\s*NCCL version (?P<v>[\w.+-]{1,40}) compiled with CUDA [\w.]{1,20}\s*$")
_INTS = re.compile(r"^\s*(\d{1,9})(?:\s+(\d{1,9})){2,4}\s*$")
_TABLE_ROW = re.compile(r"^\s*\d{1,6}\s+\d{1,9}\s+\d{1,9}\s+[\d-]{1,20}\s+\d{1,9}\s+\d{1,9}\s+"
                        r"(?P<status>NOCOMM|INIT|RUNNING|FINALIZE|ABORT|UNKNOWN)\s+(?P<errors>[A-Z,]{2,40})\s*$")
_COMM = re.compile(r"^#(?P<id>\d{1,6}-\d{1,9}) \((?P<hash>[0-9a-f]{1,16})\) (?P<what>INCOMPLETE|ERROR|MISMATCH)\s*$")
_PROCESS = re.compile(r"^\s*Process (?P<pid>\d{1,10}) on node (?P<node>\S{1,64}) managing GPUs? (?P<gpu>[\d,]{1,200}"
                      r"(?: \(NVML [\d,]{1,200}\))?)\s*$")
_N_PROCS = re.compile(r"^\s*(?:Missing communicator data from (?P<missing>\d{1,9}) job process|"
                      r"(?P<dead>\d{1,9}) job process(?:es are| is) considered dead)")
_N_RANKS_MISSING = re.compile(r"^\s*Missing communicator data from (?P<n>\d{1,9}) rank")
_MISSING_LIST = re.compile(r"^\s*The missing ranks?: (?P<list>[\d,]{1,4000})\s*$")  # 2.24-2.25
_OP_DIFF = re.compile(r"^\s*Communicator ranks have different (?P<op>\w{1,40}) operation counts\s*$")
_GROUP = re.compile(r"^\s*(?P<n>\d{1,9}) ranks (?:have launched up to operation (?P<v>\d{1,20})|"
                    r"(?P<none>have not launched any operations)|have status (?P<s>[A-Z]{2,12})|reported (?P<e>[\w ]{1,80}?))\s*$")
_ERR_KIND = re.compile(r"^\s*(?P<kind>Initialization|Asynchronous) errors? on (?P<n>\d{1,9}) ranks?\s*$")
_RANK = re.compile(r"^\s*Rank (?P<rank>\d{1,9})(?: (?:has launched up to operation (?P<v>\d{1,20})|(?P<none>has not launched "
                   r"any operations)|has status (?P<s>[A-Z]{2,12})|reported (?P<e>[\w ]{1,80}?)))? -- "
                   r"(?:GPU (?P<gpu>\d{1,4}(?: \(NVML \d{1,4}\))?) managed by process (?P<pid>\d{1,10}) on node "
                   r"(?P<node>\S{1,64})|\[process information not found\])\s*$")
_TIMEOUT = re.compile(r"^\s*Encountered (?P<n>\d{1,9}) communication timeouts? while gathering")


def _rank_of(m: re.Match[str]) -> RasRank:
    return RasRank(rank=int(m["rank"]), gpu=m["gpu"], pid=int(m["pid"]) if m["pid"] else None, node=m["node"])


class _Comm:
    def __init__(self, cid: str) -> None:
        self.id, self.missing, self.missing_ranks = cid, 0, []  # type: ignore[var-annotated]
        self.statuses: list[list] = []  # [value, count, ranks]
        self.ops: list[tuple[str, list[list]]] = []
        self.errors: list[list] = []  # [kind, error, count, ranks]
        self.kind = "async"  # the error kind being listed

    def done(self) -> RasComm:
        return RasComm(id=self.id, missing=self.missing, missing_ranks=tuple(self.missing_ranks[:MAX_ITEMS]),
                       statuses=tuple(OpGroup(v, n, tuple(r)) for v, n, r in self.statuses),
                       op_counts=tuple((op, tuple(OpGroup(v, n, tuple(r)) for v, n, r in gs)) for op, gs in self.ops),
                       errors=tuple(RankErrors(k, e, n, tuple(r)) for k, e, n, r in self.errors))


def parse_text(text: str) -> RasReport:
    """The text report (any NCCL from 2.24 on); what it does not show stays at its default."""
    out: dict = {"format": "text"}
    comms: dict[str, _Comm] = {}
    missing: list[RasRank] = []
    dead: list[RasRank] = []
    procs: list[RasRank] | None = None  # the list Process lines go to
    comm: _Comm | None = None
    group: list | None = None  # the group Rank lines go to: [value, count, ranks]
    section = ""
    after_total = False
    states: list[tuple[str, str]] = []
    for raw in text.split("\n"):
        line = raw[:MAX_LINE].rstrip()
        s = line.strip()
        if not s:
            continue
        if s in ("Job summary", "Errors", "Warnings") or s.startswith("Communicators..."):
            section = s.split("...")[0]
            comm = group = procs = None
            if section == "Warnings":
                out["complete"] = True
            continue
        if set(s) == {"="}:
            continue
        m = _VERSION.match(line)
        if m:
            out["nccl_version"] = m["v"]
            continue
        if section == "Job summary":
            if s.startswith("(total)") or s.endswith("(total)"):
                after_total = True
                continue
            m = _INTS.match(line) if after_total else None
            if m:
                nums = [int(x) for x in s.split()]
                if len(nums) == 5:
                    out.update(nodes=nums[0], processes=nums[3], gpus=nums[4])
                elif len(nums) == 3:
                    out.update(nodes=nums[0], processes=nums[1], gpus=nums[2])
                after_total = False
            continue
        if section == "Communicators":
            m = _TABLE_ROW.match(line)
            if m and len(states) < MAX_ITEMS:
                states.append((m["status"], m["errors"]))
                out["communicators"] = out.get("communicators", 0) + int(s.split()[1])
            elif s.startswith("No communicator data collected"):
                out["no_comms"] = True
                out["communicators"] = 0
            continue
        m = _COMM.match(s)
        if m:
            cid = f"#{m['id']} ({m['hash']})"
            comm = comms.setdefault(cid, _Comm(cid))
            group = procs = None
            continue
        if s in ("INCOMPLETE", "DEAD"):
            comm, group = None, None
            procs = missing if s == "INCOMPLETE" else dead
            continue
        if s == "TIMEOUT":
            comm = group = procs = None
            continue
        m = _N_PROCS.match(line)
        if m:
            if m["missing"]:
                out["missing_processes"] = int(m["missing"])
            else:
                out["dead_processes"] = int(m["dead"])
            continue
        m = _PROCESS.match(line)
        if m and procs is not None:
            if len(procs) < MAX_ITEMS:
                procs.append(RasRank(gpu=m["gpu"], pid=int(m["pid"]), node=m["node"]))
            continue
        m = _TIMEOUT.match(line)
        if m:
            out["timeouts"] = int(m["n"])
            continue
        if comm is None:
            continue
        m = _N_RANKS_MISSING.match(line)
        if m:
            comm.missing = int(m["n"])
            group = None
            continue
        m = _MISSING_LIST.match(line)
        if m:
            comm.missing_ranks += [RasRank(rank=int(x)) for x in m["list"].split(",")[:MAX_ITEMS] if x]
            continue
        m = _ERR_KIND.match(line)
        if m:
            comm.kind = "init" if m["kind"] == "Initialization" else "async"
            group = None
            continue
        if s == "Communicator ranks have different status":
            comm.statuses = []
            group = None
            continue
        m = _OP_DIFF.match(line)
        if m:
            comm.ops.append(("collective" if m["op"] == "collective" else m["op"], []))
            group = None
            continue
        m = _GROUP.match(line)
        if m:
            group = _new_group(comm, m, int(m["n"]))
            continue
        m = _RANK.match(line)
        if m:
            r = _rank_of(m)
            if m["v"] or m["none"] or m["s"] or m["e"]:  # a group of one, said on its rank's line
                g = _new_group(comm, m, 1)
                if g is not None:
                    g[-1].append(r)
                group = None
            elif group is not None:
                if len(group[-1]) < MAX_ITEMS:
                    group[-1].append(r)
            elif len(comm.missing_ranks) < MAX_ITEMS:  # under "Missing communicator data from N ranks"
                comm.missing_ranks.append(r)
            continue
    out["comm_states"] = tuple(states)
    out["missing"], out["dead"] = tuple(missing), tuple(dead)
    out["missing_processes"] = max(out.get("missing_processes", 0), len(missing))
    out["dead_processes"] = max(out.get("dead_processes", 0), len(dead))
    out["comms"] = tuple(c.done() for c in comms.values())
    return RasReport(**out)


def _new_group(comm: _Comm, m: re.Match[str], n: int) -> list | None:
    if m["s"]:
        g: list = [m["s"], n, []]
        comm.statuses.append(g)
        return g
    if m["e"]:
        g = [comm.kind, m["e"].strip(), n, []]
        comm.errors.append(g)
        return g
    if not comm.ops:
        comm.ops.append(("collective", []))
    g = [int(m["v"]) if m["v"] else 0, n, []]
    comm.ops[-1][1].append(g)
    return g


# ---- JSON ---------------------------------------------------------------------------------------

_STATUS_OK = (0, 7)  # ncclSuccess, ncclInProgress


def parse_json(text: str) -> RasReport | None:
    """The JSON report of NCCL 2.28.7+, or None when ``text`` is not one."""
    import json

    if text.lstrip().startswith('"nccl_version"'):  # a paste that lost its first line, the opening brace
        text = "{" + text
    start = text.find("{")
    if start < 0:
        return None
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators"), list):
        return None
    comms, nodes, pids, gpus = [], set(), set(), 0
    missing_all: dict[tuple, RasRank] = {}
    states = []
    for c in doc["communicators"][:MAX_ITEMS]:
        if not isinstance(c, dict):
            continue
        ranks = [r for r in (c.get("ranks") or [])[:100000] if isinstance(r, dict)]
        miss = [r for r in (c.get("missing_ranks") or [])[:100000] if isinstance(r, dict)]
        listed = [_json_rank(r) for r in ranks]
        for r in listed:
            if r.node:
                nodes.add(r.node)
            if r.pid is not None:
                pids.add((r.node, r.pid))
        gpus += len(listed)
        missing_ranks = tuple(_json_rank(r, missing=True) for r in miss[:MAX_ITEMS])
        for r in missing_ranks:
            missing_all.setdefault((r.node, r.pid), r)
        ops = _json_ops(ranks, listed)
        errors = _json_errors(ranks, listed)
        statuses = _json_statuses(ranks, listed)
        state = "ABORT" if any(s.value == "ABORT" for s in statuses) else "RUNNING"
        err = ",".join(x for x, on in (("INCOMPLETE", bool(miss)), ("ERROR", bool(errors)),
                                       ("MISMATCH", bool(ops or len(statuses) > 1))) if on) or "OK"
        states.append((state, err))
        comms.append(RasComm(id=str(c.get("hash") or "?")[:40], size=_int(c.get("size")), missing=len(miss),
                             missing_ranks=missing_ranks, statuses=statuses if len(statuses) > 1 else (),
                             op_counts=ops, errors=errors))
    dead = tuple(r for r in missing_all.values() if r.dead)
    gone = tuple(r for r in missing_all.values() if not r.dead)
    ras = _dict(doc.get("ras"))
    return RasReport(format="json", nccl_version=str(doc.get("nccl_version"))[:40] if doc.get("nccl_version") else None,
                     nodes=len(nodes) or None, processes=len(pids) or None, gpus=gpus or None,
                     communicators=len(comms), comm_states=tuple(states), missing_processes=len(gone), missing=gone,
                     dead_processes=len(dead), dead=dead, comms=tuple(comms), timeouts=_int(ras.get("timeouts_count")) or 0,
                     no_comms=not comms, complete=True)


def _dict(v: object) -> dict:
    return v if isinstance(v, dict) else {}


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _json_rank(r: dict, missing: bool = False) -> RasRank:
    status = _dict(r.get("status"))
    cuda, nvml = _int(r.get("cuda_dev")), _int(r.get("nvml_dev"))
    gpu = None if cuda is None else (str(cuda) if nvml in (None, cuda) else f"{cuda} (NVML {nvml})")
    host = r.get("host")
    pid = _int(r.get("pid"))
    return RasRank(rank=_int(r.get("rank")), gpu=gpu, pid=pid if pid is not None and pid >= 0 else None,
                   node=str(host)[:64] if isinstance(host, str) and host != "unknown" else None,
                   unresponsive=missing and status.get("unresponsive") is True,
                   dead=missing and status.get("considered_dead") is True)


def _json_ops(ranks: list[dict], listed: list[RasRank]) -> tuple[tuple[str, tuple[OpGroup, ...]], ...]:
    out = []
    ops: list[str] = []
    for r in ranks:
        counts = r.get("collective_counts")
        if isinstance(counts, dict):
            ops += [k for k in counts if k not in ops]
    for op in ops[:64]:
        by: dict[int, list[RasRank]] = {}
        for r, rr in zip(ranks, listed):
            v = _int((r.get("collective_counts") or {}).get(op))
            if v is not None:
                by.setdefault(v, []).append(rr)
        if len(by) > 1:
            groups = sorted(by.items(), key=lambda kv: (-len(kv[1]), -kv[0]))  # as NCCL orders them
            out.append((op, tuple(OpGroup(v, len(rs), tuple(rs[:MAX_ITEMS])) for v, rs in groups)))
    return tuple(out)


def _json_errors(ranks: list[dict], listed: list[RasRank]) -> tuple[RankErrors, ...]:
    by: dict[tuple[str, str], list[RasRank]] = {}
    for r, rr in zip(ranks, listed):
        status = _dict(r.get("status"))
        for kind, key in (("init", "init_state"), ("async", "async_error")):
            v = _int(status.get(key))
            if v is not None and v not in _STATUS_OK:
                by.setdefault((kind, NCCL_RESULTS.get(v, f"NCCL error {v}")), []).append(rr)
    return tuple(RankErrors(k, e, len(rs), tuple(rs[:MAX_ITEMS])) for (k, e), rs in by.items())


def _json_statuses(ranks: list[dict], listed: list[RasRank]) -> tuple[OpGroup, ...]:
    by: dict[str, list[RasRank]] = {}
    for r, rr in zip(ranks, listed):
        st = _dict(r.get("status"))
        # As rasClientRunComms derives it: abort, then finalize (or destroy), then init state.
        s = ("ABORT" if st.get("abort_flag") is True else "FINALIZE" if st.get("finalize_called") is True or st.get("destroy_flag") is True
             else "RUNNING" if _int(st.get("init_state")) == 0 else "INIT")
        by.setdefault(s, []).append(rr)
    return tuple(OpGroup(s, len(rs), tuple(rs[:MAX_ITEMS])) for s, rs in by.items())


# ---- what the report says, in its own terms -----------------------------------------------------


def stragglers(groups: tuple[OpGroup, ...]) -> tuple[OpGroup | None, tuple[OpGroup, ...]]:
    """(the group behind, the groups ahead of it) of one collective's counts: the stragglers are
    the ranks with the lowest count, not the outliers NCCL lists (nccl#1911)."""
    counted = [g for g in groups if isinstance(g.value, int)]
    if len(counted) < 2:
        return None, ()
    low = min(counted, key=lambda g: int(g.value))
    return low, tuple(g for g in counted if g is not low)
