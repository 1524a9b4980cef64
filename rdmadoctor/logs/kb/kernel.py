"""Kernel messages (dmesg, ``journalctl -k``): mlx5_core, the module loader, nvidia-peermem, PCIe AER.

A dmesg line carries ``[  123.456789] `` or a syslog ``host kernel: `` before the driver's own
``mlx5_core 0000:3b:00.0: `` (``netdev_info`` adds the interface: ``mlx5_core 0000:3b:00.0
ens1f0np0: ``); rows search past any of that. Strings checked against torvalds/linux
(drivers/net/ethernet/mellanox/mlx5/core/{cmd,health,events,en_main}.c, kernel/module,
net/sched/sch_generic.c, drivers/pci/pcie/aer.c) through the code index, NVIDIA's nvidia-peermem
source (nv_get_p2p_free_callback) and the lines quoted by NVIDIA/NVSentinel and leptonai/gpud.
"""

from __future__ import annotations

from rdmadoctor.core.codes.node import (
    GDR_PEERMEM_INVALID_CONTEXT,
    GDR_PEERMEM_LOAD_FAILED,
    GPU_XID,
    MLX5_CMD_TIMEOUT,
    MLX5_HEALTH_ERROR,
    NIC_LINK_DOWN,
    NIC_MODULE_EVENT,
    NIC_TX_TIMEOUT,
    NODE_DRIVER_FAILED,
    PCIE_AER_ERROR,
)
from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.logs.kb import Pattern

CODES = (NIC_LINK_DOWN, MLX5_CMD_TIMEOUT, MLX5_HEALTH_ERROR, NIC_TX_TIMEOUT, NIC_MODULE_EVENT, PCIE_AER_ERROR,
         GDR_PEERMEM_LOAD_FAILED, GDR_PEERMEM_INVALID_CONTEXT, GPU_XID)

# Codes that live elsewhere, named by string: with their checks (the logs layer is below them)
# or in kb/nccl.py (which imports this module).
MOD_MISSING = "MOD_MISSING"
NCCL_REG_MR_FAILED = "NCCL_REG_MR_FAILED"

# The mlx5_core device prefix, when present: `mlx5_core 0000:3b:00.0: ` or with the netdev.
_MLX5 = r"(?:mlx5_core (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])[: ].{0,256}?)?"


# What an Xid number means, as NVIDIA's Xid catalog words it (docs.nvidia.com/deploy/xid-errors).
_XIDS = {
    "13": "graphics engine exception: the application's kernel faulted", "31": "GPU memory page fault: the "
    "application's kernel accessed memory it does not own", "43": "the GPU stopped the application's kernel",
    "45": "the driver ended a context (after another error, or a process killed)", "48": "double-bit ECC error",
    "61": "internal micro-controller breakpoint", "62": "internal micro-controller halt", "63": "ECC page "
    "retirement or row remapping recorded", "64": "ECC page retirement or row remapping failed", "74": "NVLink "
    "error", "79": "the GPU has fallen off the bus: it no longer answers", "92": "high single-bit ECC error rate",
    "94": "contained ECC error", "95": "uncontained ECC error", "119": "GSP firmware RPC timeout", "120": "GSP "
    "firmware error",
}
_APP_XIDS = frozenset({"13", "31", "43", "45"})


def _xid(groups: dict[str, str]) -> dict[str, str]:
    n = groups.get("xid") or ""
    return {"xid_text": _XIDS.get(n, "see NVIDIA's Xid catalog"),
            "app": "yes" if n in _APP_XIDS else ""}


