"""``rdmadoctor label``: run the checks once and publish the node labels (NFD file, Node, stdout)."""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from rdmadoctor.cli.errors import say
from rdmadoctor.publish.base import DEFAULT_FEATURES_DIR

PUBLISH_HELP = (
    "Where the labels go. nfd (default): write the NFD local feature file <features-dir>/rdmadoctor; "
    "nfd-worker turns it into node labels, no API access needed. node: merge-patch the Node object "
    "(needs lightkube: pip install 'rdmadoctor\\[k8s]', and RBAC get/patch on nodes). "
    "stdout: print key=value lines."
)
FEATURES_DIR_HELP = (
    "NFD's features.d directory, as mounted in this container (hostPath, writable). "
    f"Default: {DEFAULT_FEATURES_DIR}"
)
EXPIRY_HELP = (
    "Seconds the NFD labels stay valid (written as '# +expiry-time=' in the file): if rdmadoctor "
    "stops, NFD drops them after this. Keep it a few agent intervals long."
)
EXPIRY_HINT = "seconds, a few agent intervals long: e.g. --expiry 600 (the default); at most a year (31536000)"
NODE_HELP = "Node to patch with --publish node / --conditions. Default: $NODE_NAME (downward API spec.nodeName)."
KUBECONFIG_HELP = "Kubeconfig for --publish node / --conditions. Default: in-cluster ServiceAccount, then $KUBECONFIG, then ~/.kube/config."
PREFIX_HELP = (
    "Label prefix for rdmadoctor's own labels (feature.node.kubernetes.io/network-rdma.capable keeps its name). "
    "nfd-master >= v0.13 accepts rdmadoctor.io/ as is; nfd-master <= v0.12, or one whose -deny-label-ns covers it, "
    "needs -extra-label-ns=rdmadoctor.io, or use --prefix rdmadoctor.feature.node.kubernetes.io/ which every NFD accepts."
)
CONDITIONS_HELP = (
    "Also set NodeConditions on nodes/status, True = problem: RDMALinkProblem, RDMAConfigProblem, "
    "GPUDirectRDMAProblem (written on change, heartbeat every 5 minutes). Needs API access (RBAC patch nodes/status). "
    "With --publish stdout: printed after the labels as '# condition TYPE=STATUS reason=...' lines."
)
DRY_RUN_HELP = "Print what would be written (the file, or the patch and labels) and write nothing."


def register(app) -> None:
    """Add the command(s) of this module to the typer app."""
    from rdmadoctor.cli.options import with_rows

    @app.command(
        "label",
        help=(
            # The first paragraph is the line in `rdmadoctor --help`'s command list: short.
            "Run the checks once and publish the node labels (an NFD feature file, the Node, or stdout).\n\n"
            "The labels: feature.node.kubernetes.io/network-rdma.capable and rdmadoctor.io/{ready,link-layer,"
            "active-ports,min-rate-gbps,gpudirect,gpu-nic}. Labels are published whether or not the "
            "node is healthy (ready=false is a label too). Writes only on change. "
            "Judges the node only, like `check --scope node`: the checks of this process itself "
            "(memlock, IPC_LOCK, /dev/shm, userspace, NCCL env) belong to `rdmadoctor preflight` in the job's pods. "
            "Exit codes as `check` (the labels published, or nothing to change): 0 healthy, 1 a problem "
            "(ready=false is published), 2 unknown; 2 also when the publish failed or on a usage error."
        ),
    )
    @with_rows("label")  # the check options (--root ... --pool, --set, --only, --skip, --timeout): rdmadoctor/options.py
    def label(
        args,
        publish: str = typer.Option("nfd", "--publish", metavar="nfd|node|stdout", help=PUBLISH_HELP),
        features_dir: str = typer.Option(DEFAULT_FEATURES_DIR, "--features-dir", metavar="DIR", help=FEATURES_DIR_HELP, show_default=False),
        expiry: float = typer.Option(600, "--expiry", metavar="SECONDS", help=EXPIRY_HELP),
        node: Optional[str] = typer.Option(None, "--node", metavar="NAME", help=NODE_HELP),
        kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", metavar="FILE", help=KUBECONFIG_HELP),
        prefix: str = typer.Option("rdmadoctor.io/", "--prefix", metavar="DOMAIN/", help=PREFIX_HELP),
        conditions: bool = typer.Option(False, "--conditions", help=CONDITIONS_HELP),
        dry_run: bool = typer.Option(False, "--dry-run", help=DRY_RUN_HELP),
    ) -> None:
        raise typer.Exit(
            run_label(
                args=args, publish=publish, features_dir=features_dir, expiry=expiry, node=node,
                kubeconfig=kubeconfig, prefix=prefix, conditions=conditions, dry_run=dry_run,
            )
        )


def run_label(
    *,
    args: Any = None,
    publish: str = "nfd",
    features_dir: str | None = None,
    expiry: float = 600,
    node: str | None = None,
    kubeconfig: str | None = None,
    prefix: str = "rdmadoctor.io/",
    conditions: bool = False,
    dry_run: bool = False,
) -> int:
    """``label`` for ``args`` (its check options, an :class:`rdmadoctor.options.Args`; default: all
    at their defaults) and its own options."""
    from rdmadoctor.cli.errors import EXPIRY_MAX, TOOL_TIMEOUT_MAX, check_number, fail_usage
    from rdmadoctor.cli.options import Args
    from rdmadoctor.publish import PublishConfigError, PublishError, make_publisher
    from rdmadoctor.runner import UsageError, diagnose, options_of

    args = Args() if args is None else args
    # Options first: a wrong flag should not cost a whole diagnosis.
    bad = check_number("--expiry", expiry, low=0, high=EXPIRY_MAX, hint=EXPIRY_HINT)
    if bad is None and args.timeout is not None:
        bad = check_number("--timeout", args.timeout, low=0, high=TOOL_TIMEOUT_MAX, low_open=True, unit="seconds",
                           hint="seconds a tool may run before it is killed, e.g. --timeout 10")
    if bad is not None:
        return bad
    try:
        pub = make_publisher(
            publish, features_dir=DEFAULT_FEATURES_DIR if features_dir is None else features_dir, expiry=expiry, node=node,
            kubeconfig=kubeconfig, prefix=prefix, conditions=conditions, dry_run=dry_run, out=sys.stdout,
        )
    except PublishConfigError as e:
        return fail_usage(e.message, e.hint)
    try:
        try:
            diag = diagnose(options_of(args, scope="node"))
        except UsageError as e:
            return fail_usage(str(e), e.hint)
        report = diag.report
        if not report.get("labels"):
            # Every run that judged something computes ready=true|false at least: none at all means
            # something upstream broke, and an empty set would take every label off the node.
            sys.stderr.write(
                "rdmadoctor: label: not publishing: the report has no labels (no check could run); "
                "an empty set would remove the node's labels. Run `rdmadoctor check --scope node` to see why\n"
            )
            return 2
        try:
            written = pub.publish(report)
        except PublishConfigError as e:
            return fail_usage(e.message, e.hint)
        except PublishError as e:
            # Whether the node's labels now say what the report says is unknown: 2, as `agent --once`.
            say(f"rdmadoctor: label: publishing failed: {e.message}")
            return 2
        for note in getattr(pub, "problems", ()) or ():
            say(f"rdmadoctor: label: note: {note}")
        what = pub.summary or (", ".join(written) if written else "nothing to change")
        say(f"rdmadoctor: label: {what} (node status: {report.get('status')})")
        return int(report.get("exit_code", 2))
    finally:
        pub.close()
