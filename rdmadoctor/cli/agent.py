"""`rdmadoctor agent`: the DaemonSet loop (rdmadoctor/agent/ does the work; this only wires).

Nothing heavy is imported here: this module is imported by every typer command line, so
prometheus-client and lightkube are imported inside the command body only.
"""

from __future__ import annotations

import os
from typing import Optional

import typer

from rdmadoctor.publish.base import DEFAULT_FEATURES_DIR
from rdmadoctor.publish.base import MODES as PUBLISH_MODES

LOG_FORMATS = ("text", "json")

# typer's rich help keeps single line breaks: one line per paragraph or list item. It reads rich
# markup, so a bracket the reader should see is written \\[ (tests/contract/test_help.py).
AGENT_HELP = """Run the checks every --interval seconds, publish the node's labels, serve /metrics.

The DaemonSet's command. It judges the node only, like `check --scope node`: the checks of its own process (memlock, IPC_LOCK, /dev/shm, userspace, NCCL env) are skipped, since `rdmadoctor preflight` judges those in each job's pod. Each cycle reads the host afresh (sysfs, /proc, the tools) and publishes the labels only when they changed: a node whose state does not change makes no API writes. A failed publish (API refused, 5xx, 409, timeout, expired token) is counted in rdmadoctor_api_errors_total and retried with backoff while the agent keeps checking and serving metrics.

--config is read again every cycle, so a mounted ConfigMap's edits apply without a restart; --pool picks its \\[pools.NAME] table; without --pool, the first pool whose `match` table fits the node's own facts (match = {gpu_model = "10de:2330", hca_count = 8, link_layer = "InfiniBand"}) or, with --publish node, its Node's labels (match = {labels = {"nvidia.com/gpu.product" = "NVIDIA-H100-80GB-HBM3"}}) is used, so one DaemonSet and one ConfigMap serve every pool, and the report says which pool and why.

Publishing (--publish):
- nfd (default): write <features-dir>/rdmadoctor for Node Feature Discovery; no API access needed; the file carries an expiry so the labels vanish if the agent stops.
- node: patch the Node's labels directly (RBAC: nodes get/patch; nodes/status patch with --conditions); node name from --node or $NODE_NAME.
- stdout: print the labels when they change (what --dry-run shows for the others); with --conditions, the NodeConditions too, as `# condition` lines.

Quarantine (--quarantine, with --publish node; default off): taint adds the NoSchedule taint rdmadoctor.io/unhealthy=<ROOT_CODE> to this Node after quarantine_after problem cycles and removes it after release_after healthy ones; at most quarantine_budget nodes of the pool (--pool, label rdmadoctor.io/pool) at once, none new when more than storm_share of the pool fails; never NoExecute, a cordon or another taint. dry-run only logs and sends Events. docs/kubernetes-quarantine.md.

On --metrics-port (default 9470; 0 = off):
- /metrics: rdmadoctor_check_ok{check}, rdmadoctor_finding{code,severity}, rdmadoctor_check_duration_seconds{check}, rdmadoctor_last_run_timestamp_seconds, rdmadoctor_node_updates_total{target}, rdmadoctor_api_errors_total, rdmadoctor_build_info{version}.
- /healthz: 200 "ok" while the checks keep running (the last cycle finished within 3 intervals + 10 s); 503 and the reason when the last cycle failed or is stuck.

Logs go to stderr: one line at start, then only when the node's status or its problems change, and on errors. SIGTERM or SIGINT stops it within about two seconds, exit 0. With --once: one cycle, then exit 0 healthy, 1 a problem, 2 unknown (or the publish failed).
"""


