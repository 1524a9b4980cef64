"""``rdmadoctor slurm health``: the checks, then one decision (:func:`rdmadoctor.core.quarantine.decide`),
then at most one change through scontrol.

- a problem, for ``quarantine_after`` consecutive runs, within the partition's budget and not in a
  storm: drain with ``rdmadoctor: CODE subject (+N more)``;
- healthy for ``release_after`` consecutive runs: resume, only a node whose reason starts
  ``rdmadoctor:``; another's drain is never resumed nor rewritten; a drain of the Prolog's gang
  (``GANG_*``) only where the node's own checks vouch for what the gang blamed
  (:func:`gang_release`), else it is kept, and every run says why and how a person resumes it;
- unknown: nothing (``--unknown drain``: taken as a problem, its first could-not-decide code as
  the root).

The runs are counted in a small state file per node (``--state-dir``, default
/var/lib/rdmadoctor/slurm). The storm rule counts the partition's failing nodes from Slurm's own
record (the nodes drained with an ``rdmadoctor:`` reason), with no shared file system; on a
shared state dir every node also sees the others' latest verdicts, the nodes not drained yet.
"""

from __future__ import annotations

import json
import os
import time

from rdmadoctor.core import quarantine as Q
from rdmadoctor.core.record import replace
from rdmadoctor.slurm import reason as R
from rdmadoctor.slurm.scontrol import Scontrol, SlurmError, describe, is_drained, partitions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

SCHEMA = "rdmadoctor.slurm-health/v1"
DEFAULT_STATE_DIR = "/var/lib/rdmadoctor/slurm"
UNKNOWN_MODES = ("leave", "drain")
# Another node's state file counts towards the partition's failing share while it is this fresh:
# a node whose health check stopped running says nothing about now.
STALE_S = 3600.0
# The Slurm features rdmadoctor keeps in step with its labels (--features); no other is touched.
FEATURES = ("rdma", "ib", "roce", "rdma_ready")


def node_name(given: str | None, env: dict[str, str]) -> str:
    """SLURMD_NODENAME (slurmd sets it for HealthCheckProgram and the Prolog), else --node, else
    the short host name."""
    if env.get("SLURMD_NODENAME", "").strip():
        return env["SLURMD_NODENAME"].strip()
    if given is not None:
        if not given.strip():
            raise SlurmError("--node is empty", "give the NodeName slurm.conf has for this node, or leave --node out")
        return given.strip()
    import socket

    return socket.gethostname().split(".")[0]


def state_path(state_dir: str, node: str) -> str:
    return os.path.join(state_dir, f"{node}.json")


def prepare_state_dir(state_dir: str) -> None:
    if not state_dir.strip():
        raise SlurmError("--state-dir is empty", f"give a directory for the state files, e.g. --state-dir {DEFAULT_STATE_DIR}")
    try:
        os.makedirs(state_dir, mode=0o755, exist_ok=True)
    except OSError as e:
        raise SlurmError(f"--state-dir {state_dir}: cannot create it ({e.strerror or e})",
                         "give a directory this user may write, e.g. --state-dir /var/lib/rdmadoctor/slurm") from None
    if not os.access(state_dir, os.W_OK | os.X_OK):
        raise SlurmError(f"--state-dir {state_dir}: not writable by this user", "run as root (HealthCheckProgram does), or give another --state-dir")


