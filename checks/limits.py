"""limits.memlock and shm.size: what the pod's process may pin, and the room NCCL has in /dev/shm."""

from __future__ import annotations

from rdmadoctor.core.record import record

from rdmadoctor.core.model import ERROR, INFO, UNKNOWN, WARNING, Check, Code, Finding, CONFIG, PodChange

KIB, MIB, GIB = 1024, 1024**2, 1024**3
CAP_IPC_LOCK_BIT = 14  # include/uapi/linux/capability.h
DOCKER_SHM_DEFAULT = 64 * MIB  # docker/containerd give every container a 64 MiB /dev/shm

MEMLOCK_LIMITED = Code(
    "MEMLOCK_LIMITED",
    "Locked-memory limit (RLIMIT_MEMLOCK) too low",
    "RDMA memory registration (ibv_reg_mr) pins pages, and the kernel counts them against "
    "RLIMIT_MEMLOCK unless the process holds CAP_IPC_LOCK. A container's default (64 KiB or 8 MiB) "
    "is exhausted at once: ibv_reg_mr fails with ENOMEM and NCCL reports 'Cannot allocate memory' "
    "or 'ibv_reg_mr failed', or falls back to sockets.",
    "Docker: `docker run --ulimit memlock=-1:-1 ...`. Kubernetes with containerd: pods inherit "
    "containerd's own limit, so raise it on every node:\n"
    "  mkdir -p /etc/systemd/system/containerd.service.d\n"
    "  printf '[Service]\\nLimitMEMLOCK=infinity\\n' > /etc/systemd/system/containerd.service.d/memlock.conf\n"
    "  systemctl daemon-reload && systemctl restart containerd\n"
    "CRI-O: in /etc/crio/crio.conf, [crio.runtime] default_ulimits = [\"memlock=-1:-1\"], then "
    "`systemctl restart crio`. Also add IPC_LOCK to the container (the kernel then lets it pin "
    "memory past the limit). If only the soft limit is low, `ulimit -l unlimited` in the "
    "entrypoint before the launcher raises it.",
)
CAP_IPC_LOCK_MISSING = Code(
    "CAP_IPC_LOCK_MISSING",
    "CAP_IPC_LOCK not in the effective capabilities",
    "With CAP_IPC_LOCK the kernel lets RDMA pin memory past RLIMIT_MEMLOCK (ib_umem_get skips the "
    "limit for a capable process); without it every registration counts against the limit. It is "
    "the capability the NVIDIA network operator and most RDMA pod examples add.",
    "Add it to the container:\n"
    "securityContext:\n"
    "  capabilities:\n"
    "    add: [\"IPC_LOCK\"]\n"
    "(Docker: `--cap-add IPC_LOCK`). A non-root container only gets it in its effective set when "
    "the process runs as root or the capability is made ambient.",
)
SHM_TOO_SMALL = Code(
    "SHM_TOO_SMALL",
    "/dev/shm too small",
    "NCCL's shared-memory transport (and its proxy buffers, and PyTorch DataLoader workers) live "
    "in /dev/shm. The container default of 64 MiB is exhausted at once: NCCL fails with "
    "'unhandled system error' (shm_open / posix_fallocate ENOSPC) or the process dies of a bus error.",
    "Mount a memory-backed emptyDir on /dev/shm in the pod spec:\n"
    "volumes:\n"
    "- name: dshm\n"
    "  emptyDir: {medium: Memory, sizeLimit: 16Gi}\n"
    "containers:\n"
    "- volumeMounts:\n"
    "  - {name: dshm, mountPath: /dev/shm}\n"
    "(Docker: `--shm-size=16g` or `--ipc=host`).",
)

SHM_REMEDY = (
    "Add to the pod spec:\n"
    "volumes:\n"
    "- name: dshm\n"
    "  emptyDir: {medium: Memory, sizeLimit: 16Gi}\n"
    "containers:\n"
    "- volumeMounts:\n"
    "  - {name: dshm, mountPath: /dev/shm}\n"
    "(Docker: `--shm-size=16g` or `--ipc=host`)."
)
IPC_LOCK_REMEDY = (
    "Add to the container in the pod spec:\n"
    "securityContext:\n"
    "  capabilities:\n"
    "    add: [\"IPC_LOCK\"]\n"
    "(Docker: `--cap-add IPC_LOCK`)."
)


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
    rt = host.runtime
    if host.live_process:
        if rt.memlock_soft != "unknown":
            soft, known, source = rt.memlock_soft, True, "process"
        if rt.memlock_hard != "unknown":
            hard, hard_known = rt.memlock_hard, True
        if rt.cap_eff is not None:
            cap_eff, cap_source = rt.cap_eff, "process"
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
        text = host.read_text("/proc/self/status")
        if text is not None:
            parsed_cap = parse_proc_status_capeff(text)
            notes.extend(f"proc/self/status: {w}" for w in parsed_cap.warnings)
            if parsed_cap.value is not None:
                cap_eff, cap_source = parsed_cap.value, "proc/self/status"
        if cap_eff is None and rt.cap_eff is not None:
            cap_eff, cap_source = rt.cap_eff, "runtime.json"
    return MemlockFacts(
        soft=_nonneg_int(soft) if known else None,
        hard=_nonneg_int(hard) if hard_known else None,
        known=known,
        hard_known=hard_known,
        source=source,
        cap_eff=_nonneg_int(cap_eff),
        cap_source=cap_source,
        notes=tuple(notes),
    )


