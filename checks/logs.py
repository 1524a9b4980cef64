"""logs.diagnose: what the job printed, judged together with what this node is.

It reads the logs given on the command line (``rdmadoctor diagnose LOG ...``, ``-`` for stdin)
and a bundle's ``logs/`` (``rdmadoctor collect --log FILE``) with :mod:`rdmadoctor.logs`, whose
knowledge base turns NCCL, libibverbs, PyTorch and kernel lines into findings. Then:

- tool outputs pasted into the text (``ibstat``, ``ibv_devinfo``, ``ulimit -a``, ``df -h
  /dev/shm``, ``lsmod``) go to the checks that declare them (``Check.pastes``: every check loaded,
  a plugin's too), whose judges read them through their own probes, on a small in-memory bundle
  that holds the paste as its ``cmd/`` file (checks/_paste.py): a pasted ``ibstat`` is judged
  exactly as ``check --bundle`` judges a recorded one (one knowledge base, not two);
- NCCL's fallback to sockets is joined with the node (the check runs after every other one):
  "NCCL fell back to sockets although this node has 8 ACTIVE InfiniBand ports: <the reason the
  node checks found>", following from that finding (the uverbs device missing in the pod,
  NCCL_IB_HCA matching nothing, NCCL_IB_DISABLE, a missing libibverbs provider ...); the log's
  failures whose cause the node shows (ibv_reg_mr failing with ENOMEM under a low memlock limit,
  a shared-memory failure under a small /dev/shm) follow from the node's finding too.

The check is spread over private modules, one job each: ``_logs_pastes`` (the pasted tool
outputs, judged by the checks that declare them) and ``_logs_join`` (the node checks' findings,
and the log's findings made to follow from them), both loaded only when the check runs. This
module keeps its codes, the reading, the judgments of nccl-tests, NCCL's RAS and settings against
the fabric the log shows, and the check.
"""

from __future__ import annotations

import re

from rdmadoctor.checks import gpu, kernel, limits, nccl, pci, roce, verbs
from rdmadoctor.checks import ib as ib_checks
from rdmadoctor.checks._nccl_judge import gid_index_problem
from rdmadoctor.checks._paste import PORT_FILES as _PORT_FILES
from rdmadoctor.checks._paste import port_list as _port_list
from rdmadoctor.checks._paste import roce_gids as _roce_gids
from rdmadoctor.checks._rdma import ROCE_NETDEV_DOWN
from rdmadoctor.checks.ib import (
    IB_LINK_LAYER_MISMATCH,
    IB_NO_DEVICES,
    IB_NO_SM,
    IB_PORT_DOWN,
    IB_PORT_INIT,
    IB_PORT_RATE_LOW,
)
from rdmadoctor.checks.kernel import MOD_MISSING
from rdmadoctor.checks.limits import (
    MEMLOCK_LIMITED,
    SHM_NEARLY_FULL,
    SHM_TOO_SMALL,
)
from rdmadoctor.checks.nccl import NCCL_IB_GID_INDEX_BAD
from rdmadoctor.checks.roce import NET_MTU_LOW, ROCE_NO_V2_GID, ROCE_V2_GID
from rdmadoctor.core.codes.nccl import (
    LOG_UNREADABLE,
    LOGS_NOTHING_TO_JUDGE,
    LOGS_READ,
    NCCL_GDR_DISABLED,
    NCCL_NICS_UNUSED,
    NCCL_SOCKET_FALLBACK,
    NCCL_TEST_BUSBW_LOW,
    NCCL_TEST_WRONG_RESULTS,
)
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.model import (
    ERROR,
    INFO,
    UNKNOWN,
    WARNING,
    Check,
    Code,
    Finding,
    LazyCodes,
    Need,
    Paste,
)
from rdmadoctor.core.record import field, record, replace
from rdmadoctor.core.words import count, listing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from rdmadoctor.checks._logs_join import NodeView


# A run across nodes below this share of the NICs' bandwidth gets NCCL_TEST_BUSBW_LOW.
BUSBW_MIN_SHARE = 0.5

NO_LOGS = (
    "no job logs to read: give them with `rdmadoctor diagnose LOG ...` or `kubectl logs POD | rdmadoctor diagnose -`, or record them in a "
    "bundle with `rdmadoctor collect --log FILE`"
)