def load_state(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


# Where a failing node of the partition was seen (the report's pool.failing_nodes).
FROM_SLURM, FROM_STATE, FROM_THIS_RUN = "rdmadoctor's drain in Slurm", "its state file", "this run"


def count_pool(me: dict[str, str], nodes: list[dict[str, str]], state_dir: str, verdict: str, root_code: str,
               now: float) -> tuple[Q.Pool, list[str], dict[str, str]]:
    """The partition as seen now: its size, the nodes rdmadoctor holds, the failing ones, and where
    each failing one was seen (:data:`FROM_SLURM`...).

    Slurm's own record comes first and needs no shared file system: every node of the partition
    whose drain reason starts ``rdmadoctor:`` (``scontrol show node -o``: a health check's drain
    or a Prolog's) is held and failing. A shared ``--state-dir`` adds the nodes not drained (yet)
    whose fresh state file says problem; this node counts by this run's verdict."""
    mine = set(partitions(me))
    pool = [n for n in nodes if mine & set(partitions(n))] or [me]
    name = me.get("NodeName", "")
    held: list[str] = []
    failing: dict[str, str] = {}
    for n in pool:
        nn = n.get("NodeName", "")
        if is_drained(n) and R.is_ours(n.get("Reason")):
            held.append(nn)
            failing[nn] = R.code_of(n.get("Reason"))
        if nn != name:
            st = load_state(state_path(state_dir, nn))
            fresh = isinstance(st.get("time"), (int, float)) and 0 <= now - st["time"] <= STALE_S
            if fresh and st.get("verdict") == Q.PROBLEM:
                failing.setdefault(nn, str(st.get("root_code") or ""))
    failing.pop(name, None)
    seen = {n: FROM_SLURM if n in held else FROM_STATE for n in failing}
    if verdict == Q.PROBLEM:
        failing[name] = root_code
        seen[name] = FROM_THIS_RUN
    codes = [c for c in failing.values() if c]
    common = max(sorted(set(codes)), key=codes.count) if codes else ""
    pool_size = Q.Pool(size=len(pool), held=len(held), failing=len(failing), common_code=common)
    return pool_size, sorted(pool_names(pool)), dict(sorted(seen.items()))


def pool_names(pool: list[dict[str, str]]) -> list[str]:
    return [n.get("NodeName", "") for n in pool]


def over_budget(sc: Scontrol, me: dict[str, str], guard: Q.Guardrails, size: int) -> str:
    """After a drain: did other nodes of the partition drain at the same moment, past the budget?
    Every node that drained ranks the partition's rdmadoctor drains the same way (oldest first,
    then by name) and the ones past the budget resume themselves, so concurrent health checks
    never leave more drained than the budget. Returns why this node stands back, or ""."""
    name = me.get("NodeName", "")
    mine = set(partitions(me))
    held = sorted(
        ((n.get("ReasonTime", ""), n.get("NodeName", "")) for n in sc.nodes()
         if mine & set(partitions(n)) and is_drained(n) and R.is_ours(n.get("Reason"))),
    )
    limit = Q.budget_limit(guard.quarantine_budget, size)
    place = next((i for i, (_t, n) in enumerate(held) if n == name), None)
    if place is None or place < limit:
        return ""
    return (f"the partition's budget is spent: {len(held)} of {size} nodes drained by rdmadoctor at once, at most "
            f"{limit} (quarantine_budget {guard.quarantine_budget}); nodes that drained at the same moment keep the "
            "oldest drains, this node waits for a place")


def gang_release(reason: str | None, expect: dict[str, Any], name: str) -> tuple[bool, str]:
    """May a healthy run resume a node drained with ``reason``? (yes or no, what to say).

    A drain for the node's own root code: yes, its checks judged that code again and found it
    gone. A drain of the Prolog's gang (``rdmadoctor: GANG_...``): the gang blamed the node for
    differing from the job's other members, which the node's own checks cannot see alone, so a
    healthy run vouches for it only where the blamed fact is judged against an expectation that
    is set (the link layer: ``link_layer`` or ``rdma_transport``, :attr:`rdmadoctor.gang.compare.Field.vouched_by`):
    the node then has it as its pool expects, and a job of that pool no longer finds it odd.
    Otherwise it stays drained (resumed, it would take the next job and be drained again), and
    the answer says how a person releases it."""
    code = R.code_of(reason)
    if not code.startswith("GANG_"):
        return True, ""
    from rdmadoctor.gang.compare import FIELD

    words = str(reason).strip()[len(R.PREFIX):].split()
    field = FIELD.get(words[1]) if code == "GANG_MISMATCH_HANG" and len(words) > 1 else None
    resume = f"scontrol update nodename={name} state=resume"
    keys = field.vouched_by if field is not None else ()
    given = [k for k in keys if expect.get(k) is not None]
    if field is not None and given:
        return True, (f"its own checks judge the {field.label} the gang blamed ({code}) against its pool's "
                      f"{', '.join(f'{k}={expect[k]}' for k in given)}, and pass")
    blamed = f"{code} {field.name}" if field is not None else code
    if field is not None and keys:
        return False, (f"the Prolog's gang drained it ({blamed}); its own checks pass, but they judge the "
                       f"{field.label} only against an expectation and neither {' nor '.join(keys)} is set: set "
                       f"one for this partition (in its pool, or --set {keys[0]}=...) and the next healthy run "
                       f"resumes it, or resume it yourself: {resume}")
    what = (f"its {field.label} against the other members'" if field is not None
            else "the bandwidth measured against the other members" if code == "GANG_MEMBER_SLOW"
            else "what the gang compared")
    return False, (f"the Prolog's gang drained it ({blamed}); its own checks pass, but they cannot judge {what}: "
                   f"a person decides (`rdmadoctor explain {code}`), and once the node is fixed resumes it: {resume}")


def features_of(report: dict[str, Any], verdict: str) -> list[str]:
    """The Slurm features the labels call for: rdma (an ACTIVE RDMA port), ib / roce (the link
    layer), rdma_ready (healthy, every check passed)."""
    from rdmadoctor.core import labels as L

    labels = L.compute(report)[0]
    out = []
    if labels.get(L.RDMA_CAPABLE) == "true":
        out.append("rdma")
    ll = labels.get(L.LINK_LAYER)
    if ll in ("infiniband", "mixed"):
        out.append("ib")
    if ll in ("ethernet", "mixed"):
        out.append("roce")
    if verdict == Q.HEALTHY and labels.get(L.READY) == "true" and "rdma" in out:
        out.append("rdma_ready")
    return out


def _feature_list(raw: str | None) -> list[str]:
    return [f for f in (raw or "").split(",") if f and f != "(null)"]


def sync_features(sc: Scontrol, me: dict[str, str], wanted: list[str]) -> str:
    """Set this node's Slurm features so that of :data:`FEATURES` exactly ``wanted`` are there
    (available and active); every other feature is kept as it is. Returns what was done."""
    name = me.get("NodeName", "")
    avail, active = _feature_list(me.get("AvailableFeatures")), _feature_list(me.get("ActiveFeatures"))
    new_avail = [f for f in avail if f not in FEATURES] + wanted
    new_active = [f for f in active if f not in FEATURES] + wanted
    if sorted(new_avail) == sorted(avail) and sorted(new_active) == sorted(active):
        return f"features unchanged ({','.join(wanted) or 'none of ' + ','.join(FEATURES)})"
    sc.set_features(name, new_avail, new_active)
    return f"features set to {','.join(new_active) or '(none)'}"


def run_health(diagnosis: Any, *, name: str, sc: Scontrol, state_dir: str, unknown_mode: str = "leave",
               features: bool = False, strict: bool = False, report_file: str | None = None,
               say: Callable[[str], None] = print, now: float | None = None) -> tuple[int, dict[str, Any]]:
    """Decide and act for one run of the checks (``diagnosis``: a runner.Outcome). Returns (exit
    code, the slurm-health document). Raises SlurmError (exit 2) when Slurm cannot be read; a
    change that fails is said and exits 2 too."""
    now = time.time() if now is None else now
    report = diagnosis.report
    guard = Q.Guardrails.from_expect(diagnosis.ctx.expect)  # GuardError: the CLI's usage error
    verdict, root, codes = Q.verdict_of(report, strict)
    as_unknown = False
    if verdict == Q.UNDECIDED and unknown_mode == "drain" and report.get("status") == "unknown":
        found = R.problems(report, strict=strict, unknown=True)
        verdict, root, codes, as_unknown = Q.PROBLEM, (found[0]["code"] if found else "UNKNOWN"), [f["code"] for f in found], True
    me = sc.node(name)
    if me is None:
        raise SlurmError(f"slurmctld knows no node {name!r}",
                         "give --node NAME (the NodeName slurm.conf has for this node), or run it where SLURMD_NODENAME is set")
    nodes = sc.nodes()
    path = state_path(state_dir, name)
    saved = load_state(path)
    ours = is_drained(me) and R.is_ours(me.get("Reason"))
    history = replace(Q.History.from_json(saved.get("history")), held=ours,
                      held_code=R.code_of(me.get("Reason")) if ours else "")
    pool, members, failing = count_pool(me, nodes, state_dir, verdict, root, now)
    d = Q.decide(verdict, root, history, pool, guard)
    action, why, new_history = d.action, d.reason, d.history
    if action == Q.RELEASE and ours:
        may, said = gang_release(me.get("Reason"), diagnosis.ctx.expect, name)
        if not may:  # kept, its healthy streak still counted: an expectation set later resumes it at once
            action, why = Q.KEEP, f"{why}, but not resumed: {said}"
            new_history = replace(new_history, held=True, held_code=history.held_code)
        elif said:
            why = f"{why}; {said}"
    if action == Q.DEFER_STORM:
        named = [f"{n} ({src})" for n, src in failing.items()]
        why += f"; failing: {', '.join(named[:10])}{f' and {len(named) - 10} more' if len(named) > 10 else ''}"
    done = ""
    failed = ""
    try:
        if action == Q.HOLD:
            if is_drained(me) and not ours:
                # An administrator's (or another tool's) drain: never rewritten.
                new_history = replace(new_history, held=False, held_code="")
                done = f"not drained: already drained by another ({describe(me)}); its reason is kept"
            else:
                text = R.node_reason(report, root, strict=strict, unknown=as_unknown)
                sc.drain(name, text)
                done = f"drained: {text}"
                if not sc.dry_run:
                    late = over_budget(sc, me, guard, pool.size)
                    if late:
                        sc.resume(name)
                        action, why = Q.DEFER_BUDGET, late
                        new_history = replace(new_history, held=False, held_code="")
                        done = "drained, then resumed: " + late
        elif action == Q.RELEASE:
            if ours:
                sc.resume(name)
                done = f"resumed (its reason was rdmadoctor's: {me.get('Reason')})"
            else:  # not ours after all: nothing to release
                new_history = replace(new_history, held=False, held_code="")
                done = "nothing to resume: the node does not carry rdmadoctor's drain"
        elif verdict == Q.HEALTHY and is_drained(me) and not ours:
            done = f"healthy, but drained by another ({describe(me)}): left drained, its reason kept"
        feature_note = ""
        if features and verdict != Q.UNDECIDED:
            try:
                feature_note = sync_features(sc, me, features_of(report, verdict))
            except SlurmError as e:  # FeaturesPlugins or a NodeFeatures plugin may refuse: said, not fatal
                feature_note = f"features not changed: {e}"
    except SlurmError as e:
        failed = str(e)
        feature_note = ""
    state = {
        "node": name,
        "time": now,
        "verdict": verdict,
        "root_code": root,
        "codes": codes,
        "history": new_history.to_json(),
        "partitions": partitions(me),
    }
    try:
        if not sc.dry_run:  # a dry run shows what this run would do; it does not count as a run
            save_state(path, state)
    except OSError as e:
        failed = failed or f"cannot write the state file {path}: {e.strerror or e}"
    if verdict == Q.UNDECIDED:
        unknown = [f"{f['code']} {f.get('subject') or ''}".strip() for f in R.problems(report, unknown=True) if f.get("severity") == "unknown"]
        why = (f"{why}; could not decide: {', '.join(unknown[:5]) or 'a check could not run'}"
               f"{' (--unknown drain to drain on it)' if unknown_mode == 'leave' else ''}")
    doc = {
        "schema": SCHEMA,
        "node": name,
        "node_state": me.get("State"),
        "node_reason": me.get("Reason"),
        "verdict": verdict,
        "root_code": root,
        "codes": codes,
        "action": action,
        "why": why,
        "done": done,
        "error": failed or None,
        "features": feature_note or None,
        "commands": list(sc.changes),
        "dry_run": sc.dry_run,
        "pool": {"partition": ",".join(partitions(me)), "nodes": members, "size": pool.size, "held": pool.held,
                 "failing": pool.failing, "failing_nodes": failing, "common_code": pool.common_code},
        "guardrails": {"quarantine_after": guard.quarantine_after, "release_after": guard.release_after,
                       "quarantine_budget": guard.quarantine_budget, "storm_share": guard.storm_share},
        "history": new_history.to_json(),
        "report": report,
    }
    say(f"slurm: node {name} ({describe(me)}): {verdict}{' ' + root if root else ''}")
    say(f"slurm: {action}: {why}")
    if done:
        say(f"slurm: {done}")
    if feature_note:
        say(f"slurm: {feature_note}")
    if failed:
        say(f"slurm: error: {failed}")
    if report_file:
        _write_report(report_file, doc)
    code = 2 if failed else int(report.get("exit_code", 2))
    return code, doc


def _write_report(path: str, doc: dict[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
