"""The launchers that start a job's processes on every node: Open MPI's mpirun (ORTE, PRRTE), ssh
under it (MPIJob, Horovod, DeepSpeed's pdsh), PMIx and Slurm's srun.

A job that never started its ranks prints no NCCL line at all: these are its only account of why.
Strings checked against open-mpi/ompi (v4.1 orte/mca/*/help-*.txt, v5 PRRTE's), openpmix/prrte,
openpmix/openpmix, SchedMD/slurm src/plugins/mpi/pmix, and OpenSSH (ssh.c, sshconnect.c,
authfile.c), and the issues named in each ``ref``.
"""

from __future__ import annotations

from rdmadoctor.core.codes.mpi import (
    MPI_LAUNCH_FAILED,
    MPI_TRANSPORT_FAILED,
)
from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.logs.kb import Pattern
from rdmadoctor.logs.kb.pytorch import _crash  # the signal, and what a crash by it usually means

CODES = (MPI_LAUNCH_FAILED, MPI_TRANSPORT_FAILED)

# Codes that live with other sources, named by string.
UCX_IB_RESOURCE_FAILED = "UCX_IB_RESOURCE_FAILED"
JOB_KILLED = "JOB_KILLED"
PROCESS_CRASHED = "PROCESS_CRASHED"
JOB_FAILED = "JOB_FAILED"

# What the launcher's own summary follows from: the ssh and daemon rows before it.
_SSH = ("mpi.ssh_denied", "mpi.ssh_key_mode", "mpi.ssh_resolve", "mpi.ssh_connect", "mpi.ssh_exchange",
        "mpi.orted_missing")


def _ofi_row(what: str, needle: str, examples: tuple[str, ...], seen: str) -> Pattern:
    """MPICH's CH4 error stack (Intel MPI 2019+ is CH4 over OFI): `func(line)...: OFI <call> failed
    (file:line:func:error)`, a bare `OFI fi_getinfo() failure` in newer MPICH; not aws-ofi-nccl's `NET/OFI`. One
    row per needle, each starting at a rare character followed by lower case: `OFI ` alone has no anchor, and an
    anchor of capitals then a space ("OFI a") nearly matches `NCCL INFO` on every line of a dense log."""
    return Pattern(
        id=f"mpi.ofi_{what}",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle=needle,
        regex=r": OFI (?P<call>[a-z][\w() ]{0,40}?) (?:failed|failure)(?: \([\w.]{1,60}:\d{1,6}:(?P<func>\w{1,80}):"
              r"(?P<error>[^)\n]{1,120})\))?",
        subject="MPI OFI",
        message="The MPI library (Intel MPI or MPICH over libfabric) failed its OFI call `{call}`{error_note}: it could "
                "not use a libfabric provider here.",
        meaning="MPI_Init aborts on this rank (or, after init, the operation fails): the job stops before NCCL, or with it.",
        fix="Run `fi_info` in the job's environment: `No data available` means no provider fits (FI_PROVIDER / "
            "I_MPI_OFI_PROVIDER naming one that is not there, no NIC given to the pod); use the provider the fabric "
            "has (mlx or verbs on InfiniBand, efa on AWS), or FI_PROVIDER=tcp to confirm.",
        ref="pmodels/mpich src/mpid/ch4/netmod/ofi/ofi_init.c, ofi_rma.h (MPIDI_OFI_CALL's `OFI %s failed`); " + seen,
        examples=examples,
        derive=lambda g: {"error_note": f" ({g['error']})" if g.get("error") else ""},
        follows=("mpi.psm_open",),
    )


_OFI_ROWS = (
    _ofi_row("getinfo", "_getinfo() fail", (
        "find_provider(2683)..........: OFI fi_getinfo() failed (ofi_init.c:2683:find_provider:No data available)",
        "find_provider(170).........: OFI fi_getinfo() failure",
    ), "https://github.com/pmodels/mpich/issues/6336, https://github.com/pmodels/mpich/issues/6612"),
    _ofi_row("addrinfo", "_mpi_init_hook(", (
        "MPIDI_NM_mpi_init_hook(689): OFI addrinfo() failed (ofi_init.h:689:MPIDI_NM_mpi_init_hook:No data available)",
    ), "https://github.com/QMCPACK/qmcpack/issues/1158 (Intel MPI 2019.1)"),
    _ofi_row("rma", "_do_put(", (
        "MPIDI_OFI_do_put(436): OFI rdma write immediate failed (ofi_rma.h:436:MPIDI_OFI_do_put:Invalid argument)",
    ), "https://github.com/easybuilders/easybuild-easyconfigs/issues/21715 (Intel MPI 2021, MPI_Put)"),
    _ofi_row("init_local", "_init_local(", (
        "MPIDI_OFI_init_local(580): OFI fi_fabric failed (ofi_init.c:580:MPIDI_OFI_init_local:Invalid argument)",
    ), "https://github.com/pmodels/mpich/issues/6547 (MPICH 4.1, no network up)"),
    _ofi_row("cq", "_handle_cq_error(", (
        "MPIDI_OFI_handle_cq_error(1008): OFI poll failed (ofi_events.h:1008:MPIDI_OFI_handle_cq_error:Cannot allocate "
        "memory)",
    ), "https://github.com/ofiwg/libfabric/issues/5648 (Intel MPI 2019.6, MPI_Iprobe)"),
    _ofi_row("vni", "_vni_context(", (
        "create_vni_context(2221).....: OFI endpoint open failed (ofi_init.c:2221:create_vni_context:Invalid argument)",
    ), "https://github.com/sxs-collaboration/spectre/issues/5935 (MPICH 4, PMPI_Init)"),
)


