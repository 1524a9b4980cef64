"""One reader for one output (issue 30, item 4): a tool's output reads the same whether it is pasted into a
log (`rdmadoctor diagnose`) or recorded in a bundle (`check --bundle`, as cmd/<name>.txt, alone or as a
terminal transcript with its prompt line).

Each text is fed to both sides; the test asserts the same findings (code, severity, cause), leaving out
what only one side can say: a bundle's "could not read X" for the files it lacks, and the reports'
bookkeeping lines. Texts from public issues are cited beside them; the others stand for a class.
"""

from __future__ import annotations

import pytest

from rdmadoctor.host import mem_host
from rdmadoctor.host.transcript import name_of
from rdmadoctor.logs import Diagnoser
from rdmadoctor.parsers.outputs import filtered, judged_filtered
from rdmadoctor.runner import Options, diagnose

# Said by one side only: what was read (diagnose), the labels and the package list a bundle lacks.
_BOOKKEEPING = {"LOGS_READ", "NODE_LABELS", "VERBS_PKG_UNCHECKED"}


def _readings(rep: dict) -> list[tuple]:
    return sorted({(f["code"], f["severity"], f.get("cause")) for c in rep["checks"] for f in c["findings"]
                   if f["severity"] != "unknown" and f["code"] not in _BOOKKEEPING}, key=str)


def pasted(text: str) -> list[tuple]:
    reader = Diagnoser()
    reader.feed(text.encode(), source="paste.txt")
    reader.end_source()
    from rdmadoctor.host import logs_only_host

    opts = Options(only=["logs"], logs=["paste.txt"], log_diagnosis=reader)
    return _readings(diagnose(opts, host=logs_only_host("paste.txt")).report)


def recorded(name: str, text: str) -> list[tuple]:
    return _readings(diagnose(Options(), host=mem_host({f"/cmd/{name}.txt": text})).report)


# https://github.com/nminoru/pib/issues/2 (description): the kernel has two devices, userspace no provider.
PIB = """\
libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs1
libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0
No IB devices found
"""
# https://github.com/OSLL/ntb-cxl/issues/90 (description): ibv_devices lists the device, ibv_devinfo cannot open it.
NTB = "Failed to open device\n"
# https://github.com/hustcat/k8s-rdma-device-plugin/issues/8 (excerpt): 8 VFs, the pod was given mlx4_2.
HUSTCAT = """\
Failed to open device
Failed to open device
hca_id: mlx4_2
        transport:                      InfiniBand (0)
        fw_ver:                         2.40.7000
        node_guid:                      0014:0500:8cc6:cd0a
        vendor_id:                      0x02c9
        vendor_part_id:                 4100
        phys_port_cnt:                  1
        Device ports:
                port:   1
                        state:                  PORT_ACTIVE (4)
                        max_mtu:                4096 (5)
                        active_mtu:             4096 (5)
                        sm_lid:                 2
                        port_lid:               1
                        port_lmc:               0x00
                        link_layer:             InfiniBand

Failed to open device
"""
# `df | grep shm` in a container with docker's default /dev/shm (the shape of every such report: the row
# alone, no header; 1K-blocks).
DF_SHM = "shm                65536       0     65536   0% /dev/shm\n"
# https://github.com/telekom-security/tpotce/issues/800 (excerpt): a host's `df -h`, docker's per-container
# shm mounts of 64M: none of them is this process's /dev/shm. Healthy: nothing to say.
TPOT = """\
shm              64M     0   64M   0% /var/lib/docker/containers/3b2ef2644dfe4e6d78b668875f8488211c43a14e1fb4ba9a7a74926fa69bcffc/mounts/shm
shm              64M     0   64M   0% /var/lib/docker/containers/bba42813ee49e811647966384e010a962b0573ddb7d27aae6248a1298428db41/mounts/shm
"""
# `ulimit -a | grep locked` (the memlock line alone), as a pod's shell prints it.
ULIMIT_LOCKED = "max locked memory       (kbytes, -l) 64\n"


