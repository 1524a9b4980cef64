"""Parsers of recorded tool output: inline outputs written after real ones, then the
real-world samples in ../shared/realworld/samples (skipped when that folder is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmadoctor.core.facts import Limits, Parsed
from rdmadoctor.parsers.common import clean_lines, ipv4_of_gid, to_bytes
from rdmadoctor.parsers.ibstat import parse_ibstat
from rdmadoctor.parsers.ibv_devinfo import parse_ibv_devinfo
from rdmadoctor.parsers.lspci import parse_lspci_vvv
from rdmadoctor.parsers.netdev import parse_ibdev2netdev, parse_show_gids
from rdmadoctor.parsers.nvidia_smi import parse_topo
from rdmadoctor.parsers.packages import parse_dpkg_l, parse_ofed_info, parse_rpm_qa
from rdmadoctor.parsers.system import (
    parse_df,
    parse_env,
    parse_lsmod,
    parse_proc_limits,
    parse_proc_status_capeff,
    parse_ulimit,
)

SAMPLES = Path(__file__).resolve().parents[3].parent / "shared" / "realworld" / "samples"
GiB = 1024**3


def sample(relative: str) -> str:
    """The verbatim output of a real-world sample, without its ``# ...`` header."""
    path = SAMPLES / relative
    if not path.is_file():
        pytest.skip(f"real-world sample {relative} not present")
    text = path.read_text(encoding="utf-8", errors="replace")
    return text.split("\n# ---\n", 1)[1] if "\n# ---\n" in text else text


def port(device, number=1):
    return next(p for p in device.ports if p.port == number)


# --------------------------------------------------------------------------- ibstat

IBSTAT_NDR_AND_ROCE = """\
CA 'mlx5_0'
\tCA type: MT4129
\tNumber of ports: 1
\tFirmware version: 28.39.1002
\tHardware version: 0
\tNode GUID: 0xa088c20300635a20
\tSystem image GUID: 0xa088c20300635a20
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 400
\t\tBase lid: 12
\t\tLMC: 0
\t\tSM lid: 1
\t\tCapability mask: 0xa751e848
\t\tPort GUID: 0xa088c20300635a20
\t\tLink layer: InfiniBand
CA 'mlx5_1'
\tCA type: MT4129
\tNumber of ports: 1
\tFirmware version: 28.39.1002
\tHardware version: 0
\tNode GUID: 0xa088c20300635a21
\tSystem image GUID: 0xa088c20300635a21
\tPort 1:
\t\tState: Down
\t\tPhysical state: Polling
\t\tRate: 10
\t\tBase lid: 65535
\t\tLMC: 0
\t\tSM lid: 0
\t\tCapability mask: 0xa751e848
\t\tPort GUID: 0xa088c20300635a21
\t\tLink layer: InfiniBand
CA 'mlx5_2'
\tCA type: MT4125
\tNumber of ports: 1
\tFirmware version: 22.36.1010
\tHardware version: 0
\tNode GUID: 0x0c42a10300f1e2d4
\tSystem image GUID: 0x0c42a10300f1e2d4
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 100
\t\tBase lid: 0
\t\tLMC: 0
\t\tSM lid: 0
\t\tCapability mask: 0x00010000
\t\tPort GUID: 0x0e42a1fffef1e2d4
\t\tLink layer: Ethernet
"""

# ConnectX-3 VPI (mlx4): one CA, two ports; mlx5 cards show one CA per port instead.
IBSTAT_DUAL_PORT = """\
CA 'mlx4_0'
\tCA type: MT4099
\tNumber of ports: 2
\tFirmware version: 2.42.5000
\tHardware version: 1
\tNode GUID: 0x0002c90300317a70
\tSystem image GUID: 0x0002c90300317a73
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 56
\t\tBase lid: 5
\t\tLMC: 0
\t\tSM lid: 1
\t\tCapability mask: 0x02514868
\t\tPort GUID: 0x0002c90300317a71
\t\tLink layer: InfiniBand
\tPort 2:
\t\tState: Initializing
\t\tPhysical state: LinkUp
\t\tRate: 40 (FDR10)
\t\tBase lid: 0
\t\tLMC: 0
\t\tSM lid: 0
\t\tCapability mask: 0x02514868
\t\tPort GUID: 0x0002c90300317a72
\t\tLink layer: InfiniBand
"""

IBSTATUS_DUAL_PORT = """\
Infiniband device 'mlx4_0' port 1 status:
\tdefault gid:\t fe80:0000:0000:0000:0002:c903:0031:7a71
\tbase lid:\t 0x5
\tsm lid:\t\t 0x1
\tstate:\t\t 4: ACTIVE
\tphys state:\t 5: LinkUp
\trate:\t\t 56 Gb/sec (4X FDR)
\tlink_layer:\t InfiniBand

Infiniband device 'mlx4_0' port 2 status:
\tdefault gid:\t fe80:0000:0000:0000:0002:c903:0031:7a72
\tbase lid:\t 0x0
\tsm lid:\t\t 0x0
\tstate:\t\t 1: DOWN
\tphys state:\t 2: Polling
\trate:\t\t 10 Gb/sec (4X)
\tlink_layer:\t InfiniBand

Infiniband device 'mlx5_0' port 1 status:
\tdefault gid:\t fe80:0000:0000:0000:a088:c203:0063:5a20
\tbase lid:\t 0xc
\tsm lid:\t\t 0x1
\tstate:\t\t 3: ARMED
\tphys state:\t 5: LinkUp
\trate:\t\t 400 Gb/sec (4X NDR)
\tlink_layer:\t InfiniBand

"""


def test_ibstat_ndr_down_and_roce_ports():
    r = parse_ibstat(IBSTAT_NDR_AND_ROCE)
    assert r.ok and r.warnings == ()
    assert [d.name for d in r.value] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    ib, down, roce = r.value
    assert (ib.source, ib.node_type, ib.hca_type, ib.fw_ver) == ("ibstat", "CA", "MT4129", "28.39.1002")
    assert ib.node_guid == "a088:c203:0063:5a20"  # sysfs / ibv_devinfo spelling
    p = port(ib)
    assert (p.state, p.phys_state, p.rate_gbps, p.link_layer, p.lid, p.sm_lid) == (
        "ACTIVE", "LinkUp", 400.0, "InfiniBand", 12, 1)
    assert (port(down).state, port(down).phys_state) == ("DOWN", "Polling")
    p = port(roce)
    assert (p.state, p.rate_gbps, p.link_layer, p.lid) == ("ACTIVE", 100.0, "Ethernet", 0)


