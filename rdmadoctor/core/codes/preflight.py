"""`preflight --wait-for-master`: where rank 0 listens, and whether it accepts a connection
(rdmadoctor/preflight/master.py).

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import Code

MASTER_UNRESOLVED = Code(
    "MASTER_UNRESOLVED",
    "Master address does not resolve",
    "`preflight --wait-for-master` never got a DNS answer for MASTER_ADDR (or the first host of "
    "VC_<TASK>_HOSTS) before --master-timeout. torch.distributed would hang in init_process_group and "
    "then fail with a rendezvous timeout, after the whole job had been scheduled.",
    "Check the name: PyTorchJob and Volcano's svc plugin create a headless Service named like the "
    "pods' subdomain; `kubectl get svc,pods -n <ns>` should show it and the master pod. "
    "Raise --master-timeout when the master pod starts slowly.",
)
MASTER_UNREACHABLE = Code(
    "MASTER_UNREACHABLE",
    "Master port does not accept connections",
    "MASTER_ADDR resolves, but nothing accepted a TCP connection on MASTER_PORT before --master-timeout: "
    "rank 0 is not running, not listening on that port yet, or a NetworkPolicy drops the traffic.",
    "`kubectl logs` of rank 0; make MASTER_PORT the port rank 0 listens on (torchrun: 29500 unless "
    "--master-port is given; Volcano's pytorch plugin: 23456); allow pod-to-pod traffic on it; raise "
    "--master-timeout if rank 0 runs its own preflight or pulls a large image first.",
)