def register(app) -> None:
    """Add the command(s) of this module to the typer app."""
    from rdmadoctor.cli.options import with_rows

    @app.command("agent", help=AGENT_HELP)
    @with_rows("agent")  # the check options (--root ... --pool, --set, --only, --skip, --timeout): rdmadoctor/options.py
    def agent(
        args,
        publish: str = typer.Option("nfd", "--publish", metavar="nfd|node|stdout", help="Where the labels go: an NFD features file (default, no API access), the Node object, or stdout."),
        features_dir: str = typer.Option(DEFAULT_FEATURES_DIR, "--features-dir", metavar="DIR", help="Where the NFD feature file is written (with --publish nfd): NFD's local features directory, or, as deploy/base does, a staging directory its nfd-relay container copies rdmadoctor's own labels from (the agent then writes no host path)."),
        expiry: int = typer.Option(600, "--expiry", metavar="SECONDS", help="The NFD file's labels expire this long after the last write, so they vanish if the agent stops; keep it several intervals long."),
        node: Optional[str] = typer.Option(None, "--node", metavar="NAME", envvar="NODE_NAME", help="The Node to patch with --publish node (default $NODE_NAME, set it from spec.nodeName with the downward API)."),
        kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", metavar="FILE", help="Kubeconfig for --publish node; default: the in-cluster ServiceAccount."),
        prefix: str = typer.Option("rdmadoctor.io/", "--prefix", metavar="PREFIX", help="Label prefix rdmadoctor owns; with --publish node only labels under it (and network-rdma.capable) are ever touched."),
        conditions: bool = typer.Option(False, "--conditions", help="Also set NodeConditions (RDMALinkProblem, RDMAConfigProblem, GPUDirectRDMAProblem; True = problem) on nodes/status; with --publish stdout, print them as `# condition` lines."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be published instead of writing it."),
        interval: float = typer.Option(60.0, "--interval", metavar="SECONDS", help="Seconds between cycles; each wait is jittered by +-10% so a DaemonSet's pods spread their API calls. The first cycle runs at once."),
        metrics_port: int = typer.Option(9470, "--metrics-port", metavar="PORT", help="Serve /metrics and /healthz on this port; 0 turns the server off."),
        metrics_address: str = typer.Option("0.0.0.0", "--metrics-address", metavar="ADDR", help="Address to serve metrics on (127.0.0.1 keeps them inside the node; :: for IPv6)."),
        report_file: Optional[str] = typer.Option(None, "--report-file", metavar="FILE", help="Write the last report (JSON, schema rdmadoctor.report/v1) here after every cycle, atomically: a reader sees the old or the new report, never a part."),
        log_format: str = typer.Option("text", "--log-format", metavar="text|json", help="Log lines on stderr as text, or as one JSON object a line (ts, level, msg, fields) for log pipelines."),
        quarantine: str = typer.Option("off", "--quarantine", metavar="off|dry-run|taint", help="With --publish node: after quarantine_after problem cycles add the NoSchedule taint rdmadoctor.io/unhealthy=<ROOT_CODE> to this Node, remove it after release_after healthy ones; within the pool's quarantine_budget, never in a storm (storm_share); dry-run only logs and emits Events. See docs/kubernetes-quarantine.md."),
        once: bool = typer.Option(False, "--once", help="Run one cycle (check, publish, report file) and exit with check's codes: 0 healthy, 1 a problem, 2 unknown or the publish failed."),
    ) -> None:
        from rdmadoctor.cli import errors as E
        from rdmadoctor.cli.errors import fail_usage

        # The numbers before anything runs: an interval of inf or 1e-300 is a wait that never ends
        # or a busy loop, an expiry of 1e20 a time stamp no clock has.
        for option, value, low, high, low_open, unit, hint in (
            ("--interval", interval, E.INTERVAL_MIN, E.INTERVAL_MAX, False, "seconds",
             "seconds between cycles, e.g. --interval 60 (the default); at most a day (86400)"),
            ("--expiry", expiry, 0, E.EXPIRY_MAX, True, "seconds",
             "seconds the NFD labels outlive the last write, several intervals: e.g. --expiry 600 (the default); at most a year (31536000)"),
            ("--metrics-port", metrics_port, 0, 65535, False, "",
             "a TCP port, e.g. --metrics-port 9470 (the default); 0 turns /metrics and /healthz off"),
            ("--timeout", args.timeout, 0, E.TOOL_TIMEOUT_MAX, True, "seconds",
             "seconds a tool may run before it is killed, e.g. --timeout 10"),
        ):
            if value is None:
                continue
            bad = E.check_number(option, value, low=low, high=high, low_open=low_open, unit=unit, hint=hint)
            if bad is not None:
                raise typer.Exit(bad)
        if publish not in PUBLISH_MODES:
            raise typer.Exit(fail_usage(f"--publish must be one of {', '.join(PUBLISH_MODES)}, got {publish!r}"))
        if log_format not in LOG_FORMATS:
            raise typer.Exit(fail_usage(f"--log-format must be text or json, got {log_format!r}"))
        given = [x for x in (args.root, args.bundle, args.example) if x]
        if len(given) > 1:
            raise typer.Exit(fail_usage("--root, --bundle and --example are exclusive: give one"))

        from rdmadoctor.agent import run_agent
        from rdmadoctor.runner import UsageError, options_of

        opts = options_of(args, scope="node")
        try:
            code = run_agent(
                opts,
                publish_mode=publish,
                features_dir=features_dir,
                expiry=expiry,
                node=node if node is not None else (os.environ.get("NODE_NAME") or None),
                kubeconfig=kubeconfig,
                prefix=prefix,
                conditions=conditions,
                dry_run=dry_run,
                interval=interval,
                metrics_port=metrics_port,
                metrics_address=metrics_address,
                report_file=report_file,
                log_format=log_format,
                once=once,
                quarantine=quarantine,
            )
        except UsageError as e:
            code = fail_usage(str(e), e.hint)
        raise typer.Exit(code)
