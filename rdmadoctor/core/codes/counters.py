"""Port error counters, read twice a window apart (the ib.counters check, checks/counters.py).

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import COULD_NOT_DECIDE, INFORMATION, PROBLEM, Code

IB_LINK_FLAP = Code(
    "IB_LINK_FLAP",
    "The link went down and up",
    "The port's link_downed counter grew: the link dropped and retrained (a flap). Every NCCL connection "
    "over the port breaks when it happens (the job fails with IBV_WC_RETRY_EXC_ERR or hangs), and a link "
    "that flaps once usually flaps again: a marginal cable or transceiver, a switch port, dust on an optic.",
    "Look at the cable and the switch port: `mlxlink -d <dev> -m -c -e` (eye, BER, FEC and cable info), "
    "`ibdiagnet` or the switch's port log; reseat or replace the cable/transceiver. Drain the node if it "
    "flaps again. The finding clears after counter_recovery_seconds without a flap.",
    kind=PROBLEM,
    from_counters=True,
)
IB_SYMBOL_ERRORS = Code(
    "IB_SYMBOL_ERRORS",
    "Symbol errors on the link",
    "The port's symbol_error counter grows faster than symbol_errors_max_per_hour: bits arrive corrupted, "
    "packets are dropped and retransmitted, and the link slows every collective that crosses it. It "
    "often precedes a flap.",
    "`mlxlink -d <dev> -m -c -e` shows the raw and effective BER; clean or replace the optic or cable, "
    "check the switch side. Raise symbol_errors_max_per_hour only for a known-marginal link.",
    kind=PROBLEM,
    from_counters=True,
)
ROCE_ACK_TIMEOUTS = Code(
    "ROCE_ACK_TIMEOUTS",
    "Local ACK timeouts on a RoCE port",
    "The RoCE port's local_ack_timeout_err counter grows faster than ack_timeouts_max_per_hour: the peer "
    "did not acknowledge in time and the QP retransmitted (NCCL_IB_TIMEOUT), usually packet loss in the "
    "Ethernet fabric: PFC / ECN not set up end to end, a congested or misconfigured switch.",
    "Check lossless RoCE on the NIC (`mlnx_qos -i <netdev>`: PFC on the traffic class NCCL uses, "
    "NCCL_IB_TC) and on every switch hop; watch the CNP counters (np_cnp_sent, rp_cnp_handled) and the "
    "switch's drop counters.",
    kind=PROBLEM,
    from_counters=True,
)
PORT_COUNTERS_RESET = Code(
    "PORT_COUNTERS_RESET",
    "Port counters were reset",
    "Information: a counter went back to a lower value that is not a wrap (a 32-bit hw_counter near its top, or a 64-bit one): the driver was "
    "reloaded, the HCA reset or the node rebooted. Growth is counted again from the reset.",
    "Nothing to fix. If it was not planned, look at `dmesg` for an mlx5 reset or a firmware fatal error.",
    kind=INFORMATION,
)
PORT_COUNTERS_SATURATED = Code(
    "PORT_COUNTERS_SATURATED",
    "A port counter stopped at its top value",
    "Information: an InfiniBand error counter (link_downed and link_error_recovery are 8 bits wide, "
    "symbol_error and port_rcv_errors 16) reached the top of its field and, as the InfiniBand spec makes "
    "these counters do, stopped there: growth since is not seen, so this check cannot see new flaps or "
    "errors on the port until the counter is cleared.",
    "Clear the port's counters: `perfquery -R <lid> <port>` (infiniband-diags; `perfquery -R` alone for "
    "the local port), or reload the driver at the next maintenance. The check sees growth again from there.",
    kind=INFORMATION,
)
PORT_COUNTERS_UNREADABLE = Code(
    "PORT_COUNTERS_UNREADABLE",
    "Port counters could not be read",
    "The port has no readable error counters in sysfs (ports/N/counters/), so flaps and symbol errors "
    "cannot be judged on it. This is missing evidence, not a finding about the link.",
    "Mount the host's /sys (the DaemonSet mounts it read-only under /host/sys); some drivers (iWARP, "
    "rxe) have no PMA counters at all.",
    kind=COULD_NOT_DECIDE,
)
