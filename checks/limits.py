"""limits.memlock and shm.size: what the job's process may pin, and the room NCCL has in /dev/shm.

Whether RLIMIT_MEMLOCK binds RDMA depends on the process, not only on the limit: ib_umem_get()
(drivers/infiniband/core/umem.c, the pinning behind ibv_reg_mr) refuses a registration with
ENOMEM only when ``new_pinned > lock_limit && !capable(CAP_IPC_LOCK)``, and its earlier
``can_do_mlock()`` (mm/mlock.c) passes for a zero limit too when the process is capable. So a
process with CAP_IPC_LOCK in its effective set is not limited, whatever `ulimit -l` says.
``capable()`` asks the initial user namespace: in a user-namespaced pod (hostUsers: false) the
CapEff bit does not count.
"""

from __future__ import annotations

from rdmadoctor.core.codes.node import (
    _IPC_LOCK_YAML,
    _RAISE_DEFAULT,
    CAP_IPC_LOCK_MISSING,
    CAPS_UNREADABLE,
    MEMLOCK_BYPASSED_BY_IPC_LOCK,
    MEMLOCK_LIMITED,
    MEMLOCK_UNREADABLE,
    SHM_NEARLY_FULL,
    SHM_TOO_SMALL,
    SHM_UNREADABLE,
    SHM_YAML,
)
from rdmadoctor.core.expect import MAX_BYTES, Expect
from rdmadoctor.core.model import CONFIG, ERROR, INFO, UNKNOWN, WARNING, Check, Finding, Paste, PodChange
from rdmadoctor.core.record import record, replace

KIB, MIB, GIB = 1024, 1024**2, 1024**3
CAP_IPC_LOCK_BIT = 14  # include/uapi/linux/capability.h
DOCKER_SHM_DEFAULT = 64 * MIB  # docker/containerd give every container a 64 MiB /dev/shm
# /proc/self/uid_map of the initial user namespace: the whole uid range mapped onto itself.
INIT_UID_MAP = ("0", "0", "4294967295")

SHM_REMEDY = "Add to the pod spec:\n" + SHM_YAML
IPC_LOCK_REMEDY = "Add to the container in the pod spec:\n" + _IPC_LOCK_YAML + "(Docker: `--cap-add IPC_LOCK`)."