def _has_logs(ctx) -> str | None:
    given = getattr(ctx, "logs", ()) or getattr(ctx, "log_diagnosis", None) is not None
    return None if given or ctx.host.logs() else NO_LOGS


# ---- reading ----------------------------------------------------------------------------------


def _read(ctx) -> Any:
    """One Diagnosis of every log: a bundle's logs/ (through the Host, in pieces) and the paths given.

    `rdmadoctor diagnose` reads its files first (a progress line, stdin read once) and hands the
    Diagnoser over in ``ctx.log_diagnosis``; the bundle's logs join the same diagnosis.
    """
    from rdmadoctor.logs import Diagnoser

    pre = getattr(ctx, "log_diagnosis", None)
    d = pre if pre is not None else Diagnoser()
    from rdmadoctor.host import HostError

    for path in ctx.host.logs():
        name = path.lstrip("/")
        try:
            d.read_stream(name, ctx.host.open_log(path))
        except HostError as e:
            d.error(str(e), name)
            d.end_source()
    if pre is None:
        for path in getattr(ctx, "logs", ()):
            d.read(path)
    return d.finish()


# ---- nccl-tests' bandwidth against the fabric the same log shows -------------------------------


def _fabric(diag, node) -> tuple[list[tuple[str, float]], str] | None:
    """(device, Gb/s) of the ACTIVE ports NCCL can use, from a pasted ibstat / ibv_devinfo of the
    same log, else from the node checked; and where they come from. None: nothing shows them."""
    from rdmadoctor.checks._logs_pastes import _filtered

    found: list[tuple[str, float]] = []
    for seg in diag.segments:
        if seg.kind in ("ibstat", "ibstatus", "ibv_devinfo") and not _filtered(seg.command):
            found += [(d.name, p.rate_gbps) for d in _port_list(seg.kind, seg.text) for p in d.ports
                      if p.state == "ACTIVE" and p.rate_gbps]
    source = "the pasted port list"
    if not found:
        found, source = list(node.rates), "this node"
    if not found:
        bw = (diag.nccl or {}).get("net_bw_gbs")
        return ([("NCCL's topology", bw * 8)], "NCCL's topology in the log") if bw else None
    used = {d.get("name") for d in (diag.nccl or {}).get("net_devices") or ()}
    mine = [r for r in found if r[0] in used]
    return (mine or found), source


def _gid_tables(diag, layers: dict[str, str]) -> dict[tuple[str, int], tuple[list, Any]]:
    """(device, port) -> (its GIDs, the pasted output that lists them) of the RoCE ports a pasted
    `show_gids` or `ibv_devinfo -v` lists."""
    out: dict[tuple[str, int], tuple[list, Any]] = {}
    for seg in diag.segments:
        if seg.kind == "show_gids":
            for key, (_, gids) in _roce_gids(seg.text, layers).items():
                out.setdefault(key, (list(gids), seg))
        elif seg.kind == "ibv_devinfo":
            for d in _port_list(seg.kind, seg.text):
                for p in d.ports:
                    if p.gids and p.link_layer == "Ethernet":
                        out.setdefault((d.name, p.port), (list(p.gids), seg))
    return out


