"""``rdmadoctor fleet``: each node against its pool (rdmadoctor/fleet/ does the work; this only wires)."""

from __future__ import annotations

from typing import List, Optional

import typer

FLEET_HELP = """Compare nodes with their pool: name the nodes whose facts differ from what most of their pool has.

No golden file: for every fingerprint field (HCA firmware, board, rate, width, MTUs, P_Key, subnet prefix, GID index, kernel, drivers, rdma-core, OFED, GPUs, rails, PCIe links) the pool's majority is the expectation, and a node with another value is an outlier, named with the evidence ("fw_ver 28.39.1002 on 3/512 nodes (...); pool majority 28.41.1000 (509 nodes)"). A field with no single most common value is undecided; a pool of one node is not compared. Identity (hostnames, GUIDs, LIDs, addresses) is never compared.

Inputs: PATH is a report (`rdmadoctor check --json`, the agent's --report-file), a bundle (`rdmadoctor collect`: checked here), a folder of either, or - (stdin: one report, JSON lines, or a JSON array); --kube reads the rdmadoctor.io/fingerprint annotation of every Node (the agent in direct mode writes it); --prometheus URL reads rdmadoctor_node_info and rdmadoctor_hca_info.

Each node is counted once: of several reports of one node the newest (by its time) is compared and the others are set aside, with a note; a document that is not a node's report (`diagnose --json` of a log) is skipped with a note. Inputs are read typed and bounded: regular files only, each capped in size, a report with a field of the wrong type named and left out.

--prometheus takes credentials: --bearer-token-file FILE, or --http-config FILE in promtool's --http.config.file format (bearer or basic auth, a CA file, a client certificate).

Pools: the --pool each report was judged with (the agent's --pool); --group-by LABEL groups by a node label instead (the Node's labels with --kube, the metric's labels with --prometheus, the report's labels otherwise).

Exit codes: 0 every node agrees with its pool, 1 drift (an outlier), 2 could not decide (a tied field, an input that could not be read, no pool of two nodes) or a usage error."""


def register(app) -> None:
    from rdmadoctor.cli.options import JsonOpt

    @app.command("fleet", help=FLEET_HELP)
    def fleet(
        paths: Optional[List[str]] = typer.Argument(None, metavar="[PATH ...|-]", show_default=False),
        kube: bool = typer.Option(False, "--kube", help="Read the Nodes' rdmadoctor.io/fingerprint annotations (a paginated list of Nodes, started again twice after an outage)."),
        kubeconfig: Optional[str] = typer.Option(
            None, "--kubeconfig", metavar="FILE",
            help="Kubeconfig for --kube. Default: in-cluster ServiceAccount, then $KUBECONFIG, then ~/.kube/config.",
        ),
        prometheus: Optional[str] = typer.Option(
            None, "--prometheus", metavar="URL", help="Read the info metrics from this Prometheus (http://prometheus:9090) through its HTTP API."
        ),
        http_config: Optional[str] = typer.Option(
            None, "--http-config", metavar="FILE",
            help="Credentials for --prometheus in promtool's --http.config.file format: authorization (bearer credentials or "
                 "credentials_file), basic_auth (username, password or password_file), tls_config (ca_file, cert_file, key_file).",
        ),
        bearer_token_file: Optional[str] = typer.Option(
            None, "--bearer-token-file", metavar="FILE", help="Send this file's token to --prometheus (Authorization: Bearer)."
        ),
        group_by: Optional[str] = typer.Option(None, "--group-by", metavar="LABEL", help="Group nodes by this node label instead of their --pool."),
        as_json: bool = JsonOpt,
    ) -> None:
        raise typer.Exit(
            run_fleet(paths=list(paths or []), kube=kube, kubeconfig=kubeconfig, prometheus=prometheus, group_by=group_by, as_json=as_json,
                      http_config=http_config, bearer_token_file=bearer_token_file)
        )


def run_fleet(
    *,
    paths: list[str],
    kube: bool = False,
    kubeconfig: str | None = None,
    prometheus: str | None = None,
    group_by: str | None = None,
    as_json: bool = False,
    http_config: str | None = None,
    bearer_token_file: str | None = None,
) -> int:
    import json
    import sys

    from rdmadoctor.cli.errors import fail_usage, say
    from rdmadoctor.core.words import count
    from rdmadoctor.fleet import FleetError, read_fleet
    from rdmadoctor.fleet.compare import exit_code, lines

    given = sum(1 for x in (bool(paths), kube, prometheus is not None) if x)
    if given != 1:
        return fail_usage(
            "give the fleet one source: report/bundle paths (or -), --kube, or --prometheus URL",
            "rdmadoctor fleet reports/   |   rdmadoctor fleet --kube   |   rdmadoctor fleet --prometheus http://prometheus:9090",
        )
    if group_by is not None and not group_by.strip():
        return fail_usage("--group-by needs a label name", "e.g. --group-by node.kubernetes.io/instance-type")
    if (http_config is not None or bearer_token_file is not None) and prometheus is None:
        return fail_usage("--http-config and --bearer-token-file are the credentials of --prometheus", "add --prometheus URL")
    if prometheus is not None and not prometheus.startswith(("http://", "https://")):
        return fail_usage(f"--prometheus must be an http:// or https:// URL, got {prometheus!r}", "e.g. --prometheus http://prometheus:9090")
    try:
        result = read_fleet(paths=paths, kube=kube, kubeconfig=kubeconfig, prometheus=prometheus, group_by=group_by,
                            http_config=http_config, bearer_token_file=bearer_token_file)
    except FleetError as e:
        from rdmadoctor.core.words import printable

        say(f"rdmadoctor: error: {printable(e.message, 2000)}")
        if e.hint:
            say(f"  hint: {printable(e.hint, 2000)}")
        return 2
    code = exit_code(result)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
    else:
        for line in lines(result):
            sys.stdout.write(line + "\n")
        verdict = {0: "no drift", 1: "drift", 2: "could not decide"}[code]
        nodes = count(sum(p["nodes"] for p in result["pools"]), "node")
        sys.stdout.write(f"fleet: {verdict} ({nodes} in {count(len(result['pools']), 'pool')})\n")
    return code