@pytest.mark.parametrize("name, command, text, want", [
    ("ibv_devinfo", "ibv_devinfo", PIB, {("VERBS_PROVIDER_MISSING", "error", None),
                                         ("VERBS_NO_DEVICES", "error", "VERBS_PROVIDER_MISSING")}),
    ("ibv_devinfo", "ibv_devinfo", NTB, {("DEV_UVERBS_MISSING", "error", None)}),
    ("ibv_devinfo", "ibv_devinfo", HUSTCAT, {("DEV_UVERBS_MISSING", "info", None)}),
    ("df-shm", "df | grep shm", DF_SHM, {("SHM_TOO_SMALL", "error", None)}),
    ("df-shm", "df -h | grep shm", TPOT, set()),
])
def test_an_output_reads_the_same_pasted_and_recorded(name: str, command: str, text: str, want: set) -> None:
    with_prompt = f"$ {command}\n{text}"
    got = pasted(with_prompt)
    assert set(got) == want
    assert recorded(name, with_prompt) == got  # the bundle's file is a terminal transcript
    if not filtered(command):
        assert recorded(name, text) == got  # the bundle's file is the output alone


def test_a_filtered_ulimit_in_a_transcript_is_read() -> None:
    """On main the bundle dropped `ulimit -a | grep locked` as a filtered output (MEMLOCK_UNREADABLE); diagnose read
    it. Both read 64 KiB now; what follows differs by what each knows of the capabilities (a bundle without
    /proc/self/status cannot tell whether CAP_IPC_LOCK lifts the limit)."""
    rep = diagnose(Options(only=["limits"]), host=mem_host({"/cmd/ulimit.txt": f"$ ulimit -a | grep locked\n{ULIMIT_LOCKED}"})).report
    (f,) = [f for c in rep["checks"] for f in c["findings"]]
    assert f["code"] == "CAPS_UNREADABLE" and "64 KiB" in f["message"]
    assert ("MEMLOCK_LIMITED", "warning", None) in pasted(f"$ ulimit -a | grep locked\n{ULIMIT_LOCKED}")


def test_no_devices_after_skipped_devices_is_not_a_node_without_devices() -> None:
    """On main a bundle said IB_NO_DEVICES here: the kernel lists two devices libibverbs skipped."""
    rep = diagnose(Options(), host=mem_host({"/cmd/ibv_devinfo.txt": PIB})).report
    codes = {f["code"] for c in rep["checks"] for f in c["findings"]}
    assert "IB_NO_DEVICES" not in codes
    (f,) = [f for c in rep["checks"] if c["id"] == "ib.devices" for f in c["findings"]]
    assert f["code"] == "VERBS_NO_DEVICES" and f["cause"] == "VERBS_PROVIDER_MISSING"
    assert f["data"]["evidence"][0]["line"] == 3


def test_no_devices_alone_stays_the_nodes_finding() -> None:
    rep = diagnose(Options(only=["ib"]), host=mem_host({"/cmd/ibv_devinfo.txt": "No IB devices found\n"})).report
    assert [f["code"] for c in rep["checks"] if c["id"] == "ib.devices" for f in c["findings"]] == ["IB_NO_DEVICES"]


@pytest.mark.parametrize("command, name", [
    ("df -h | grep shm", "df-shm"),
    ("df |& grep shm", "df-shm"),
    ("ulimit -a | grep locked", "ulimit"),
    ("lspci -vvv | grep ACSCtl", "lspci"),
    ("ibstat | grep State", None),
    ("lsmod |& grep mlx", None),  # `|&` is a pipe: it filters what follows it
    ("ibdev2netdev | column -t", "ibdev2netdev"),
    ("ibstat | tee out.txt", "ibstat"),
])
def test_which_filtered_outputs_are_read_is_one_rule(command: str, name: str | None) -> None:
    assert name_of(command) == name
    word = command.split()[0]
    assert (name is not None) == (not filtered(command) or judged_filtered({"df": "df-shm"}.get(word, word)))
