"""``run --metrics-port``: the hang watch's state on /metrics (and /healthz), served by the agent's
bounded server (:class:`rdmadoctor.agent.server.MetricsServer`: one loop thread, deadlines, a
cap on connections), so a scraper costs the job nothing but a socket.

- ``rdmadoctor_job_hang{blamed_node}``: 1 while `run` sees the job hung, with the node NCCL's RAS
  names first (root cause first; "" when RAS names none or could not be asked), else 0;
- ``rdmadoctor_job_hangs_total``: hangs seen since the job started;
- ``rdmadoctor_nccl_ib_devices_failed``: IB devices NCCL's port failover took out of use and has
  not recovered (2.29.7+).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HELP = {
    "rdmadoctor_job_hang": "1 while rdmadoctor run sees the job hung (no output for hang_after_s, or PyTorch's watchdog); "
                           "blamed_node: the node NCCL's RAS names first",
    "rdmadoctor_job_hangs": "Hangs rdmadoctor run saw since the job started",
    "rdmadoctor_nccl_ib_devices_failed": "IB devices NCCL's port failover took out of use and has not recovered",
}


class RunCollector:
    """The prometheus-client Collector protocol over a HangWatch's state."""

    def __init__(self, watch: Any):
        self.watch = watch

    def collect(self):  # metric families
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        w = self.watch
        state = dict(w.state)
        hang = GaugeMetricFamily("rdmadoctor_job_hang", HELP["rdmadoctor_job_hang"], labels=["blamed_node"])
        hang.add_metric([state.get("blamed") or "" if state.get("hang") else ""], int(state.get("hang") or 0))
        yield hang
        yield CounterMetricFamily("rdmadoctor_job_hangs", HELP["rdmadoctor_job_hangs"], value=len(w.hangs))
        failed = sum(1 for e in w.failover if e.get("event") == "failed") - sum(1 for e in w.failover if e.get("event") == "recovered")
        yield GaugeMetricFamily("rdmadoctor_nccl_ib_devices_failed", HELP["rdmadoctor_nccl_ib_devices_failed"], value=max(0, failed))


def serve(port: int, watch: Any, address: str = "0.0.0.0") -> Any:
    """Start /metrics on ``port`` (0: a free one); the server (``.port``, ``.stop()``)."""
    from prometheus_client import CollectorRegistry

    from rdmadoctor.agent.server import MetricsServer

    reg = CollectorRegistry(auto_describe=True)
    reg.register(RunCollector(watch))
    return MetricsServer(address, port, reg, lambda: (True, "ok")).start()
