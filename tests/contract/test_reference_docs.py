"""The generated reference pages of docs/ (scripts/reference_docs.py) are current, and what they are
generated from is found in the code rather than listed by hand: a new expectation key, metric,
option or command shows up when the pages are regenerated, and a stale page fails here with the
command that regenerates it."""

from __future__ import annotations

import ast
import runpy
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SCRIPT = ROOT / "scripts" / "reference_docs.py"
REGENERATE = ".venv/bin/python scripts/reference_docs.py"


@pytest.fixture(scope="module")
def gen() -> dict:
    return runpy.run_path(str(SCRIPT))


@pytest.fixture(scope="module")
def pages(gen: dict) -> dict[str, str]:
    return gen["pages"]()


@pytest.mark.parametrize("name", ["configuration.md", "metrics.md", "cli.md", "codes.md", "README.md"])
def test_page_is_current(pages: dict[str, str], name: str) -> None:
    path = DOCS / name
    assert path.exists(), f"docs/{name} is missing: {REGENERATE}"
    assert path.read_text(encoding="utf-8") == pages[name], f"docs/{name} is stale: {REGENERATE}"


def test_every_expectation_key_is_documented(pages: dict[str, str]) -> None:
    from rdmadoctor.engine.expectations import PROFILES, SPEC

    text = pages["configuration.md"]
    for key in SPEC:
        assert f"\n### {key}\n" in text, key
    for name in PROFILES:
        assert f"\n### {name}\n" in text, name
    assert "[pools." in text and "--set" in text


def test_readers_are_found_in_the_code(pages: dict[str, str]) -> None:
    """ib.ports reads min_rate_gbps though ib.devices declares it; the quarantine keys are read by
    rdmadoctor.core.quarantine, outside the checks; gang_slow_share is declared outside them."""
    text = pages["configuration.md"]
    section = text.split("\n### min_rate_gbps\n", 1)[1].split("\n### ", 1)[0]
    assert "| Declared by | `ib.devices` |" in section
    assert "`ib.ports`" in section.split("| Read by checks |", 1)[1].split("\n", 1)[0]
    quarantine = text.split("\n### quarantine_after\n", 1)[1].split("\n### ", 1)[0]
    assert "`rdmadoctor.core.quarantine`" in quarantine
    assert "| `gang_slow_share` | number | `0.7` |" in text


def test_every_metric_the_agent_serves_is_documented(pages: dict[str, str]) -> None:
    """Cross-check of the static scan against what the agent's collector really yields."""
    from rdmadoctor.output.metrics import AgentMetrics

    text = pages["metrics.md"]
    families = list(AgentMetrics("0.0.0", targets=("node",)).collect())
    assert families
    for fam in families:
        name = fam.name + ("_total" if fam.type == "counter" else "")
        assert f"\n### {name}\n" in text, name
        assert f"**{fam.type}**" in text.split(f"\n### {name}\n", 1)[1].split("\n### ", 1)[0], name


def test_metric_scan_reads_branches_and_loops(gen: dict) -> None:
    """Families built under an `if`, in a loop over a literal table, with labels from a local name
    and help from a HELP dict: the shapes the exporters use."""
    source = '''
HELP = {"x_on": "on help", "x_a": "a help", "x_b": "b help"}
A = "x_a"

def collect(self, on):
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    labels = ["pool", "code"]
    if on:
        yield GaugeMetricFamily("x_on", HELP["x_on"], labels=labels)
    for name, extra in ((A, ("k",)), ("x_b", ())):
        yield CounterMetricFamily(name, HELP[name], labels=["pool", *extra])
'''
    module = types.ModuleType("scan_example")
    sys.modules["scan_example"] = module
    try:
        exec(compile(source, "scan_example.py", "exec"), module.__dict__)
        found = [(f["name"], f["type"], f["labels"], f["help"]) for f in gen["_families_in"](module, ast.parse(source))]
    finally:
        del sys.modules["scan_example"]
    assert found == [
        ("x_on", "gauge", ("pool", "code"), "on help"),
        ("x_a", "counter", ("pool", "k"), "a help"),
        ("x_b", "counter", ("pool",), "b help"),
    ]


def test_every_command_and_option_is_documented(pages: dict[str, str], gen: dict) -> None:
    text = pages["cli.md"]
    commands = gen["_cli_commands"]()
    assert any(path[1:] == ["slurm", "health"] for path, _ in commands)
    for path, cmd in commands[1:]:
        title = " ".join(path[1:])
        section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
        for p in cmd.params:
            for flag in getattr(p, "opts", ()):
                if flag.startswith("-") and flag != "--help":
                    assert f"`{flag}`" in section, (title, flag)


def test_alert_rules_are_listed(pages: dict[str, str]) -> None:
    import yaml

    text = pages["metrics.md"]
    for path in ("rules.yaml", "fleet-rules.yaml"):
        for group in yaml.safe_load((ROOT / "deploy" / "monitoring" / path).read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    assert f"\n#### {rule['alert']}\n" in text, rule["alert"]
    # Runbooks link the pages here, not a URL pinned to a release (bump-version.sh moves the pin):
    # a version bump leaves the page current.
    assert "/blob/" not in text
    assert "runbook_url: [alerts.md#rdmadoctorstale](alerts.md#rdmadoctorstale)" in text


def test_index_lists_every_page(pages: dict[str, str]) -> None:
    index = pages["README.md"]
    for path in DOCS.glob("*.md"):
        if path.name != "README.md":
            assert f"]({path.name})" in index, path.name
    assert REGENERATE in index


def test_readme_sample_report_is_the_real_output(gen: dict) -> None:
    """README.md's sample report is what `rdmadoctor check --example broken-pod` prints into a pipe,
    character for character: the script renders it as it renders the pages above."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    report = gen["sample_report"]()
    assert report.startswith("FAIL: trainer-7f9c4-0 ") and "SHM_TOO_SMALL" in report
    block = readme.split(gen["SAMPLE_MARK"], 1)[1].split("\n```\n", 1)[1].split("\n```\n", 1)[0] + "\n"
    assert block == report, f"README.md's sample report is stale: {REGENERATE}"
    assert gen["readme"](readme, report) == readme


def test_readme_sample_report_is_replaced_where_it_stands(gen: dict) -> None:
    """The renderer replaces only the fenced block under the marker, and refuses a README without it."""
    text = f"# x\n\n{gen['SAMPLE_MARK']} more -->\n```\nold\nlines\n```\n\nafter\n```\nkept\n```\n"
    assert gen["readme"](text, "new\n") == f"# x\n\n{gen['SAMPLE_MARK']} more -->\n```\nnew\n```\n\nafter\n```\nkept\n```\n"
    with pytest.raises(RuntimeError, match="no fenced block"):
        gen["readme"]("# x\n```\nold\n```\n", "new\n")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown page (lower case, punctuation dropped, spaces to
    hyphens), and its explicit `<a id=...>` ones."""
    import re

    text = path.read_text(encoding="utf-8")
    out = set(re.findall(r'<a id="([^"]+)"', text))
    fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"#{1,6} (.*)", line)):
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_links_between_the_pages_resolve() -> None:
    """Every relative link of the README, CONTRIBUTING.md, deploy/README.md and docs/ names a file
    that exists and, for a page, a heading it has: a section moved out of the README leaves no link
    behind to where it was."""
    import re

    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "deploy" / "README.md", *sorted(DOCS.glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