def test_ibstat_dual_port_card_reads_every_port():
    r = parse_ibstat(IBSTAT_DUAL_PORT)
    assert r.ok and r.warnings == ()
    (dev,) = r.value
    assert [p.port for p in dev.ports] == [1, 2]
    assert (port(dev, 1).state, port(dev, 1).rate_gbps) == ("ACTIVE", 56.0)
    assert (port(dev, 2).state, port(dev, 2).phys_state, port(dev, 2).rate_gbps) == (
        "INIT", "LinkUp", 40.0)


def test_ibstat_armed_and_slow_rate():
    text = IBSTAT_DUAL_PORT.replace("State: Initializing", "State: Armed").replace(
        "Rate: 40 (FDR10)", "Rate: 2.5")
    dev = parse_ibstat(text).value[0]
    assert (port(dev, 2).state, port(dev, 2).rate_gbps) == ("ARMED", 2.5)


def test_ibstatus_dual_port_and_hex_lids():
    r = parse_ibstat(IBSTATUS_DUAL_PORT)
    assert r.ok and r.warnings == ()
    mlx4, mlx5 = r.value
    assert mlx4.name == "mlx4_0" and mlx4.source == "ibstat" and mlx4.fw_ver is None
    p1, p2 = mlx4.ports
    assert (p1.state, p1.phys_state, p1.rate_gbps, p1.lid, p1.sm_lid, p1.link_layer) == (
        "ACTIVE", "LinkUp", 56.0, 5, 1, "InfiniBand")
    assert p1.gids[0].gid == "fe80:0000:0000:0000:0002:c903:0031:7a71" and p1.gids[0].index == 0
    assert (p2.state, p2.phys_state, p2.rate_gbps, p2.lid) == ("DOWN", "Polling", 10.0, 0)
    p = port(mlx5)
    assert (p.state, p.rate_gbps, p.lid) == ("ARMED", 400.0, 12)


def test_ibstat_spaces_instead_of_tabs_and_crlf_give_the_same_facts():
    expected = parse_ibstat(IBSTAT_DUAL_PORT)
    spaces = IBSTAT_DUAL_PORT.replace("\t", "    ")
    assert parse_ibstat(spaces) == expected
    assert parse_ibstat(IBSTAT_DUAL_PORT.replace("\n", "\r\n")) == expected
    flat = "\n".join(line.strip() for line in IBSTAT_DUAL_PORT.splitlines())
    assert parse_ibstat(flat) == expected


def test_ibstat_noise_lines_and_prompts_are_ignored():
    lines = IBSTAT_NDR_AND_ROCE.splitlines()
    noisy = (["user@gpu-node-07:~$ ibstat", "$ ibstat"] + lines[:10]
             + ["ibwarn: [12345] mad_rpc_open_port: client_register for mgmt 1 failed",
                "libibverbs: Warning: couldn't load driver 'libvmw_pvrdma-rdmav34.so': "
                "libvmw_pvrdma-rdmav34.so: cannot open shared object file: No such file or directory"]
             + lines[10:] + ["[root@gpu-node-07 ~]# "])
    assert parse_ibstat("\n".join(noisy)) == parse_ibstat(IBSTAT_NDR_AND_ROCE)


def test_ibstat_ibpanic_keeps_what_was_read_and_warns():
    head = IBSTAT_NDR_AND_ROCE.split("CA 'mlx5_2'")[0]
    text = head + "ibpanic: [2741] main: stat of IB device 'mlx5_2' failed: No such file or directory\n"
    r = parse_ibstat(text)
    assert r.ok
    assert [d.name for d in r.value] == ["mlx5_0", "mlx5_1"]
    assert port(r.value[1]).link_layer == "InfiniBand"
    assert any("cut off" in w and "ibpanic" in w for w in r.warnings)


def test_ibstat_missing_second_port_is_named():
    text = IBSTAT_DUAL_PORT.split("\tPort 2:")[0]
    r = parse_ibstat(text)
    (dev,) = r.value
    assert [p.port for p in dev.ports] == [1]
    assert any("mlx4_0" in w and "port 2" in w for w in r.warnings)


def test_ibstat_port_block_cut_mid_way_keeps_its_fields():
    text = IBSTAT_DUAL_PORT.split("\t\tRate: 40 (FDR10)")[0]
    r = parse_ibstat(text)
    p2 = port(r.value[0], 2)
    assert (p2.state, p2.phys_state) == ("INIT", "LinkUp")
    assert (p2.rate_gbps, p2.lid, p2.link_layer) == (None, None, None)
    assert any("cut off" in w for w in r.warnings)


def test_ibstat_unrecognisable_input():
    for text in ("", "\n\n", "bash: ibstat: command not found", "hello: world"):
        r = parse_ibstat(text)
        assert isinstance(r, Parsed) and r.value == [] and not r.ok and r.warnings


def test_ibstatus_unknown_values_are_none():
    text = ("Infiniband device 'rxe0' port 1 status:\n\tdefault gid:\t unknown\n\tbase lid:\t unknown\n"
            "\tstate:\t\t 4: ACTIVE\n\trate:\t\t unknown\n\tlink_layer:\t Ethernet\n")
    r = parse_ibstat(text)
    p = port(r.value[0])
    assert (p.state, p.lid, p.rate_gbps, p.gids, p.link_layer) == ("ACTIVE", None, None, (), "Ethernet")
    assert r.warnings == ()


def test_ibstatus_without_devices():
    r = parse_ibstat("Fatal error:  No devices\n")
    assert r.ok and r.value == []


# --------------------------------------------------------------------------- ibv_devinfo