def judge_memlock(f: MemlockFacts, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    want = _nonneg_int(expect.get("memlock_min_bytes"))  # None: unlimited required
    want_text = "unlimited" if want is None else f"at least {fmt_bytes(want)}"
    cap = f.cap_ipc_lock
    limited: bool | None = None
    if not f.known:
        why = "; ".join(f.notes) or "no /proc/self/limits, cmd/ulimit.txt or memlock value in runtime.json"
        out.append(Finding("MEMLOCK_LIMITED", UNKNOWN, "memlock", f"the memlock limit could not be read ({why})."))
    else:
        limited = f.soft is not None and (want is None or f.soft < want)
    if limited:
        hard = fmt_bytes(f.hard) if f.hard_known else "unknown"
        consequence = "RDMA memory registration (ibv_reg_mr) fails or NCCL errors with 'Cannot allocate memory'"
        if cap:
            # ib_umem_get() skips the limit for a CAP_IPC_LOCK process, so this process would get
            # by; but the checker often runs with more capabilities than the job (a root agent,
            # an init container): a job without the capability fails, so it stays an error.
            consequence += (
                " (this process holds CAP_IPC_LOCK and may pin past the limit; a job process without "
                "it, e.g. a non-root one, cannot)"
            )
        sev = ERROR
        remedy = MEMLOCK_LIMITED.fix
        if f.hard_known and f.hard is None:
            remedy = (
                "The hard limit is unlimited: run `ulimit -l unlimited` in the entrypoint before the "
                "launcher (e.g. `command: [\"bash\", \"-c\", \"ulimit -l unlimited && exec torchrun ...\"]`). "
                "Better, fix the default for every pod: " + MEMLOCK_LIMITED.fix
            )
        out.append(
            Finding(
                "MEMLOCK_LIMITED",
                sev,
                "memlock",
                f"memlock soft limit {fmt_bytes(f.soft)} (hard {hard}); expected {want_text}: {consequence}.",
                remedy,
                data={"memlock_soft": f.soft, "memlock_hard": f.hard if f.hard_known else "unknown", "source": f.source},
                # With IPC_LOCK the kernel skips RLIMIT_MEMLOCK for RDMA registrations (ib_umem_get):
                # a pod can fix a low node default itself; raising the default is the other way.
                pod=PodChange(ipc_lock=True, whole=False),
            )
        )
    if expect.get("require_ipc_lock", True):
        if cap is False:
            # When memlock already suffices the capability changes nothing for RDMA:
            # a missing one is then worth a warning, not a failed pod.
            sev = WARNING if limited is False else ERROR
            out.append(
                Finding(
                    "CAP_IPC_LOCK_MISSING",
                    sev,
                    "CAP_IPC_LOCK",
                    f"CapEff {f.cap_eff:016x} lacks CAP_IPC_LOCK (bit {CAP_IPC_LOCK_BIT}); expected it in the "
                    "effective set so RDMA can pin memory regardless of the memlock limit"
                    + (" (not needed while the memlock limit suffices)." if sev == WARNING else "."),
                    IPC_LOCK_REMEDY,
                    data={"cap_eff": f"{f.cap_eff:016x}"},
                    pod=PodChange(ipc_lock=True),
                )
            )
        elif cap is None:
            sev = INFO if limited is False else UNKNOWN
            out.append(
                Finding(
                    "CAP_IPC_LOCK_MISSING",
                    sev,
                    "CAP_IPC_LOCK",
                    "the effective capabilities could not be read (no CapEff in /proc/self/status or runtime.json).",
                )
            )
    return out


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
        return [Finding("SHM_TOO_SMALL", UNKNOWN, "/dev/shm", f"the size of /dev/shm could not be read ({why}).")]
    data = {"shm_bytes": f.size, "shm_free_bytes": f.free, "shm_min_bytes": want}
    if f.size < want:
        default = " (the container default)" if f.size == DOCKER_SHM_DEFAULT else ""
        return [
            Finding(
                "SHM_TOO_SMALL",
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
                "SHM_TOO_SMALL",
                WARNING,
                "/dev/shm",
                f"/dev/shm has {fmt_bytes(f.free)} free of {fmt_bytes(f.size)}; expected at least "
                f"{fmt_bytes(want // 2)} free: files left by earlier jobs (NCCL segments, DataLoader "
                "tensors) fill it and the next job fails with 'unhandled system error'.",
                "Find and remove the leftovers: `ls -la /dev/shm` (`rm /dev/shm/nccl-*` when no job runs), "
                "or restart the pod; if the space is really used, give /dev/shm a larger sizeLimit.\n" + SHM_REMEDY,
                data=data,
                pod=PodChange(shm_min_bytes=want, whole=False),
            )
        ]
    return []


def _shm_inventory(f: ShmFacts) -> dict:
    return {"shm_bytes": f.size, "shm_free_bytes": f.free}


CHECKS = [
    Check(
        scope="pod",
        id="limits.memlock",
        condition=CONFIG,
        gate=True,
        title="Locked-memory limit and CAP_IPC_LOCK",
        probe=probe_memlock,
        judge=judge_memlock,
        codes=(MEMLOCK_LIMITED, CAP_IPC_LOCK_MISSING),
        inventory=_memlock_inventory,
        description="RLIMIT_MEMLOCK (soft and hard) of this process and CAP_IPC_LOCK in its effective "
        "capabilities: what RDMA memory registration needs.",
    ),
    Check(
        scope="pod",
        id="shm.size",
        condition=CONFIG,
        gate=True,
        title="/dev/shm size",
        probe=probe_shm,
        judge=judge_shm,
        codes=(SHM_TOO_SMALL,),
        inventory=_shm_inventory,
        description="Size and free space of /dev/shm, where NCCL's shared-memory transport lives.",
    ),
]
