"""Joins: what NCCL's own lines say that the findings are joined with, and the findings built from it.

A setting NCCL prints before the failure it explains (``NCCL_SOCKET_IFNAME set by environment to
eth2``) is joined to that failure (``_SETTING_JOINS``); the line that shows NCCL on sockets is the
evidence of NCCL_SOCKET_FALLBACK and places it among the findings; a kill is told how far NCCL got
(its first line, its first ``Init COMPLETE``); the hosts' net plugins and NCCL's device list make
findings of their own. ``_linked`` is the verdict's order: :mod:`.linking` links each symptom to
its cause, and the findings of this part take their places among them.
"""

from __future__ import annotations

import re

from rdmadoctor.core import codes as code_registry
from rdmadoctor.core.model import ERROR, INFO, WARNING, Finding
from rdmadoctor.logs import kb, prefix
from rdmadoctor.logs.nccl import is_socket, tcp_fabric
from rdmadoctor.logs.scan.linking import (
    _explains_fallback,
    _ib_off,
    _link,
    _order_key,
    _rank_key,
    _socket_fallback,
    _told,
)
from rdmadoctor.logs.scan.matching import _RUN_KILLED, MAX_EVIDENCE
from rdmadoctor.logs.scan.pastes import _others_unopened

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from rdmadoctor.logs.nccl import NcclFacts
    from rdmadoctor.logs.scan.matching import _Agg
    from rdmadoctor.logs.scan.pastes import Segment

# NCCL settings that explain a failure after them: `NCCL_SOCKET_IFNAME set by environment to eth2`
# (src/misc/socket.cc), `NCCL_IB_HCA set to mlx5_0` (src/transport/net_ib.cc), `NCCL_NET set by
# environment to IB` (src/misc/param.cc ncclGetEnv).
_SETTING = re.compile(r"\b(?P<name>NCCL_SOCKET_IFNAME|NCCL_IB_HCA|NCCL_NET|NCCL_IB_GID_INDEX) set (?:by environment )?to (?P<value>\S{1,200})")
# The same settings as a launch or a script makes them (issue 30): `export NCCL_IB_HCA=mlx5_0`, `env
# NCCL_NET=IB torchrun ...`, `-x NCCL_SOCKET_IFNAME=eth2`, `--export=ALL,NCCL_...`, a list item or a diff's line
# ("- NCCL_SOCKET_IFNAME=eth0", "+export ..."), a variable before the command; and, through
# prefix.settings_said, as code and config write them (`os.environ["NCCL_IB_HCA"] = "mlx5"`, a YAML entry).
# Anchored where a launch puts them: a setting told in prose ("I tried NCCL_IB_HCA=mlx5_1") is not the job's.
_LAUNCHED = re.compile(
    r"(?:^\s{0,40}(?:[$#>]\s{1,4})?(?:[-+*]\s{0,8})?(?:export\s{1,8}|env\s{1,8}|ENV\s{1,8})?"
    r"|(?:-x|--env|-e|\benv|\bexport)\s{1,8}|--export[=\s](?:[^,\s]{0,200},){0,20}?|\bNCCL_\w{1,40}=\S{0,200}\s{1,8})"
    # (a value ends where srun's --export list names the next variable: "--export=ALL,NCCL_IB_HCA=mlx5_0,NCCL_NET=IB")
    r"(?P<name>NCCL_SOCKET_IFNAME|NCCL_IB_HCA|NCCL_NET|NCCL_IB_GID_INDEX)=[\"']?(?P<value>(?:[^\"'\s;,]|,(?![A-Z][A-Z\d_]{0,40}=)){1,200})"
)
# The next entry of srun's --export list after one read (any variable: those not joined are passed over).
_EXPORTED = re.compile(r",(?P<name>[A-Z][A-Z\d_]{0,40})=[\"']?(?P<value>(?:[^\"'\s;,]|,(?![A-Z][A-Z\d_]{0,40}=)){0,200})[\"']?")
_JOINED_NAMES = frozenset(("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_NET", "NCCL_IB_GID_INDEX"))
# (setting, the codes of the failures it explains, what it means, the fix): one row per join.
_SETTING_JOINS = (
    ("NCCL_NET", ("NCCL_NET_INIT_FAILED",),
     "NCCL_NET is set to {value} ({where}), which forces that network and allows no other: it is the cause when this "
     "node cannot initialise it",
     "Unset NCCL_NET (NCCL takes IB when it works and sockets otherwise), or set it to a network this node has "
     "(`Socket` on a node without RDMA devices)."),
    ("NCCL_SOCKET_IFNAME", ("NCCL_NO_SOCKET_INTERFACE", "NCCL_BOOTSTRAP_FAILED", "NCCL_SOCKET_ERROR", "NCCL_NET_INIT_FAILED"),
     "NCCL_SOCKET_IFNAME is set to {value} ({where}), so NCCL uses only that interface for its sockets: it is the "
     "likely cause (it does not exist in the pod, is down, has no address, or is not one the other hosts reach)",
     "List the pod's interfaces with `ip -br addr` and set NCCL_SOCKET_IFNAME to one that is UP with an address the "
     "other hosts reach (`=eth0` for an exact name, `net1` for a Multus network), or unset it."),
    ("NCCL_SOCKET_IFNAME", ("NCCL_LOOPBACK",),
     "NCCL_SOCKET_IFNAME is set to {value} ({where}) and left NCCL no interface but the loopback",
     ""),  # (the row's own fix says what to set)
    ("NCCL_IB_HCA", ("NCCL_IB_NO_DEVICE",),
     "NCCL_IB_HCA is set to {value} ({where}), so NCCL only looks at those HCAs: the list is the likely cause (it names "
     "no device this pod sees with an ACTIVE port)",
     "Set NCCL_IB_HCA to devices that `ibv_devinfo` in the pod lists with an ACTIVE port (`=mlx5_0,mlx5_1`; "
     "`^mlx5_4` excludes one), or unset it so NCCL takes every ACTIVE port."),
)