IBV_DEVINFO_V_IB_DUAL = """\
libibverbs: Warning: couldn't load driver 'libvmw_pvrdma-rdmav34.so': libvmw_pvrdma-rdmav34.so: cannot open shared object file: No such file or directory
hca_id:\tmlx5_0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t28.39.1002
\tnode_guid:\t\t\ta088:c203:0063:5a20
\tsys_image_guid:\t\t\ta088:c203:0063:5a20
\tvendor_id:\t\t\t0x02c9
\tvendor_part_id:\t\t\t4129
\thw_ver:\t\t\t\t0x0
\tboard_id:\t\t\tMT_0000000838
\tphys_port_cnt:\t\t\t1
\tmax_mr_size:\t\t\t0xffffffffffffffff
\tdevice_cap_flags:\t\t0x21361c36
\t\t\t\t\tBAD_PKEY_CNTR
\t\t\t\t\tBAD_QKEY_CNTR
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t4096 (5)
\t\t\tsm_lid:\t\t\t1
\t\t\tport_lid:\t\t12
\t\t\tport_lmc:\t\t0x00
\t\t\tlink_layer:\t\tInfiniBand
\t\t\tmax_msg_sz:\t\t0x40000000
\t\t\tactive_width:\t\t4X (2)
\t\t\tactive_speed:\t\t100.0 Gbps (128)
\t\t\tphys_state:\t\tLINK_UP (5)
\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:a088:c203:0063:5a20

hca_id:\tmlx4_0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t2.42.5000
\tnode_guid:\t\t\t0002:c903:0031:7a70
\tvendor_part_id:\t\t\t4099
\tboard_id:\t\t\tMT_1090120019
\tphys_port_cnt:\t\t\t2
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_INIT (2)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t2048 (4)
\t\t\tsm_lid:\t\t\t0
\t\t\tport_lid:\t\t0
\t\t\tlink_layer:\t\tInfiniBand
\t\t\tactive_width:\t\t4X (2)
\t\t\tactive_speed:\t\t14.0 Gbps (16)
\t\t\tphys_state:\t\tLINK_UP (5)
\t\tport:\t2
\t\t\tstate:\t\t\tPORT_DOWN (1)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t4096 (5)
\t\t\tsm_lid:\t\t\t0
\t\t\tport_lid:\t\t0
\t\t\tlink_layer:\t\tInfiniBand
\t\t\tactive_width:\t\t4X (2)
\t\t\tactive_speed:\t\t2.5 Gbps (1)
\t\t\tphys_state:\t\tPOLLING (2)
"""


def test_ibv_devinfo_v_ib_dual_port_rates_and_states():
    r = parse_ibv_devinfo(IBV_DEVINFO_V_IB_DUAL)
    assert r.ok
    cx7, cx3 = r.value
    assert (cx7.source, cx7.hca_type, cx7.fw_ver, cx7.board_id) == (
        "ibv_devinfo", "4129", "28.39.1002", "MT_0000000838")
    p = port(cx7)
    assert (p.state, p.phys_state, p.rate_gbps, p.link_layer, p.lid, p.sm_lid, p.active_mtu) == (
        "ACTIVE", "LinkUp", 400.0, "InfiniBand", 12, 1, 4096)
    assert p.gids[0].type is None  # IB ports print no GID type
    assert [q.port for q in cx3.ports] == [1, 2]
    assert (port(cx3, 1).state, port(cx3, 1).rate_gbps, port(cx3, 1).active_mtu) == ("INIT", 56.0, 2048)
    assert (port(cx3, 2).state, port(cx3, 2).phys_state, port(cx3, 2).rate_gbps) == (
        "DOWN", "Polling", 10.0)
    assert any("vmw_pvrdma" in w and "provider" in w for w in r.warnings)


@pytest.mark.parametrize(("width", "speed", "rate"), [
    ("4X (2)", "25.0 Gbps (32)", 100.0),
    ("4X (2)", "50.0 Gbps (64)", 200.0),
    ("4X (2)", "53.125 Gbps (64)", 200.0),
    ("4X (2)", "106.25 Gbps (128)", 400.0),
    ("4X (2)", "25.78125 Gbps", 100.0),
    ("4X (2)", "10.0 Gbps (8)", 40.0),
    ("2X (16)", "100.0 Gbps (128)", 200.0),
    ("1X (1)", "2.5 Gbps (1)", 2.5),
    ("12X (8)", "2.5 Gbps (1)", 30.0),
    ("8X (4)", "200.0 Gbps (256)", 1600.0),
    ("4X (2)", "invalid speed (0)", None),
])
def test_ibv_devinfo_rate_uses_nominal_lane_rates(width, speed, rate):
    text = (f"hca_id: mlx5_0\n\tport:\t1\n\t\tstate: PORT_ACTIVE (4)\n"
            f"\t\tactive_width:\t{width}\n\t\tactive_speed:\t{speed}\n\t\tlink_layer: InfiniBand\n")
    assert port(parse_ibv_devinfo(text).value[0]).rate_gbps == rate


def test_ibv_devinfo_states_and_phys_states():
    for state, phys, want in [("PORT_ARMED (3)", "LINK_UP (5)", ("ARMED", "LinkUp")),
                              ("PORT_DOWN (1)", "DISABLED (3)", ("DOWN", "Disabled")),
                              ("PORT_ACTIVE_DEFER (5)", "LINK_ERROR_RECOVERY (6)",
                               ("ACTIVE_DEFER", "LinkErrorRecovery"))]:
        text = f"hca_id: m\n port: 1\n  state: {state}\n  phys_state: {phys}\n  link_layer: Ethernet\n"
        p = port(parse_ibv_devinfo(text).value[0])
        assert (p.state, p.phys_state) == want


def test_ibv_devinfo_no_devices():
    r = parse_ibv_devinfo("No IB devices found\n")
    assert r.ok and r.value == []
    r = parse_ibv_devinfo("Failed to get IB devices list: Function not implemented\n")
    assert r.ok and r.value == [] and "Function not implemented" in r.warnings[0]


def test_ibv_devinfo_list_only_and_garbage():
    r = parse_ibv_devinfo("2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n")
    assert r.ok and [d.name for d in r.value] == ["mlx5_0", "mlx5_1"] and r.value[0].ports == ()
    assert r.warnings
    r = parse_ibv_devinfo("Segmentation fault (core dumped)\n")
    assert not r.ok and r.value == []


def test_ibv_devinfo_missing_port_is_named():
    text = IBV_DEVINFO_V_IB_DUAL.split("\t\tport:\t2")[0]
    r = parse_ibv_devinfo(text)
    assert any("mlx4_0" in w and "port 2" in w for w in r.warnings)


# --------------------------------------------------------------------------- nvidia-smi topo

TOPO_SPACES = """\
        GPU0    GPU1    NIC0    NIC1    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV4     PXB     SYS     0-15,32-47      0               N/A
GPU1    NV4      X      SYS     PXB     16-31,48-63     1               N/A
NIC0    PXB     SYS      X      SYS
NIC1    SYS     PXB     SYS      X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
"""