PATTERNS: tuple[Pattern, ...] = (
    # -- ssh, under mpirun and the launchers that use it ------------------------------------------
    Pattern(
        id="mpi.ssh_denied",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="Permission denied (publickey",
        regex=r"(?:(?P<host>[\w.@-]{1,300}): )?Permission denied \((?P<methods>publickey[\w,-]{0,100})\)",
        subject="ssh",
        message="ssh to {host_text} was refused (`Permission denied ({methods})`): the launcher's key is not accepted "
                "there, so mpirun cannot start its daemon on that node.",
        meaning="The job never starts on that node; mpirun reports the daemons it could not start next.",
        fix="From the launcher, `ssh -v <worker> hostname`: the worker's authorized_keys must hold the launcher's public "
            "key, owned by the user with mode 0600 (a Kubernetes Secret mounted with defaultMode 0600).",
        ref="openssh-portable sshconnect2.c `Permission denied (%s).`; https://github.com/kubeflow/mpi-operator/issues/424",
        examples=("root@tensorflow-benchmarks-worker-1.tensorflow-benchmarks-worker: Permission denied (publickey,password).",),
        derive=lambda g: {"host_text": g.get("host") or "a node"},
    ),
    Pattern(
        id="mpi.ssh_key_mode",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="are too open",
        regex=r"Permissions (?P<mode>0?\d{3,4}) for '(?P<key>[^'\n]{1,300})' are too open",
        subject="ssh key",
        message="ssh refused to use the private key {key} because its mode is {mode} (readable by others): it logs in "
                "without it and is refused.",
        meaning="mpirun cannot start its daemons on the other nodes.",
        fix="`chmod 600` the key; mounted from a Kubernetes Secret, set the volume's defaultMode to 0600 (MPIJob's "
            "launcher does) and mount it where ssh looks.",
        ref="openssh-portable authfile.c sshkey_perm_ok `Permissions 0%3.3o for '%s' are too open.`; "
            "https://github.com/kubeflow/mpi-operator/issues/429",
        examples=("Permissions 0640 for '/root/.ssh/id_rsa' are too open.",),
    ),
    Pattern(
        id="mpi.ssh_resolve",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="Could not resolve hostname",
        regex=r"ssh: Could not resolve hostname (?P<host>[\w.-]{1,300}): (?P<why>[^\n]{1,100}?)\s*$",
        subject="{host}",
        message="The launcher's ssh could not resolve {host} ({why}): that node's name does not exist in DNS yet, or "
                "not under that name.",
        meaning="mpirun cannot start its daemon there; in a Kubernetes MPIJob, the launcher ran before the worker "
                "pods (and their headless Service records) were ready.",
        fix="Start the launcher once the workers are Running (MPIJob's launcher waits for them in recent "
            "mpi-operator versions; an init container that waits on `getent hosts <worker>` otherwise) and check the "
            "hostfile's names.",
        ref="openssh-portable ssh.c `ssh: Could not resolve hostname %s: %s`; "
            "https://github.com/kubeflow/mpi-operator/issues/481",
        examples=("ssh: Could not resolve hostname tensorflow-benchmarks-worker-0.tensorflow-benchmarks-worker: Name or "
                  "service not known",),
    ),
    Pattern(
        id="mpi.ssh_connect",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="ssh: connect to host",
        regex=r"ssh: connect to host (?P<host>\S{1,300}) port (?P<port>\d{1,5}): (?P<why>[^\n]{1,100}?)\s*$",
        subject="{host}",
        message="The launcher's ssh could not connect to {host} on port {port}: {why}.",
        meaning="mpirun (or horovodrun, pdsh) cannot start the job's processes on that node.",
        fix="`Connection refused`: no sshd listens on that port there (start it, or pass the port its sshd uses: "
            "`-mca plm_rsh_args \"-p N\"`, `horovodrun --ssh-port`); `timed out` / `No route to host`: a firewall or "
            "route between the nodes.",
        ref="openssh-portable sshconnect.c `ssh: connect to host %s port %s: %s`; "
            "https://github.com/horovod/horovod/issues/504",
        examples=("ssh: connect to host 192.168.11.1 port 50000: Connection refused",),
    ),
    Pattern(
        id="mpi.ssh_exchange",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="exchange_identification: ",
        regex=r"(?:ssh|kex)_exchange_identification: (?P<why>[^\n]{1,100}?)\s*$",
        subject="ssh",
        message="An sshd closed the connection before the ssh handshake ({why}): it refuses the launcher (MaxStartups "
                "reached by many parallel connections, a host allow list) or is not ready.",
        meaning="mpirun cannot start its daemon on that node.",
        fix="Raise MaxStartups in the workers' sshd_config (mpirun connects to many nodes at once), check hosts.allow, "
            "and retry once the worker's sshd is up.",
        ref="openssh-portable sshconnect.c ssh_exchange_identification / kex_exchange_identification; "
            "https://github.com/openpmix/prrte/issues/1493",
        examples=("ssh_exchange_identification: Connection closed by remote host",),
    ),
    Pattern(
        id="mpi.ssh_check_failed",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="returned non-zero exit status 255",
        regex=r"Command '(?P<cmd>ssh [^'\n]{0,300}?(?P<host>[\w.-]{1,255}) hostname)' returned non-zero exit status 255",
        subject="ssh",
        message="The launcher's check that it can ssh to {host} without a password failed (`{cmd}` exited 255): "
                "passwordless ssh from this node to that one does not work.",
        meaning="DeepSpeed's (pdsh) launcher stops before starting anything.",
        fix="Set up key-based ssh from the launching node to every host in the hostfile (`ssh <host> hostname` must "
            "work without a prompt), or launch each node yourself (`--no_ssh_check`, torchrun per node).",
        ref="deepspeedai/DeepSpeed deepspeed/launcher/runner.py (`ssh -o PasswordAuthentication=no {host} hostname`); "
            "https://github.com/deepspeedai/DeepSpeed/issues/4907",
        examples=("subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 192.168.3.100 hostname' "
                  "returned non-zero exit status 255.",),
    ),
    # -- mpirun: ORTE (Open MPI <= 4), PRRTE (5) -----------------------------------------------------
    Pattern(
        id="mpi.orted_missing",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="rted: No such file",
        regex=r"(?P<path>\S{0,300}?(?P<daemon>orted|prted)): No such file or directory",
        subject="{daemon}",
        message="The node mpirun logged in to has no {path}: Open MPI is not installed there at the same path (ssh "
                "reached the host, not the container the job runs in, or another image).",
        meaning="mpirun cannot start its daemon there.",
        fix="Install the same Open MPI at the same prefix on every node (the same image), point ssh at the container's "
            "sshd (its port), or give `--prefix`.",
        ref="open-mpi/ompi orte/mca/plm/rsh (the remote shell runs `orted`); https://github.com/horovod/horovod/issues/301",
        examples=("bash: /usr/local/bin/orted: No such file or directory",),
    ),
    Pattern(
        id="mpi.sshd_missing",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="sshd: No such file",
        regex=r"(?P<path>\S{0,200}/sshd): No such file or directory",
        subject="sshd",
        message="The worker has no ssh server ({path} is missing): the launcher cannot log in to start the ranks there.",
        meaning="An MPIJob (or any mpirun over ssh) never starts its processes on that worker.",
        fix="Use a worker image with openssh-server (MPIJob's workers run sshd), or a launcher that does not need ssh "
            "(torchrun on every pod, Slurm).",
        ref="kubeflow/mpi-operator (workers run `/usr/sbin/sshd -De`); https://github.com/NVIDIA/cloudai/issues/720",
        examples=("/bin/bash: line 1: /usr/sbin/sshd: No such file or directory",),
    ),
    Pattern(
        id="mpi.daemons_not_started",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="was unable to reliably start one or more daemons",
        regex=r"(?P<rte>ORTE|PRTE) was unable to reliably start one or more daemons",
        subject="mpirun",
        message="mpirun ({rte}) could not start its daemon on one or more nodes: the job never started there.",
        meaning="The reason is what the remote shell printed before it (an ssh error, a missing orted).",
        fix="Run `ssh <node> hostname` and `ssh <node> which orted` from the launcher; the lines before this one name "
            "the failure.",
        ref="open-mpi/ompi orte/mca/plm/base/help-plm-base.txt [no-lib-path] / orte/mca/plm/rsh help (4.x), "
            "openpmix/prrte (5.x); https://github.com/kubeflow/mpi-operator/issues/481",
        examples=("ORTE was unable to reliably start one or more daemons.",),
        follows=_SSH,
        symptom_after=_SSH,
    ),
    Pattern(
        id="mpi.lost_daemon",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="has lost communication with a remote daemon",
        regex=r"(?P<rte>ORTE|PRTE) has lost communication with a remote daemon",
        subject="mpirun",
        message="mpirun ({rte}) lost its connection to the daemon of another node while the job ran: that node's "
                "daemon died (a worker pod that was killed, evicted or restarted, a node that rebooted) or the network "
                "between them dropped it.",
        meaning="Every rank is stopped; the node named in mpirun's message is where to look.",
        fix="Check that node's pod or host at that time (`kubectl describe pod`, OOM kills, `dmesg`) and the network "
            "between the nodes; mpirun's message names the node.",
        ref="open-mpi/ompi orte/mca/errmgr help `ORTE has lost communication with a remote daemon.` (4.x); "
            "https://github.com/kubeflow/mpi-operator/issues/152",
        examples=("ORTE has lost communication with a remote daemon.",),
    ),
    Pattern(
        id="mpi.tcp_connect",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="unable to complete a TCP connection",
        regex=r"A process or daemon was unable to complete a TCP connection",
        subject="mpirun",
        message="An MPI process or daemon could not open a TCP connection to another node: usually a firewall, or an "
                "interface the other node cannot reach.",
        meaning="The job cannot wire up; it hangs or stops.",
        fix="Open the ports between the nodes (Open MPI uses dynamic ports: `-mca oob_tcp_dynamic_ipv4_ports` and "
            "`btl_tcp_port_min_v4` narrow them), and pin the interfaces the nodes share (`-mca oob_tcp_if_include`, "
            "`btl_tcp_if_include`).",
        ref="open-mpi/ompi opal/mca/btl/tcp/help-mpi-btl-tcp.txt [client connect fail], "
            "orte/mca/oob/tcp help; https://github.com/horovod/horovod/issues/2043",
        examples=("A process or daemon was unable to complete a TCP connection",),
    ),
    Pattern(
        id="mpi.not_enough_slots",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="There are not enough slots available",
        regex=r"There are not enough slots available in the system to satisfy the (?P<n>\d{1,7}) slots?",
        subject="mpirun slots",
        message="mpirun was asked for {n} processes and the hosts it was given offer fewer slots.",
        meaning="The job does not start.",
        fix="Give each host its slots (`-H host1:8,host2:8`, `slots=8` in the hostfile) or `--oversubscribe`; in an "
            "MPIJob, slotsPerWorker.",
        ref="open-mpi/ompi orte/mca/rmaps/base/help-orte-rmaps-base.txt [orte-rmaps-base:alloc-error]; "
            "https://github.com/horovod/horovod/issues/978",
        examples=("There are not enough slots available in the system to satisfy the 2 slots",),
    ),
    Pattern(
        id="mpi.rank_signal",
        code=JOB_KILLED,
        severity=ERROR,
        needle="noticed that process rank",
        regex=r"noticed that process rank (?P<rank>\d{1,7}) with PID (?P<pid>\d{1,10}) on node (?P<node>\S{1,300}) exited "
              r"on signal (?P<sig>9|15|2|1) \((?P<name>[^)\n]{1,40})\)",
        subject="{signal_text}",
        message="mpirun saw rank {rank} (PID {pid} on {node}) killed by {signal_text}.",
        meaning="SIGKILL (9) is most often the kernel's OOM killer or a forced stop; the other ranks are stopped with it.",
        fix="SIGKILL: `dmesg | grep -i oom` on that node, or the pod's last state (OOMKilled); give it more memory.",
        ref="open-mpi/ompi orte/mca/errmgr help `%s noticed that process rank %s with PID %s on node %s exited on signal "
            "%d (%s).`; https://github.com/open-mpi/ompi/issues/2661",
        examples=("mpirun noticed that process rank 0 with PID 21183 on node host01 exited on signal 9 (Killed).",),
        symptom=True,
        derive=_crash,
    ),
    Pattern(
        id="mpi.rank_crashed",
        code=PROCESS_CRASHED,
        severity=ERROR,
        needle="noticed that process rank",
        regex=r"noticed that process rank (?P<rank>\d{1,7}) with PID (?P<pid>\d{1,10}) on node (?P<node>\S{1,300}) exited "
              r"on signal (?P<sig>(?!(?:9|15|2|1) )\d{1,3}) \((?P<name>[^)\n]{1,40})\)",
        subject="{signal_text}",
        message="mpirun saw rank {rank} (PID {pid} on {node}) crash with {signal_text}{crash_note}.",
        meaning="The other ranks are stopped with it; the crashing rank's output before this line says where.",
        fix="Read the rank's backtrace: SIGBUS with NCCL frames is a small /dev/shm (raise it); SIGSEGV in UCX or MPI "
            "is a library mismatch (UCX_TLS=tcp to confirm).",
        ref="open-mpi/ompi orte/mca/errmgr help `... exited on signal %d (%s).`",
        examples=("mpirun noticed that process rank 3 with PID 211 on node node-2 exited on signal 11 (Segmentation "
                  "fault).",),
        symptom=True,
        derive=_crash,
    ),
    Pattern(
        id="mpi.signal_handler",
        code=PROCESS_CRASHED,
        severity=ERROR,
        # (the context needle of errors.py: no scan needle more, and none that NCCL's INFO lines hold)
        needle="Signal: ",
        # Open MPI's own handler: "[host:pid] *** Process received signal ***" then "[host:pid] Signal: ... (N)"; its
        # prefix is stripped by a log viewer or a `sed` as often as not (issue 30): the signal line is read at the
        # start of the line once prefixes are removed, after the banner pasted on the same line, or after `] ` (`]: `).
        regex=r"(?:^\W{0,4}|\*\*\*\s{1,4}|\]:? )Signal: (?P<name>[A-Z][\w ]{1,40}?) \((?P<sig>\d{1,3})\)",
        subject="{signal_text}",
        message="An MPI process crashed with {signal_text}{crash_note}.",
        meaning="The job stops; the backtrace printed after this line names the library it crashed in.",
        fix="Read the backtrace: a crash in UCX or UCC during MPI_Init is a library mismatch or a transport it cannot "
            "use (UCX_TLS=tcp, or `-mca pml ob1`, to confirm); in NCCL with SIGBUS, a small /dev/shm.",
        ref="open-mpi/ompi opal/util/stacktrace.c `%s Signal: %s (%d)`; https://github.com/NVIDIA/nccl-tests/issues/218",
        examples=("[a1eb0914a5e2:01167] Signal: Segmentation fault (11)", "Signal: Segmentation fault (11)"),
        symptom=True,
        derive=_crash,
    ),
    # -- Kubernetes training operators ----------------------------------------------------------------
    Pattern(
        id="mpi.operator_pod_exited",
        code=JOB_FAILED,
        severity=ERROR,
        needle=" exited with code ",
        regex=r"Pod:? (?P<pod>[\w.-]{1,300}) exited with code (?P<rc>[1-9]\d{0,2})",
        subject="{pod}",
        message="The training operator reports pod {pod} exited with code {rc}: its container failed.",
        meaning="The job fails or restarts the pod; the reason is in that pod's own log.",
        fix="`kubectl logs <pod> --previous` (the failed run) and `kubectl describe pod`: the first error there.",
        ref="kubeflow/training-operator pkg/controller (`Pod: %s.%s exited with code %v`); "
            "https://github.com/kubeflow/trainer/issues/2008",
        examples=('time="2024-02-21T09:32:29Z" level=info msg="Pod: kubeflow.pytorch-simple-worker-0 exited with code 1" '
                  "job=kubeflow.pytorch-simple replica-type=worker",),
        symptom=True,
    ),
    Pattern(
        id="mpi.crash_loop",
        code=JOB_FAILED,
        severity=ERROR,
        needle="back-off ",
        regex=r"[Bb]ack-off (?P<delay>\d{1,5}[ms]\w{0,4}) restarting failed container(?:=(?P<container>[\w.-]{1,100}) "
              r"pod=(?P<pod>[\w.-]{1,300}))?",
        subject="{pod_subject}",
        message="Kubernetes keeps restarting a failed container{where} (CrashLoopBackOff, next try in {delay}): it exits "
                "with an error every time it starts.",
        meaning="The job cannot start or restart; the container's own log says why.",
        fix="`kubectl logs <pod> --previous` shows the last failed run's output; fix its first error.",
        ref="kubernetes/kubernetes pkg/kubelet (`back-off %s restarting failed container=%s pod=%s`); "
            "https://github.com/kubeflow/trainer/issues/2008",
        examples=("Error pod pytorch-simple-worker-0 container pytorch waiting message: back-off 40s restarting failed "
                  "container=pytorch pod=pytorch-simple-worker-0_kubeflow(2e06a4e3-b7c1)",),
        derive=lambda g: {"where": f" ({g['container']} in {g['pod']})" if g.get("pod") else "",
                          "pod_subject": (g.get("pod") or "container").split("_")[0]},
        symptom=True,
    ),
    # -- PMIx and Slurm ----------------------------------------------------------------------------------
    Pattern(
        id="mpi.pmix_init",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="pmix_init failed",
        regex=r"pmix_init failed",
        subject="PMIx",
        message="The job's PMIx library could not start (`pmix_init failed`): a component it needs is missing in "
                "this environment (the lines before name the framework and component, such as psec/munge).",
        meaning="No rank starts; the launcher and the container's PMIx do not agree.",
        fix="For a missing psec/munge component in a container, `PMIX_MCA_psec=native` (or install munge in the "
            "image); use the PMIx the launcher (srun --mpi=pmix) was built with.",
        ref="openpmix/openpmix src/runtime/help-pmix-runtime.txt [pmix_init:startup:internal-failure]; "
            "https://github.com/NVIDIA/pyxis/issues/88",
        examples=("It looks like pmix_init failed for some reason; your parallel process is",),
    ),
    Pattern(
        id="mpi.slurm_pmix_timeout",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="collective timeout",
        regex=r"mpi/pmix\w{0,8}: pmixp_coll\w{0,40}: (?P<node>\S{1,300}) \[\d{1,6}\]: [\w.]{1,40}:\d{1,6}: "
              r"0x[0-9a-f]{1,16}: collective timeout",
        subject="srun PMIx",
        message="Slurm's PMIx plugin on {node} timed out waiting for the other nodes in the job's start-up exchange: "
                "the nodes cannot reach each other on the port Slurm's PMIx uses, or a node's step failed.",
        meaning="The ranks never finish starting (srun hangs or fails).",
        fix="Check the network between the nodes for slurmstepd's PMIx traffic (SLURM_PMIX_DIRECT_CONN, firewalls), "
            "and the other nodes' slurmd logs for a failed step.",
        ref="SchedMD/slurm src/plugins/mpi/pmix/pmixp_coll_ring.c `%p: collective timeout seq=%d`; "
            "https://github.com/NVIDIA/deepops/issues/1179",
        examples=("slurmstepd: error:  mpi/pmix_v3: pmixp_coll_ring_reset_if_to: adas-ml [0]: pmixp_coll_ring.c:742: "
                  "0x14ce0c02cb20: collective timeout seq=0",),
    ),
    Pattern(
        id="mpi.mpich_pmi_init",
        code=MPI_LAUNCH_FAILED.code,
        severity=ERROR,
        needle="PMI2 init failed",
        # A frame of MPICH's error stack under `Fatal error in MPI_Init: Other MPI error` (errors.py reads the stack
        # as one message): the frame names the layer, PMI, so the failure is the launch's, not the network's.
        regex=r"(?P<func>\w{1,60})\(\d{1,6}\)\.{0,60}:\s{0,4}PMI2 init failed(?::\s{0,4}(?P<rc>-?\d{1,6}))?",
        subject="PMI",
        message="The MPI library (Cray MPICH, MPICH) could not reach the process manager in MPI_Init (`PMI2 init "
                "failed` in {func}): the program was started outside the launcher it was built for (mpirun or a bare "
                "`./prog` where srun or aprun starts the ranks), or under srun with another PMI.",
        meaning="No rank starts: MPI_Init aborts before any network is used. Inside a job started the right way, the "
                "same stack can mean MPI_Init timed out (slow file systems at start-up).",
        fix="Start the program with the system's launcher: `srun -n <ranks> ./prog` under Slurm (with the PMI the "
            "library was built for: `srun --mpi=pmi2`; `srun --mpi=list` shows them), `aprun` on a Cray ALPS system; "
            "Cray MPICH's `mpirun` does not start its ranks on a login node.",
        ref="Cray MPICH's ch3 start-up (MPID_Init `PMI2 init failed: %d`); https://github.com/cmbant/CosmoMC/issues/21 "
            "(mpirun on Cori), NERSC's python docs (`from mpi4py import MPI` on a login node)",
        examples=("MPID_Init(638).......:  PMI2 init failed: 1", "MPID_Init(286).......:  PMI2 init failed: 1"),
    ),
    # -- the MPI libraries' own transports: Open MPI's PML / BTL / MTL, Intel MPI and MPICH over OFI, PSM2/PSM3,
    #    MVAPICH2 ------------------------------------------------------------------------------------------------
    *_OFI_ROWS,
    Pattern(
        id="mpi.mpich_fatal",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="Other MPI error",
        # MPICH's (and Intel MPI's, MVAPICH2's) abort banner; the error stack under it names the layer that
        # failed (an OFI call, MVAPICH2's rdma_iba_*): this line only follows from it.
        regex=r"Fatal error in (?P<func>P?MPI_\w{1,40}|internal_\w{1,40}): Other MPI error",
        subject="MPI {func}",
        message="The MPI library (MPICH, Intel MPI or MVAPICH2) aborted in {func} with an internal error (`Other MPI "
                "error`): the error stack printed under it names the layer that failed.",
        meaning="This rank stops (MPI_Init: the job never starts); in Intel MPI and MPICH the failing layer is almost "
                "always the network module (OFI) or its provider.",
        fix="Read the last lines of the error stack (an `OFI ... failed` line, `rdma_iba_hca_init: cannot create cq`); "
            "rerun with I_MPI_DEBUG=5 (Intel MPI) or FI_LOG_LEVEL=warn to see the provider it picked.",
        ref="pmodels/mpich src/mpi/errhan/errutil.c (`Fatal error in %s: %s, error stack:`); "
            "https://github.com/openucx/ucx/issues/7978 (Intel MPI 2019u12), https://github.com/firemodels/fds/issues/7868, "
            "https://github.com/flux-framework/flux-core/issues/4451 (MVAPICH2 2.3.6)",
        examples=(
            "Abort(1091215) on node 5 (rank 5 in comm 0): Fatal error in PMPI_Init: Other MPI error, error stack:",
            "Abort(1094799) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init_thread: Other MPI error, error stack:",
            "Abort(337237391): Fatal error in internal_Init_thread: Other MPI error, error stack:",
        ),
        symptom=True,
    ),
    Pattern(
        id="mpi.mvapich2_iba_init",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="rdma_iba_",
        # MVAPICH2's verbs channel (mrail/gen2) in its error stack: `rdma_iba_hca_init(1636)..: cannot create cq`.
        regex=r"(?P<func>rdma_iba_\w{1,40})\(\d{1,6}\)\.{0,60}:\s{1,4}(?P<what>[^\n]{1,120}?)\s*$",
        subject="MVAPICH2 {func}",
        message="MVAPICH2's InfiniBand channel could not set up the HCA in {func}: {what}.",
        meaning="MPI_Init aborts on this rank. `cannot create cq` (or a QP, SRQ, memory region) is the locked-memory "
                "limit almost every time; otherwise the HCA's resources or a device the process cannot open.",
        fix="Run with `ulimit -l unlimited` (under Slurm or Flux the limit the launcher passes on, PropagateResourceLimits; "
            "IPC_LOCK in a container); check the HCA with `ibv_devinfo` and MV2_IBA_HCA.",
        ref="MVAPICH2 src/mpid/ch3/channels/mrail/src/gen2/rdma_iba_priv.c rdma_iba_hca_init (`cannot create cq`, "
            "`Failed to create qp`, ...); https://github.com/flux-framework/flux-core/issues/4451",
        examples=("rdma_iba_hca_init(1636)..: cannot create cq",),
    ),
    Pattern(
        id="mpi.ompi_ofi_call",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="OFI Libfabric library call",
        regex=r"Open MPI failed an OFI Libfabric library call \((?P<call>\w{1,60})\)",
        subject="mtl ofi {call}",
        message="Open MPI's OFI layer (the ofi MTL, over libfabric) failed the libfabric call {call}: the provider it "
                "picked cannot be used on this node (the box's `Error:` line gives the errno).",
        meaning="MPI_Init aborts, or the job goes on unpredictably and crashes later (Open MPI's own words).",
        fix="Run `fi_info -v` in the job's environment; choose a provider that works here (`-mca mtl_ofi_provider_include "
            "<prov>`, FI_PROVIDER), use the libfabric the provider was built with (a Cray/HPE cxi needs its own), or "
            "leave OFI (`-mca pml ucx`, `-mca mtl ^ofi`).",
        ref="open-mpi/ompi ompi/mca/mtl/ofi/help-mtl-ofi.txt [OFI call fail] (mtl_ofi_component.c, 2.x-5.x); "
            "https://github.com/ofiwg/libfabric/issues/6710 (fi_endpoint, psm3), https://github.com/open-mpi/ompi/issues/12038 "
            "(fi_domain, cxi)",
        examples=("Open MPI failed an OFI Libfabric library call (fi_endpoint).  This is highly",
                  "Open MPI failed an OFI Libfabric library call (fi_domain).  This is highly"),
    ),
    Pattern(
        id="mpi.btl_ofi_call",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="btl_ofi_component",  # BTL_VERBOSE's location, on every such line ("with err=" has no rare letter)
        regex=r"(?P<dev>[\w.-]{1,64}) failed (?P<call>fi_\w{1,40}) with err=(?P<error>[^\n]{1,120}?)\s*$",
        subject="btl ofi {dev}",
        message="Open MPI's ofi BTL could not use {dev}: libfabric's {call} failed with `{error}`.",
        meaning="That BTL skips the device: one-sided MPI (and anything that needed the BTL) fails or falls back; a "
                "crash can follow on some releases.",
        fix="`fi_info -v -p <prov>` in the job's environment; `Function not implemented` is a provider or libfabric "
            "without that call (use the site's libfabric); exclude the BTL (`-mca btl ^ofi`) to confirm.",
        ref="open-mpi/ompi opal/mca/btl/ofi/btl_ofi_component.c mca_btl_ofi_init_device (`%s failed fi_domain with err=%s`, "
            "BTL_VERBOSE); https://github.com/open-mpi/ompi/issues/13803",
        examples=("[polaris-login-02][[46076,1],0][../../../../../opal/mca/btl/ofi/btl_ofi_component.c:581:"
                  "mca_btl_ofi_init_device] cxi0 failed fi_domain with err=Function not implemented",),
    ),
    Pattern(
        id="mpi.openib_create_queue",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="BTL failed to initialize while trying to",
        regex=r"The OpenFabrics \(openib\) BTL failed to initialize while trying to",
        subject="btl openib",
        message="Open MPI's openib BTL could not create a verbs queue at start (the box's `Function:` and `Error:` "
                "lines name the call and the errno).",
        meaning="The openib BTL is not usable on this node: MPI_Init fails, or MPI runs without RDMA where another "
                "transport is allowed.",
        fix="`Cannot allocate memory`: raise the locked-memory limit (`ulimit -l unlimited`); `Device or resource busy`: "
            "another process holds the device's resources; on Open MPI 4+ use UCX instead (`-mca pml ucx -mca btl ^openib`).",
        ref="open-mpi/ompi opal/mca/btl/openib/help-mpi-btl-openib.txt [init-fail-create-q] (v1.x-4.1); "
            "https://github.com/open-mpi/ompi/issues/166",
        examples=("The OpenFabrics (openib) BTL failed to initialize while trying to",),
    ),
    Pattern(
        id="mpi.btl_tcp_connect_box",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="Open MPI failed to TCP connect",
        regex=r"Open MPI failed to TCP connect to a peer MPI process",
        subject="btl tcp",
        message="Open MPI's TCP transport could not connect to another MPI process (the box's `Message:` line names "
                "the address, `Error:` the reason): the job may hang or fail.",
        meaning="MPI traffic between those two processes cannot flow over TCP: the job hangs or aborts.",
        fix="Pin the interfaces every node can reach (`-mca btl_tcp_if_include <iface or CIDR>`); `No route to host` "
            "is an interface (docker0, a second NIC) the peer cannot reach, or a firewall.",
        ref="open-mpi/ompi opal/mca/btl/tcp/help-mpi-btl-tcp.txt [client connect fail] (4.0.3+), btl_tcp_endpoint.c "
            "mca_btl_tcp_endpoint_complete_connect",
        examples=("WARNING: Open MPI failed to TCP connect to a peer MPI process.  This",),
    ),
    Pattern(
        id="mpi.btl_tcp_connect",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="btl_tcp_endpoint",  # BTL_ERROR's location ("connect() to" has no rare letter to scan for)
        regex=r"btl_tcp_endpoint\.c:\d{1,6}:\w{1,60}\] connect\(\) to (?P<peer>[\w.:%\[\]-]{1,300}) failed"
              r"(?:: (?P<error>[^\n]{1,120}?))?\s*$",
        subject="btl tcp",
        message="Open MPI's TCP transport could not connect to {peer}{error_note}: that address is not reachable from "
                "this node on the interface Open MPI chose.",
        meaning="MPI traffic to that process cannot flow: the job hangs or aborts.",
        fix="Pin the interfaces every node can reach (`-mca btl_tcp_if_include <iface or CIDR>`, and "
            "`oob_tcp_if_include`); `No route to host` is an interface (docker0, a second NIC) the peer cannot reach, "
            "or a firewall.",
        ref="open-mpi/ompi opal/mca/btl/tcp/btl_tcp_endpoint.c mca_btl_tcp_endpoint_complete_connect (BTL_ERROR "
            "`connect() to %s failed: %s (%d)`, <= 4.0; 4.0.3+ says it in the [client connect fail] box); "
            "https://github.com/open-mpi/ompi/issues/2168",
        examples=("[ivy08][[463,1],0][btl_tcp_endpoint.c:803:mca_btl_tcp_endpoint_complete_connect] connect() to "
                  "10.102.1.194 failed: No route to host (113)",),
        derive=lambda g: {"error_note": f" ({g['error']})" if g.get("error") else ""},
        follows=("mpi.btl_tcp_connect_box",),
        symptom_after=("mpi.btl_tcp_connect_box",),
    ),
    Pattern(
        id="mpi.intel_fabric_unavailable",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="MPI startup(): ",
        regex=r"MPI startup\(\): (?P<fabric>\w{1,16}) fabric is not available and fallback fabric is not enabled",
        subject="MPI {fabric}",
        message="Intel MPI could not start its {fabric} fabric and was told not to fall back (I_MPI_FALLBACK=0): "
                "MPI_Init aborts.",
        meaning="The job does not start; the lines before it say why the provider failed (PSM2, verbs, a device).",
        fix="Fix the provider the lines before name (`fi_info`, the NIC, `ulimit -l`), or allow the fallback "
            "(I_MPI_FALLBACK=1, or I_MPI_FABRICS=shm:tcp to confirm).",
        ref="Intel MPI 2018/2019 `MPI startup(): %s fabric is not available and fallback fabric is not enabled`; "
            "https://github.com/intel/MLSL/issues/25",
        examples=("[1] [1] MPI startup(): ofi fabric is not available and fallback fabric is not enabled",),
        follows=("mpi.psm_open",),
        symptom_after=("mpi.psm_open",),
    ),
    Pattern(
        id="mpi.psm_open",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="can't open ",
        regex=r"PSM(?P<v>[23]) can't open (?:hfi|nic) unit: (?P<unit>-?\d{1,4}) \(err=(?P<err>\d{1,4})\)",
        subject="PSM{v}",
        message="PSM{v} (Omni-Path / Intel Ethernet fabric, under Open MPI's MTL or libfabric's psm{v} provider) could "
                "not open its NIC (unit {unit}, err={err}).",
        meaning="MPI over PSM cannot start on this node: MPI_Init fails, or the library falls back to a slower path.",
        fix="Check the NIC PSM needs (`ls /sys/class/infiniband`, hfi1 for Omni-Path, a RoCE NIC for PSM3), the "
            "locked-memory limit (`ulimit -l unlimited`); on a node without one, exclude the provider (`-mca mtl ^psm2`, "
            "FI_PROVIDER=tcp or mlx).",
        ref="cornelisnetworks/opa-psm2 psm.c `PSM2 can't open hfi unit: %d (err=%d)`; intel/eth-psm3-fi `PSM3 can't "
            "open nic unit: %d (err=%d)`; https://github.com/open-mpi/ompi/issues/10601, "
            "https://github.com/intel/MLSL/issues/25, https://github.com/uxlfoundation/oneDAL/pull/3741",
        examples=(
            "bdw-0214.30734PSM2 can't open hfi unit: -1 (err=23)",
            "unnervm76f27:rank1: PSM3 can't open nic unit: 0 (err=23)",
        ),
        follows=("ofi.psm3_cq_failed",),
        symptom_after=("ofi.psm3_cq_failed",),
    ),
    Pattern(
        id="mpi.openib_device_error",
        code=MPI_TRANSPORT_FAILED.code,
        severity=WARNING,
        needle="OpenFabrics ",
        regex=r"There was an error initializing an OpenFabrics device",
        subject="btl openib",
        message="Open MPI's openib BTL could not initialize an RDMA device: that BTL does not use it (Open MPI goes on "
                "with UCX or TCP if it can).",
        meaning="Usually harmless on Open MPI 4+ where UCX carries InfiniBand (`-mca btl ^openib` silences it); an error "
                "when openib was the only path to the fabric.",
        fix="Use UCX (`-mca pml ucx -mca btl ^openib`); if UCX also fails, the lines around it name the device problem.",
        ref="open-mpi/ompi opal/mca/btl/openib/help-mpi-btl-openib.txt [init-fail-no-mem] (v1.x-4.1); "
            "https://github.com/open-mpi/ompi/issues/6300, https://github.com/openucx/ucx/issues/8511",
        examples=("WARNING: There was an error initializing an OpenFabrics device.",),
    ),
    Pattern(
        id="mpi.openib_no_cpc",
        code=MPI_TRANSPORT_FAILED.code,
        severity=WARNING,
        needle="OpenFabrics ",
        regex=r"No OpenFabrics connection schemes reported that they were able to be\s{0,4}(?:used)?",
        subject="btl openib",
        message="Open MPI's openib BTL found no way to connect on a port (neither rdmacm nor udcm): it disables itself "
                "for that port.",
        meaning="openib is not used there; with UCX available nothing is lost, otherwise MPI falls back to TCP.",
        fix="Use UCX (`-mca pml ucx -mca btl ^openib`); on RoCE, rdmacm needs an IP address on the port's netdev.",
        ref="open-mpi/ompi opal/mca/btl/openib/help-mpi-btl-openib-cpc-base.txt [no cpcs for port] (v1.x-4.1); "
            "https://github.com/openucx/ucx/issues/8440",
        examples=("No OpenFabrics connection schemes reported that they were able to be",),
    ),
    Pattern(
        id="mpi.pml_none",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="No components were able to be opened in the pml framework",
        regex=r"No components were able to be opened in the pml framework",
        subject="pml",
        message="Open MPI could open none of its point-to-point layers (PML: ucx, ob1, cm): MPI_Init aborts.",
        meaning="The job does not start. Often the PML asked for (`-mca pml ucx`) cannot load its library or open a "
                "device.",
        fix="`ompi_info | grep pml` shows what is installed; check that UCX is found (`ucx_info -v`, LD_LIBRARY_PATH) and "
            "sees a device (`ucx_info -d`); `-mca pml ob1` confirms it is UCX.",
        ref="open-mpi/ompi opal/mca/base/help-mca-base.txt [find-available:none found]; "
            "https://github.com/open-mpi/ompi/issues/9838, https://github.com/open-mpi/ompi/issues/11669",
        examples=("No components were able to be opened in the pml framework.",),
    ),
    Pattern(
        id="mpi.pml_ucx_error",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="pml_ucx.c:",
        regex=r"pml_ucx\.c:\d{1,6}\s{1,4}Error: (?P<what>Failed to create UCP worker|ucp_ep_create\(proc=\d{1,9}\) failed: "
              r"[^\n]{1,80}?|Failed to receive UCX worker address: [^\n]{1,80}?|Failed to resolve UCX endpoint for rank \d{1,9})\s*$",
        subject="pml ucx",
        message="Open MPI's UCX layer failed: {what}.",
        meaning="MPI cannot start (no UCP worker) or cannot reach a peer (an endpoint it could not create).",
        fix="Read the UCX ERROR line before it (an ibv_create_cq `Cannot allocate memory` is `ulimit -l`); `ucx_info -d` "
            "shows what UCX can open.",
        ref="open-mpi/ompi ompi/mca/pml/ucx/pml_ucx.c (`Failed to create UCP worker`, `ucp_ep_create(proc=%d) failed`); "
            "https://github.com/open-mpi/ompi/issues/6300, https://github.com/openucx/ucx/issues/2718, "
            "https://github.com/openucx/ucx/issues/3513 (`Failed to resolve UCX endpoint for rank %d`)",
        examples=(
            "[mpi11:04770] pml_ucx.c:212 Error: Failed to create UCP worker",
            "[clx-hercules-007:20550] pml_ucx.c:296 Error: ucp_ep_create(proc=371) failed: Input/output error",
            "Sat Apr 20 22:59:55 2019[1,220]<stderr>:[clx-orion-037:24850] pml_ucx.c:447  Error: Failed to resolve UCX "
            "endpoint for rank 219",
        ),
        follows=(UCX_IB_RESOURCE_FAILED,),
        symptom_after=(UCX_IB_RESOURCE_FAILED,),
    ),
    Pattern(
        id="mpi.btl_unreachable",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="At least one pair of MPI processes",
        regex=r"At least one pair of MPI processes are unable to reach each other for",
        subject="btl",
        message="Open MPI found no transport (BTL) that connects two of its processes: the job aborts.",
        meaning="Every BTL allowed (`-mca btl ...`) was unavailable between the two hosts: often `self` alone, or "
                "openib/tcp excluded with nothing else left.",
        fix="Allow a transport between hosts: `-mca pml ucx`, or `-mca btl tcp,self,vader` (with btl_tcp_if_include "
            "naming the interface the hosts share).",
        ref="open-mpi/ompi ompi/mca/bml/r2/help-mca-bml-r2.txt [unreachable proc]; https://github.com/open-mpi/ompi/issues/3573",
        examples=("At least one pair of MPI processes are unable to reach each other for",),
    ),
    Pattern(
        id="mpi.mvapich2_no_hca",
        code=MPI_TRANSPORT_FAILED.code,
        severity=ERROR,
        needle="No active HCAs found on the system",
        regex=r"No active HCAs found on the system!{0,3}(?: (?P<n>\d{1,3}))?",
        subject="MVAPICH2",
        message="MVAPICH2 found no HCA with an ACTIVE port it may use: its verbs channel cannot start and MPI_Init aborts.",
        meaning="The job does not start on this node.",
        fix="`ibstat` on the node (a port ACTIVE, the device in the pod); MV2_IBA_HCA names the HCAs MVAPICH2 may use; "
            "a node without RDMA needs an MVAPICH2 built for TCP (ch3:sock/nemesis).",
        ref="MVAPICH2 src/mpid/ch3/channels/mrail/src/gen2/rdma_iba_priv.c rdma_open_hca `No active HCAs found on the "
            "system!!!` (2.x)",
        examples=("rdma_open_hca(1051)...............: No active HCAs found on the system!!! 0",),
    ),
)