def _gid_index(diag, layers: dict[str, str]) -> list[Finding]:
    """NCCL_IB_GID_INDEX as the log says it, against the GID tables pasted beside it: the entry it names
    must be a RoCE v2 GID a peer can route to (with an IPv4 address), on every RoCE port NCCL uses."""
    setting = (diag.settings or {}).get("NCCL_IB_GID_INDEX")
    if setting is None or not re.fullmatch(r"\d{1,4}", setting["value"]):
        return []
    tables = _gid_tables(diag, layers)
    used = {d.get("name") for d in (diag.nccl or {}).get("net_devices") or () if isinstance(d, dict)}
    idx = int(setting["value"])
    bad, good, rows = [], set(), []
    for (dev, port), (gids, seg) in sorted(tables.items(), key=lambda kv: kv[0]):
        if used and dev not in used:
            continue
        problem, v4 = gid_index_problem(f"{dev}/{port}", gids, idx)
        if v4 is not None:
            good.add(v4)
        if problem is None:
            continue
        bad.append(problem)
        lines = seg.text.split("\n")
        at = next((i for i, x in enumerate(lines) if re.match(rf"\s*{re.escape(dev)}\s+{port}\s+{idx}\s", x)), 0)
        rows.append({"file": seg.file, "line": seg.line + at, "text": lines[at][:400], "host": None, "rank": None, "time": None})
    if not bad:
        return []
    fix = (f"Set NCCL_IB_GID_INDEX={next(iter(good))} (the RoCE v2 GID with the IPv4 address), or remove it on NCCL 2.21+, "
           "which picks that GID per port itself." if len(good) == 1 else
           "Remove NCCL_IB_GID_INDEX (NCCL 2.21+ picks the RoCE v2 IPv4 GID of each port), or give every port's netdev an "
           "IPv4 address so the index is the same on all.")
    ev = setting["evidence"]
    return [Finding(NCCL_IB_GID_INDEX_BAD.code, ERROR, "NCCL_IB_GID_INDEX",
                    f"NCCL_IB_GID_INDEX is set to {idx} (line {ev.get('line')} of {ev.get('file')}) and the pasted GID table says: "
                    f"{'; '.join(bad)}. Expected a RoCE v2 GID with an IPv4 address: NCCL's connections over that GID fail "
                    "(ibv_modify_qp timeouts) or stay in one L2 segment.",
                    fix, data={"evidence": [ev] + rows[:2], "gid_index": idx})]


def _unused_nics(diag) -> list[Finding]:
    """NCCL's device list against the ACTIVE ports of the same link layer a paste of the node shows."""
    from rdmadoctor.checks._logs_pastes import _filtered, _shown

    devices = [d for d in (diag.nccl or {}).get("net_devices") or () if isinstance(d, dict) and d.get("name")]
    layers = {d.get("link_layer") for d in devices}
    if not devices or len(layers) != 1 or None in layers or (diag.nccl or {}).get("nodes") == 1:
        return []  # none, both fabrics in one list (NCCL_MIXED_LINK_LAYERS), or one node: no traffic on them
    used = {d["name"] for d in devices}
    active: dict[str, tuple] = {}
    for seg in diag.segments:
        if seg.kind not in _PORT_FILES or _filtered(seg.command):
            continue
        for d in _port_list(seg.kind, seg.text):
            if any(p.state == "ACTIVE" and p.link_layer in layers for p in d.ports):
                active.setdefault(d.name, (seg, d))
    idle = sorted(set(active) - used)
    if not idle or not used & set(active):
        return []  # all used, or the paste is of another node (none of NCCL's devices in it)
    layer = {"InfiniBand": "InfiniBand", "Ethernet": "RoCE"}.get(str(next(iter(layers))), "RDMA")
    mine = sorted(used & set(active))
    setting = (diag.settings or {}).get("NCCL_IB_HCA")
    why = (f" NCCL_IB_HCA is set to {setting['value']} (line {setting['evidence'].get('line')} of "
           f"{setting['evidence'].get('file')}): that is what leaves them out." if setting else
           " NCCL_IB_HCA is not in the log: the pod may see only those devices (its rdma/hca resource, /dev/infiniband).")
    seg, _ = active[idle[0]]
    lines = seg.text.split("\n")
    at = next((i for i, x in enumerate(lines) if idle[0] in x), 0)
    ev = [setting["evidence"]] if setting else []
    ev.append({"file": seg.file, "line": seg.line + at, "text": lines[at][:400], "host": None, "rank": None, "time": None})
    return [Finding(NCCL_NICS_UNUSED.code, WARNING, "NCCL_IB_HCA" if setting else "NCCL devices",
                    f"NCCL's IB transport uses {len(mine)} of the {len(active)} ACTIVE {layer} ports the pasted `{_shown(seg)}` shows "
                    f"({', '.join(mine)}; not {', '.join(idle)}): inter-node bandwidth is at most {len(mine)}/{len(active)} of the "
                    f"node's.{why} If those ports carry storage or another job on purpose, nothing to do.",
                    NCCL_NICS_UNUSED.fix, data={"evidence": ev, "used": mine, "idle": idle})]