# Drivers before the NIC Legend named the RDMA devices in the header, and said SOC for SYS.
TOPO_OLD = """\
\tGPU0\tGPU1\tmlx5_0\tmlx5_1\tCPU Affinity
GPU0\t X \tPIX\tPHB\tSOC\t0-11
GPU1\tPIX\t X \tPHB\tSOC\t0-11
mlx5_0\tPHB\tPHB\t X \tSOC\t
mlx5_1\tSOC\tSOC\tSOC\t X \t
"""


def test_topo_space_separated_with_legend():
    r = parse_topo(TOPO_SPACES)
    assert r.ok and r.warnings == ()
    t = r.value
    assert t.gpus == ("GPU0", "GPU1") and t.nics == ("mlx5_0", "mlx5_1")
    assert t.gpu_nic == (("PXB", "SYS"), ("SYS", "PXB"))
    assert t.gpu_numa == (0, 1) and t.gpu_cpu_affinity == ("0-15,32-47", "16-31,48-63")


def test_topo_same_facts_with_tabs_and_crlf():
    tabs = "\n".join("\t".join(line.split("    ")) for line in TOPO_SPACES.splitlines())
    assert parse_topo(tabs).value == parse_topo(TOPO_SPACES).value
    assert parse_topo(TOPO_SPACES.replace("\n", "\r\n")) == parse_topo(TOPO_SPACES)


def test_topo_old_format_device_names_in_header():
    r = parse_topo(TOPO_OLD)
    assert r.ok and r.warnings == ()
    assert r.value.nics == ("mlx5_0", "mlx5_1")
    assert r.value.gpu_nic == (("PHB", "SYS"), ("PHB", "SYS"))
    assert r.value.gpu_numa == (None, None) and r.value.gpu_cpu_affinity == ("0-11", "0-11")


def test_topo_mp_form():
    text = TOPO_SPACES.replace("NV4", "SYS")
    assert parse_topo(text).value.gpu_nic == (("PXB", "SYS"), ("SYS", "PXB"))


def test_topo_gpu_row_missing_a_cell_is_rejected():
    text = TOPO_SPACES.replace("GPU1    NV4      X      SYS     PXB", "GPU1    NV4      X      SYS")
    r = parse_topo(text)
    assert r.value is None and not r.ok
    assert any("GPU1" in w and "expected 4" in w and "found 3" in w for w in r.warnings)


def test_topo_gpu_row_extra_cell_is_rejected():
    text = TOPO_SPACES.replace("GPU0     X      NV4     PXB     SYS", "GPU0     X      NV4     PXB     SYS   SYS")
    r = parse_topo(text)
    assert r.value is None and any("expected 4" in w and "found 5" in w for w in r.warnings)


def test_topo_unknown_cell_is_rejected():
    r = parse_topo(TOPO_SPACES.replace("GPU0     X      NV4     PXB", "GPU0     X      NV4     PXQ"))
    assert r.value is None and not r.ok
    assert any("GPU0" in w and "PXQ" in w and "NIC0" in w for w in r.warnings)


def test_topo_missing_header_is_rejected():
    body = "\n".join(TOPO_SPACES.splitlines()[1:])
    r = parse_topo(body)
    assert r.value is None and not r.ok and "header" in r.warnings[0]


def test_topo_truncated_after_matrix_keeps_nic_numbers():
    text = TOPO_SPACES.split("Legend:")[0]
    r = parse_topo(text)
    assert r.ok and r.value.nics == ("NIC0", "NIC1")
    assert r.value.gpu_nic == (("PXB", "SYS"), ("SYS", "PXB"))
    assert any("NIC0" in w and "NIC1" in w for w in r.warnings)


def test_topo_malformed_nic_row_only_warns():
    r = parse_topo(TOPO_SPACES.replace("NIC1    SYS     PXB     SYS      X", "NIC1    SYS     PXB"))
    assert r.ok and r.value.gpu_nic == (("PXB", "SYS"), ("SYS", "PXB"))
    assert any("NIC1" in w and "found 2" in w for w in r.warnings)


def test_topo_cut_inside_gpu_rows():
    text = "\n".join(TOPO_SPACES.splitlines()[:2])
    r = parse_topo(text)
    assert r.value.gpus == ("GPU0",) and r.value.gpu_nic == (("PXB", "SYS"),)
    assert any("GPU1" in w for w in r.warnings)


def test_topo_not_a_topology():
    for text in ("", "No devices were found", "NVIDIA-SMI has failed because it couldn't communicate"):
        r = parse_topo(text)
        assert r.value is None and not r.ok


# --------------------------------------------------------------------------- ibdev2netdev, show_gids

def test_ibdev2netdev_verbose_form():
    text = ("0000:3b:00.0 mlx5_0 (MT4119 - MCX516A-CCAT) CX516A - ConnectX-5 QSFP28 fw 16.35.2000 "
            "port 1 (ACTIVE) ==> ens1f0np0 (Up)\n"
            "0000:3b:00.1 mlx5_1 (MT4119 - MCX516A-CCAT) CX516A - ConnectX-5 QSFP28 fw 16.35.2000 "
            "port 1 (DOWN  ) ==> ens1f1np1 (Down)\n")
    r = parse_ibdev2netdev(text)
    assert r.ok
    assert [(x.device, x.port, x.netdev, x.up) for x in r.value] == [
        ("mlx5_0", 1, "ens1f0np0", True), ("mlx5_1", 1, "ens1f1np1", False)]


def test_ibdev2netdev_garbage():
    r = parse_ibdev2netdev("ibdev2netdev: command not found")
    assert not r.ok and r.value == []


def test_show_gids_space_separated():
    text = ("DEV     PORT    INDEX   GID                                     IPv4            VER     DEV\n"
            "---     ----    -----   ---                                     ------------    ---     ---\n"
            "mlx5_2  1       3       0000:0000:0000:0000:0000:ffff:0a00:0102 10.0.1.2        v2      ens2f0np0\n"
            "n_gids_found=1\n")
    (row,) = parse_show_gids(text).value
    assert (row.device, row.index, row.ipv4, row.version, row.netdev) == ("mlx5_2", 3, "10.0.1.2", "v2", "ens2f0np0")


# --------------------------------------------------------------------------- packages

