"""Gloo, PyTorch's CPU collective backend (barriers, object gathers, the CPU groups of DeepSpeed,
Lightning, vLLM, Megatron): the same TCP between ranks NCCL's bootstrap needs, with its own interface.

Gloo binds to the address the host name resolves to, else to the loopback address with a warning
(torch/csrc/distributed/c10d/ProcessGroupGloo.cpp); its TCP pairs report failures from
third_party/gloo/gloo/transport/tcp/pair.cc; PyTorch wraps a failed mesh as ``Gloo connectFullMesh
failed with ...``. Strings checked against pytorch/pytorch 1.9 .. 2.8 and facebookincubator/gloo.
"""

from __future__ import annotations

from rdmadoctor.core.codes.pytorch import (
    GLOO_LOOPBACK,
)
from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.logs.kb import Pattern

CODES = (GLOO_LOOPBACK,)

# Codes that live with other sources, named by string (see kb/ucx.py).
NCCL_SOCKET_ERROR = "NCCL_SOCKET_ERROR"
NCCL_NO_SOCKET_INTERFACE = "NCCL_NO_SOCKET_INTERFACE"

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="gloo.loopback",
        code=GLOO_LOOPBACK.code,
        severity=WARNING,
        needle="Unable to resolve hostname to a (local) address",
        regex=r"Unable to resolve hostname to a \(local\) address\. Using the loopback address as fallback",
        subject="GLOO_SOCKET_IFNAME",
        message="Gloo could not resolve the host name to a local address and listens on the loopback address: ranks "
                "on other hosts cannot reach this one.",
        meaning="A multi-node job fails at its first Gloo call (a barrier, a CPU group); on one host nothing happens.",
        fix="Set GLOO_SOCKET_IFNAME to the pod's interface (`eth0`, `net1` for Multus), or make the host name resolve "
            "to the pod's address.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupGloo.cpp createDefaultDevice `Unable to resolve "
            "hostname to a (local) address. Using the loopback address as fallback. Manually set the network interface "
            "to bind to with GLOO_SOCKET_IFNAME.` (1.8+)",
        examples=(
            "[rank0]:[W ProcessGroupGloo.cpp:721] Warning: Unable to resolve hostname to a (local) address. Using the "
            "loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. "
            "(function operator())",
        ),
    ),
    Pattern(
        id="gloo.connect_full_mesh",
        code=NCCL_SOCKET_ERROR,
        severity=ERROR,
        needle="connectFullMesh failed",
        regex=r"Gloo connectFullMesh failed with (?:\[[^\]\n]{1,200}\] ?)?(?P<why>[^\n]{1,300}?)\s*$",
        subject="Gloo",
        message="PyTorch's Gloo backend could not connect its ranks to one another: {why_text}.",
        meaning="The job stops at its first Gloo call (a barrier, a CPU group): Gloo's TCP between hosts does not "
                "work, most often because it listens on an address the other hosts cannot reach.",
        fix="Set GLOO_SOCKET_IFNAME to the pod's interface the other hosts reach (`eth0`, `net1` for Multus), check "
            "that pod-to-pod TCP is open on all ports, and look for GLOO_LOOPBACK before this line.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupGloo.cpp `Gloo connectFullMesh failed with %s` "
            "(2.0+)",
        examples=(
            "[rank8]:[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with "
            "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
            "[E ProcessGroupGloo.cpp:138] Gloo connectFullMesh failed with Connection reset by peer",
        ),
        follows=(GLOO_LOOPBACK.code,),
        symptom_after=(GLOO_LOOPBACK.code,),
        derive=lambda g: {"why_text": "Gloo gave no reason (`no error`)" if g.get("why") == "no error" else g.get("why", "")},
    ),
    Pattern(
        id="gloo.connect_loopback",
        code=GLOO_LOOPBACK.code,
        severity=ERROR,
        needle="transport/tcp/pair.cc:",
        # A peer's address that is a loopback one: the peer resolved its own host name to 127.0.1.1
        # (Debian's /etc/hosts entry) or 127.0.0.1 and published that to the others.
        regex=r"transport/tcp/pair\.cc:\d{1,6}\] connect \[(?P<addr>127(?:\.\d{1,3}){3}|::1)\]:(?P<port>\d{1,5}): "
              r"(?P<what>[^\n]{1,80}?)\.?\s*$",
        subject="GLOO_SOCKET_IFNAME",
        message="Gloo tried to reach a peer at {addr}:{port}, a loopback address ({what}): that peer published the "
                "address its host name resolves to, and it resolves to the loopback alias (127.0.1.1 in /etc/hosts), "
                "so no other host can reach it.",
        meaning="A multi-node job fails at its first Gloo call (a barrier, a CPU group) and the process aborts.",
        fix="Set GLOO_SOCKET_IFNAME to the interface the hosts reach each other on (`eth0`, `ib0`, `net1` for "
            "Multus) on every host, or make the host name resolve to that interface's address (remove the "
            "`127.0.1.1 <hostname>` line of /etc/hosts).",
        ref="facebookincubator/gloo gloo/transport/tcp/pair.cc Pair::connect (`connect %s: %s` with the peer's "
            "address); https://github.com/pytorch/pytorch/issues/15592",
        examples=("  what():  [/opt/conda/conda-bld/pytorch_1544084119927/work/third_party/gloo/gloo/transport/tcp/"
                  "pair.cc:724] connect [127.0.1.1]:3210: Connection refused",),
    ),
    Pattern(
        id="gloo.pair_failed",
        code=NCCL_SOCKET_ERROR,
        severity=ERROR,
        needle="transport/tcp/pair.cc:",
        regex=r"transport/tcp/pair\.cc:\d{1,6}\] (?:connect (?!\[(?:127\.|::1\]))(?P<to>\[[^\]\n]{1,100}\]:\d{1,5}): )?"
              r"(?P<what>Connection closed by peer|Connection refused|Connection reset by "
              r"peer|Connect timeout|Read error|Write error|Timed out)[^\[\n]{0,100}(?P<peer>\[[^\]\n]{1,100}\]:\d{1,5})?",
        subject="Gloo",
        message="A Gloo TCP connection between ranks failed: {what} {peer_text}.",
        meaning="A peer went away (its process died first: look for its error) or the network between the hosts "
                "dropped the connection.",
        fix="Find the first error of the rank at that address; if it has none, check the network between the hosts and "
            "GLOO_SOCKET_IFNAME.",
        ref="facebookincubator/gloo gloo/transport/tcp/pair.cc (`Connection closed by peer`, `Read error`, `Connect "
            "timeout`), raised through PyTorch's ProcessGroupGloo",
        examples=(
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
            "[10.244.1.12]:28913",
            "RuntimeError: [/opt/conda/conda-bld/pytorch_1682343967769/work/third_party/gloo/gloo/transport/tcp/"
            "pair.cc:799] connect [172.31.71.170]:13195: Connection refused",
        ),
        derive=lambda g: {"peer_text": g.get("to") or g.get("peer") or ""},
        symptom=True,  # a peer that died first, most of the time
    ),
    Pattern(
        id="gloo.no_interface",
        code=NCCL_NO_SOCKET_INTERFACE,
        severity=ERROR,
        needle="Unable to find address for",
        regex=r"Unable to find address for:? (?P<iface>[\w.:@-]{1,64})",
        subject="{iface}",
        message="Gloo was told to use interface {iface} (GLOO_SOCKET_IFNAME, Horovod's --network-interface) and this "
                "host has no interface by that name with an address: it aborts.",
        meaning="The process dies at its first Gloo call (`gloo::EnforceNotMet`, `Fatal Python error: Aborted`); the "
                "interface names differ between the hosts.",
        fix="Name an interface every host has (`ip -br addr` on each), or one name per host through its own "
            "environment; Horovod takes a list.",
        ref="facebookincubator/gloo gloo/transport/tcp/device.cc lookupAddrForIface `Unable to find address for: %s`; "
            "https://github.com/horovod/horovod/issues/2431",
        examples=("  what():  [enforce fail at /tmp/horovod/third_party/compatible_gloo/gloo/transport/tcp/device.cc:83] "
                  "ifa != nullptr. Unable to find address for: enp129s0f1",),
    ),
)
