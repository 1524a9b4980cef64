"""What a correct `rdmadoctor diagnose` says about each real log in tests/fixtures/logs/.

Every fixture is text somebody posted in a public issue or committed to a public repository,
copied verbatim (an excerpt when long) under a three-line header:

    # source: <URL of the issue, or of the file at a commit>  (who posted it)
    # what: <what the log shows>
    # ---

Everything after "# ---" is the log: feed ``body(name)`` to the diagnoser, never the header.

Each row of EXPECTED was written by reading the log, not by running rdmadoctor:

- ``codes``: codes a correct diagnosis MUST report (any severity). An empty set means the log
  holds no problem we can name with certainty; ``absent`` then carries the point of the fixture.
- ``absent``: codes it must NOT report (false positives the log invites: a socket line that is
  only bootstrap, a "GPU Direct RDMA Disabled" for a socket "HCA", a WorkNCCL that did not time out).
- ``root``: the code that should head the report (the first root cause, not a symptom), or None
  when the log does not show the cause.
- ``nccl``: facts about what NCCL did, as the log shows them. Each key given must equal
  ``diag.nccl[key]`` (``(diag.nccl or {}).get(key)``); keys not given are not checked, so a
  fixture says nothing about a field it cannot show. A value of None asserts the field is None:
  the log does not show it and the diagnoser must not guess. ``nccl: None`` means the log has no
  NCCL lines at all and nothing is checked. Conventions (those of rdmadoctor/logs/nccl.py):
  ``network`` exactly as in "Using network X" (older "Using internal Network X" names the same
  thing); ``net_devices`` as {name, port (int), link_layer} with link_layer "InfiniBand" for /IB
  (also /IB/SHARP) and "RoCE" for /RoCE, in the order NCCL lists them; ``socket_ifaces``,
  ``hosts`` (sorted; the NCCL "host:pid:tid [dev]" host, not a launcher's label) and ``ranks``
  (the largest "nranks"/"nRanks" printed); ``gdr`` True when a NET channel (or 2.4 Ring) line
  says /GDRDMA, False when NET channel lines lack it or NCCL says GPU Direct RDMA is disabled.
- ``subjects`` (optional): {code: [substrings]}: each substring must appear in the subject of at
  least one finding of that code (the ibv_wc_status name of a completion error, the HCA of a GDR one).
- ``pre25`` (optional, True): NCCL 2.2-2.4 output ("Using internal Network Socket", "NET/IB: [0]
  mlx5_0:1/IB", Ring lines, a bootstrap "NET/Socket : Using" printed even when IB carries the
  traffic); older than the 2.5-2.30 the issue promises, kept because people still paste it.
- ``note`` (optional): why a row says what it says, where a reader could doubt it.
- ``xfail`` (optional): the change to the scan the row waits on; the row is a strict xfail until then.

Codes named here that the knowledge base did not have when the table was written (the lead
reconciles the names): NCCL_IB_NO_DEVICE, NCCL_SYSTEM_ERROR, NCCL_SOCKET_CONNECT_FAILED,
NCCL_IB_MODIFY_QP_FAILED, NCCL_IB_OPEN_DEVICE_FAILED, MLX5_CMD_TIMEOUT, NCCL_NET_PLUGIN_FAILED.
See NEW_CODES.
"""

from __future__ import annotations

from pathlib import Path

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
HEADER_END = b"\n# ---\n"

# Codes this table uses that no module defined when it was written: name -> meaning.
# (All the names the table first used now exist: the knowledge base adopted NCCL_IB_NO_DEVICE,
# NCCL_SYSTEM_ERROR, NCCL_IB_MODIFY_QP_FAILED, MLX5_CMD_TIMEOUT; a socket connect failure is
# NCCL_SOCKET_ERROR, an "Unable to open device" DEV_UVERBS_MISSING, a plugin that failed to load
# NCCL_NET_PLUGIN_LOAD_FAILED, and libibverbs listing no device VERBS_NO_DEVICES.)
NEW_CODES: dict[str, str] = {}


def body(name: str) -> bytes:
    """The log of fixture ``name``: its bytes after the header's "# ---" line."""
    data = (LOGS / name).read_bytes()
    _, sep, rest = data.partition(HEADER_END)
    if not sep:
        raise ValueError(f"{name}: no '# ---' line ends the header")
    return rest


def header(name: str) -> dict[str, str]:
    """The header's fields: {"source": ..., "what": ...}."""
    data = (LOGS / name).read_bytes()
    head, _, _ = data.partition(HEADER_END)
    out: dict[str, str] = {}
    for line in head.decode("utf-8").splitlines():
        key, _, value = line.removeprefix("# ").partition(": ")
        out[key] = value
    return out


IB = "InfiniBand"


def _dev(name: str, link_layer: str, port: int = 1) -> dict:
    return {"name": name, "port": port, "link_layer": link_layer}