DPKG_L = """\
Desired=Unknown/Install/Remove/Purge/Hold
| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend
|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)
||/ Name                    Version          Architecture Description
+++-=======================-================-============-=========================================
ii  ibverbs-providers:amd64 50.0-2ubuntu0.2  amd64        User space provider drivers for libibverbs
hi  libibverbs1:amd64       50.0-2ubuntu0.2  amd64        Library for direct userspace use of RDMA (InfiniBand/iWARP)
rc  mlnx-ofed-kernel-utils  5.8-OFED.5.8.1.1 amd64        Userspace tools to restart and tune mlnx-ofed kernel modules
iF  mlnx-ofed-kernel-dkms   23.10.OFED.23.10 all          DKMS support for mlnx-ofed kernel modules
un  perftest                <none>           <none>       (no description available)
ii  rdma-core               50.0-2ubuntu0.2  amd64        RDMA core userspace infrastructure and documentation
"""


def test_dpkg_l_installed_rows_only():
    r = parse_dpkg_l(DPKG_L)
    assert r.ok and r.value.source == "dpkg"
    assert r.value.packages == {"ibverbs-providers": "50.0-2ubuntu0.2", "libibverbs1": "50.0-2ubuntu0.2",
                                "rdma-core": "50.0-2ubuntu0.2"}
    assert any("mlnx-ofed-kernel-dkms" in w and "iF" in w for w in r.warnings)


def test_rpm_qa_names_with_dashes_and_digits():
    text = ("libibverbs-48.0-1.el9.x86_64\nrdma-core-devel-48.0-1.el9.x86_64\nperftest-23.10.0-0.29.g0705c22.2310055.x86_64\n"
            "infiniband-diags-48.0-1.el9.x86_64\nkmod-mlnx-ofa_kernel-23.10-OFED.23.10.1.1.9.1.rhel9u2.x86_64\n"
            "gpg-pubkey-fd431d51-4ae0493b\npython3-pyverbs-48.0-1.el9.x86_64\n")
    r = parse_rpm_qa(text)
    assert r.ok and r.warnings == () and r.value.source == "rpm"
    assert r.value.packages == {
        "libibverbs": "48.0-1.el9", "rdma-core-devel": "48.0-1.el9",
        "perftest": "23.10.0-0.29.g0705c22.2310055", "infiniband-diags": "48.0-1.el9",
        "kmod-mlnx-ofa_kernel": "23.10-OFED.23.10.1.1.9.1.rhel9u2", "gpg-pubkey": "fd431d51-4ae0493b",
        "python3-pyverbs": "48.0-1.el9"}


def test_ofed_info_with_rpm_package_list():
    text = ("MLNX_OFED_LINUX-23.10-1.1.9.0 (OFED-23.10-1.1.9):\n\nperftest:\n/sw/perftest-23.10.0.src.rpm\n\n"
            "Installed Packages:\n-------------------\nlibibverbs-2307mlnx47-1.2310119.x86_64\n"
            "perftest-23.10.0-0.29.g0705c22.2310119.x86_64\n")
    r = parse_ofed_info(text)
    assert r.ok and r.value.ofed_version == "MLNX_OFED_LINUX-23.10-1.1.9.0"
    assert r.value.packages == {"libibverbs": "2307mlnx47-1.2310119", "perftest": "23.10.0-0.29.g0705c22.2310119"}


def test_ofed_info_not_installed():
    r = parse_ofed_info("bash: ofed_info: command not found\n")
    assert not r.ok and r.value.ofed_version is None


# --------------------------------------------------------------------------- system

def test_lsmod():
    text = ("Module                  Size  Used by\nmlx5_ib               471040  0\n"
            "ib_uverbs             184320  2 rdma_ucm,mlx5_ib\nmlx5_core            2342912  1 mlx5_ib\n"
            "nvidia_peermem         16384  0\n")
    r = parse_lsmod(text)
    assert r.ok and r.value == {"mlx5_ib", "ib_uverbs", "mlx5_core", "nvidia_peermem"}
    assert parse_lsmod("Module                  Size  Used by\n") == Parsed(set())
    assert not parse_lsmod("lsmod: command not found").ok


BASH_ULIMIT_A = """\
real-time non-blocking time  (microseconds, -R) unlimited
core file size              (blocks, -c) 0
data seg size               (kbytes, -d) unlimited
file locks                          (-x) unlimited
max locked memory           (kbytes, -l) 64
max memory size             (kbytes, -m) unlimited
"""


@pytest.mark.parametrize(("text", "limits"), [
    (BASH_ULIMIT_A, Limits(65536, 65536)),
    (BASH_ULIMIT_A.replace("-l) 64", "-l) unlimited"), Limits(None, None)),
    ("time(seconds)        unlimited\nlocked memory(kbytes) 8192\nlocks                unlimited\n",
     Limits(8388608, 8388608)),  # dash
    ("-t: cpu time (seconds)              unlimited\n-l: locked-in-memory size (kbytes)  64\n",
     Limits(65536, 65536)),  # zsh
    ("-d: data seg size (kb)             unlimited\n-l: max locked memory (kb)         64\n",
     Limits(65536, 65536)),  # busybox ash
    ("64\n", Limits(65536, 65536)),
    ("$ ulimit -l\nunlimited\n", Limits(None, None)),
])
def test_ulimit(text, limits):
    r = parse_ulimit(text)
    assert r.ok and r.warnings == () and r.value == limits


def test_ulimit_without_memlock_line():
    r = parse_ulimit("core file size              (blocks, -c) 0\n")
    assert r.value is None and not r.ok


PROC_LIMITS = """\
Limit                     Soft Limit           Hard Limit           Units     
Max stack size            8388608              unlimited            bytes     
Max locked memory         65536                65536                bytes     
Max address space         unlimited            unlimited            bytes     
"""


def test_proc_limits():
    assert parse_proc_limits(PROC_LIMITS).value == Limits(65536, 65536)
    text = PROC_LIMITS.replace("65536                65536", "unlimited            unlimited")
    assert parse_proc_limits(text).value == Limits(None, None)
    text = PROC_LIMITS.replace("65536                65536", "8388608              unlimited")
    assert parse_proc_limits(text).value == Limits(8388608, None)
    assert not parse_proc_limits("Max open files 1024 1024 files").ok


def test_proc_status_capeff():
    text = "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n"
    assert parse_proc_status_capeff(text).value == 0x1FFFFFFFFFF
    assert parse_proc_status_capeff("CapEff:\t00000000a80425fb\n").value == 0xA80425FB
    assert parse_proc_status_capeff("Name: x").value is None


