"""Never a silent pass, over the whole corpus (issue 30, item 2, "Done when": the no-silent-pass test runs
over the whole corpus).

Every failing text the project holds is gathered here from where it lives and diagnosed the way
`rdmadoctor diagnose FILE` diagnoses it; none may read as clean ("pass") or as nothing to judge
("unknown", LOGS_NOTHING_TO_JUDGE): each gets at least one error or warning. The texts:

- tests/fixtures/logs/ (tests/logs_expected.py): the rows a reader named a problem in;
- tests/fixtures/frames/ (tests/unit/logs/test_frames.py): the rows that must report a problem code;
- tests/fixtures/silent/ (this file's SILENT table): texts hunted for issue 30 from public issues, each
  with its source in its header; the healthy ones among them must raise no error;
- the failing texts written into tests/unit/logs/test_silent_pass.py, test_mpi_boxes.py and
  test_diagnose_corpus.py (FAILURE_SHAPES);
- ../shared/realworld/gpu-h200/: the logs of a real H200 machine (REALWORLD; skipped where the shared
  folder is absent, as in a fresh clone).

A fixture file that no table classifies fails ``test_every_fixture_is_classified``: a text cannot join the
corpus without saying whether it fails.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from diagnosed import PROBLEM, report

from tests.logs_expected import EXPECTED as LOGS_EXPECTED
from tests.logs_expected import HEADER_END
from tests.logs_expected import body as log_body
from tests.unit.logs import test_diagnose_corpus, test_frames, test_mpi_boxes, test_silent_pass
from tests.unit.logs.test_silent_pass import findings

ROOT = Path(__file__).resolve().parents[3]
SILENT_DIR = ROOT / "tests" / "fixtures" / "silent"
FRAMES_DIR = ROOT / "tests" / "fixtures" / "frames"
LOGS_DIR = ROOT / "tests" / "fixtures" / "logs"
REALWORLD_DIR = ROOT.parent / "shared" / "realworld" / "gpu-h200"

# tests/fixtures/silent/: file -> what a correct diagnosis says (written by reading the text, with its
# source in the file's header): "codes" it must report, or "healthy" (no error at all), "absent" codes.
# Each failing one was checked before the fix it came with; where no fix was needed the row holds what it reads.
SILENT: dict[str, dict] = {
    # Intel MPI and MPICH: a fatal error in PMPI_Init and its error stack
    # (a stack is one message: MPICH's generic banner is MPI_TRANSPORT_FAILED, a frame a row knows decides the code)
    "intelmpi-sisso-64-init-stack-empty.txt": {"codes": {"MPI_TRANSPORT_FAILED"}, "absent": {"LOG_ERROR_UNKNOWN"}},
    "intelmpi-smilei-819-ofi-init-hook.txt": {"codes": {"LOG_ERROR_UNKNOWN"}},
    "intelmpi-soca-682-ctest-ofi-addrinfo.txt": {"codes": {"MPI_TRANSPORT_FAILED"}},
    "intelmpi-pcluster-1695-av-map.txt": {"codes": {"MPI_TRANSPORT_FAILED"}},
    "mpich-spectre-5935-ofi-endpoint-open.txt": {"codes": {"MPI_TRANSPORT_FAILED"}},
    "craympich-cosmomc-21-pmi2-init.txt": {"codes": {"MPI_LAUNCH_FAILED"},
                                           "absent": {"MPI_TRANSPORT_FAILED", "LOG_ERROR_UNKNOWN"}},
    "mpich-7417-ucx-addr-exchange-stack.txt": {"codes": {"LOG_ERROR_UNKNOWN", "MPI_TRANSPORT_FAILED"}},
    "ompi-7768-ucx-thread-multiple-pml-box.txt": {"codes": {"MPI_TRANSPORT_FAILED", "LOG_ERROR_UNKNOWN"}},
    # Open MPI: PMIx, PSM2
    "ompi-pbmpi-11-pmix-not-initialized.txt": {"codes": {"LOG_ERROR_UNKNOWN"}},
    "ompi-10601-psm2-hfi-unit.txt": {"codes": {"MPI_TRANSPORT_FAILED"}},
    # UCX over verbs
    "ucx-spectre-3886-reg-mr-eagain.txt": {"codes": {"UCX_IB_RESOURCE_FAILED"}},
    "ucx-7978-devx-qp-enomem.txt": {"codes": {"UCX_IB_RESOURCE_FAILED", "MPI_TRANSPORT_FAILED"},
                                    "absent": {"LOG_ERROR_UNKNOWN"}},
    # verbs programs: perftest and a tutorial's server
    "perftest-139-irdma-create-qp-inline.txt": {"codes": {"VERBS_RESOURCE_FAILED"}, "absent": {"LOG_ERROR_UNKNOWN"}},
    "perftest-softiwarp-23-allocate-mr-segv.txt": {"codes": {"LOG_ERROR_UNKNOWN"}},
    "verbs-rdmatutorial-6-create-qp-enomem.txt": {"codes": {"LOG_ERROR_UNKNOWN"}},
    # healthy
    "perftest-132-write-bw-healthy.txt": {"healthy": True},
    "ucx-8851-info-two-rails-healthy.txt": {"healthy": True},
    "ucx-7245-osu-bibw-healthy.txt": {"healthy": True},
    "ompi-nccl-65-fork-warning-test-passed.txt": {"healthy": True},
}

# ../shared/realworld/gpu-h200/ (its README says what each log shows): True where the job failed.
REALWORLD = {
    "nccl_dup_gpu.log": True,  # two ranks on one GPU
    "nccl_ifname_bad.log": True,  # NCCL_SOCKET_IFNAME naming no interface
    "nccl_warn_only.log": True,  # the same at NCCL_DEBUG=WARN
    "nccl_net_ib_forced.log": True,  # NCCL_NET=IB without an HCA
    "nccl_torchrun2.log": True,  # torchrun ended by SIGTERM, its workers hung
    "nccl_ib_hca_none.log": False,  # one host on sockets: nothing crosses a network
    "nccl_ib_disable.log": False,  # NCCL_IB_DISABLE=1 on one host: said, and no failure
    "nccl_run.txt": False,  # one rank, one all-reduce
}


def _kinds() -> dict[str, str]:
    return test_diagnose_corpus._kinds()


def _silent_body(name: str) -> bytes:
    data = (SILENT_DIR / name).read_bytes()
    head, sep, rest = data.partition(HEADER_END)
    assert sep and head.startswith(b"# source: https://"), name
    return rest


def _failing_texts() -> list[tuple[str, object]]:
    """(id, a function giving the text's bytes) for every failing text of the corpus."""
    kinds = _kinds()
    out: list[tuple[str, object]] = []
    for row in LOGS_EXPECTED:
        if test_diagnose_corpus.failing(row):
            out.append((f"logs/{row['file']}", lambda n=row["file"]: log_body(n)))
    for name, row in sorted(test_frames.EXPECTED.items()):
        if not row.get("healthy") and any(kinds.get(c) == "problem" for c in row.get("codes") or ()):
            out.append((f"frames/{name}", lambda n=name: test_frames.body(n)))
    for name, row in sorted(SILENT.items()):
        if not row.get("healthy"):
            out.append((f"silent/{name}", lambda n=name: _silent_body(n)))
    for name, (text, _first) in sorted(test_silent_pass.FAILING.items()):
        out.append((f"test_silent_pass/{name}", lambda t=text: t.encode()))
    for name, (text, _boxes) in sorted(test_mpi_boxes.UNKNOWN_BOXES.items()):
        out.append((f"test_mpi_boxes/{name}", lambda t=text: t.encode()))
    for name, (text, _code) in sorted(test_mpi_boxes.KNOWN_BOXES.items()):
        out.append((f"test_mpi_boxes/{name}", lambda t=text: t.encode()))
    for i, line in enumerate(test_diagnose_corpus.FAILURE_SHAPES):
        out.append((f"failure_shapes/{i}", lambda t=line: f"{t}\n".encode()))
    for name, failed in sorted(REALWORLD.items()):
        if failed:
            out.append((f"realworld/{name}", lambda n=name: _realworld(n)))
    return out


def _realworld(name: str) -> bytes:
    if not (REALWORLD_DIR / name).is_file():
        pytest.skip(f"{REALWORLD_DIR} is absent (a fresh clone)")
    return (REALWORLD_DIR / name).read_bytes()


FAILING = _failing_texts()


def test_the_corpus_is_whole() -> None:
    names = [n for n, _ in FAILING]
    assert len(names) == len(set(names))
    for source in ("logs/", "frames/", "silent/", "test_silent_pass/", "test_mpi_boxes/", "failure_shapes/", "realworld/"):
        assert any(n.startswith(source) for n in names), source
    assert len(names) >= 100


@pytest.mark.parametrize("name", [n for n, _ in FAILING])
def test_no_failing_text_of_the_corpus_passes(name: str) -> None:
    """A failing text gets at least one error or warning (not LOGS_NOTHING_TO_JUDGE), and its report neither
    passes nor says it could not decide."""
    data = dict(FAILING)[name]()  # type: ignore[operator]
    rep = report(data, name=name.rsplit("/", 1)[-1])
    got = [(f["code"], f["severity"]) for f in findings(rep)]
    problems = [c for c, s in got if s in PROBLEM and c != "LOGS_NOTHING_TO_JUDGE"]
    assert problems, f"a failing text read as {rep['status']}: {got}"
    assert rep["status"] in ("fail", "warn"), (rep["status"], got)


@pytest.mark.parametrize("name", sorted(n for n, r in SILENT.items() if r.get("healthy")))
def test_a_healthy_hunted_text_raises_no_error(name: str) -> None:
    rep = report(_silent_body(name), name=name)
    errors = [(f["code"], f["subject"]) for f in findings(rep) if f["severity"] == "error"]
    assert not errors, errors
    assert not set(SILENT[name].get("absent") or ()) & {f["code"] for f in findings(rep)}


@pytest.mark.parametrize("name", sorted(n for n, r in SILENT.items() if r.get("codes")))
def test_a_hunted_text_reports_what_its_reader_saw(name: str) -> None:
    rep = report(_silent_body(name), name=name)
    got = {f["code"] for f in findings(rep)}
    assert set(SILENT[name]["codes"]) <= got, (sorted(SILENT[name]["codes"]), sorted(got))
    assert not set(SILENT[name].get("absent") or ()) & got, sorted(got)


@pytest.mark.parametrize("name", [n for n, failed in sorted(REALWORLD.items()) if not failed])
def test_a_healthy_realworld_log_raises_no_error(name: str) -> None:
    rep = report(_realworld(name), name=name)
    assert not [f for f in findings(rep) if f["severity"] == "error"], [(f["code"], f["severity"]) for f in findings(rep)]


def test_every_fixture_is_classified() -> None:
    """Each text in a corpus folder is in its folder's table (failing or not): none is left out of this test."""
    assert {p.name for p in LOGS_DIR.iterdir()} == {r["file"] for r in LOGS_EXPECTED}
    assert {p.name for p in FRAMES_DIR.iterdir()} == set(test_frames.EXPECTED)
    assert {p.name for p in SILENT_DIR.iterdir()} == set(SILENT)
    if REALWORLD_DIR.is_dir():
        logs = {p.name for p in REALWORLD_DIR.iterdir() if p.name.startswith("nccl_")}
        assert logs == set(REALWORLD), sorted(logs ^ set(REALWORLD))


def test_the_dense_healthy_log_raises_no_error() -> None:
    # ../shared/realworld/gpu-h200/dense_all.log.gz: NCCL_DEBUG_SUBSYS=ALL, 60,000 all-reduces, a healthy run.
    path = REALWORLD_DIR / "dense_all.log.gz"
    if not path.is_file():
        pytest.skip(f"{path} is absent (a fresh clone)")
    with gzip.open(path) as f:
        data = f.read(8 << 20)
    data = data[: data.rfind(b"\n") + 1]
    rep = report(data, name="dense_all.log")
    assert not [f for f in findings(rep) if f["severity"] == "error"], [(f["code"], f["severity"]) for f in findings(rep)]