# ---- NCCL's RAS report pasted into the log (the scan keeps it as an "ncclras" output) -------------

EXPECT = {
    "hang_after_s": Expect(
        300.0, "number", "s", min=1, max=7 * 86400, null_means="off",
        doc="`rdmadoctor run`: a job that prints nothing for this long (or whose PyTorch watchdog reports a timeout) "
            "is hung: NCCL's RAS is asked and the node's ports are read. Below PyTorch's watchdog (10 min by default), "
            "so the hang is named before the job is killed; null: no hang watch.",
        example=120,
    ),
}


def _ras_reports(diag) -> list[Finding]:
    """Pasted RAS reports (text or JSON), judged as `rdmadoctor run` judges the one it asks for."""
    from rdmadoctor.core.codes.pytorch import NCCL_TIMEOUT
    from rdmadoctor.logs.ras import judge_report
    from rdmadoctor.parsers import ncclras

    hang = next((f for f in diag.findings if f.code == NCCL_TIMEOUT.code), None)
    said = None
    if hang is not None:
        ev = (hang.data.get("evidence") or [{}])[0]
        said = f"PyTorch's watchdog reports a collective timeout on line {ev.get('line')} of {ev.get('file')}"
    out: list[Finding] = []
    seen: dict[tuple[str, str], Finding] = {}
    for seg in diag.segments:
        if seg.kind != "ncclras" and not (seg.command or "").split()[:1] == ["ncclras"]:
            continue
        report = ncclras.parse(seg.text)
        if report is None:
            continue
        ev = [{"file": seg.file, "line": seg.line, "text": seg.text.split("\n", 1)[0][:400], "host": None, "rank": None,
               "time": None}]
        for f in judge_report(report, hang=said, evidence=ev, source="the pasted NCCL RAS report"):
            have = seen.get((f.code, f.subject))
            if have is not None:  # the same job asked twice (text, then JSON): one finding, both places
                if len(have.data["evidence"]) < 3:
                    have.data["evidence"].append(ev[0])
                continue
            seen[(f.code, f.subject)] = replace(f, data={**f.data, "evidence": list(ev), "pasted": "ncclras",
                                                         "format": report.format, "nccl_version": report.nccl_version})
            out.append(seen[(f.code, f.subject)])
    return out


def _test_tables(diag) -> list:
    """(segment, table) of every pasted nccl-tests result table, parsed once for the judges below."""
    from rdmadoctor.parsers.nccltests import parse_busbw

    tables = [(seg, parse_busbw(seg.text).value) for seg in diag.segments if seg.kind == "nccl-tests"]
    return [(seg, table) for seg, table in tables if table is not None]


def _busbw(diag, node, tables: list) -> list[Finding]:
    nodes = (diag.nccl or {}).get("nodes") or 0
    if nodes < 2:
        return []  # on one node NVLink carries the traffic: the NICs say nothing about it
    best = None
    for seg, table in tables:
        peak = table.peak_gbs
        if peak is not None and (best is None or peak > best[0]):
            best = (peak, seg)
    fabric = _fabric(diag, node)
    if best is None or fabric is None:
        return []
    peak, seg = best
    ports, source = fabric
    gbps = sum(r for _, r in ports)
    capacity = gbps / 8
    if peak >= capacity * BUSBW_MIN_SHARE:
        return []
    lines = seg.text.split("\n")
    at = next((i for i, x in enumerate(lines) if f"{peak:.2f}" in x), 0)
    nccl = diag.nccl or {}
    why, cause = "", None
    if nccl.get("socket_hosts") or str(nccl.get("network") or "").lower().endswith("socket"):
        why, cause = " NCCL ran over sockets, not the RDMA ports.", NCCL_SOCKET_FALLBACK.code
    elif nccl.get("gdr") is False:
        why, cause = " NCCL ran without GPUDirect RDMA (staged through host memory).", NCCL_GDR_DISABLED.code
    rate = ", ".join(sorted({f"{r:g} Gb/s" for _, r in ports}))
    what = (f"the NICs {source} shows" if ports[0][0] == "NCCL's topology" else
            f"the {count(len(ports), 'ACTIVE port')} ({rate}) {source} shows for NCCL")
    message = (f"nccl-tests peaked at {peak:g} GB/s bus bandwidth across {nodes} nodes; {what} carry about "
               f"{capacity:.0f} GB/s per node: expected at least {BUSBW_MIN_SHARE:.0%} of that "
               f"({capacity * BUSBW_MIN_SHARE:.0f} GB/s).{why}")
    ev = {"file": seg.file, "line": seg.line + at, "text": lines[at][:400], "host": None, "rank": None, "time": None}
    data = {"evidence": [ev], "busbw_peak_gbs": peak, "fabric_gbps": gbps, "nodes": nodes, "pasted": "nccl-tests"}
    return [Finding(NCCL_TEST_BUSBW_LOW.code, WARNING, "nccl-tests", message, NCCL_TEST_BUSBW_LOW.fix, data=data,
                    cause=cause)]