def test_df_human_and_blocks():
    r = parse_df("Filesystem      Size  Used Avail Use% Mounted on\nshm              64M     0   64M   0% /dev/shm\n")
    assert r.ok and r.value[0].size_bytes == 64 * 1024**2 and r.value[0].used_bytes == 0
    r = parse_df("Filesystem     1K-blocks  Used Available Use% Mounted on\n"
                 "tmpfs           24684096     0  24684096   0% /dev/shm\n")
    assert r.value[0].size_bytes == 24684096 * 1024 and r.value[0].mountpoint == "/dev/shm"


def test_df_wrapped_long_names_type_column_and_spaces_in_mountpoint():
    text = ("Filesystem                                   1024-blocks      Used Available Capacity Mounted on\n"
            "/dev/mapper/very--long--volume--group-lv_root_filesystem\n"
            "                                                 102687672  8834944  88593540      10% /\n"
            "tmpfs                                          1056964608   259072 1056705536       1% /dev/shm\n"
            "//nas.example.com/share                          1073741824 0 1073741824 0% /mnt/My Share\n")
    r = parse_df(text)
    assert r.ok and r.warnings == ()
    root, shm, nas = r.value
    assert root.filesystem == "/dev/mapper/very--long--volume--group-lv_root_filesystem" and root.mountpoint == "/"
    assert root.size_bytes == 102687672 * 1024
    assert shm.mountpoint == "/dev/shm" and nas.mountpoint == "/mnt/My Share"
    r = parse_df("Filesystem     Type   Size  Used Avail Use% Mounted on\ntmpfs          tmpfs  4.0M  512K  3.5M  13% /dev/shm\n")
    (row,) = r.value
    assert (row.filesystem, row.size_bytes, row.used_bytes, row.avail_bytes) == ("tmpfs", 4 * 1024**2, 512 * 1024,
                                                                               int(3.5 * 1024**2))


def test_to_bytes():
    assert to_bytes("1008G") == 1008 * GiB
    assert to_bytes("4.0M") == 4 * 1024**2
    assert (to_bytes("512K"), to_bytes("0"), to_bytes("-"), to_bytes("12", 1024)) == (524288, 0, None, 12288)


def test_env_multiline_values_and_prompts():
    text = ("user@node:~$ env\nNCCL_IB_HCA=mlx5_0,mlx5_1\nNCCL_IB_GID_INDEX=3\n"
            "BASH_FUNC_module%%=() {  eval $($LMOD_CMD bash \"$@\")\n}\nEMPTY=\nURL=http://x/?a=b\n"
            "user@node:~$ \n")
    r = parse_env(text)
    assert r.ok and r.warnings == ()
    assert r.value == {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_IB_GID_INDEX": "3",
                       "BASH_FUNC_module%%": "() {  eval $($LMOD_CMD bash \"$@\")\n}", "EMPTY": "",
                       "URL": "http://x/?a=b"}
    assert parse_env("NCCL_DEBUG=INFO\r\nUCX_TLS=rc\r\n").value == {"NCCL_DEBUG": "INFO", "UCX_TLS": "rc"}
    assert not parse_env("").ok


# --------------------------------------------------------------------------- lspci

LSPCI_DOWNGRADED = """\
0000:17:00.0 Infiniband controller: Mellanox Technologies MT28908 Family [ConnectX-6]
\tSubsystem: Mellanox Technologies Device 0007
\tNUMA node: 1
\tCapabilities: [60] Express (v2) Endpoint, MSI 00
\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported
\t\tLnkSta:\tSpeed 8GT/s (downgraded), Width x8 (downgraded)
\t\t\tTrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-
\tCapabilities: [230 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd- EgressCtrl- DirectTrans-
\tKernel driver in use: mlx5_core
\tKernel modules: mlx5_core

0000:18:00.0 3D controller: NVIDIA Corporation GA100 [A100 SXM4 80GB] (rev a1)
\tNUMA node: 1
\tCapabilities: <access denied>
\tKernel driver in use: nvidia
"""


def test_lspci_downgraded_link_and_acs_redirect():
    r = parse_lspci_vvv(LSPCI_DOWNGRADED)
    assert r.ok
    hca, gpu = r.value
    assert hca.bdf == "0000:17:00.0" and hca.description.startswith("Infiniband controller")
    assert (hca.lnkcap_speed_gts, hca.lnkcap_width, hca.lnksta_speed_gts, hca.lnksta_width) == (16.0, 16, 8.0, 8)
    assert hca.acsctl["SrcValid"] is True and hca.acsctl["ReqRedir"] is True and hca.acsctl["TransBlk"] is False
    assert (hca.numa_node, hca.driver) == (1, "mlx5_core")
    assert (gpu.lnksta_speed_gts, gpu.acsctl, gpu.driver) == (None, None, "nvidia")
    assert any("root" in w for w in r.warnings)


def test_lspci_garbage():
    r = parse_lspci_vvv("pcilib: Cannot open /proc/bus/pci\n")
    assert not r.ok and r.value == []


# --------------------------------------------------------------------------- common

def test_prompt_lines_are_dropped_but_data_is_not():
    text = ("$ ibstat\nuser@h:~$ ibstat\n[u@h ~]$ df -h\n((venv) ) [u@h ~]$ x\nroot@h:/# lspci\n$ u@h:~$ a\n"
            "u@h ~ % zsh\n```\n\tLnkCap: Port #0, Speed 32GT/s\n #bytes  #iterations\nhttps://github.com/x y\n")
    assert clean_lines(text) == ["\tLnkCap: Port #0, Speed 32GT/s", " #bytes  #iterations",
                                 "https://github.com/x y", ""]


def test_ipv4_of_gid():
    assert ipv4_of_gid("::ffff:192.168.1.11") == "192.168.1.11"
    assert ipv4_of_gid("0000:0000:0000:0000:0000:ffff:c0a8:010b") == "192.168.1.11"
    assert ipv4_of_gid("fe80:0000:0000:0000:ba59:9fff:fe37:8268") is None
    assert ipv4_of_gid("::ffff:999.1.1.1") is None and ipv4_of_gid("") is None


# --------------------------------------------------------------------------- real-world samples

def test_sample_ibv_devinfo_asus_cx7_all_ports_down():
    r = parse_ibv_devinfo(sample("ibv_devinfo/asus_esc8000a_cx7_roce_all_port_down.txt"))
    assert r.ok and r.warnings == ()
    assert [d.name for d in r.value] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert {d.hca_type for d in r.value} == {"4129"}
    assert [d.fw_ver for d in r.value] == ["28.41.1000", "28.41.1000", "28.43.2566", "28.43.2566"]
    for d in r.value:
        (p,) = d.ports
        assert (p.port, p.state, p.link_layer, p.max_mtu) == (1, "DOWN", "Ethernet", 4096)
    assert [d.ports[0].active_mtu for d in r.value] == [1024, 1024, 4096, 4096]