def _kill(name: str) -> bool:
    """A finding of a job stopped from outside (Code.kill): told how far NCCL got before it."""
    code = code_registry.get(name)
    return code is not None and code.kill


class Joins:
    """Owns what NCCL's own lines said that the verdict needs: its settings (``_settings``), the
    line that shows it on sockets (``_socket_seen``, ``_socket_explicit``), each host's net-plugin
    line (``_plugin_seen``), its first device list with both link layers (``_ports_seen``), its first
    line and first ``Init COMPLETE`` (``_nccl_first``, ``_nccl_complete``), the host of each
    kubectl --prefix pod (``_pod_host``) and the transport callback (``on_transport``, ``_fired``)."""

    if TYPE_CHECKING:
        facts: NcclFacts
        aggs: dict[tuple[str, str], _Agg]
        segments: list[Segment]
        sources: list[dict]
        _src_index: int
        _known_text: bool

        def _evidence(self, text: str, lineno: int, meta: prefix.Meta) -> dict: ...

    def _start_joins(self, on_transport: Callable[[dict], None] | None) -> None:
        self.on_transport = on_transport
        self._fired = False
        self._socket_seen: tuple | None = None
        self._socket_explicit = False  # (seq, evidence) of the first line showing NCCL on sockets
        self._pod_host: dict[str, str] = {}  # kubectl --prefix pod -> the host NCCL's prefix names
        self._plugin_seen: dict[str | None, dict] = {}  # host -> the line that says which net plugin it uses
        self._ports_seen: dict | None = None  # NCCL's first device list with InfiniBand and RoCE ports
        self._settings: dict[str, dict] = {}  # NCCL_SOCKET_IFNAME ... -> {value, seq, evidence}
        self._nccl_first: dict | None = None  # evidence of NCCL's first line of its own
        self._nccl_complete: dict | None = None  # evidence of the first "Init COMPLETE"

    def _nccl_line(self, text: str, body: str, meta: prefix.Meta, lineno: int) -> None:
        """A line of NCCL's (its prefix, or the word NCCL): its facts, and the lines the verdict quotes."""
        if meta.level is not None:  # a line NCCL printed itself (its host:pid:tid prefix)
            if meta.pod and meta.host and meta.host != meta.pod and len(self._pod_host) < 1024:
                # `kubectl logs --prefix` names the pod, NCCL the host it runs on: one host.
                self._pod_host.setdefault(meta.pod, meta.host)
            if self._nccl_first is None:
                self._nccl_first = self._evidence(text, lineno, meta)
                self.facts.init_started = True
        complete = self.facts.init_complete
        self.facts.feed(body, meta.host)
        if meta.host in self.facts.host_plugins and meta.host not in self._plugin_seen and len(self._plugin_seen) < 64:
            self._plugin_seen[meta.host] = self._evidence(text, lineno, meta)
        if self._ports_seen is None and "/RoCE" in body and "/IB" in body and ": Using [" in body:
            self._ports_seen = self._evidence(text, lineno, meta)  # a device list with both link layers
        if not complete and self.facts.init_complete and self._nccl_complete is None:
            self._nccl_complete = self._evidence(text, lineno, meta)
        if " set " in body:
            s = _SETTING.search(body)
            if s is not None and s.group("name") not in self._settings:
                self._settings[s.group("name")] = {"value": s.group("value").rstrip("."), "seq": (self._src_index, lineno),
                                                   "evidence": self._evidence(text, lineno, meta)}
        if meta.level is None and "NCCL_" in body:
            self._launched(text, body, meta, lineno)
        # The line that shows NCCL on sockets: "Using network Socket" (or a NET/Socket channel),
        # else, for NCCL <= 2.5, the "NET/Socket : Using" after "No device found".
        if ("Using " in body or "via NET/" in body) and (self._socket_seen is None or not self._socket_explicit):
            # (once an explicit line is held, nothing here changes: the check over every host's
            # network is not paid again on every later NCCL line)
            explicit = any(is_socket(n, None) for n in self.facts.networks.values()) or bool(self.facts.socket_channel_hosts)
            if explicit or self._socket_seen is None and self.facts._implied():
                self._socket_explicit = explicit
                self._socket_seen = ((self._src_index, lineno), self._evidence(text, lineno, meta))
        if self._socket_seen is None and "NET/OFI Selected" in body and tcp_fabric(self.facts.fabric):
            # aws-ofi-nccl on libfabric's tcp provider: the line that shows NCCL's traffic on TCP.
            self._socket_seen = ((self._src_index, lineno), self._evidence(text, lineno, meta))
        if not self._fired and self.on_transport is not None and self.facts.connected and self.facts.network():
            self._fire()

    def _launched(self, text: str, body: str, meta: prefix.Meta, lineno: int) -> None:
        """Settings a launch, a script or a config makes (``_LAUNCHED``, prefix.settings_said), kept as
        NCCL's own line would be: the first of each, joined to the failure they explain."""
        said = []
        first = body.lstrip()[:2]
        if first[:1] == "#" and first != "# ":  # a script's comment ("#export NCCL_IB_HCA=..."); "# " is a root prompt
            return
        m = _LAUNCHED.search(body) if "=" in body else None
        for _ in range(8):  # each `-x NAME=value` of a launch (a few, never many)
            if m is None:
                break
            said.append((m.group("name"), m.group("value")))
            end = m.end()
            # the rest of srun's --export list: "--export=ALL,NCCL_IB_HCA=mlx5_0,NCCL_SOCKET_IFNAME=eth0"
            more = _EXPORTED.match(body, end)
            while more is not None and len(said) < 32:
                said.append((more.group("name"), more.group("value")))
                end = more.end()
                more = _EXPORTED.match(body, end)
            # the variables set after it in the same command: `env NCCL_NET=IB NCCL_SOCKET_IFNAME=eth0 torchrun`
            for word in body[end:end + 2000].split(None, 16)[:16]:
                name, eq, value = word.partition("=")
                if not eq or not name.isidentifier():
                    break
                said.append((name, value.strip("\"'")))
            m = _LAUNCHED.search(body, end)  # `mpirun -x NCCL_IB_HCA=mlx5_0 -x NCCL_SOCKET_IFNAME=eth0`
        for line in prefix.settings_said(body):  # "export NAME=value"
            name, _, value = line[len("export "):].partition("=")
            said.append((name, value))
        for name, value in said:
            if name in _JOINED_NAMES and name not in self._settings:
                self._settings[name] = {"value": value, "seq": (self._src_index, lineno),
                                        "evidence": self._evidence(text, lineno, meta)}
                self._known_text = True  # a setting of NCCL's was read and judged: the text says something

    @property
    def transport_shown(self) -> bool:
        """NCCL's transport is known (on_transport has fired, or would have)."""
        return self._fired or bool(self.facts.connected and self.facts.network())

    def _fire(self) -> None:
        self._fired = True
        try:
            assert self.on_transport is not None
            self.on_transport(self.facts.to_json() or {})
        except Exception:  # noqa: BLE001 - a callback's failure never stops the reading
            pass

    def fallback_reason(self) -> str | None:
        """The earliest problem seen so far that explains a fall back to sockets, worded as the
        NCCL_SOCKET_FALLBACK finding words it ("... (NCCL_IB_DISABLED_BY_ENV)"); None: none yet."""
        for a in sorted(self.aggs.values(), key=lambda a: a.seq):
            if _explains_fallback(a):
                return f"{kb.render(a.pattern.message, a.groups).rstrip('. ')} ({a.pattern.code})"
        return None

    def _single_host(self, aggs: list[_Agg]) -> tuple[list[_Agg], Finding | None]:
        """On a job whose ranks are all on one host, `NET/IB : No device found` and NCCL on sockets
        are information: (the findings without them, the NCCL_SINGLE_HOST finding or None)."""
        from rdmadoctor.core.codes.nccl import NCCL_IB_NO_DEVICE, NCCL_LOOPBACK, NCCL_SINGLE_HOST
        from rdmadoctor.core.codes.pytorch import GLOO_LOOPBACK

        # (An image without libibverbs stays a finding: the next job with it on two nodes runs on TCP.)
        quiet = [a for a in aggs if a.pattern.code in (NCCL_IB_NO_DEVICE.code, GLOO_LOOPBACK.code, NCCL_LOOPBACK.code)]
        on_sockets = self._socket_seen is not None or bool(self.facts.socket_channel_hosts)
        if not quiet and not on_sockets:
            return aggs, None
        evidence = [ev for a in quiet for ev in a.evidence]
        if self._socket_seen is not None:
            evidence.append(self._socket_seen[1])
        nodes = "nNodes 1" if self.facts.nnodes == 1 else "every rank on one host"
        codes = {a.pattern.code for a in quiet}
        said = " and ".join(x for x in ("`NET/IB : No device found`" if NCCL_IB_NO_DEVICE.code in codes else "",
                                         "Gloo on the loopback address" if GLOO_LOOPBACK.code in codes else "",
                                         "NCCL's sockets on the loopback" if NCCL_LOOPBACK.code in codes else "",
                                         f"NCCL on {self.facts.network() or 'sockets'}" if on_sockets else "") if x)
        f = Finding(NCCL_SINGLE_HOST.code, INFO, "NCCL", f"The job runs on one host ({nodes}): NCCL sends nothing over the "
                    f"network, so {said} {'are' if ' and ' in said else 'is'} information here, not an error.", NCCL_SINGLE_HOST.fix,
                    data={"evidence": evidence[:MAX_EVIDENCE], "nodes": 1})
        return [a for a in aggs if a not in quiet], f

    def _mixed_link_layers(self) -> Finding | None:
        """NCCL_MIXED_LINK_LAYERS: NCCL's IB device list holds InfiniBand and RoCE ports."""
        from rdmadoctor.core.codes.nccl import NCCL_MIXED_LINK_LAYERS

        devs = self.facts.net_devices
        layers = {d.get("link_layer") for d in devs}
        if not {"InfiniBand", "RoCE"} <= layers:
            return None
        roce = sorted({d["name"] for d in devs if d.get("link_layer") == "RoCE"})
        ib = sorted({d["name"] for d in devs if d.get("link_layer") == "InfiniBand"})
        return Finding(NCCL_MIXED_LINK_LAYERS.code, WARNING, "NCCL_IB_HCA",
                       f"NCCL's IB transport uses InfiniBand ports ({', '.join(ib[:8])}) and RoCE ports "
                       f"({', '.join(roce[:8])}) together: channels through the RoCE ones cannot reach InfiniBand peers.",
                       f"Keep NCCL on one fabric: NCCL_IB_HCA=^{','.join(roce[:8])} (or list the InfiniBand ports).",
                       data={"roce": roce, "infiniband": ib, "evidence": [self._ports_seen] if self._ports_seen else []})

    def _plugins_differ(self) -> Finding | None:
        """NCCL_PLUGIN_MISMATCH: the hosts of one job do not load the same net plugin (one the SHARP or
        OFI plugin, another NCCL's own transports): their ranks cannot connect, or hang."""
        from rdmadoctor.core.codes.nccl import NCCL_PLUGIN_MISMATCH

        by: dict[str, list[str]] = {}
        for host, plugin in self.facts.host_plugins.items():
            if host:
                by.setdefault(plugin, []).append(host)
        named = [p for p in by if p and "/" not in p]
        # Hosts with a plugin against hosts without; or two plugins named differently (a path and a
        # name are the same plugin seen at two moments, not a difference).
        if not (("" in by and len(by) > 1) or len(named) > 1):
            return None
        said = "; ".join(f"{', '.join(sorted(hosts)[:4])}{' ...' if len(hosts) > 4 else ''}: "
                         f"{plugin or 'no net plugin (NCCL internal)'}" for plugin, hosts in sorted(by.items()))
        evidence = [ev for h, ev in self._plugin_seen.items() if h][:MAX_EVIDENCE]
        return Finding(NCCL_PLUGIN_MISMATCH.code, ERROR, "NCCL net plugin",
                       f"The job's hosts do not use the same NCCL net plugin ({said}): ranks on different transports "
                       "cannot connect to each other, and the job hangs or fails where they meet.",
                       NCCL_PLUGIN_MISMATCH.fix, data={"evidence": evidence, "plugins": {k or "": v for k, v in by.items()}})

    def _alias_pods(self) -> None:
        """Hosts named by a kubectl --prefix pod, renamed to the host NCCL's prefix gave that pod."""
        alias = self._pod_host
        if not alias:
            return
        f = self.facts
        f.hosts = {alias.get(h, h) for h in f.hosts}
        f.networks = {alias.get(h, h) if h else h: n for h, n in f.networks.items()}
        for name in ("socket_channel_hosts", "no_ib_hosts", "socket_iface_hosts"):
            setattr(f, name, {alias.get(h, h) if h else h for h in getattr(f, name)})
        for a in self.aggs.values():
            a.hosts = {alias.get(h, h) for h in a.hosts}

    def _stage(self, f: Finding) -> Finding:
        """A kill, with how far NCCL got before it and the next step for that stage."""
        from rdmadoctor.core.record import replace
        from rdmadoctor.logs.kb.pytorch import KILLED_STAGES

        def where(ev: dict | None) -> str:
            return f"line {ev['line']} of {ev['file']}" if ev else "?"

        if self._nccl_complete is not None or self.facts.init_complete:
            stage = "collective"
        elif self.facts.init_started:
            stage = "init"
        else:
            stage = "before_nccl"
        what, step = KILLED_STAGES[stage]
        what = what.format(first=where(self._nccl_first), complete=where(self._nccl_complete))
        ev = (f.data.get("evidence") or [{}])[0]
        # `run` saw the kill itself, after the last line: there is no line to point at.
        at = f" (line {ev['line']} of {ev['file']})" if ev.get("line") and f.data.get("pattern") != _RUN_KILLED.id else ""
        data = {**f.data, "nccl_stage": stage}
        if "SIGKILL" in f.subject or "(Killed)" in f.subject or f.subject.startswith("signal 9"):
            # SIGKILL is the OOM killer's signal before it is a stop after a hang: that is checked first.
            step = ("first whether the kernel's OOM killer sent it (`dmesg | grep -i oom` on the node, the pod's last "
                    f"state OOMKilled, exit code 137) and give the pod more memory; if not, {step}")
        return replace(f, message=f"{f.message.rstrip('.')}{at}. {what}.", remedy=f"Next: {step}.", data=data)

    def _joined(self, f: Finding) -> Finding:
        """A failure after the NCCL setting that explains it: both lines as evidence (_SETTING_JOINS)."""
        if f.cause:
            return f
        ev = (f.data.get("evidence") or [{}])[0]
        for name, codes, why, fix in _SETTING_JOINS:
            setting = self._settings.get(name)
            if setting is None or f.code not in codes:
                continue
            src = next((i for i, s in enumerate(self.sources) if s["name"] == ev.get("file")), None)
            if src is None or (src, ev.get("line") or 0) < setting["seq"]:
                continue  # the setting came after the failure: it did not shape it
            from rdmadoctor.core.record import replace

            sev = setting["evidence"]
            text = why.format(value=setting["value"], where=f"line {sev['line']} of {sev['file']}")
            data = {**f.data, "setting": {"name": name, "value": setting["value"], "file": sev["file"], "line": sev["line"]},
                    "evidence": [sev] + list(f.data.get("evidence") or [])[: MAX_EVIDENCE - 1]}
            return replace(f, message=f"{text}. {f.message}", remedy=f"{fix} {f.remedy}".strip(), data=data)
        return f

    def _linked(self, nccl: dict | None) -> list[Finding]:
        """The findings in the verdict's order: each symptom under its cause (:mod:`.linking`), the
        socket fallback where NCCL went to sockets, the net plugins, the link layers, one host."""
        aggs = sorted(self.aggs.values(), key=_order_key(list(self.aggs.values())))
        single = None
        if self.facts.single_host():
            aggs, single = self._single_host(aggs)
        aggs = _ib_off(aggs)
        aggs = _others_unopened(aggs, self.segments)
        aggs = _told(aggs)
        linked, cause = _link(aggs)
        findings = [self._stage(f) if _kill(f.code) else self._joined(f) for f in linked]
        ids = list(range(len(findings)))  # each finding's agg; -1 the socket fallback, -2 the one-host note
        fallback = None if self.facts.single_host() else _socket_fallback(self.facts, nccl, aggs)
        reason = None
        if fallback is not None:
            at = len(findings)
            if self._socket_seen is not None:
                seq, ev = self._socket_seen
                fallback.data["evidence"] = [ev]
                at = next((i for i, a in enumerate(aggs) if a.seq > seq), len(aggs))
            findings.insert(at, fallback)
            ids.insert(at, -1)
            if fallback.cause:
                reason = next((i for i, a in enumerate(aggs) if _explains_fallback(a)), None)
        for extra in (None if self.facts.single_host() else self._plugins_differ(), self._mixed_link_layers()):
            if extra is not None:
                findings.append(extra)
                ids.append(-3)
        if single is not None:
            findings.append(single)
            ids.append(-2)
        rank = _rank_key(aggs, cause, fallback=fallback is not None, reason=reason)
        findings = [f for _, f in sorted(zip(ids, findings), key=lambda x: rank(x[0]))]
        return findings

    def _settings_said(self) -> dict:
        """Joins' share of the finish: NCCL's settings as its log says them, the first of each."""
        return {name: {"value": v["value"], "evidence": v["evidence"]} for name, v in self._settings.items()}