def fmt_bytes(n: int | None) -> str:
    """65536 -> "64 KiB", 17179869184 -> "16 GiB", None -> "unlimited"."""
    if n is None:
        return "unlimited"
    for unit, name in ((1024**4, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if n >= unit:
            q = n / unit
            return f"{int(q)} {name}" if n % unit == 0 else f"{q:.1f} {name}"
    return f"{n} bytes"


def _nonneg_int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def in_user_namespace(uid_map: str | None) -> bool | None:
    """/proc/self/uid_map -> True in a user namespace, False in the initial one, None unknown."""
    if uid_map is None:
        return None
    return [line.split() for line in uid_map.splitlines() if line.strip()] != [list(INIT_UID_MAP)]


# ---- limits.memlock ---------------------------------------------------------------------


@record
class MemlockFacts:
    soft: int | None  # bytes; None = unlimited (when known)
    hard: int | None
    known: bool  # the soft limit could be read at all
    hard_known: bool
    source: str | None  # "process" | "proc/self/limits" | "cmd/ulimit.txt" | "runtime.json"
    cap_eff: int | None  # CapEff bits; None = unknown
    cap_source: str | None
    notes: tuple[str, ...] = ()
    uid: int | None = None  # effective uid of the checking process; None = unknown
    cap_bnd: int | None = None  # CapBnd: what a root process started in this container gets
    userns: bool | None = None  # in a user namespace (capabilities do not count for capable())

    @property
    def cap_ipc_lock(self) -> bool | None:
        return None if self.cap_eff is None else bool(self.cap_eff >> CAP_IPC_LOCK_BIT & 1)


def probe_memlock(ctx) -> MemlockFacts:
    host = ctx.host
    notes: list[str] = []
    soft: int | None = None
    hard: int | None = None
    known = hard_known = False
    source = None
    cap_eff = None
    cap_source = None
    status = None
    rt = host.runtime
    if host.live_process:
        if rt.memlock_soft != "unknown":
            soft, known, source = rt.memlock_soft, True, "process"
        if rt.memlock_hard != "unknown":
            hard, hard_known = rt.memlock_hard, True
        if rt.cap_eff is not None:
            cap_eff, cap_source = rt.cap_eff, "process"
        # Under --root, /proc/self of the mounted tree is not this process.
        if host.kind == "live":
            status = host.read_text("/proc/self/status")
    else:
        from rdmadoctor.parsers.system import parse_proc_limits, parse_proc_status_capeff, parse_ulimit

        text = host.read_text("/proc/self/limits")
        if text is not None:
            parsed = parse_proc_limits(text)
            notes.extend(f"proc/self/limits: {w}" for w in parsed.warnings)
            if parsed.value is not None:
                soft, hard, known, hard_known = parsed.value.memlock_soft, parsed.value.memlock_hard, True, True
                source = "proc/self/limits"
        if not known:
            res = host.cmd("ulimit")
            if res.text is not None:
                parsed = parse_ulimit(res.text)
                notes.extend(f"cmd/ulimit.txt: {w}" for w in parsed.warnings)
                if parsed.value is not None:
                    # ulimit shows one limit (the soft one): the hard one stays unknown.
                    soft, known, source = parsed.value.memlock_soft, True, "cmd/ulimit.txt"
        if not known and rt.memlock_soft != "unknown":
            soft, known, source = rt.memlock_soft, True, "runtime.json"
            if rt.memlock_hard != "unknown":
                hard, hard_known = rt.memlock_hard, True
        status = host.read_text("/proc/self/status")
        if status is not None:
            parsed_cap = parse_proc_status_capeff(status)
            notes.extend(f"proc/self/status: {w}" for w in parsed_cap.warnings)
            if parsed_cap.value is not None:
                cap_eff, cap_source = parsed_cap.value, "proc/self/status"
        if cap_eff is None and rt.cap_eff is not None:
            cap_eff, cap_source = rt.cap_eff, "runtime.json"
    from rdmadoctor.parsers.system import parse_status_caps, parse_status_uid

    uid = parse_status_uid(status)
    if uid is None:
        uid = _nonneg_int(getattr(rt, "uid", None))  # runtime.json "uid", or the live process's euid
    userns = in_user_namespace(host.read_text("/proc/self/uid_map")) if host.kind != "root" else None
    return MemlockFacts(
        soft=_nonneg_int(soft) if known else None,
        hard=_nonneg_int(hard) if hard_known else None,
        known=known,
        hard_known=hard_known,
        source=source,
        cap_eff=_nonneg_int(cap_eff),
        cap_source=cap_source,
        notes=tuple(notes),
        uid=uid,
        cap_bnd=parse_status_caps(status, "CapBnd"),
        userns=userns,
    )


@record
class JobProcess:
    """Whose capabilities the memlock verdict rests on."""

    uid: int | None  # the uid the verdict holds for; None = unknown
    other: bool  # the job runs as another user than this check (expectation job_uid)
    cap_ipc_lock: bool | None  # does the job's process hold CAP_IPC_LOCK effective; None = unknown
    why: str = ""  # how that was decided when it is not this process's CapEff

    @property
    def who(self) -> str:
        if self.other:
            return f"the job (uid {self.uid})"
        return "this process" + (f" (uid {self.uid})" if self.uid is not None else "")


def job_process(f: MemlockFacts, expect: dict) -> JobProcess:
    job_uid = _nonneg_int(expect.get("job_uid"))
    if job_uid is None or job_uid == f.uid:
        job = JobProcess(f.uid, False, f.cap_ipc_lock)
    else:
        me = f"uid {f.uid}" if f.uid is not None else "a uid that could not be read"
        if job_uid == 0:
            # A root process started in this container gets the bounding set in its effective set.
            if f.cap_bnd is None:
                job = JobProcess(0, True, None, f"this check runs as {me}, and the bounding set a root job would get (CapBnd) could not be read")
            else:
                has = bool(f.cap_bnd >> CAP_IPC_LOCK_BIT & 1)
                job = JobProcess(0, True, has, f"this check runs as {me}; a root job gets this container's bounding set, which {'holds' if has else 'lacks'} CAP_IPC_LOCK")
        else:
            # execve() by a non-root user clears the permitted and effective sets, except for
            # ambient or file capabilities (capabilities(7)); Kubernetes sets neither.
            job = JobProcess(
                job_uid,
                True,
                False,
                f"this check runs as {me}; a non-root job does not keep capabilities across exec (only ambient or file "
                "capabilities would), so it is judged without CAP_IPC_LOCK",
            )
    if job.cap_ipc_lock and f.userns:
        why = "its CAP_IPC_LOCK is held in a user namespace (/proc/self/uid_map) and does not count: capable() asks the initial namespace"
        job = JobProcess(job.uid, job.other, False, why)
    return job


def judge_memlock(f: MemlockFacts, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    want = _nonneg_int(expect.get("memlock_min_bytes"))  # None: unlimited required
    want_text = "unlimited" if want is None else f"at least {fmt_bytes(want)}"
    job = job_process(f, expect)
    cap = job.cap_ipc_lock
    why = f" ({job.why})" if job.why else ""
    limited: bool | None = None
    if f.known:
        limited = f.soft is not None and (want is None or f.soft < want)
    hard = fmt_bytes(f.hard) if f.hard_known else "unknown"
    seen = f"memlock soft limit {fmt_bytes(f.soft)} (hard {hard})"
    data = {"memlock_soft": f.soft, "memlock_hard": f.hard if f.hard_known else "unknown", "source": f.source, "uid": job.uid}
    if cap and limited is not False:
        what = f"{seen} is below the expected {want_text}" if f.known else "the memlock limit could not be read"
        out.append(
            Finding(
                MEMLOCK_BYPASSED_BY_IPC_LOCK.code,
                INFO,
                "memlock",
                f"{what}, but it does not bind RDMA: {job.who} holds CAP_IPC_LOCK, and the kernel does not count "
                f"RDMA registrations (ibv_reg_mr) against RLIMIT_MEMLOCK for it{why}.",
                data=data,
            )
        )
    elif limited is None:
        notes = "; ".join(f.notes) or "no /proc/self/limits, cmd/ulimit.txt or memlock value in runtime.json"
        out.append(
            Finding(
                MEMLOCK_UNREADABLE.code,
                UNKNOWN,
                "memlock",
                f"the memlock limit could not be read ({notes}), and {job.who} "
                + ("lacks" if cap is False else "is not known to hold")
                + " CAP_IPC_LOCK: whether RDMA registration is limited is unknown.",
            )
        )
    elif limited and cap is None:
        caps_why = job.why or "no CapEff in /proc/self/status or runtime.json"
        out.append(
            Finding(
                CAPS_UNREADABLE.code,
                UNKNOWN,
                "CAP_IPC_LOCK",
                f"{seen} is below the expected {want_text}; it binds RDMA only when {job.who} lacks CAP_IPC_LOCK, "
                f"and the capabilities could not be read ({caps_why}).",
                data=data,
            )
        )
    elif limited:
        out.append(_memlock_limited(f, job, seen, want_text, data))
    if cap is None and limited is None:
        out.append(
            Finding(
                CAPS_UNREADABLE.code,
                UNKNOWN,
                "CAP_IPC_LOCK",
                f"the capabilities of {job.who} could not be read ({job.why or 'no CapEff in /proc/self/status or runtime.json'}).",
            )
        )
    if expect.get("require_ipc_lock", True) and cap is False:
        # When memlock already suffices the capability changes nothing for RDMA:
        # a missing one is then worth a warning, not a failed pod.
        sev = WARNING if limited is False else ERROR
        have = f"CapEff {f.cap_eff:016x} lacks CAP_IPC_LOCK (bit {CAP_IPC_LOCK_BIT})" if f.cap_eff is not None else "no CapEff"
        seen_cap = have if not job.other and not job.why else f"{job.who} lacks CAP_IPC_LOCK ({job.why})"
        pod: PodChange | None
        remedy, pod = IPC_LOCK_REMEDY, PodChange(ipc_lock=True)
        if job.uid is not None and job.uid != 0:
            # Container runtimes put capabilities added for a non-root user in its bounding set only.
            remedy = (
                f"uid {job.uid} is not root: IPC_LOCK added in the pod spec does not reach its effective set. Run the "
                "job as root with IPC_LOCK added, or raise the memlock limit (see MEMLOCK_LIMITED) and set "
                "require_ipc_lock = false."
            )
            pod = None
        out.append(
            Finding(
                CAP_IPC_LOCK_MISSING.code,
                sev,
                "CAP_IPC_LOCK",
                f"{seen_cap}; expected it in the effective set so RDMA can pin memory regardless of the memlock limit"
                + (" (not needed while the memlock limit suffices)." if sev == WARNING else "."),
                remedy,
                data={"cap_eff": f"{f.cap_eff:016x}" if f.cap_eff is not None else None, "uid": job.uid},
                pod=pod,
            )
        )
    return out


def _memlock_limited(f: MemlockFacts, job: JobProcess, seen: str, want_text: str, data: dict) -> Finding:
    nonroot = job.uid is not None and job.uid != 0
    for_whom = f" for {job.who}" if job.other else ""
    why = f" ({job.why})" if job.why else ""
    message = (
        f"{seen}{for_whom}; expected {want_text}, or CAP_IPC_LOCK to lift it for RDMA, which {job.who} lacks{why}: "
        "RDMA memory registration (ibv_reg_mr) fails or NCCL errors with 'Cannot allocate memory'."
    )
    if nonroot:
        # Capabilities added in the pod spec are not effective for a non-root user: only a
        # higher limit helps.
        remedy = (
            f"uid {job.uid} is not root: IPC_LOCK added in the pod spec does not reach its effective set, so raise "
            "the limit. " + _RAISE_DEFAULT
        )
        pod = None
    else:
        # The YAML itself comes from `pod` (preflight prints it once for every finding).
        remedy = (
            "Add IPC_LOCK to the container's securityContext.capabilities (Docker: `--cap-add IPC_LOCK`): a "
            "complete fix for RDMA, the kernel then does not apply the limit to its registrations. Or raise the "
            "limit. " + _RAISE_DEFAULT
        )
        # With IPC_LOCK the kernel skips RLIMIT_MEMLOCK for RDMA registrations (ib_umem_get):
        # a pod can fix a low node default itself; raising the default is the other way.
        pod = PodChange(ipc_lock=True, whole=False)
    if f.hard_known and f.hard is None:
        remedy = (
            "The hard limit is unlimited: run `ulimit -l unlimited` in the entrypoint before the launcher "
            "(e.g. `command: [\"bash\", \"-c\", \"ulimit -l unlimited && exec torchrun ...\"]`). Or: " + remedy
        )
    return Finding(MEMLOCK_LIMITED.code, ERROR, "memlock", message, remedy, data=data, pod=pod)


def _memlock_inventory(f: MemlockFacts) -> dict:
    return {
        "memlock_bytes": f.soft if f.known else None,
        "memlock_hard_bytes": f.hard if f.hard_known else None,
        "memlock_known": f.known,
        "cap_ipc_lock": f.cap_ipc_lock,
    }


# ---- shm.size ---------------------------------------------------------------------------


@record
class ShmFacts:
    size: int | None  # bytes; None = unknown
    free: int | None
    source: str | None  # "process" | "runtime.json" | "cmd/df-shm.txt"
    notes: tuple[str, ...] = ()


def probe_shm(ctx) -> ShmFacts:
    host = ctx.host
    rt = host.runtime
    notes: list[str] = []
    if rt.shm_size is not None:
        return ShmFacts(rt.shm_size, rt.shm_free, "process" if host.live_process else "runtime.json")
    if host.live_process:
        return ShmFacts(None, None, None, ("statvfs(/dev/shm) failed: /dev/shm is not mounted",))
    res = host.cmd("df-shm")
    if res.text is not None:
        from rdmadoctor.parsers.system import parse_df

        parsed = parse_df(res.text)
        notes.extend(f"cmd/df-shm.txt: {w}" for w in parsed.warnings)
        for row in parsed.value:
            if row.mountpoint == "/dev/shm":
                return ShmFacts(row.size_bytes, row.avail_bytes, "cmd/df-shm.txt", tuple(notes))
        notes.append("cmd/df-shm.txt has no row mounted on /dev/shm")
    return ShmFacts(None, None, None, tuple(notes))


def judge_shm(f: ShmFacts, expect: dict) -> list[Finding]:
    want = _nonneg_int(expect.get("shm_min_bytes"))
    if want is None:
        want = GIB
    if f.size is None:
        why = "; ".join(f.notes) or "no shm_size in runtime.json and no cmd/df-shm.txt"
        return [Finding(SHM_UNREADABLE.code, UNKNOWN, "/dev/shm", f"the size of /dev/shm could not be read ({why}).")]
    data = {"shm_bytes": f.size, "shm_free_bytes": f.free, "shm_min_bytes": want}
    if f.size < want:
        default = " (the container default)" if f.size == DOCKER_SHM_DEFAULT else ""
        return [
            Finding(
                SHM_TOO_SMALL.code,
                ERROR,
                "/dev/shm",
                f"/dev/shm is {fmt_bytes(f.size)}{default}; expected at least {fmt_bytes(want)}: NCCL's "
                "shared-memory transport fails with 'unhandled system error' / bus error.",
                SHM_REMEDY,
                data=data,
                pod=PodChange(shm_min_bytes=want),
            )
        ]
    if f.free is not None and f.free < want // 2:
        return [
            Finding(
                SHM_NEARLY_FULL.code,
                WARNING,
                "/dev/shm",
                f"/dev/shm has {fmt_bytes(f.free)} free of {fmt_bytes(f.size)}; expected at least "
                f"{fmt_bytes(want // 2)} free: files left by earlier jobs (NCCL segments, DataLoader "
                "tensors) fill it and the next job fails with 'unhandled system error'.",
                SHM_NEARLY_FULL.fix + "\n" + SHM_REMEDY,
                data=data,
                pod=PodChange(shm_min_bytes=want, whole=False),
            )
        ]
    return []


def _shm_inventory(f: ShmFacts) -> dict:
    return {"shm_bytes": f.size, "shm_free_bytes": f.free}


# The expectations this module's checks read: declared once, here, with type, unit and range
# (engine.expectations builds its table from every check's defaults).
EXPECT_MEMLOCK: dict[str, Expect] = {
    "memlock_min_bytes": Expect(
        None, "bytes", "bytes", min=0, max=MAX_BYTES, null_means="unlimited", example="unlimited",
        doc="Smallest acceptable memlock limit (ulimit -l); RDMA registers pinned memory.",
    ),
    "require_ipc_lock": Expect(
        True, "bool", nullable=False,
        doc="A pod without CAP_IPC_LOCK and a limited memlock is an error.",
    ),
    "job_uid": Expect(
        None, "int", "uid", min=0, max=4294967294, null_means="the uid of this check's process", example=1000,
        doc="The uid the training process runs as (preflight --job-uid): the memlock verdict is for it.",
    ),
}


# What shm.size reads.
EXPECT_SHM: dict[str, Expect] = {
    "shm_min_bytes": Expect(
        1 * GIB, "bytes", "bytes", min=0, max=MAX_BYTES, nullable=False, example="8GiB",
        doc="Smallest acceptable /dev/shm; NCCL puts its intra-node buffers there.",
    ),
}


# ---- limits pasted into a job's log (logs.diagnose) ------------------------------------------------


def judge_pasted_memlock(seg, expect: dict, node, layers: dict[str, str]) -> list[Finding]:
    """`ulimit -a` (or its memlock line), or a process's /proc/<pid>/limits table."""
    from rdmadoctor.checks._paste import PasteHost

    paste = PasteHost({"/proc/self/limits" if seg.kind == "limits" else "/cmd/ulimit.txt": seg.text}, expect)
    facts = probe_memlock(paste)
    if not facts.known:
        return []
    have = getattr(node, "memlock", None)
    if have is not None and have.cap_eff is not None:
        # The paste shows the limit; whether it binds RDMA depends on CAP_IPC_LOCK, which only
        # the node (the pod checked, `diagnose LOG --live` inside the job's pod) can say.
        facts = replace(facts, cap_eff=have.cap_eff, cap_source=have.cap_source, uid=have.uid, cap_bnd=have.cap_bnd,
                        userns=have.userns)
    out = []
    for f in judge_memlock(facts, expect):
        if f.code == MEMLOCK_LIMITED.code:
            out.append(f)
        elif f.code == CAPS_UNREADABLE.code and f.data.get("memlock_soft") is not None:
            # Below the expected limit, capabilities unknown: it binds RDMA unless the job holds
            # CAP_IPC_LOCK. A warning, raised to an error when the log shows registration failing.
            soft = fmt_bytes(f.data.get("memlock_soft"))
            want = expect.get("memlock_min_bytes")
            out.append(
                Finding(
                    MEMLOCK_LIMITED.code,
                    WARNING,
                    "memlock",
                    f"memlock soft limit {soft}; expected {'unlimited' if want is None else 'at least ' + fmt_bytes(want)}, "
                    "or CAP_IPC_LOCK, which lifts it for RDMA (the log does not show the job's capabilities): RDMA "
                    "memory registration (ibv_reg_mr) fails with 'Cannot allocate memory' unless the job holds it.",
                    MEMLOCK_LIMITED.fix,
                    data=dict(f.data),
                    pod=PodChange(ipc_lock=True, whole=False),
                )
            )
    return out


def judge_pasted_shm(seg, expect: dict, node, layers: dict[str, str]) -> list[Finding]:
    """`df -h` (or its /dev/shm row)."""
    from rdmadoctor.checks._paste import PasteHost
    from rdmadoctor.parsers.outputs import CMD_OF_KIND

    facts = probe_shm(PasteHost({f"/cmd/{CMD_OF_KIND['df']}.txt": seg.text}, expect))
    if facts.size is None:
        return []  # a `df` without a /dev/shm row says nothing about it
    return [f for f in judge_shm(facts, expect) if f.code in (SHM_TOO_SMALL.code, SHM_NEARLY_FULL.code)]


# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 50

CHECKS = [
    Check(
        scope="pod",
        id="limits.memlock",
        condition=CONFIG,
        gate=True,
        title="Locked-memory limit and CAP_IPC_LOCK",
        probe=probe_memlock,
        judge=judge_memlock,
        codes=(MEMLOCK_LIMITED, MEMLOCK_UNREADABLE, MEMLOCK_BYPASSED_BY_IPC_LOCK, CAP_IPC_LOCK_MISSING, CAPS_UNREADABLE),
        defaults=EXPECT_MEMLOCK,
        inventory=_memlock_inventory,
        pastes=(Paste("ulimit", judge_pasted_memlock), Paste("limits", judge_pasted_memlock)),
        description="RLIMIT_MEMLOCK (soft and hard) of the job's process and CAP_IPC_LOCK in its effective "
        "capabilities, which lifts the limit for RDMA memory registration.",
    ),
    Check(
        scope="pod",
        id="shm.size",
        condition=CONFIG,
        gate=True,
        title="/dev/shm size",
        probe=probe_shm,
        judge=judge_shm,
        codes=(SHM_TOO_SMALL, SHM_NEARLY_FULL, SHM_UNREADABLE),
        defaults=EXPECT_SHM,
        inventory=_shm_inventory,
        pastes=(Paste("df", judge_pasted_shm),),
        description="Size and free space of /dev/shm, where NCCL's shared-memory transport lives.",
    ),
]