def test_sample_ibv_devinfo_dgx_spark_roce_names_and_mtu():
    r = parse_ibv_devinfo(sample("ibv_devinfo/dgxspark_4_roce_ports_active_mtu1024_tabs.txt"))
    assert r.ok and r.warnings == ()
    assert [d.name for d in r.value] == ["rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"]
    for d in r.value:
        assert (d.hca_type, d.fw_ver, d.board_id) == ("4129", "28.45.4028", "NVD0000000087")
        (p,) = d.ports
        assert (p.state, p.link_layer, p.active_mtu, p.max_mtu) == ("ACTIVE", "Ethernet", 1024, 4096)
        assert p.rate_gbps is None and p.phys_state is None  # plain ibv_devinfo prints neither


def test_sample_ibv_devinfo_v_cx6_roce_gids_and_rate():
    r = parse_ibv_devinfo(sample("ibv_devinfo/scaleoutsean_cx6_roce_ibv_devinfo_v_full.txt"))
    assert r.ok
    (d,) = r.value  # "-l" lists four HCAs, "-v -d mlx5_0" details one
    assert (d.name, d.hca_type, d.fw_ver) == ("mlx5_0", "4123", "20.24.4702")
    (p,) = d.ports
    assert (p.state, p.phys_state, p.link_layer, p.rate_gbps, p.active_mtu) == (
        "ACTIVE", "LinkUp", "Ethernet", 100.0, 4096)
    g3 = next(g for g in p.gids if g.index == 3)
    assert (g3.gid, g3.type, g3.ipv4) == ("::ffff:192.168.1.11", "RoCE v2", "192.168.1.11")
    assert [g.type for g in p.gids] == ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"]
    assert any("irdma0" in w and "irdma1" in w and "mlx5_1" in w for w in r.warnings)


def test_sample_ibv_devinfo_slurm_cx7_cut_before_link_layer():
    r = parse_ibv_devinfo(sample("ibv_devinfo/slurmv4_cx7_roce_port_active_tabs.txt"))
    assert r.ok
    (d,) = r.value
    assert (d.name, d.hca_type, d.fw_ver) == ("mlx5_0", "4129", "28.43.2026")
    (p,) = d.ports
    assert (p.state, p.active_mtu, p.lid) == ("ACTIVE", 4096, 0)
    # The expect line says Ethernet, but the posted output stops at port_lmc: not a fact here.
    assert p.link_layer is None
    assert any("link_layer" in w for w in r.warnings)


def test_sample_topo_dgx_a100():
    r = parse_topo(sample("topo/dgx_a100_8gpu_10nic_tabs.txt"))
    assert r.ok and r.warnings == ()
    t = r.value
    assert t.gpus == tuple(f"GPU{i}" for i in range(8))
    assert t.nics == tuple(f"mlx5_{i}" for i in range(10))
    cell = {(g, n): t.gpu_nic[i][j] for i, g in enumerate(t.gpus) for j, n in enumerate(t.nics)}
    assert cell["GPU0", "mlx5_0"] == "PXB"
    for pair, nics in {(0, 1): (0, 1), (2, 3): (2, 3), (4, 5): (4, 5), (6, 7): (6, 7)}.items():
        for g in pair:
            pxb = {n for n in t.nics if cell[f"GPU{g}", n] == "PXB"}
            assert pxb == {f"mlx5_{nics[0]}", f"mlx5_{nics[1]}"}
    for g in t.gpus:
        assert cell[g, "mlx5_8"] == "SYS" and cell[g, "mlx5_9"] == "SYS"
    assert t.gpu_numa == (3, 3, 1, 1, 7, 7, 5, 5)
    assert t.gpu_cpu_affinity[0] == "48-63,176-191"


def test_sample_topo_hgx_one_pix_nic_per_gpu():
    r = parse_topo(sample("topo/slurmv4_hgx_8gpu_12nic_roce_single_numa_tabs.txt"))
    assert r.ok and r.warnings == ()
    t = r.value
    assert len(t.nics) == 12 and t.nics[10] == "mlx5_10"
    pix = {g: [n for n, rel in zip(t.nics, row) if rel == "PIX"] for g, row in zip(t.gpus, t.gpu_nic)}
    assert pix == {"GPU0": ["mlx5_0"], "GPU1": ["mlx5_1"], "GPU2": ["mlx5_2"], "GPU3": ["mlx5_5"],
                   "GPU4": ["mlx5_6"], "GPU5": ["mlx5_7"], "GPU6": ["mlx5_8"], "GPU7": ["mlx5_11"]}
    assert all(rel != "SYS" for row in t.gpu_nic for rel in row)
    for n in ("mlx5_3", "mlx5_4", "mlx5_9", "mlx5_10"):
        assert all(row[t.nics.index(n)] == "NODE" for row in t.gpu_nic)
    assert t.gpu_numa == (0,) * 8 and set(t.gpu_cpu_affinity) == {"0-191"}


def test_sample_topo_asus_node_and_sys_only():
    r = parse_topo(sample("topo/asus_esc8000a_rtx6000ada_4gpu_4nic_node_sys.txt"))
    assert r.ok and r.warnings == ()
    t = r.value
    assert t.nics == ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")
    assert t.gpu_nic == (("NODE", "NODE", "SYS", "SYS"), ("NODE", "NODE", "SYS", "SYS"),
                         ("SYS", "SYS", "NODE", "NODE"), ("SYS", "SYS", "NODE", "NODE"))
    assert t.gpu_numa == (0, 0, 1, 1) and t.gpu_cpu_affinity == ("0-31", "0-31", "32-63", "32-63")


def test_sample_topo_puget_all_node():
    t = parse_topo(sample("topo/puget_wrx90_2gpu_phb_2nic_node.txt")).value
    assert t.nics == ("mlx5_0", "mlx5_1") and t.gpu_nic == (("NODE", "NODE"), ("NODE", "NODE"))
    assert t.gpu_numa == (0, 0) and t.gpu_cpu_affinity == ("0-23", "0-23")