def _wrong(tables: list) -> list[Finding]:
    """nccl-tests' `#wrong` columns: a row whose results differ from the expected values is wrong data
    moved or reduced, whether or not the run printed its `Out of bounds values` summary."""
    for seg, table in tables:
        bad = [r for r in table.rows if r.wrong > 0]
        if not bad:
            continue
        lines = seg.text.split("\n")
        first = str(bad[0].size_bytes)
        at = next((i for i, x in enumerate(lines) if x.split()[:1] == [first]), 0)
        ev = {"file": seg.file, "line": seg.line + at, "text": lines[at][:400], "host": None, "rank": None, "time": None}
        wrong = sum(r.wrong for r in bad)
        message = (f"nccl-tests counted wrong results in {count(len(bad), 'size')} of {len(table.rows)} ({wrong} "
                   f"elements in the #wrong columns, first at {bad[0].size_bytes} bytes): the collective completed with "
                   "data that differs from what it should be.")
        return [Finding(NCCL_TEST_WRONG_RESULTS.code, ERROR, "nccl-tests", message, NCCL_TEST_WRONG_RESULTS.fix,
                        data={"evidence": [ev], "wrong": wrong, "pasted": "nccl-tests"})]
    return []


def _tables_read(tables: list) -> tuple[dict, ...]:
    """What each pasted nccl-tests table measured, said in the summary: a table read is a table judged,
    whether or not a finding came of it (its busbw is compared with the NICs only across nodes)."""
    out = []
    for seg, table in tables:
        sizes = sorted(r.size_bytes for r in table.rows)
        lines = seg.text.split("\n")
        first = next((i for i, x in enumerate(lines) if x.split()[:1] and x.split()[0].isdigit()), 0)  # its first row
        out.append({"file": seg.file, "line": seg.line + first, "sizes": len(sizes), "smallest_bytes": sizes[0] if sizes else None,
                    "largest_bytes": sizes[-1] if sizes else None, "busbw_peak_gbs": table.peak_gbs,
                    "wrong": sum(r.wrong for r in table.rows)})
    return tuple(out)


def pastes_of(checks) -> dict[str, tuple[Paste, ...]]:
    """Pasted-output kind -> the declarations (Check.pastes) of the checks that judge it, in check order."""
    out: dict[str, list[Paste]] = {}
    for c in checks:
        for p in getattr(c, "pastes", ()) or ():
            out.setdefault(p.kind, []).append(p)
    return {kind: tuple(ps) for kind, ps in out.items()}


def _loaded(ctx) -> tuple[Check, ...]:
    """Every check loaded (the engine's Context.loaded), else those of this run."""
    return tuple(getattr(ctx, "loaded", ()) or ()) or tuple((getattr(ctx, "checks", None) or {}).values())


# ---- the check -------------------------------------------------------------------------------


@record
class LogFacts:
    diagnosis: Any  # rdmadoctor.logs.Diagnosis
    pasted: tuple[Finding, ...] = ()  # judged from the tool outputs pasted into the logs
    node: NodeView = field(default_factory=lambda: _no_node())
    judged: tuple[str, ...] = ()  # the pasted outputs a check judged, as shown to the user
    tests: tuple[dict, ...] = ()  # what each pasted nccl-tests table measured (_tables_read)


def _no_node() -> NodeView:
    from rdmadoctor.checks._logs_join import NodeView

    return NodeView(False)