EXPECTED: list[dict] = [
    # --- NCCL transport: IB / RoCE init, plugins, versions -----------------------------------
    {"file": "nccltests-185-roce-init-2.19.3.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK", "NCCL_IB_NO_DEVICE"}, "root": None,
     "nccl": {"version": "2.19.3", "cuda": "12.3", "network": "IB",
              "net_devices": [_dev("mlx5_10", "RoCE"), _dev("mlx5_11", "RoCE")],
              "hosts": ["dgxh100-3", "dgxh100-4"]}},
    {"file": "nccl-1052-roce-hca-2.18.5.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK"}, "root": None,
     "nccl": {"version": "2.18.5", "cuda": "12.0", "network": "IB",
              "net_devices": [_dev("mlx5_4", "RoCE")], "hosts": ["node2", "node4"], "gdr": None}},
    {"file": "nccltests-227-ibext-v8-irdma-2.21.5.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK"}, "root": None,
     "nccl": {"version": "2.21.5", "cuda": "12.4", "network": "IBext_v8",
              "net_devices": [_dev("irdma0", "RoCE"), _dev("irdma3", "RoCE")],
              "hosts": ["ai-worker01", "ai-worker03"]},
     "note": "Intel irdma devices; a plugin's network name is kept as NCCL prints it."},
    {"file": "nccl-2397-initialized-net-plugin-ib.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK", "NCCL_NET_PLUGIN_LOAD_FAILED"}, "root": None,
     "nccl": {"network": "IB", "net_devices": [_dev("mlx5_0", "RoCE"), _dev("mlx5_1", "RoCE")],
              "hosts": ["ubuntu2", "ubuntu4"], "version": None},
     "note": "'Could not find: libnccl-net.so' / libnccl-gin.so are informational: the internal IB plugin is used."},
    {"file": "nccl-1029-pod-prefix-ibext-sharp.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK", "NCCL_GDR_DISABLED"}, "root": None,
     "nccl": {"network": "IBext", "net_devices": [_dev("mlx5_9", IB)],
              "hosts": ["rdma-gpu-train-worker-0"]},
     "note": "'mlx5_9:1/IB/SHARP': the link layer is IB, SHARP is a capability; the 'worker-0: ' label is the launcher's."},
    {"file": "nccl-1291-gh200-ibext-v8-dmabuf.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK", "NCCL_GDR_DISABLED"}, "root": None,
     "nccl": {"network": "IBext_v8", "net_devices": [_dev("mlx5_2", IB)], "hosts": ["gh1", "gh2"],
              "ranks": 2, "gdr": None},
     "note": "'DMA-BUF is available' says GDR could be used, not that a channel uses it: gdr stays None."},
    {"file": "nccl-302-rank-prefix-mixed-ib-roce-2.5.log",
     "codes": {"NCCL_MIXED_LINK_LAYERS"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_MIXED_LINK_LAYERS",
     "nccl": {"net_devices": [_dev("mlx5_1", IB), _dev("mlx5_3", IB), _dev("mlx5_0", IB),
                              _dev("mlx5_2", "RoCE"), _dev("mlx5_4", IB)],
              "hosts": ["crow-ib-new-nccl-256-info-19"], "version": None},
     "note": "'[155] ' before each line is the launcher's rank label; one port is RoCE among four IB: a warning "
             "(later in the same issue, the ring through that port fails ibv_modify_qp with EINVAL)."},
    {"file": "nccl-333-opa-hfi1-2.5.6.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK"}, "root": None,
     "nccl": {"version": "2.5.6", "cuda": "10.1",
              "net_devices": [_dev("hfi1_0", IB), _dev("hfi1_1", IB), _dev("hfi1_2", IB), _dev("hfi1_3", IB)],
              "hosts": ["xxx"]},
     "note": "Intel Omni-Path through verbs; first line starts with a markdown '> ', bold '**' inside a line."},
    {"file": "nccl-1866-version-2.27.6-cuda13.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK", "NCCL_NET_PLUGIN_LOAD_FAILED"}, "root": None,
     "nccl": {"version": "2.27.6", "cuda": "13.0", "network": None,
              "hosts": ["cl4-gpu03-vm", "cl4-gpu04-vm"]},
     "note": "2.27 prints the version as an INFO line; the transport is not chosen yet in this excerpt."},
    {"file": "nccl-1597-efa-libfabric-init.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK"}, "root": None,
     "nccl": {"network": "Libfabric", "hosts": ["8h200-2", "8h200-3"]},
     "note": "aws-ofi-nccl on EFA is an RDMA network, not a socket fallback."},
    {"file": "nccl-707-ib-gdrdma-channels.log",
     "codes": set(), "absent": {"NCCL_GDR_DISABLED", "NCCL_SOCKET_FALLBACK"}, "root": None,
     "nccl": {"gdr": True, "hosts": ["10-90-43-152"]}},
    {"file": "nvpeermem-56-nccl-2.4.7-ib-init.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK", "NCCL_IB_DISABLED_BY_ENV"}, "root": None,
     "nccl": {"version": "2.4.7", "cuda": "10.0", "net_devices": [_dev("mlx5_0", IB)],
              "hosts": ["master_node", "secondary_node"]},
     "pre25": True,
     "note": "NCCL 2.4 prints its bootstrap interface as 'NET/Socket : Using [0]ib0' although NET/IB carries "
             "the traffic; 'NCCL_IB_DISABLE set by environment to 0' enables IB."},
    {"file": "horovod-639-ib-init-2.3.5.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK"}, "root": None,
     "nccl": {"version": "2.3.5", "cuda": "10.0", "network": "IB", "ranks": 3,
              "hosts": ["c4140-01", "c4140-02", "c4140-03"]},
     "pre25": True,
     "note": "'Using internal Network IB' and 'NET/IB: [0] mlx5_0:1/IB' are the 2.3 spellings; "
             "'NET/Socket : 1 interfaces found' is not a fallback."},
    {"file": "nccl-224-mpi-tagged-gdrdma-rings-2.4.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK", "NCCL_GDR_DISABLED"}, "root": None,
     "nccl": {"gdr": True, "hosts": ["gpu6", "gpu7"]},
     "pre25": True,
     "note": "'[1,N]<stdout>:' is mpirun --tag-output; 'Socket creation failed : Address family not supported' "
             "is an IB OOB socket error no code of the catalogue names."},

    # --- Socket fallback -------------------------------------------------------------------
    {"file": "nccltests-188-ib-disabled-mpi.log",
     "codes": {"NCCL_SOCKET_FALLBACK", "NCCL_IB_DISABLED_BY_ENV"}, "absent": {"NCCL_IB_NO_DEVICE"},
     "root": "NCCL_IB_DISABLED_BY_ENV",
     "nccl": {"network": "Socket", "socket_ifaces": ["ibs85f0", "ib0"], "hosts": ["user"]},
     "note": "Open MPI's '[user:852715] ... help-mpi-btl-openib.txt' lines are MPI's, not NCCL's."},
    {"file": "nccl-1053-ib-disabled-lo-socket.log",
     "codes": {"NCCL_SOCKET_FALLBACK", "NCCL_IB_DISABLED_BY_ENV"},
     "absent": {"NCCL_GDR_DISABLED", "NCCL_IB_NO_DEVICE"}, "root": "NCCL_IB_DISABLED_BY_ENV",
     "nccl": {"network": "Socket", "socket_ifaces": ["lo"], "hosts": ["axa"], "version": None, "gdr": False},
     "note": "'NET/Socket : GPU Direct RDMA Disabled for HCA 0 'lo'' is about a socket: no GDR finding; "
             "gdr is False only because NCCL says so."},
    {"file": "nccl-226-aws-no-device-socket.log",
     "codes": {"NCCL_SOCKET_FALLBACK", "NCCL_IB_NO_DEVICE"}, "absent": {"NCCL_IB_DISABLED_BY_ENV"},
     "root": "NCCL_IB_NO_DEVICE",
     "nccl": {"socket_ifaces": ["ens3"], "version": None,
              "hosts": ["ip-172-31-0-110", "ip-172-31-1-23", "ip-172-31-1-46", "ip-172-31-1-93",
                        "ip-172-31-11-39", "ip-172-31-12-21", "ip-172-31-12-210", "ip-172-31-14-85",
                        "ip-172-31-4-24", "ip-172-31-4-37", "ip-172-31-5-233", "ip-172-31-5-237",
                        "ip-172-31-5-41", "ip-172-31-6-136", "ip-172-31-7-53", "ip-172-31-8-135",
                        "ip-172-31-8-153"]},
     "pre25": True,
     "note": "NCCL 2.4.7 (another part of the same paste); 'NET/IB : No device found.' is why it is sockets."},
    {"file": "nccl-226-no-device-socket-2.4.7.log",
     "codes": {"NCCL_SOCKET_FALLBACK", "NCCL_IB_NO_DEVICE"}, "absent": set(), "root": "NCCL_IB_NO_DEVICE",
     "nccl": {"version": "2.4.7", "cuda": "9.2", "socket_ifaces": ["ens3"],
              "hosts": ["ip-172-31-0-11", "ip-172-31-10-149", "ip-172-31-10-182", "ip-172-31-11-73",
                        "ip-172-31-15-113", "ip-172-31-15-231", "ip-172-31-3-113", "ip-172-31-7-247"]},
     "pre25": True},
    {"file": "nccl-941-container-no-device-2.17.1.log",
     "codes": {"NCCL_SOCKET_FALLBACK", "NCCL_IB_NO_DEVICE"}, "absent": {"NCCL_IB_DISABLED_BY_ENV"},
     "root": "NCCL_IB_NO_DEVICE",
     "nccl": {"version": "2.17.1", "cuda": "12.1", "network": "Socket", "plugin": "NCCL RDMA Plugin",
              "socket_ifaces": ["ens5f0np0", "ens3f0np0", "ens8f1np1", "bond0", "virbr0"],
              "hosts": ["05-06-76-200"]}},
    {"file": "horovod-1651-calico-no-device-2.5.6.log",
     "codes": {"NCCL_SOCKET_FALLBACK", "NCCL_IB_NO_DEVICE"}, "absent": set(), "root": "NCCL_IB_NO_DEVICE",
     "nccl": {"version": "2.5.6", "cuda": "10.2", "socket_ifaces": ["enp96s0f0", "tunl0", "enp96s0f1"],
              "hosts": ["gpu2-ru7"]},
     "note": "No 'Using network' line in this excerpt: from 2.5 a 'NET/Socket : Using' after 'NET/IB : No device "
             "found.' is the socket transport itself."},
    {"file": "nccl-451-docker-open-device-failed.log",
     "codes": {"NCCL_SOCKET_FALLBACK", "DEV_UVERBS_MISSING"}, "absent": {"NCCL_IB_DISABLED_BY_ENV"},
     "root": "DEV_UVERBS_MISSING",
     "nccl": {"network": "Socket", "socket_ifaces": ["bond0"]},
     "note": "Host prefixes stripped by the poster. 'NCCL_IB_DISABLE set by environment to 0' enables IB. In a "
             "container ibv_open_device fails when /dev/infiniband/uverbsN is not passed in (DEV_UVERBS_MISSING "
             "would also be a fair root)."},
    {"file": "byteps-61-k8s-no-libibverbs-2.3.7.log",
     "codes": {"NCCL_SINGLE_HOST", "VERBS_LIB_MISSING"}, "absent": {"NCCL_IB_DISABLED_BY_ENV", "NCCL_SOCKET_FALLBACK"},
     "root": "VERBS_LIB_MISSING",
     "nccl": {"version": "2.3.7", "cuda": "9.0", "network": "Socket", "ranks": 4, "nodes": 1,
              "hosts": ["worker-pytorch-0"]},
     "pre25": True,
     "note": "ranks 0-3 of 4 all print from worker-pytorch-0: one host, so NCCL's socket transport carries nothing "
             "(BytePS uses NCCL inside a host only); the image still lacks libibverbs (issue 15 item 3)."},
    {"file": "horovod-583-k8s-socket-2.2.13.log",
     "codes": {"NCCL_SINGLE_HOST"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": None,
     "nccl": {"version": "2.2.13", "cuda": "9.0", "network": "Socket", "ranks": 2, "nodes": 1,
              "hosts": ["training-f9148280-4d48-4728-a74e-bdacff21c995-9vgfj"]},
     "pre25": True,
     "note": "NCCL 2.2 lines say 'INFO', not 'NCCL INFO'. Ranks 0 and 1 of 2 both print from one pod: a one-host "
             "job, whose socket transport carries nothing (issue 15 item 3)."},
    {"file": "nccl-952-socket-channels.log",
     "codes": {"NCCL_SOCKET_FALLBACK"}, "absent": {"NCCL_GDR_DISABLED"}, "root": None,
     "nccl": {"gdr": False},
     "note": "Only channel lines: inter-node ones go 'via NET/Socket/3'. Host redacted as '<cluster_name>'."},

    # --- GPUDirect RDMA off ------------------------------------------------------------------
    {"file": "nccl-1537-gdr-disabled-roce.log",
     "codes": {"NCCL_GDR_DISABLED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_GDR_DISABLED",
     "nccl": {"network": "IB", "net_devices": [_dev("mlx5_0", "RoCE"), _dev("mlx5_1", "RoCE")],
              "gdr": False, "ranks": 16, "hosts": ["hostname1"]},
     "subjects": {"NCCL_GDR_DISABLED": ["mlx5_0"]}},
    {"file": "nccl-899-gdr-no-module-docker.log",
     "codes": {"NCCL_GDR_DISABLED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_GDR_DISABLED",
     "nccl": {"gdr": False, "hosts": ["21346d5cefce", "6a5a91752e39"]},
     "subjects": {"NCCL_GDR_DISABLED": ["mlx5_1"]},
     "note": "'(no module)': nvidia_peermem (nv_peer_mem) not loaded; every channel is NET/IB/0 without GDRDMA."},

    # --- Work completion errors ---------------------------------------------------------------
    {"file": "nccl-1405-status12-ibext-recv.log",
     "codes": {"NCCL_IB_COMPLETION_ERROR"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_IB_COMPLETION_ERROR",
     "nccl": {"hosts": ["kp-ddp-worker-0"], "version": None},
     "subjects": {"NCCL_IB_COMPLETION_ERROR": ["IBV_WC_RETRY_EXC_ERR"]}},
    {"file": "nccl-1814-status12-then-flushed.log",
     "codes": {"NCCL_IB_COMPLETION_ERROR"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_IB_COMPLETION_ERROR",
     "nccl": {"hosts": ["hostname-test"]},
     "subjects": {"NCCL_IB_COMPLETION_ERROR": ["IBV_WC_RETRY_EXC_ERR", "IBV_WC_WR_FLUSH_ERR"]},
     "note": "Status 12 comes first; the status 5 (flushed) completions on the same QP follow from it. The "
             "first line keeps the poster's leading markdown backtick."},
    {"file": "nccl-1737-flushed-only.log",
     "codes": {"NCCL_IB_COMPLETION_ERROR"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": None,
     "nccl": {"hosts": ["gh-3714u15"]},
     "subjects": {"NCCL_IB_COMPLETION_ERROR": ["IBV_WC_WR_FLUSH_ERR"]},
     "note": "Only flushed (status 5) completions: the first error is outside the excerpt, so no root is clear."},
    {"file": "nccl-928-status4-local-protection.log",
     "codes": {"NCCL_IB_COMPLETION_ERROR"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_IB_COMPLETION_ERROR",
     "nccl": {"hosts": ["H100-1", "H100-2", "H100-5"]},
     "subjects": {"NCCL_IB_COMPLETION_ERROR": ["IBV_WC_LOC_PROT_ERR"]},
     "note": "'with error 4, opcode ..., vendor err 81 (Send)' on three hosts: a broken GPUDirect path."},

    # --- Verbs resources: QP/CQ, memory registration, modify_qp ------------------------------
    {"file": "nccl-380-create-cq-roce-2.7.8.log",
     "codes": {"NCCL_QP_CQ_CREATE_FAILED"}, "absent": {"NCCL_SOCKET_FALLBACK", "NCCL_REG_MR_FAILED"},
     "root": "NCCL_QP_CQ_CREATE_FAILED",
     "nccl": {"version": "2.7.8", "cuda": "11.0", "network": "IB", "net_devices": [_dev("mlx5_1", "RoCE")],
              "gdr": False, "hosts": ["spark01"]}},
    {"file": "nccl-562-create-qp-ibext-2.8.3.log",
     "codes": {"NCCL_QP_CQ_CREATE_FAILED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_QP_CQ_CREATE_FAILED",
     "nccl": {"version": "2.8.3", "cuda": None, "network": "IBext", "hosts": ["hai-a100-3"]},
     "note": "The build printed 'NCCL version 2.8.3+cudaCUDA_MAJOR.CUDA_MINOR': no CUDA version to read."},
    {"file": "ofi-563-register-memory-pdsh-prefix.log",
     "codes": {"NCCL_REG_MR_FAILED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_REG_MR_FAILED",
     "nccl": {"hosts": ["ip-10-0-87-143"]},
     "note": "aws-ofi-nccl 'NET/OFI Unable to register memory ... Cannot allocate memory'; '10.0.87.143: ' "
             "twice before each line is the launcher's."},
    {"file": "nccl-799-modify-qp-no-such-device-2.7.8.log",
     "codes": {"NCCL_IB_MODIFY_QP_FAILED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_IB_MODIFY_QP_FAILED",
     "nccl": {"version": "2.7.8", "cuda": "10.2", "network": "IB", "net_devices": [_dev("mlx5_3", "RoCE")],
              "hosts": ["72bf7b08-26f3-4ebc-8b9d-85df3e4414c0"]},
     "note": "The poster fixed it with NCCL_IB_HCA=^mlx5_3 (a port NCCL should not have used)."},

    # --- Shared memory --------------------------------------------------------------------------
    {"file": "nccltests-166-shm-extend-failed.log",
     "codes": {"NCCL_SHM_FAILED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_SHM_FAILED",
     "nccl": {"hosts": ["ubuntu"]}},
    {"file": "nccl-1518-shm-cuda-invalid-argument.log",
     "codes": {"NCCL_SHM_FAILED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_SHM_FAILED",
     "nccl": {"hosts": None},
     "note": "Only '[rank]' prefixes: no host to report."},
    {"file": "pytorch-ci-490-shm-no-space-timestamps.log",
     "codes": {"NCCL_SHM_FAILED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_SHM_FAILED",
     "nccl": {"hosts": ["mt-l-x86iavx512-45-172-t4-4-csmpw-runner-g4sfw-workflow"]},
     "note": "'[%F %T] ' timestamps on WARN lines only; the socket errors and 'Socket recv failed' follow the shm failure."},
    {"file": "nccl-1589-shm-attach-failed.log",
     "codes": {"NCCL_SHM_FAILED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_SHM_FAILED",
     "nccl": {"gdr": True, "hosts": ["g148"]}},
    {"file": "nccl-525-kubeflow-posix-fallocate-2.9.6.log",
     "codes": {"NCCL_SHM_FAILED"}, "absent": set(), "root": "NCCL_SHM_FAILED", "nccl": {"hosts": None}},
    {"file": "nccl-290-docker-shm-rings-fallocate.log",
     "codes": {"NCCL_SHM_FAILED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_SHM_FAILED",
     "nccl": {"hosts": ["gpu2-ru7"]}},
    {"file": "torchtitan-853-distbackenderror-shm-last-error.log",
     "codes": {"NCCL_SHM_FAILED", "NCCL_SYSTEM_ERROR"}, "absent": set(), "root": "NCCL_SHM_FAILED",
     "nccl": {"version": "2.21.5"},
     "note": "The 'Last error:' names the shared-memory failure: that is the cause of the unhandled system error."},
    {"file": "aks-pod-df-h-shm-64m.log",
     "codes": {"SHM_TOO_SMALL"}, "absent": {"SHM_NEARLY_FULL"}, "root": "SHM_TOO_SMALL", "nccl": None,
     "note": "df -h in a pod: 'shm 64M ... /dev/shm' is the container default."},

    # --- PyTorch: watchdog timeouts and unhandled system errors --------------------------------
    {"file": "llamafactory-7396-watchdog-pid-prefix.log",
     "codes": {"NCCL_TIMEOUT"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_TIMEOUT", "nccl": None},
    {"file": "basicsr-737-watchdog-pg-guid.log",
     "codes": {"NCCL_TIMEOUT"}, "absent": set(), "root": "NCCL_TIMEOUT", "nccl": None},
    {"file": "ofa-271-watchdog-old-format.log",
     "codes": {"NCCL_TIMEOUT"}, "absent": set(), "root": "NCCL_TIMEOUT", "nccl": None},
    {"file": "pytorch-118369-watchdog-after-progress-bar.log",
     "codes": {"NCCL_TIMEOUT"}, "absent": set(), "root": "NCCL_TIMEOUT", "nccl": None,
     "note": "The first timeout is glued to the end of a progress-bar line."},
    {"file": "nccl-1409-watchdog-indented.log",
     "codes": {"NCCL_TIMEOUT"}, "absent": set(), "root": "NCCL_TIMEOUT", "nccl": None},
    {"file": "pytorch-149984-async-system-error-empty-last.log",
     "codes": {"NCCL_SYSTEM_ERROR"}, "absent": {"NCCL_TIMEOUT"}, "root": None,
     "nccl": {"version": "2.25.1"},
     "note": "'Collective WorkNCCL(... Timeout(ms)=1000000) raised ... async exception' is not a watchdog "
             "timeout; 'Last error:' is empty, so the cause is unknown."},
    {"file": "nccl-875-runtimeerror-traceback-2.10.3.log",
     "codes": {"NCCL_SYSTEM_ERROR"}, "absent": set(), "root": None, "nccl": {"version": "2.10.3"}},
    {"file": "hkproj-1-distbackenderror-no-route.log",
     "codes": {"NCCL_SYSTEM_ERROR", "NCCL_SOCKET_ERROR"}, "absent": set(),
     "root": "NCCL_SOCKET_ERROR", "nccl": {"version": "2.18.6"},
     "note": "'Last error: socketStartConnect: Connect to ... failed : No route to host': the wrong interface."},
    {"file": "awsome-192-one-line-distbackenderror.log",
     "codes": {"NCCL_SYSTEM_ERROR", "NCCL_SOCKET_ERROR"}, "absent": set(),
     "root": "NCCL_SOCKET_ERROR", "nccl": {"version": "2.18.5"},
     "note": "All on one line: both the exception and its 'Last error:' (a connect to 127.0.0.1) must be read "
             "from the same line."},
    {"file": "sglang-5594-socket-connect-abort.log",
     "codes": {"NCCL_SOCKET_ERROR"}, "absent": {"NCCL_SOCKET_FALLBACK"},
     "root": "NCCL_SOCKET_ERROR", "nccl": {"hosts": ["h100-15"]}},

    # --- libibverbs warnings and the IB tools ----------------------------------------------------
    {"file": "scout-5251-ibv-devinfo-no-config-dir.log",
     "codes": {"VERBS_PROVIDER_MISSING", "VERBS_NO_DEVICES"}, "absent": set(), "root": "VERBS_PROVIDER_MISSING",
     "nccl": None,
     "note": "No /etc/libibverbs.d: no provider is installed, so the devices that exist are not listed."},
    {"file": "pib-2-no-userspace-driver-transcript.log",
     "codes": {"VERBS_PROVIDER_MISSING", "VERBS_NO_DEVICES"}, "absent": set(), "root": "VERBS_PROVIDER_MISSING",
     "nccl": None},
    {"file": "caffe-590-container-ibv-devinfo-0-hcas.log",
     "codes": {"VERBS_PROVIDER_MISSING", "VERBS_NO_DEVICES"}, "absent": set(), "root": "VERBS_PROVIDER_MISSING",
     "nccl": None, "note": "'ibv_devinfo -l' prints '0 HCAs found:' where ibv_devinfo prints 'No IB devices found'."},
    {"file": "rxe-48-couldnt-load-driver.log",
     "codes": {"VERBS_PROVIDER_MISSING"}, "absent": set(), "root": "VERBS_PROVIDER_MISSING", "nccl": None,
     "note": "\"couldn't load driver 'rxe': librxe-rdmav2.so: cannot open shared object file\" for the one device."},
    {"file": "mmdet-6002-training-verbs-warnings.log",
     "codes": {"VERBS_PROVIDER_MISSING"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "VERBS_PROVIDER_MISSING",
     "nccl": None},
    {"file": "horovod-3333-mpi-tagged-couldnt-stat.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK", "VERBS_PROVIDER_MISSING"}, "root": None, "nccl": None,
     "note": "\"couldn't stat '/sys/class/infiniband/mlx5_NN'\": the container sees names it cannot stat; no "
             "catalogue code names it, and it is not a missing provider."},
    {"file": "ldms-rlimit-memlock-32k.log",
     "codes": {"MEMLOCK_LIMITED"}, "absent": set(), "root": "MEMLOCK_LIMITED", "nccl": None},
    {"file": "ompi-26307-ulimit-a-unlimited.log",
     "codes": set(), "absent": {"MEMLOCK_LIMITED"}, "root": None, "nccl": None,
     "note": "'max locked memory (kbytes, -l) unlimited'."},
    {"file": "docker-1099-root-cat-and-ulimit-ha.log",
     "codes": set(), "absent": {"MEMLOCK_LIMITED"}, "root": None, "nccl": None,
     "note": "Two commands behind '# ' root prompts; the first line of the log starts with '# '."},
    {"file": "azhpc-59-ibpanic-an0-then-ibstat-init.log",
     "codes": {"IB_PORT_INIT"}, "absent": {"IB_PORT_DOWN", "IB_NO_DEVICES", "IB_NO_SM"}, "root": "IB_PORT_INIT",
     "nccl": None, "subjects": {"IB_PORT_INIT": ["mlx5_ib0"]},
     "note": "The ibpanic is about mlx5_an0 (the Accelerated Networking NIC, not IB) and must not hide the "
             "'ibstat mlx5_ib0' that follows: port 1 State: Initializing. The port knows its subnet manager "
             "(SM lid 361): an SM is there and has not activated it, so the headline is the port (IB_PORT_INIT), "
             "not a missing SM (IB_NO_SM is for ports with SM lid 0)."},
    {"file": "gpud-752-ibstat-partial-ibpanic.log",
     "codes": set(), "absent": {"IB_PORT_DOWN", "IB_PORT_INIT", "IB_NO_DEVICES"}, "root": None, "nccl": None,
     "note": "mlx5_7 port 1 is Active/LinkUp; ibstat then panics on mlx5_8."},
    {"file": "k8srdma-8-ibv-devinfo-failed-to-open.log",
     "codes": set(), "absent": {"IB_NO_DEVICES", "IB_PORT_DOWN"}, "root": None, "nccl": None,
     "note": "The pod was given one VF (mlx4_2, PORT_ACTIVE); 'Failed to open device' is for the VFs it was not given."},
    {"file": "trinity-219-ibstatus-fatal-and-dmesg.log",
     "codes": {"IB_NO_DEVICES"}, "absent": set(), "root": "IB_NO_DEVICES", "nccl": None,
     "note": "\"ibstatus: Fatal error: device '*': sys files not found\": nothing under /sys/class/infiniband."},

    # --- Kernel ---------------------------------------------------------------------------------
    {"file": "armnas-16-dmesg-grep-mlx5-healthy.log",
     "codes": set(), "absent": {"IB_PORT_DOWN", "PCIE_LINK_DEGRADED", "MLX5_CMD_TIMEOUT"}, "root": None,
     "nccl": None, "note": "A healthy ConnectX-5 probe: 'Cable plugged', sufficient slot power."},
    {"file": "ucx-7738-dmesg-mlx5-cmd-timeout.log",
     "codes": {"MLX5_CMD_TIMEOUT"}, "absent": set(), "root": "MLX5_CMD_TIMEOUT", "nccl": None},

    # --- Plugins and clouds ---------------------------------------------------------------------
    {"file": "ofi-24-aws-libfabric-rings-av-error.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK"}, "root": None,
     "nccl": {"gdr": False,
              "hosts": ["ip-172-32-34-121", "ip-172-32-36-209", "ip-172-32-38-1", "ip-172-32-45-165"]},
     "pre25": True,
     "note": "Rings 'via NET/AWS Libfabric/0' (a network name with a space, no GDRDMA); 'NET/OFI Couldn't open "
             "AV' has no catalogue code."},
    {"file": "ofi-889-cloudwatch-paste-2.21.5.log",
     "codes": set(), "absent": {"NCCL_SOCKET_FALLBACK"}, "root": None,
     "nccl": {"version": "2.21.5", "cuda": "12.8"},
     "note": "CloudWatch table rows; the timestamp is glued to the NCCL host on most rows."},

    # --- What users really paste (issue 16): other stacks, quoted replies, nccl-tests ---------------
    {"file": "ucx-8746-create-cq-memlock-hint.log",
     "codes": {"MEMLOCK_LIMITED"}, "absent": {"UCX_IB_RESOURCE_FAILED"}, "root": "MEMLOCK_LIMITED", "nccl": None,
     "note": "UCX names the cause itself ('current: 64 kbytes'): the memlock limit, not a second finding."},
    {"file": "deepep-55-nvshmem-no-peermem-quoted.log",
     "codes": {"GDR_PEERMEM_MISSING"}, "absent": set(), "root": "GDR_PEERMEM_MISSING", "nccl": None,
     "note": "Every line is in a markdown quote ('> '), the command in inline code, the mention autolinked."},
    {"file": "megatron-516-sigbus-shm-p2p.log",
     "codes": {"NCCL_SHM_FAILED"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "NCCL_SHM_FAILED",
     "nccl": {"hosts": ["09677202c889"]},
     "note": "SIGBUS 'nonexistent physical address' with ncclGroupEnd frames in a container: /dev/shm too small."},
    {"file": "ofi-67-no-optimal-provider-pdsh.log",
     "codes": {"OFI_NO_PROVIDER"}, "absent": {"NCCL_SOCKET_FALLBACK"}, "root": "OFI_NO_PROVIDER", "nccl": None,
     "note": "The plugin's own test prints 'WARN: Function: ... Line: ...:' instead of NCCL's prefix."},
    {"file": "nccltests-219-internal-error-ranks.log",
     "codes": {"NCCL_TEST_FAILED"}, "absent": set(), "root": "NCCL_TEST_FAILED",
     "subjects": {"NCCL_TEST_FAILED": ["fengyun"]}, "nccl": {"nodes": 2}},
    {"file": "nccltests-37-allgather-out-of-bounds.log",
     "codes": {"NCCL_TEST_WRONG_RESULTS"}, "absent": set(), "root": "NCCL_TEST_WRONG_RESULTS", "nccl": None},
    {"file": "rxe-74-kernel-abi-empty-ibv-devices.log",
     "codes": {"VERBS_KERNEL_ABI_MISMATCH"}, "absent": {"IB_NO_DEVICES"}, "root": "VERBS_KERNEL_ABI_MISMATCH",
     "nccl": None,
     "note": "The kernel has rxe0 (lsmod, rxe_cfg); libibverbs skips it for its ABI, so 'wasn't found' and the "
             "empty ibv_devices list follow from that."},

    # --- Kubernetes output without an RDMA problem -----------------------------------------------
    {"file": "rdmashared-93-kubectl-logs-device-plugin.log",
     "codes": set(), "absent": {"IB_NO_DEVICES", "VERBS_PROVIDER_MISSING"}, "root": None, "nccl": None},
    {"file": "mpioperator-48-kubectl-timestamps.log",
     "codes": {"LOGS_NOTHING_TO_JUDGE"}, "absent": {"NCCL_TIMEOUT", "NCCL_SOCKET_FALLBACK"}, "root": None, "nccl": None,
     "note": "TensorFlow start-up only: no NCCL line, no error, no tool output: nothing to judge, never a pass "
             "(issue 15 item 2)."},

    # --- issue 30: other stacks' own transports, NVSHMEM's device level, NCCL's sockets, GCP (found texts) ---
    {"file": "qmcpack-1158-intel-mpi-ofi-addrinfo.log",
     "codes": {"MPI_TRANSPORT_FAILED"}, "absent": set(), "root": "MPI_TRANSPORT_FAILED", "nccl": None,
     "subjects": {"MPI_TRANSPORT_FAILED": ["OFI"]}},
    {"file": "mpich-6336-ofi-getinfo-nodata.log",
     "codes": {"MPI_TRANSPORT_FAILED"}, "absent": set(), "root": "MPI_TRANSPORT_FAILED", "nccl": None},
    {"file": "easybuild-21715-intel-mpi-ofi-rdma-write.log",
     "codes": {"MPI_TRANSPORT_FAILED"}, "absent": set(), "root": "MPI_TRANSPORT_FAILED", "nccl": None,
     "note": "A failure after init (MPI_Put): the OFI call in MPICH's error stack is the same row."},
    {"file": "mlsl-25-intel-mpi-psm2-no-fallback.log",
     "codes": {"MPI_TRANSPORT_FAILED"}, "absent": set(), "root": "MPI_TRANSPORT_FAILED", "nccl": None,
     "subjects": {"MPI_TRANSPORT_FAILED": ["PSM2"]},
     "note": "PSM2 cannot open the hfi unit; 'ofi fabric is not available' follows from it."},
    {"file": "ompi-6300-openib-ucx-create-cq-enomem.log",
     "codes": {"UCX_IB_RESOURCE_FAILED", "MPI_TRANSPORT_FAILED"}, "absent": set(), "root": "UCX_IB_RESOURCE_FAILED",
     "nccl": None, "note": "pml_ucx's 'Failed to create UCP worker' follows UCX's ibv_create_cq ENOMEM."},
    {"file": "ompi-11669-pml-none-opened.log",
     "codes": {"MPI_TRANSPORT_FAILED"}, "absent": set(), "root": "MPI_TRANSPORT_FAILED", "nccl": None},
    {"file": "ompi-10601-psm2-cannot-open-hfi.log",
     "codes": {"MPI_TRANSPORT_FAILED"}, "absent": set(), "root": "MPI_TRANSPORT_FAILED", "nccl": None},
    {"file": "nccl-1618-socket-poll-no-pollout.log",
     "codes": {"NCCL_SOCKET_ERROR"}, "absent": set(), "root": "NCCL_SOCKET_ERROR", "nccl": None,
     "note": "A site's own prefix ([rank/size][time] [file:line] [host:pid=N]) before NCCL WARN."},
    {"file": "nvshmem-33-ibgda-create-ah-dct.log",
     "codes": {"NVSHMEM_IBGDA_RESOURCE_FAILED"}, "absent": set(), "root": "NVSHMEM_IBGDA_RESOURCE_FAILED", "nccl": None},
    {"file": "ntbcxl-90-ibv-devinfo-failed-to-open.log",
     "codes": {"DEV_UVERBS_MISSING"}, "absent": {"VERBS_NO_DEVICES"}, "root": "DEV_UVERBS_MISSING", "nccl": None},
    # healthy ones: the designed transport of GCP VMs, and docker's own shm mounts
    {"file": "nccl-1519-fastsocket-gdr-per-nic.log",
     "codes": {"NCCL_GCP_NET_PLUGIN"}, "absent": {"NCCL_GDR_DISABLED"}, "root": None,
     "nccl": {"plugin": "FastSocket"},
     "note": "Eight `NET/FastSocket : GPU Direct RDMA Disabled for HCA N 'ethN'` lines: TCP NICs, nothing to warn of."},
    {"file": "nccl-651-fastsocket-init-healthy.log",
     "codes": {"NCCL_GCP_NET_PLUGIN"}, "absent": {"NCCL_GDR_DISABLED", "NCCL_NET_PLUGIN_LOAD_FAILED"}, "root": None,
     "nccl": None, "note": "NCCL's facts read `NET/FastSocket : Using` as network Socket and no plugin (see "
                          "tests/unit/logs/test_diagnose_corpus.py::test_gcp_plugins_are_the_designed_transport)."},
    {"file": "tpotce-800-df-docker-shm-mounts.log",
     "codes": set(), "absent": {"SHM_TOO_SMALL", "SHM_NEARLY_FULL"}, "root": None, "nccl": None,
     "note": "64M shm mounts of other containers, not /dev/shm."},
]