def test_sample_lspci_tree_is_not_a_topo_matrix():
    r = parse_topo(sample("topo/asus_esc8000a_lspci_tv_cx7_separate_root_ports.txt"))
    assert r.value is None and not r.ok


def test_sample_ibdev2netdev_dgx_spark_two_up_two_down():
    r = parse_ibdev2netdev(sample("misc/dgxspark_ibdev2netdev_roce_two_up_two_down.txt"))
    assert r.ok and r.warnings == ()
    assert [(x.device, x.netdev, x.up) for x in r.value] == [
        ("rocep1s0f0", "enp1s0f0np0", True), ("rocep1s0f1", "enp1s0f1np1", False),
        ("roceP2p1s0f0", "enP2p1s0f0np0", True), ("roceP2p1s0f1", "enP2p1s0f1np1", False)]


def test_sample_ibdev2netdev_12_hcas_with_bond():
    r = parse_ibdev2netdev(sample("misc/slurmv4_ibdev2netdev_12hca_roce_bond.txt"))
    assert r.ok and len(r.value) == 12
    by_dev = {x.device: x for x in r.value}
    assert by_dev["mlx5_3"].netdev == by_dev["mlx5_9"].netdev == "bond0"
    assert by_dev["mlx5_3"].up and by_dev["mlx5_9"].up
    assert {d for d, x in by_dev.items() if x.up is False} == {"mlx5_4", "mlx5_10"}
    assert (by_dev["mlx5_4"].netdev, by_dev["mlx5_10"].netdev) == ("enp83s0f1np1", "enp210s0f1np1")
    assert sum(x.up is True for x in r.value) == 10


def test_sample_ibdev2netdev_among_other_commands():
    r = parse_ibdev2netdev(sample("misc/daocloud_rdma_link_ibdev2netdev_lspci_cx5.txt"))
    assert [(x.device, x.netdev, x.up) for x in r.value] == [
        ("mlx5_0", "enp4s0f0np0", True), ("mlx5_1", "enp4s0f1np1", True)]


def test_sample_show_gids_v1_v2():
    r = parse_show_gids(sample("misc/slurmv4_show_gids_cx7_roce_v1_v2.txt"))
    assert r.ok and len(r.value) == 4
    by_index = {row.index: row for row in r.value}
    assert (by_index[3].version, by_index[3].ipv4, by_index[3].netdev) == ("v2", "10.99.91.39", "ens108np0")
    assert (by_index[2].version, by_index[2].ipv4) == ("v1", "10.99.91.39")
    assert by_index[0].ipv4 is None and by_index[1].ipv4 is None
    assert (by_index[0].version, by_index[1].version) == ("v1", "v2")
    assert by_index[0].gid.startswith("fe80") and {row.device for row in r.value} == {"mlx5_0"}


def test_sample_df_h_host_shm():
    r = parse_df(sample("shm/slurmv4_host_df_h_shm_1008G.txt"))
    assert r.ok and r.warnings == ()
    shm = next(row for row in r.value if row.mountpoint == "/dev/shm")
    assert (shm.filesystem, shm.size_bytes, shm.used_bytes) == ("tmpfs", 1008 * GiB, 253 * 1024**2)
    assert len(r.value) == 11


def test_sample_ofed_info_23_10_full():
    r = parse_ofed_info(sample("dpkg/daocloud_ofed_info_mofed_23_10_installed_packages.txt"))
    assert r.ok and r.warnings == ()
    db = r.value
    assert (db.ofed_version, db.source) == ("MLNX_OFED_LINUX-23.10-1.1.9.0", "ofed_info")
    for name in ("rdma-core", "libibverbs1", "ibverbs-providers", "librdmacm1", "infiniband-diags"):
        assert db.packages[name] == "2307mlnx47-1.2310119"
    assert db.packages["perftest"] == "23.10.0-0.29.g0705c22.2310055"
    assert db.packages["ucx"] == "1.16.0-1.2310119"
    assert db.packages["mlnx-ofed-kernel-dkms"] == "23.10.OFED.23.10.1.1.9.1-1"
    assert db.packages["opensm"].startswith("5.17.0.")
    assert "ibarr" in db.packages and "clusterkit" not in db.packages  # source list is not installed


def test_sample_ofed_info_s_trailing_colon():
    r = parse_ofed_info(sample("dpkg/daocloud_ofed_info_s_23_07.txt"))
    assert r.ok and r.value.ofed_version == "MLNX_OFED_LINUX-23.07-0.5.1.2" and r.value.packages == {}


def test_sample_ofed_info_5_0_debian():
    text = sample("dpkg/rdmainvertedindex_ofed_info_mofed_5_0_debian10.txt")
    db = parse_ofed_info(text).value
    assert db.ofed_version == "MLNX_OFED_LINUX-5.0-2.1.8.0"
    for name in ("rdma-core", "libibverbs1", "ibverbs-providers", "librdmacm1", "infiniband-diags"):
        assert db.packages[name] == "50mlnx1-1.50218"
    assert db.packages["perftest"] == "4.4+0.5-1"
    assert db.packages["ucx"] == "1.8.0-1.50218"
    assert db.packages["mlnx-ofed-kernel-dkms"] == "5.0-OFED.5.0.2.1.8.1.g5f67178"
    assert (db.packages["openmpi-bin"], db.packages["openmpi"]) == ("3.1.3-11", "4.0.3rc4-1.50218")
    # the same listing read as plain dpkg -l output
    assert parse_dpkg_l(text).value.packages == db.packages


def test_sample_lspci_vvv_connectx7_full_gen5_link():
    r = parse_lspci_vvv(sample("misc/asus_esc8000a_lspci_vvv_connectx7.txt"))
    assert r.ok and r.warnings == ()
    (d,) = r.value
    assert d.bdf == "21:00.0" and "ConnectX-7" in d.description
    assert (d.lnkcap_speed_gts, d.lnkcap_width, d.lnksta_speed_gts, d.lnksta_width) == (32.0, 16, 32.0, 16)
    assert d.numa_node == 0 and d.driver == "mlx5_core"
    assert len(d.acsctl) == 7 and not any(d.acsctl.values())


def test_sample_lspci_acsctl_grep_all_disabled():
    r = parse_lspci_vvv(sample("misc/asus_esc8000a_lspci_acsctl_all_disabled.txt"))
    assert r.ok and len(r.value) == 46
    assert all(d.bdf == "?" and d.acsctl and not any(d.acsctl.values()) for d in r.value)
    assert any("unknown" in w for w in r.warnings)
