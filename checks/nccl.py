"""nccl.env: the job's NCCL settings against this node (HCAs, socket interfaces, GID index, IB on/off).

The settings are read as NCCL's C code reads them, not as its docs summarise them: its number
parsing (strtoll, atoi) and its device-list matching (``^``, ``=``, prefixes, ``dev:port``) are in
checks/_nccl_rules.py, with the NCCL source files they follow.

Two transports are judged beyond the settings' syntax:

- NET/IB on iWARP: ncclIbInitDevices (src/transport/net_ib/init.cc) keeps every ACTIVE port whose
  link layer is InfiniBand or Ethernet and never reads the device's transport type, so an iWARP RNIC
  is listed as a RoCE device ("NET/IB : Using [0]cxgb4_0:1/RoCE"). The job then fails at its first
  inter-node connection: NCCL connects QPs itself with ibv_modify_qp to RTR and RTS (connect.cc
  ncclIbQpRtr / ncclIbQpRts, an address handle built from GID index 0, the RNIC's only GID:
  ncclIbGetGidIndex finds no other in a one-entry table), and an iWARP driver accepts RTS only for
  a QP the iWARP connection manager connected (checks/iwarp.py cites the drivers): IWARP_NCCL_IB.
- NET/Socket: with NCCL_IB_DISABLE, without a usable RDMA port, or in a pool that trains over TCP by
  design (rdma_required = false), every byte between nodes goes through the interfaces NCCL's
  socket transport found (src/misc/socket.cc ncclFindInterfaces: NCCL_SOCKET_IFNAME, else "ib*",
  else anything but docker, lo and virbr), each at the speed NCCL itself reads from
  /sys/class/net/<if>/speed (net_socket.cc ncclNetSocketGetSpeed). Their speed and MTU are judged
  against socket_min_gbps and socket_min_mtu.

Its codes are in the registry's NCCL family (rdmadoctor/core/codes/nccl.py). The check is spread
over private modules, one job each: ``_nccl_rules`` (NCCL's own parsing and matching rules, with
their NCCL source files), ``_nccl_probe`` (facts: settings, ports, and the interfaces the Host
reads, ``host.interfaces()``) and ``_nccl_judge`` (facts -> findings).
This module declares the check and keeps every name it ever offered importable from here.
"""

from __future__ import annotations

# Re-exported: other modules, plugins and tests import these from rdmadoctor.checks.nccl.
from rdmadoctor.checks._nccl_judge import ROCE_V2, judge_nccl  # noqa: F401
from rdmadoctor.checks._nccl_probe import HAS_ENV, HcaPort, NcclFacts, NetIf, probe_nccl  # noqa: F401
from rdmadoctor.checks._nccl_rules import (  # noqa: F401
    LLONG_MAX,
    LLONG_MIN,
    HcaEntryReport,
    HcaSelection,
    IfEntry,
    IfList,
    c_atoi,
    c_strtoll,
    clip,
    entry_matches,
    list_matches,
    master_addr_error,
    nccl_auto_interfaces,
    numeric_exact,
    parse_if_list,
    select_hcas,
    select_interfaces,
)
from rdmadoctor.core.codes.nccl import (
    IWARP_NCCL_IB,
    NCCL_ENV_INFO,
    NCCL_ENV_INVALID,
    NCCL_IB_DISABLED_BY_ENV,
    NCCL_IB_GID_INDEX_BAD,
    NCCL_IB_GID_INDEX_UNKNOWN,
    NCCL_IB_HCA_NO_MATCH,
    NCCL_IB_HCA_PREFIX,
    NCCL_IB_HCA_UNKNOWN,
    NCCL_MASTER_ADDR_BAD,
    NCCL_SOCKET_IFNAME_MTU_LOW,
    NCCL_SOCKET_IFNAME_NO_ADDR,
    NCCL_SOCKET_IFNAME_NO_MATCH,
    NCCL_SOCKET_IFNAME_SLOW,
    NCCL_SOCKET_IFNAME_UNKNOWN,
    NCCL_SOCKET_IFNAME_UNSET,
    NCCL_SOCKET_SPEED_NOT_REPORTED,
    NCCL_SOCKET_SPEED_UNKNOWN,
    NCCL_SOCKET_TRANSPORT,
)
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.model import CONFIG, Check
from rdmadoctor.host.net import IFF_RUNNING, IFF_UP  # noqa: F401


def _inventory_json(facts: NcclFacts) -> dict:
    return {"nccl_env": {k: v for k, v in facts.settings.items() if k.startswith("NCCL_")}}


# The expectations this module's checks read: declared once, here, with type, unit and range
# (engine.expectations builds its table from every check's defaults).
EXPECT: dict[str, Expect] = {
    "compute_hcas": Expect(
        None, "list", null_means="every HCA", example=["mlx5_0", "mlx5_1"],
        doc="Names (or prefixes) of the HCAs meant for NCCL; storage and management ones are left out.",
    ),
    "socket_min_gbps": Expect(
        None, "number", "Gb/s", above=0, max=10000, null_means="no minimum", example=25,
        doc="Lowest acceptable speed (/sys/class/net/<if>/speed) of the interfaces NCCL_SOCKET_IFNAME selects, "
        "judged when NCCL moves its data over TCP sockets.",
    ),
    "socket_min_mtu": Expect(
        None, "int", "bytes", min=68, max=65536, null_means="no MTU check", example=9000,
        doc="Lowest acceptable MTU of the interfaces NCCL_SOCKET_IFNAME selects, judged when NCCL moves its data "
        "over TCP sockets.",
    ),
}


# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 90

CHECKS = [
    Check(
        defaults=EXPECT,
        scope="pod",
        id="nccl.env",
        condition=CONFIG,
        gate=True,
        title="NCCL settings",
        probe=probe_nccl,
        judge=judge_nccl,
        codes=(
            NCCL_IB_HCA_NO_MATCH,
            NCCL_IB_HCA_UNKNOWN,
            NCCL_IB_HCA_PREFIX,
            NCCL_SOCKET_IFNAME_NO_MATCH,
            NCCL_SOCKET_IFNAME_NO_ADDR,
            NCCL_SOCKET_IFNAME_UNKNOWN,
            NCCL_IB_DISABLED_BY_ENV,
            NCCL_IB_GID_INDEX_BAD,
            NCCL_IB_GID_INDEX_UNKNOWN,
            NCCL_ENV_INVALID,
            NCCL_MASTER_ADDR_BAD,
            NCCL_ENV_INFO,
            IWARP_NCCL_IB,
            NCCL_SOCKET_IFNAME_SLOW,
            NCCL_SOCKET_IFNAME_MTU_LOW,
            NCCL_SOCKET_IFNAME_UNSET,
            NCCL_SOCKET_SPEED_UNKNOWN,
            NCCL_SOCKET_SPEED_NOT_REPORTED,
            NCCL_SOCKET_TRANSPORT,
        ),
        needs=(HAS_ENV,),
        inventory=_inventory_json,
        description="The job's NCCL_* settings (environment, NCCL_CONF_FILE, /etc/nccl.conf) against this node: "
        "NCCL_IB_HCA selects ACTIVE ports and no iWARP one, NCCL_SOCKET_IFNAME an interface that is up with an address "
        "(and, when NCCL's data goes over sockets, at socket_min_gbps and socket_min_mtu), NCCL_IB_GID_INDEX a RoCE v2 "
        "GID, no NCCL_IB_DISABLE while RDMA works (unless rdma_required = false), MASTER_ADDR/PORT well-formed.",
    ),
]