def probe_logs(ctx) -> LogFacts:
    # The parts that read pastes and join the node, loaded only when the check runs (a check
    # without logs, the usual `rdmadoctor check`, never needs them).
    from rdmadoctor.checks._logs_join import _node_view
    from rdmadoctor.checks._logs_pastes import _judged, _link_layers, _pasted

    diag = _read(ctx)
    node = _node_view(ctx)
    tables = _test_tables(diag)
    judges = pastes_of(_loaded(ctx))
    layers = _link_layers(diag) if diag.settings.get("NCCL_IB_GID_INDEX") else {}
    return LogFacts(diag, tuple(_ras_reports(diag) + _pasted(diag, ctx.expect, node, judges) + _busbw(diag, node, tables)
                                + _wrong(tables) + _gid_index(diag, layers) + _unused_nics(diag)), node,
                    tuple(_judged(diag, judges)), _tables_read(tables))


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} bytes"


def _tests_said(tests: tuple[dict, ...]) -> str:
    """The summary's sentence on the pasted nccl-tests tables: sizes, peak bus bandwidth, wrong results."""
    parts = []
    for t in tests[:4]:
        if not t["sizes"]:
            parts.append(f"{t['file']}:{t['line']} holds its heading and no row")
            continue
        span = _size(t["smallest_bytes"]) if t["sizes"] == 1 else f"{_size(t['smallest_bytes'])} to {_size(t['largest_bytes'])}"
        peak = "no bus bandwidth" if t["busbw_peak_gbs"] is None else f"peak bus bandwidth {t['busbw_peak_gbs']:g} GB/s"
        wrong = f"{t['wrong']} wrong results" if t["wrong"] else "no wrong results"
        parts.append(f"{count(t['sizes'], 'size')} ({span}), {peak}, {wrong} ({t['file']}:{t['line']})")
    return " nccl-tests: " + "; ".join(parts) + "."


def _summary(diag, judged: list[str], tests: tuple[dict, ...] = ()) -> Finding:
    from rdmadoctor.logs import transport_line

    read = [s for s in diag.sources if s.get("bytes")]
    names = ", ".join(s["name"] for s in read[:6]) + (f" and {len(read) - 6} more" if len(read) > 6 else "")
    total = sum(s.get("bytes") or 0 for s in read)
    lines = sum(s.get("lines") or 0 for s in read)
    empty = [s["name"] for s in diag.sources if not s.get("bytes") and not s.get("error")]
    line = transport_line(diag.nccl) or (
        "NCCL's transport is not in the logs (run the job with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)"
    )
    message = f"read {count(len(read), 'log')}, {_size(total)}, {count(lines, 'line')} ({names}): {line}."
    if judged:
        message += f" Judged the pasted output of {listing(judged)}."
    if tests:
        message += _tests_said(tests)
    if empty:
        message += f" Empty: {', '.join(empty[:6])}."
    if diag.notes:
        message += " " + "; ".join(diag.notes) + "."
    data = {"sources": diag.sources, "segments": [{"kind": s.kind, "command": s.command, "file": s.file, "line": s.line}
                                                  for s in diag.segments], "judged": judged}
    if tests:
        data["nccl_tests"] = list(tests)
    return Finding(LOGS_READ.code, INFO, "logs", message, data=data)