def _bdf(groups: dict[str, str]) -> dict[str, str]:
    return {"device": groups.get("bdf") or "mlx5 device"}


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="kernel.mlx5_link_down",
        code=NIC_LINK_DOWN.code,
        severity=WARNING,
        needle="Link down",
        regex=r"mlx5_core (?P<bdf>[0-9a-fA-F:.]{1,32}) (?P<netdev>[\w.-]{1,64}): Link down",
        subject="{netdev}",
        message="The kernel logged `Link down` for {netdev} ({bdf}); a port in use should stay up.",
        meaning="Traffic on the port stops; RoCE or IPoIB connections over it fail until it is back.",
        fix="Check the cable, transceiver and switch port (`mlxlink -d <bdf> -m`, `ethtool -S <if>`); drain the node "
            "if it flaps.",
        ref="torvalds/linux drivers/net/ethernet/mellanox/mlx5/core/en_main.c mlx5e_update_carrier netdev_info "
            "`Link down`",
        examples=("[ 5123.887211] mlx5_core 0000:3b:00.0 ens1f0np0: Link down",
                  "Mar 04 10:12:33 gpu-node-7 kernel: mlx5_core 0000:b5:00.1 enp181s0f1np1: Link down"),
    ),
    Pattern(
        id="kernel.mlx5_cmd_timeout",
        code=MLX5_CMD_TIMEOUT.code,
        severity=ERROR,
        needle="Will cause a leak of a command resource",
        regex=_MLX5 + r"(?<![A-Z0-9_])(?P<cmd>[A-Z][A-Z0-9_]+)\(0x[0-9a-fA-F]{1,16}\)(?: Async,)? timeout\. Will cause a leak of a command "
                      r"resource",
        subject="{device}",
        message="The ConnectX firmware of {device} did not answer command {cmd} in time; the device's control plane "
                "is not responding.",
        meaning="Queue creation, memory registration and resets on this HCA fail or hang; jobs on the node fail.",
        fix="Drain the node; `mlxfwmanager --query`, `devlink health show`; `mlxfwreset -d <bdf> reset` or a cold "
            "reboot; replace the card if it repeats.",
        ref="torvalds/linux drivers/net/ethernet/mellanox/mlx5/core/cmd.c wait_func / cb_timeout_handler (`cmd[%d]: "
            "%s(0x%x) Async, timeout.` in newer kernels); NVIDIA/NVSentinel nicdriver cmd_exec_timeout",
        examples=(
            "kernel: [   66.816635] mlx5_core 0000:03:00.0: wait_func:964:(pid 112): ENABLE_HCA(0x104) timeout. Will "
            "cause a leak of a command resource",
            "[  257.137072] mlx5_core 0000:56:00.0: wait_func:1189:(pid 72061): ACCESS_REG(0x805) timeout. Will cause a "
            "leak of a command resource",
            "mlx5_core 0000:56:00.0: cb_timeout_handler:911:(pid 0): cmd[2]: CREATE_MKEY(0x200) Async, timeout. Will "
            "cause a leak of a command resource",
        ),
        derive=_bdf,
    ),
    Pattern(
        id="kernel.mlx5_health_miss",
        code=MLX5_HEALTH_ERROR.code,
        severity=ERROR,
        needle="mlx5_core",
        regex=_MLX5 + r"device's health compromised(?: - reached miss count)?",
        subject="{device}",
        message="The firmware heartbeat of {device} stopped (`device's health compromised`); a healthy HCA keeps it "
                "counting.",
        meaning="The driver will reset or disable the device; every RDMA connection on it is lost.",
        fix="Drain the node; collect dmesg and `devlink health show`, then reboot and check the firmware; replace the "
            "card if it returns.",
        ref="torvalds/linux drivers/net/ethernet/mellanox/mlx5/core/health.c poll_health (`- reached miss count` "
            "since 4.x); NVIDIA/NVSentinel nicdriver health_poll_failed",
        examples=(
            "kernel: [   17.982092] mlx5_core 0000:41:00.0: poll_health:852:(pid 0): device's health compromised - "
            "reached miss count",
        ),
        derive=_bdf,
    ),
    Pattern(
        id="kernel.mlx5_health_syndrome",
        code=MLX5_HEALTH_ERROR.code,
        severity=ERROR,
        needle="mlx5_core",
        regex=r"mlx5_core (?P<bdf>[0-9a-fA-F:.]{1,32}): (?:\w{1,64}:\d{1,9}:\(pid \d{1,9}\): )?synd 0x(?P<synd>[0-9a-fA-F]{1,16}): "
              r"(?P<what>.*?\S)\s*$",
        subject="{bdf}",
        message="ConnectX device {bdf} reported health syndrome 0x{synd}: {what}.",
        meaning="The device is in a fatal state; the driver resets or disables it and RDMA on it stops.",
        fix="Drain the node; collect dmesg and `devlink health show`; an `unrecoverable hardware error` that returns "
            "after a cold reboot means the card must be replaced.",
        ref="torvalds/linux drivers/net/ethernet/mellanox/mlx5/core/health.c print_health_info `synd 0x%x: %s` "
            "(hsynd_str); NVIDIA/NVSentinel nicdriver unrecoverable_err",
        examples=(
            "kernel: [   17.982217] mlx5_core 0000:41:00.0: print_health_info:458:(pid 0): synd 0x8: unrecoverable "
            "hardware error",
            "mlx5_core 0000:41:00.0: synd 0x1: firmware internal error",
        ),
    ),
    Pattern(
        id="kernel.mlx5_fatal_error",
        code=MLX5_HEALTH_ERROR.code,
        severity=ERROR,
        needle="Fatal error",
        regex=r"mlx5_core (?P<bdf>[0-9a-fA-F:.]{1,32}): (?:\w{1,64}:\d{1,9}:\(pid \d{1,9}\): )?Fatal error (?P<n>\d{1,9}) detected",
        subject="{bdf}",
        message="ConnectX device {bdf} reported fatal error {n}; the driver starts its recovery.",
        meaning="The device resets; RDMA connections on it are lost.",
        fix="Drain the node; collect dmesg and `devlink health show`; check firmware and the PCIe link after a reboot.",
        ref="torvalds/linux drivers/net/ethernet/mellanox/mlx5/core/health.c poll_health `Fatal error %u detected`",
        examples=("mlx5_core 0000:41:00.0: poll_health:866:(pid 0): Fatal error 1 detected",),
    ),
    Pattern(
        id="kernel.mlx5_probe_failed",
        code=NODE_DRIVER_FAILED.code,
        severity=ERROR,
        needle="mlx5_core",
        # The driver's probe of a ConnectX function failed: no netdev, no RDMA device from it. The
        # step that failed comes first (handle_hca_cap, mlx5_load_one), then the probe's own line.
        regex=r"mlx5_core(?::| (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):) (?:\w{1,64}:\d{1,9}:\(pid \d{1,9}\): )?"
              r"(?:probe of (?P<pbdf>[0-9a-fA-F:.]{1,32}) failed with error (?P<err>-?\d{1,4})"
              r"|(?P<step>handle_hca_cap|set_hca_cap|mlx5_load_one|mlx5_init_one|mlx5_function_setup|init_one|"
              r"mlx5_cmd_init) failed(?: with error code (?P<err2>-?\d{1,4}))?)",
        subject="{device}",
        message="The mlx5_core driver could not bring up ConnectX function {device} ({what}): it gives no network "
                "interface and no RDMA device.",
        meaning="The node has one RDMA device fewer (or none): NCCL and MPI use the rest, or TCP. `-22` (EINVAL) "
                "after a capability step is the driver and the card's firmware not agreeing.",
        fix="Read `dmesg | grep mlx5` from the first line of that device; bring the firmware to the version the "
            "driver expects (`mlxfwmanager --query`, `mlxfwmanager -u`) or use the driver (MLNX_OFED/DOCA, or the "
            "kernel's) that supports this firmware; then reload mlx5_core or reboot.",
        ref="torvalds/linux drivers/net/ethernet/mellanox/mlx5/core/main.c (`handle_hca_cap failed`, "
            "`mlx5_load_one failed with error code %d`), drivers/base/dd.c (`probe of %s failed with error %d`); "
            "https://github.com/pocopico/rp-ext/issues/129",
        examples=("[    5.502207] mlx5_core 0000:01:00.0: handle_hca_cap failed",
                  "[    5.662202] mlx5_core 0000:01:00.0: mlx5_load_one failed with error code -22",
                  "[    5.663152] mlx5_core: probe of 0000:01:00.0 failed with error -22"),
        derive=lambda g: {
            "device": g.get("bdf") or g.get("pbdf") or "mlx5 device",
            "what": f"probe failed with error {g['err']}" if g.get("err")
            else f"{g.get('step')} failed" + (f" with error {g['err2']}" if g.get("err2") else ""),
        },
    ),
    Pattern(
        id="kernel.netdev_watchdog",
        code=NIC_TX_TIMEOUT.code,
        severity=WARNING,
        needle="NETDEV WATCHDOG",
        # Kernel 6.8 (backported to 6.6.47 and 6.1.107) moved the driver in front of the text.
        regex=r"NETDEV WATCHDOG: (?P<netdev>[\w.-]{1,64}) \((?P<driver>[^)]{1,64})\): transmit queue (?P<queue>\d{1,6}) timed out"
              r"|(?<![\w-])(?P<driver2>[\w-]{1,64}) (?P<bdf>[0-9a-fA-F:.]{1,32}) (?P<netdev2>[\w.-]{1,64}): NETDEV WATCHDOG: "
              r"(?:CPU: \d{1,6}: )?transmit queue (?P<queue2>\d{1,6}) timed out",
        subject="{ifname}",
        message="Transmit queue {q} of {ifname} ({drv}) sent nothing for several seconds and the kernel asked the "
                "driver to reset it.",
        meaning="Traffic on the interface stalls meanwhile; repeated timeouts mean a wedged NIC.",
        fix="Look for mlx5 command timeouts or health errors around it; update NIC firmware and driver; drain the "
            "node if it repeats.",
        ref="torvalds/linux net/sched/sch_generic.c dev_watchdog (`NETDEV WATCHDOG: %s (%s): transmit queue %u timed "
            "out`; netdev_crit form since 6.8); NVIDIA/NVSentinel nicdriver netdev_watchdog",
        examples=(
            "[81234.11] NETDEV WATCHDOG: ens1f0np0 (mlx5_core): transmit queue 3 timed out",
            "NETDEV WATCHDOG: eth0 (mlx5_core): transmit queue 0 timed out 5032 ms",
            "mlx5_core 0000:65:00.0 eth0: NETDEV WATCHDOG: CPU: 5: transmit queue 0 timed out 5032 ms",
        ),
        derive=lambda g: {"ifname": g.get("netdev") or g.get("netdev2") or "?",
                          "drv": g.get("driver") or g.get("driver2") or "?",
                          "q": g.get("queue") or g.get("queue2") or "?"},
    ),
    Pattern(
        id="kernel.mlx5_module_event",
        code=NIC_MODULE_EVENT.code,
        severity=WARNING,
        needle="Port module event",
        regex=_MLX5 + r"Port module event(?:\[error\])?: module (?P<module>\d{1,6}), (?P<status>Cable unplugged|Cable error)"
                      r"(?:, (?P<error>.*?\S))?\s*$",
        subject="{device} module {module}",
        message="ConnectX {device} reported module {module}: {status}{error_note}; a port in use needs its cable "
                "plugged and healthy.",
        meaning="The port goes down or will not come up.",
        fix="Inspect and reseat or replace the cable/transceiver (`mlxlink -d <bdf> -m`, `ethtool -m <if>`); use a "
            "supported module; check cooling for `High Temperature`.",
        ref="torvalds/linux drivers/net/ethernet/mellanox/mlx5/core/events.c port_module (mlx5_pme_status, "
            "mlx5_pme_error); NVIDIA/NVSentinel nicdriver module_unplugged, port_module_high_temp",
        examples=(
            "mlx5_core 0000:3b:00.0: Port module event: module 0, Cable unplugged",
            "mlx5_core 0000:3b:00.0: Port module event[error]: module 1, Cable error, High Temperature",
            "mlx5_core 0000:3b:00.0: Port module event[error]: module 0, Cable error, Power budget exceeded",
        ),
        derive=lambda g: {"device": g.get("bdf") or "mlx5 device",
                          "error_note": f" ({g['error']})" if g.get("error") else ""},
    ),
    Pattern(
        id="kernel.pcie_aer_uncorrected",
        code=PCIE_AER_ERROR.code,
        severity=ERROR,
        needle="PCIe Bus Error: severity=Uncorrect",
        regex=r"(?:(?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):? (?:AER: )?)?PCIe Bus Error: "
              r"severity=(?P<severity>Uncorrected \((?:Fatal|Non-Fatal)\)|Uncorrectable[^,]*), type=(?P<type>[^,]+), "
              r"(?:id=\w+)?\((?P<agent>[^)]*)\)",
        subject="{device}",
        message="PCIe reported an {severity} error ({type}, {agent}) at {device}; a healthy link has none.",
        meaning="The device (an HCA or a GPU) can fall off the bus or corrupt transfers; jobs on it fail.",
        fix="`lspci -s <bdf>` names the device; check its link (`lspci -vv -s <bdf> | grep LnkSta`) and drain the node "
            "for hardware service if it repeats.",
        ref="torvalds/linux drivers/pci/pcie/aer.c aer_print_error `PCIe Bus Error: severity=%s, type=%s, (%s)` "
            "(older kernels `id=%04x(%s)`)",
        examples=(
            "pcieport 0000:c0:01.1: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
            "(Requester ID)",
            "[369145.923124] igb 0000:09:00.0: AER: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction "
            "Layer, (Requester ID)",
        ),
        derive=lambda g: {"device": g.get("bdf") or "a PCIe device"},
    ),
    Pattern(
        id="kernel.pcie_aer_corrected",
        code=PCIE_AER_ERROR.code,
        severity=WARNING,
        needle="PCIe Bus Error: severity=Correct",
        regex=r"(?:(?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):? (?:AER: )?)?PCIe Bus Error: "
              r"severity=(?P<severity>Corrected|Correctable), type=(?P<type>[^,]+), (?:id=\w+)?\((?P<agent>[^)]*)\)",
        subject="{device}",
        message="PCIe corrected a {type} error at {device} ({agent}); frequent corrected errors mean a marginal link.",
        meaning="Each one costs a replay; many of them lower the device's bandwidth and often precede a link that "
                "trains down.",
        fix="Count them (`dmesg | grep -c 'PCIe Bus Error'`); if they keep coming, reseat the card or riser and check "
            "`lspci -vv -s <bdf> | grep LnkSta` against LnkCap.",
        ref="torvalds/linux drivers/pci/pcie/aer.c aer_print_error (`Corrected`, `Correctable` in newer kernels)",
        examples=(
            "[ 4908.274589] pcieport 0000:00:1c.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
            "pcieport 0000:07:00.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Receiver ID)",
            "pcieport 0000:00:1c.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, id=00e0(Transmitter ID)",
        ),
        derive=lambda g: {"device": g.get("bdf") or "a PCIe device"},
    ),
    Pattern(
        id="kernel.mlx5_mkey_limits",
        code=NCCL_REG_MR_FAILED,
        severity=ERROR,
        needle="CREATE_MKEY",
        regex=_MLX5 + r"CREATE_MKEY\(0x[0-9a-fA-F]{1,16}\) op_mod\(0x[0-9a-fA-F]{1,16}\) failed, status (?P<status>[\w ]{1,128})"
                      r"\(0x(?P<code>[0-9a-fA-F]{1,16})\)",
        subject="{device}",
        message="The ConnectX firmware of {device} refused to create a memory key: {status} (0x{code}).",
        meaning="Memory registrations (ibv_reg_mr) fail on this HCA: NCCL cannot register its buffers.",
        fix="`limits exceeded`: too many or too large registrations for the HCA; fewer ranks or communicators per "
            "HCA, NCCL_IB_QPS_PER_CONNECTION=1, and check nothing else pins memory on the node.",
        ref="torvalds/linux drivers/net/ethernet/mellanox/mlx5/core/cmd.c mlx5_cmd_check / mlx5_cmd_out_err `%s(0x%x) "
            "op_mod(0x%x) failed, status %s(0x%x), syndrome (0x%x)`",
        examples=("mlx5_core 0000:41:00.0: mlx5_cmd_check:816:(pid 2300450): CREATE_MKEY(0x200) op_mod(0x0) failed, "
                  "status limits exceeded(0x8), syndrome (0x59c8a4)",),
        derive=_bdf,
    ),
    Pattern(
        id="kernel.peermem_symbol",
        code=GDR_PEERMEM_LOAD_FAILED.code,
        severity=ERROR,
        needle="_peer",
        regex=r"(?P<module>nvidia_peermem|nv_peer_mem): (?P<what>Unknown symbol|disagrees about version of symbol) "
              r"(?P<symbol>\w+)",
        subject="{module}",
        message="The kernel refused to load {module}: {what} {symbol}. It was built against another RDMA stack than "
                "the one loaded.",
        meaning="GPUDirect RDMA is unavailable: NCCL stages every inter-node transfer through host memory.",
        fix="Rebuild the NVIDIA driver modules against the installed OFED (OFED first, then the driver), then "
            "`modprobe nvidia_peermem`; GPU Operator: driver.rdma.enabled=true, useHostMofed=true with host OFED.",
        ref="torvalds/linux kernel/module/main.c resolve_symbol/check_version (`%s: Unknown symbol %s (err %d)`, `%s: "
            "disagrees about version of symbol %s`); symbol from NVIDIA open-gpu-kernel-modules nvidia-peermem",
        examples=(
            "[31832.683273] nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client",
            "[31832.683276] nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)",
            "nv_peer_mem: Unknown symbol ib_unregister_peer_memory_client (err -2)",
        ),
    ),
    Pattern(
        id="kernel.peermem_modprobe",
        code=GDR_PEERMEM_LOAD_FAILED.code,
        severity=ERROR,
        needle="ERROR: could not insert '",
        regex=r"could not insert '(?P<module>nvidia_peermem|nv_peer_mem)': (?P<error>.*?\S)\s*$",
        subject="{module}",
        message="modprobe could not load {module}: {error}.",
        meaning="GPUDirect RDMA is unavailable: NCCL stages every inter-node transfer through host memory.",
        fix="`dmesg | grep -i peermem` shows why (usually a symbol mismatch with OFED: rebuild the NVIDIA modules "
            "after installing OFED); or use DMA-BUF with the open kernel module.",
        ref="kmod modprobe `could not insert '%s': %s`",
        examples=("modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument",
                  "modprobe: ERROR: could not insert 'nvidia_peermem': Unknown symbol in module, or unknown parameter "
                  "(see dmesg)"),
        # modprobe's summary of what the kernel says in its log (a symbol whose version disagrees, an
        # OFED/driver build mismatch): that line explains it, before or after it in a paste; alone it leads.
        follows=("kernel.rdma_module_symbol_version", "kernel.peermem_symbol"),
        symptom=True,
    ),
    Pattern(
        id="kernel.rdma_module_unknown_symbol",
        code=MOD_MISSING,
        severity=ERROR,
        needle="Unknown symbol",
        regex=r"(?P<module>mlx5_ib|mlx5_core|ib_core|ib_uverbs|ib_umad|rdma_ucm|rdma_cm|ib_cm|ib_ipoib|rdma_rxe|"
              r"mlx_compat): (?P<what>Unknown symbol) (?P<symbol>\w+)",
        subject="{module}",
        message="The kernel refused to load RDMA module {module}: {what} {symbol}; its build does not match the "
                "RDMA core that is loaded.",
        meaning="The module stays unloaded: without it the RDMA stack is incomplete (no device, no uverbs, or no "
                "connection manager).",
        fix="Use one RDMA kernel stack: rebuild or reinstall MLNX_OFED/DOCA-OFED for the running kernel (`dkms status`, "
            "`/etc/init.d/openibd restart`) or remove it and use the inbox modules.",
        ref="torvalds/linux kernel/module/main.c resolve_symbol/check_version",
        examples=("[  12.3] mlx5_ib: Unknown symbol ib_umem_get (err -22)",),
    ),
    Pattern(
        id="kernel.rdma_module_symbol_version",
        code=MOD_MISSING,
        severity=ERROR,
        needle="disagrees about version of symbol",
        regex=r"(?P<module>mlx5_ib|mlx5_core|ib_core|ib_uverbs|ib_umad|rdma_ucm|rdma_cm|ib_cm|ib_ipoib|rdma_rxe|"
              r"mlx_compat): (?P<what>disagrees about version of symbol) (?P<symbol>\w+)",
        subject="{module}",
        message="The kernel refused to load RDMA module {module}: {what} {symbol}; its build does not match the "
                "RDMA core that is loaded.",
        meaning="The module stays unloaded: without it the RDMA stack is incomplete (no device, no uverbs, or no "
                "connection manager).",
        fix="Use one RDMA kernel stack: rebuild or reinstall MLNX_OFED/DOCA-OFED for the running kernel (`dkms status`, "
            "`/etc/init.d/openibd restart`) or remove it and use the inbox modules.",
        ref="torvalds/linux kernel/module/main.c resolve_symbol/check_version",
        examples=("rdma_rxe: disagrees about version of symbol ib_register_device",),
    ),
    Pattern(
        id="kernel.peermem_invalid_context",
        code=GDR_PEERMEM_INVALID_CONTEXT.code,
        severity=WARNING,
        needle="ERROR detected invalid context",
        regex=r"nvidia-peermem (?P<func>\w+):\d+ ERROR detected invalid context",
        subject="nvidia-peermem",
        message="nvidia-peermem got a free callback for a registration it does not know ({func}); GPUDirect RDMA "
                "registrations are being torn down out of order.",
        meaning="Repeated, it goes with GPUDirect RDMA transfers that hang or fail.",
        fix="Update the NVIDIA driver and OFED; use DMA-BUF instead of peermem (NCCL_DMABUF_ENABLE=1 with the open "
            "kernel module), or confirm with NCCL_NET_GDR_LEVEL=LOC.",
        ref="NVIDIA open-gpu-kernel-modules kernel-open/nvidia-peermem/nvidia-peermem.c nv_get_p2p_free_callback; "
            "leptonai/gpud peermem matcher",
        examples=("[Thu Sep 19 02:29:46 2024] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, "
                  "skipping further processing",),
    ),
    Pattern(
        id="kernel.nvidia_xid",
        code=GPU_XID.code,
        severity=ERROR,
        needle="NVRM: Xid",
        regex=r"NVRM: Xid \(PCI:(?P<bdf>[0-9a-fA-F:.]{4,16})\): (?P<xid>\d{1,4})\b",
        subject="GPU {bdf}",
        message="The NVIDIA driver reported Xid {xid} on the GPU at {bdf}: {xid_text}.",
        meaning="A hardware or driver Xid (79, 74, ECC, GSP) takes the GPU out: its job hangs or dies and the peers "
                "time out; an application Xid (13, 31, 43) is the program's fault.",
        fix="Drain the node and reset the GPU (`nvidia-smi -r -i <n>`) or reboot for a hardware Xid; for 13/31/43 rerun "
            "with CUDA_LAUNCH_BLOCKING=1.",
        ref="NVIDIA driver NVRM `Xid (PCI:%04x:%02x:%02x): %d, ...`; https://docs.nvidia.com/deploy/xid-errors/",
        examples=("[ 5123.456789] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.",
                  "kernel: NVRM: Xid (PCI:0000:b1:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected "
                  "on link 3"),
        derive=_xid,
        symptom_when=(("app", "yes"),),
    ),
    Pattern(
        id="kernel.gpu_no_handle",
        code=GPU_XID.code,
        severity=ERROR,
        needle="Unable to determine the device handle for GPU",
        regex=r"Unable to determine the device handle for GPU ?(?P<bdf>[0-9a-fA-F:.]{4,20}): (?P<why>[^\n]{1,80}?)\s*$",
        subject="GPU {bdf}",
        message="nvidia-smi cannot reach the GPU at {bdf} ({why}): it has stopped answering (fallen off the bus).",
        meaning="Anything on that GPU hangs; the node needs the GPU reset or a reboot.",
        fix="`dmesg | grep -i xid` (79: fallen off the bus); drain the node, `nvidia-smi -r -i <n>` or reboot, and have "
            "the GPU checked if it repeats.",
        ref="NVIDIA nvidia-smi `Unable to determine the device handle for GPU %s: %s`; "
            "https://github.com/rwth-i6/returnn/issues/1486",
        examples=("Unable to determine the device handle for GPU0000:03:00.0: Unknown Error",),
    ),
)