def judge_logs(facts: LogFacts, expect: dict) -> list[Finding]:
    from rdmadoctor.checks._logs_join import _join
    from rdmadoctor.checks._logs_pastes import _shown

    diag = facts.diagnosis
    out = _join(list(diag.findings), list(facts.pasted), facts.node, diag.nccl)
    seen = {(f.code, f.subject) for f in out}
    # A pasted limit that only might bind (capabilities unknown) is an error once the log shows a
    # registration failing with ENOMEM because of it.
    bound = {f.data["follows"]["subject"] for f in out if f.cause == MEMLOCK_LIMITED.code and f.data.get("follows", {}).get("check") == "logs.diagnose"}
    out += [replace(f, severity=ERROR) if f.code == MEMLOCK_LIMITED.code and f.subject in bound else f
            for f in facts.pasted if (f.code, f.subject) not in seen]
    for s in diag.sources:
        if s.get("error"):
            out.append(
                Finding(
                    LOG_UNREADABLE.code,
                    UNKNOWN,
                    s["name"],
                    f"{s['error']}" + (f" ({_size(s['bytes'])} read before)" if s.get("bytes") else ""),
                    LOG_UNREADABLE.fix,
                )
            )
    judged = list(facts.judged)
    if diag.read_any and not diag.recognised and not facts.pasted and not judged:
        read = [s for s in diag.sources if s.get("bytes")]
        lines = sum(s.get("lines") or 0 for s in read)
        others = list(dict.fromkeys(f"`{_shown(seg)}`" for seg in diag.segments))
        outputs = (f"the pasted output of {listing(others[:6])}, which holds nothing rdmadoctor judges" if others else "no tool output")
        if any(seg.kind == "ibdev2netdev" for seg in diag.segments):
            outputs += (" (ibdev2netdev's (Up)/(Down) of an InfiniBand port is its IPoIB interface's state, not the port's: "
                        "`ibstat` shows the port)")
        out.append(Finding(LOGS_NOTHING_TO_JUDGE.code, UNKNOWN, "logs",
                           f"read {count(lines, 'line')} ({_size(sum(s['bytes'] for s in read))}) and found nothing to judge: no NCCL "
                           f"line, no known message, no error line or traceback; {outputs}. Expected the output of "
                           "a job run with NCCL_DEBUG=INFO, or a pasted command with its prompt.",
                           LOGS_NOTHING_TO_JUDGE.fix))
    if diag.read_any:
        out.append(_summary(diag, judged, facts.tests))
    return out


def _inventory(facts: LogFacts) -> dict:
    d = facts.diagnosis
    return {"nccl": d.nccl, "logs": {"sources": d.sources, "notes": d.notes}}


def _codes() -> tuple[Code, ...]:
    """Every code this check can emit: the knowledge base's own, the node checks' codes its rows
    and its pasted outputs reuse (one meaning, one code), and its two of its own. Read when the
    codes are (LazyCodes): `check` without logs skips this check without importing the kb."""
    from rdmadoctor.logs import kb

    direct = (
        LOGS_READ, LOG_UNREADABLE, LOGS_NOTHING_TO_JUDGE, NCCL_TEST_BUSBW_LOW, IB_NO_DEVICES, IB_PORT_DOWN, IB_PORT_INIT, IB_NO_SM, IB_PORT_RATE_LOW,
        IB_LINK_LAYER_MISMATCH, MEMLOCK_LIMITED, SHM_TOO_SMALL, SHM_NEARLY_FULL, MOD_MISSING, ROCE_NO_V2_GID, ROCE_V2_GID,
        ROCE_NETDEV_DOWN, gpu.GPU_NIC_FAR, gpu.GPU_NIC_NEAR, NCCL_IB_GID_INDEX_BAD, NCCL_NICS_UNUSED, NET_MTU_LOW,
    )
    by = {c.code: c for c in (*kb.codes(), *direct)}
    elsewhere = {c.code: c for mod in (ib_checks, roce, verbs, limits, kernel, gpu, pci, nccl) for chk in mod.CHECKS for c in chk.codes}
    for row in kb.patterns():
        if row.code not in by and row.code in elsewhere:
            by[row.code] = elsewhere[row.code]
    return tuple(by.values())


# After the node checks: logs.diagnose joins the log with what they found (then node.labels, 910).
ORDER = 900

CHECKS = [
    Check(
        scope="pod",
        id="logs.diagnose",
        condition=None,
        gate=False,
        title="Job logs (NCCL, libibverbs, PyTorch, kernel)",
        probe=probe_logs,
        judge=judge_logs,
        codes=LazyCodes(_codes),
        needs=(Need("job logs", _has_logs),),
        # After every other check: the join needs what the node checks found.
        after=("*",),
        inventory=_inventory,
        defaults=EXPECT,
        description="The job's logs (`rdmadoctor diagnose LOG`, a bundle's logs/ from `collect --log`) through the "
        "knowledge base: root causes first, each with its evidence; tool outputs pasted in them judged by the node "
        "checks; NCCL's fallback to sockets joined with this node's ports and the reason the node checks found.",
    ),
]
