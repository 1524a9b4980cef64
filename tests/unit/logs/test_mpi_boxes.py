"""Open MPI's help messages are read as one message each (issue 30, item 2: never a silent pass, and
never one failure told three times).

Open MPI prints a help message (opal_show_help) between two lines of dashes: "It looks like MPI_INIT
failed for some reason; your parallel process is / likely to abort.  ... This failure appears to be an
internal failure". Read line by line, each failure-shaped line of the prose was a finding of its own
(LOG_ERROR_UNKNOWN for "failed", for "abort", for "failure", for the detail line). A box is one message
(rdmadoctor/logs/scan/errors.py ``_boxed``): one finding at most, quoting the box's headline and its
indented details, and none when a row of the knowledge base knows a line of the box.

Each text is an excerpt of output posted in a public issue (its URL above it), fed to the diagnosis the
way `rdmadoctor diagnose FILE` feeds it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.logs.test_fastpath import _fast, _reference
from tests.unit.logs.test_silent_pass import findings, problems, quoted, report

EDGE = "-" * 74 + "\n"

# https://github.com/geoschem/GCHP/issues/94 (Open MPI's MPI_INIT box, then its MPI_Init_thread banner)
GCHP_94 = (
    EDGE
    + "It looks like MPI_INIT failed for some reason; your parallel process is\n"
    "likely to abort.  There are many reasons that a parallel process can\n"
    "fail during MPI_INIT; some of which are due to configuration or environment\n"
    "problems.  This failure appears to be an internal failure; here's some\n"
    "additional information (which may only be relevant to an Open MPI\n"
    "developer):\n"
    "\n"
    "  ompi_mpi_init: ompi_rte_init failed\n"
    '  --> Returned "(null)" (-43) instead of "Success" (0)\n'
    + EDGE
)
# https://github.com/radical-cybertools/radical.pilot/issues/2980 (a component not found, then MPI_INIT; the
# excerpt starts with the closing edge of a box cut off above it)
RADICAL_2980 = (
    EDGE + EDGE
    + "A requested component was not found, or was unable to be opened.  This\n"
    "means that this component is either not installed or is unable to be\n"
    "used on your system (e.g., sometimes this means that shared libraries\n"
    "that the component requires are unable to be found/loaded).  Note that\n"
    "Open MPI stopped checking at the first component that it did not find.\n"
    "\n"
    "Host:      h32n16\n"
    "Framework: pml\n"
    "Component: pami\n"
    + EDGE + EDGE
    + "It looks like MPI_INIT failed for some reason; your parallel process is\n"
    "likely to abort.  There are many reasons that a parallel process can\n"
    "fail during MPI_INIT; some of which are due to configuration or environment\n"
    "problems.  This failure appears to be an internal failure; here's some\n"
    "additional information (which may only be relevant to an Open MPI\n"
    "developer):\n"
    "\n"
    "  mca_pml_base_open() failed\n"
    '  --> Returned "Not found" (-13) instead of "Success" (0)\n'
    + EDGE
)
# https://github.com/RobotLocomotion/drake/issues/633 (orte_init, then MPI_INIT: details indented by one space)
DRAKE_633 = (
    EDGE
    + "It looks like orte_init failed for some reason; your parallel process is\n"
    "likely to abort.  There are many reasons that a parallel process can\n"
    "fail during orte_init; some of which are due to configuration or\n"
    "environment problems.  This failure appears to be an internal failure;\n"
    "here's some additional information (which may only be relevant to an\n"
    "Open MPI developer):\n"
    "\n"
    " orte_ess_set_name failed\n"
    " --> Returned value A system-required executable either could not be found\n"
    "or was not executable by this user (-127) instead of ORTE_SUCCESS\n"
    + EDGE
)
# https://github.com/MFlowCode/MFC/pull/475 (openib disabled for a port, a known row; then the OFI MTL's fi_domain)
MFC_475 = (
    EDGE
    + "No OpenFabrics connection schemes reported that they were able to be\n"
    "used on a specific port.  As such, the openib BTL (OpenFabrics\n"
    "support) will be disabled for this port.\n"
    "\n"
    "  Local host:           carpenter04\n"
    "  Local device:         mlx5_0\n"
    "  Local port:           1\n"
    "  CPCs attempted:       rdmacm, udcm\n"
    + EDGE + EDGE
    + "Open MPI failed an OFI Libfabric library call (fi_domain).  This is highly\n"
    "unusual; your job may behave unpredictably (and/or abort) after this.\n"
    "\n"
    "  Local host: carpenter04\n"
    "  Location: ../../../../../ompi/mca/mtl/ofi/mtl_ofi_component.c:936\n"
    "  Error: Function not implemented (38)\n"
    + EDGE
    + " Pre-processing a 100x0x0 case on 10 rank(s)\n"
)

UNKNOWN_BOXES = {
    # name: (text, the headline of each box's finding, in order, and the detail each quotes)
    "gchp-94-mpi-init": (GCHP_94, [("It looks like MPI_INIT failed for some reason", "ompi_mpi_init: ompi_rte_init failed")]),
    "radical-2980-component-then-mpi-init": (RADICAL_2980, [
        ("A requested component was not found, or was unable to be opened.", None),
        ("It looks like MPI_INIT failed for some reason", "mca_pml_base_open() failed")]),
    "drake-633-orte-init": (DRAKE_633, [("It looks like orte_init failed for some reason", "orte_ess_set_name failed")]),
}


@pytest.mark.parametrize("name", sorted(UNKNOWN_BOXES))
def test_a_box_no_row_knows_is_one_unknown_error_quoting_its_headline(name: str) -> None:
    """Before, each failure-shaped line of the prose was a finding (GCHP #94's box: "failed", "abort",
    "failure", "ompi_rte_init failed", four LOG_ERROR_UNKNOWN for one message)."""
    text, boxes = UNKNOWN_BOXES[name]
    rep = report(text)
    assert rep["status"] == "fail"
    unknown = [f for f in problems(rep) if f["code"] == "LOG_ERROR_UNKNOWN"]
    assert len(unknown) == len(boxes), [quoted(f) for f in unknown]
    for f, (headline, detail) in zip(unknown, boxes):
        assert headline in f["message"] and quoted(f)[0].startswith(headline), (f["message"], quoted(f))
        assert "Open MPI help message" in f["message"]
        if detail is not None:
            assert any(detail in q for q in quoted(f)[1:]), quoted(f)


def test_the_first_box_heads_the_report() -> None:
    # https://github.com/radical-cybertools/radical.pilot/issues/2980: the missing component is why MPI_INIT failed.
    head = problems(report(RADICAL_2980))[0]
    assert "A requested component was not found" in quoted(head)[0]


# https://github.com/PoonLab/covizu/issues/350 (a box a row knows, with "no route found" in its prose)
COVIZU_350 = (
    "\U0001f3c4 [1:40:16.771589] start MPI on minor lineages\n"
    + EDGE
    + "ORTE was unable to reliably start one or more daemons.\n"
    "This usually is caused by:\n"
    "\n"
    "* not finding the required libraries and/or binaries on\n"
    "  one or more nodes. Please check your PATH and LD_LIBRARY_PATH\n"
    "  settings, or configure OMPI with --enable-orterun-prefix-by-default\n"
    "\n"
    "* an inability to create a connection back to mpirun due to a\n"
    "  lack of common network interfaces and/or no route found between\n"
    "  them. Please check network connectivity (including firewalls\n"
    "  and network routing requirements).\n"
    + EDGE
)
# https://github.com/open-mpi/ompi/issues/1011 (unreachable peers, a row; "going to abort" closes the box)
OMPI_1011 = (
    "[rvandevaart@drossetti-ivy4 dynamic]$ mpirun --mca btl self,sm,tcp -np 2 intercomm_create\n"
    "b: MPI_Intercomm_create( intra, 0, intra, MPI_COMM_NULL, 201, &inter) [rank 2]\n"
    + EDGE
    + "At least one pair of MPI processes are unable to reach each other for\n"
    "MPI communications.  This means that no Open MPI device has indicated\n"
    "that it can be used to communicate between these processes.  This is\n"
    "an error; Open MPI requires that all MPI processes be able to reach\n"
    "each other.  This error can sometimes be the result of forgetting to\n"
    'specify the "self" BTL.\n'
    "\n"
    "  Process 1 ([[49915,2],1]) is on host: drossetti-ivy4\n"
    "  Process 2 ([[49915,3],0]) is on host: drossetti-ivy4\n"
    "  BTLs attempted: tcp self sm\n"
    "\n"
    "Your MPI job is now going to abort; sorry.\n"
    + EDGE
)
# https://github.com/NVIDIA/nccl-tests/issues/218 (mpirun's two boxes at the end of a crashed job)
NCCLTESTS_218 = (
    EDGE
    + "Primary job  terminated normally, but 1 process returned\n"
    "a non-zero exit code. Per user-direction, the job has been aborted.\n"
    + EDGE + EDGE
    + "mpirun noticed that process rank 3 with PID 1167 on node 10.10.21.2 exited on signal 11 (Segmentation fault).\n"
    + EDGE
    + "3 total processes killed (some possibly by mpirun during cleanup)\n"
)

KNOWN_BOXES = {
    "covizu-350-orte-daemons": (COVIZU_350, "MPI_LAUNCH_FAILED"),
    "ompi-1011-unreachable": (OMPI_1011, "MPI_TRANSPORT_FAILED"),
    "nccltests-218-primary-job-then-signal": (NCCLTESTS_218, "PROCESS_CRASHED"),
    # two boxes, each a row's: openib's CPCs, then the OFI MTL's fi_domain (mpi.ompi_ofi_call)
    "mfc-475-fi-domain": (MFC_475, "MPI_TRANSPORT_FAILED"),
}


@pytest.mark.parametrize("name", sorted(KNOWN_BOXES))
def test_a_box_a_row_knows_says_only_what_the_row_says(name: str) -> None:
    """Before, covizu #350's "no route found" and ompi #1011's "going to abort" were unknown errors beside
    the row that explains the box."""
    text, code = KNOWN_BOXES[name]
    rep = report(text)
    assert {f["code"] for f in problems(rep)} == {code}, [(f["code"], quoted(f)) for f in problems(rep)]
    assert "LOG_ERROR_UNKNOWN" not in {f["code"] for f in findings(rep)}


def test_a_box_a_row_knows_quotes_its_details() -> None:
    # https://github.com/MFlowCode/MFC/pull/475: the row knows the box's headline; the box's indented `Error:` line
    # (the errno) is quoted by that row's finding, not an unknown error of its own.
    f = next(f for f in problems(report(MFC_475)) if f["subject"] == "mtl ofi fi_domain")
    assert f["code"] == "MPI_TRANSPORT_FAILED" and quoted(f)[0].startswith("Open MPI failed an OFI Libfabric library call")
    assert any("Error: Function not implemented (38)" in q for q in quoted(f)[1:]), quoted(f)


# ---- healthy: a warning box, the job ran --------------------------------------------------------------

HEALTHY_BOXES = {
    # https://github.com/open-mpi/ompi/issues/11063 (no active port for openib; UCX ran hello_c)
    "ompi-11063-no-active-ports": (
        "[nscc-gz@centos203 examples]$ mpirun  -np 4 -mca pml ucx -mca btl_openib_if_exclude mlx5_0  ./hello_c\n"
        + EDGE
        + "WARNING: There is at least non-excluded one OpenFabrics device found,\n"
        "but there are no active ports detected (or Open MPI was unable to use\n"
        "them).  This is most certainly not what you wanted.  Check your\n"
        "cables, subnet manager configuration, etc.  The openib BTL will be\n"
        "ignored for this job.\n"
        "\n"
        "  Local host: centos203\n"
        + EDGE
        + "Hello, world, I am 1 of 4, (Open MPI v4.1.2, package: Open MPI nscc-gz@centos203 Distribution, ident: 4.1.2, "
        "repo rev: v4.1.2, Nov 24, 2021, 112)\n"),
    # https://github.com/underworldcode/underworld2/issues/223 (the fork() warning; its maintainers: safe to ignore)
    "underworld2-223-fork": (
        EDGE
        + "An MPI process has executed an operation involving a call to the\n"
        '"fork()" system call to create a child process.  Open MPI is currently\n'
        "operating in a condition that could result in memory corruption or\n"
        "other system errors; your MPI job may hang, crash, or produce silent\n"
        "data corruption.  The use of fork() (or system() or other calls that\n"
        "create child processes) is strongly discouraged.  \n"
        "\n"
        "The process that invoked fork was:\n"
        "\n"
        "  Local host:          raijin3 (PID 6981)\n"
        "  MPI_COMM_WORLD rank: 0\n"
        "\n"
        "If you are *absolutely sure* that your application will successfully\n"
        "and correctly survive a call to fork(), you may disable this warning\n"
        "by setting the mpi_warn_on_fork MCA parameter to 0.\n"
        + EDGE),
}


@pytest.mark.parametrize("name", sorted(HEALTHY_BOXES))
def test_a_warning_box_of_a_job_that_ran_is_no_error(name: str) -> None:
    rep = report(HEALTHY_BOXES[name])
    assert "LOG_ERROR_UNKNOWN" not in {f["code"] for f in findings(rep)}
    assert not [f for f in problems(rep) if f["severity"] == "error"]


# ---- the box's bounds ----------------------------------------------------------------------------------


def test_a_row_known_after_a_failure_line_takes_the_box() -> None:
    # The order of ompi #1011's box turned round (made for this test: no public box was found whose known line
    # comes after a failure-shaped one): the unknown finding made at "abort" is taken back by the row after it.
    lines = OMPI_1011.splitlines(keepends=True)
    box = [lines[2], lines[-2]] + lines[3:-2] + [lines[-1]]
    rep = report("".join(box))
    assert [f["code"] for f in problems(rep)] == ["MPI_TRANSPORT_FAILED"]


def test_a_line_of_dashes_never_closed_is_no_box() -> None:
    # A line of dashes of another program (a table's rule, a banner) opens no box that swallows what follows:
    # after MAX_BOX_LINES lines each failure-shaped line is a finding of its own again.
    from rdmadoctor.logs.scan.errors import MAX_BOX_LINES

    # (two failures apart: adjacent lines would be one cascade, errors._MESSAGES)
    text = EDGE + "epoch 1 done\n" * (MAX_BOX_LINES + 5) + "cannot create cq\n" + "epoch 2 done\n" * 3 + "FATAL: rank 3 aborted\n"
    unknown = [f for f in problems(report(text)) if f["code"] == "LOG_ERROR_UNKNOWN"]
    assert len(unknown) == 2, [quoted(f) for f in unknown]


def test_tag_output_and_tabs_frame_a_box_too() -> None:
    # mpirun --tag-output puts `[1,0]<stderr>:` before every line, the box's edges too; a ticket may indent
    # the whole box by a tab (https://github.com/RadioAstronomySoftwareGroup/pyuvsim/issues/73 did).
    tagged = "".join(f"[1,0]<stderr>:{line}" for line in GCHP_94.splitlines(keepends=True))
    tabbed = "".join(f"\t{line}" for line in GCHP_94.splitlines(keepends=True))
    for text in (tagged, tabbed):
        unknown = [f for f in problems(report(text)) if f["code"] == "LOG_ERROR_UNKNOWN"]
        assert len(unknown) == 1 and "It looks like MPI_INIT failed" in quoted(unknown[0])[0], [quoted(f) for f in unknown]


@pytest.mark.parametrize("name", sorted(UNKNOWN_BOXES) + sorted(KNOWN_BOXES))
def test_a_box_reads_the_same_in_any_chunking(name: str, monkeypatch) -> None:
    text = (UNKNOWN_BOXES.get(name) or KNOWN_BOXES[name])[0].encode()
    reference = _reference(text, monkeypatch)
    assert _fast(text, 1 << 20) == reference
    assert _fast(text, 97) == reference


# ---- other messages of several lines: an MPI library's banner, MPICH's error stack -----------------------

SILENT = Path(__file__).resolve().parents[2] / "fixtures" / "silent"


def _silent(name: str) -> str:
    return (SILENT / name).read_text().split("\n# ---\n", 1)[1]


STACKS = {
    # name: (the code of the message's one finding, its first line, the lines after it it quotes)
    # https://github.com/cmbant/CosmoMC/issues/21: Cray MPICH run with mpirun outside srun; "PMI2 init failed" names the
    # layer, so the stack is a launch failure (MPI_LAUNCH_FAILED), not the generic banner's MPI_TRANSPORT_FAILED
    # (three LOG_ERROR_UNKNOWN before silent; the banner's row and two of them after stacks)
    "craympich-cosmomc-21-pmi2-init.txt": ("MPI_LAUNCH_FAILED", "Fatal error in MPI_Init: Other MPI error, error stack:",
                                           ("channel initialization failed", "PMI2 init failed: 1")),
    # https://github.com/sxs-collaboration/spectre/issues/5935: a banner no row knows ("Unknown error class"), its
    # bottom frame an OFI call a row knows: that row's finding, quoting the banner
    "mpich-spectre-5935-ofi-endpoint-open.txt": ("MPI_TRANSPORT_FAILED",
                                                 "Fatal error in PMPI_Init: Unknown error class, error stack:",
                                                 ("OFI endpoint open failed",)),
    # https://github.com/pmodels/mpich/issues/7417: MPICH over UCX, the generic banner's row quoting the frames no row
    # knows, the bottom one (the UCX address exchange) kept
    "mpich-7417-ucx-addr-exchange-stack.txt": ("MPI_TRANSPORT_FAILED",
                                               "Fatal error in internal_Init_thread: Other MPI error, error stack:",
                                               ("ucx function returned with failed status",)),
    # https://github.com/rouyang2017/SISSO/issues/64: the generic banner, its frames empty
    "intelmpi-sisso-64-init-stack-empty.txt": ("MPI_TRANSPORT_FAILED",
                                               "Fatal error in PMPI_Init: Other MPI error, error stack:", ()),
    # https://github.com/bayesiancook/pbmpi/issues/11: Open MPI's MPI_ERRORS_ARE_FATAL banner ("error", then "abort"),
    # no row knows it: one LOG_ERROR_UNKNOWN
    "ompi-pbmpi-11-pmix-not-initialized.txt": ("LOG_ERROR_UNKNOWN", "*** An error occurred in MPI_Init",
                                               ("*** MPI_ERRORS_ARE_FATAL",)),
}


@pytest.mark.parametrize("name", sorted(STACKS))
def test_a_banner_or_an_error_stack_is_one_message(name: str) -> None:
    """Each failure-shaped line of the message was a finding of its own. The message is one: the finding of the
    row that knows one of its lines (a frame that names the layer before the generic banner), quoting its first
    line and the frames that say what failed, and no LOG_ERROR_UNKNOWN for any of its lines; one LOG_ERROR_UNKNOWN
    when no row knows it."""
    code, first, then = STACKS[name]
    found = problems(report(_silent(name)))
    (f,) = [f for f in found if any(first in q for q in quoted(f))]
    assert f["code"] == code and first in quoted(f)[0], (f["code"], quoted(f))
    assert all(any(t in q for q in quoted(f)[1:]) for t in then), quoted(f)
    assert not [g for g in found if g is not f and any(t in q for t in (first, *then) for q in quoted(g))]
    lines = _silent(name).splitlines()
    start = next(i for i, line in enumerate(lines) if first in line)
    stack = [line for line in lines[start + 1:] if re.match(r"(?:\w+|\(unknown\))\(\d*\)\.*:|\*\*\*", line)]
    assert not [g for g in found if g["code"] == "LOG_ERROR_UNKNOWN" and g is not f
                and any(q in stack for q in quoted(g))], [quoted(g) for g in found]


def test_a_pmi_frame_makes_mpichs_stack_a_launch_failure() -> None:
    # https://github.com/cmbant/CosmoMC/issues/21: `mpirun -np 1 ./cosmomc` on a Cori login node; Cray MPICH needs srun.
    rep = report(_silent("craympich-cosmomc-21-pmi2-init.txt"))
    (f,) = problems(rep)
    assert (f["code"], f["subject"], f["data"]["pattern"]) == ("MPI_LAUNCH_FAILED", "PMI", "mpi.mpich_pmi_init")
    assert "srun" in f["remedy"] and "PMI2 init failed" in f["message"]


def test_a_ucx_error_before_mpichs_stack_is_its_root() -> None:
    # https://github.com/pmodels/mpich/issues/7417: UCX's own ERROR line (no row knows it) is a message of its own,
    # printed first; the MPI stack (the generic banner's row, a symptom) follows from it.
    found = problems(report(_silent("mpich-7417-ucx-addr-exchange-stack.txt")))
    assert found[0]["code"] == "LOG_ERROR_UNKNOWN" and "failed to unpack address" in quoted(found[0])[0]
    assert not found[0].get("cause"), found[0]
    mpi = next(f for f in found if f["code"] == "MPI_TRANSPORT_FAILED")
    assert mpi["cause"] == "LOG_ERROR_UNKNOWN" and mpi["data"]["follows"]["line"] == 1, mpi["data"]


def test_each_process_prints_its_own_banner() -> None:
    # https://github.com/open-mpi/ompi/issues/3573 (two ranks' MPI_Barrier banners; the second rank's lines here are the
    # first's with its host, interleaved the way two processes' stderr meet): one finding for the failure both
    # report, quoting each rank's first line and the first rank's "abort" line.
    text = ("[opusgpu34-wbu2:20880] *** An error occurred in MPI_Barrier\n"
            "[opusgpu25-wbu2:23686] *** An error occurred in MPI_Barrier\n"
            "[opusgpu34-wbu2:20880] *** reported by process [1215758337,1]\n"
            "[opusgpu34-wbu2:20880] *** on communicator MPI_COMM_WORLD\n"
            "[opusgpu34-wbu2:20880] *** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n")
    unknown = [f for f in problems(report(text)) if f["code"] == "LOG_ERROR_UNKNOWN"]
    assert len(unknown) == 1, [quoted(f) for f in unknown]
    assert [q.split("]")[0] for q in quoted(unknown[0])] == ["[opusgpu34-wbu2:20880", "[opusgpu25-wbu2:23686",
                                                             "[opusgpu34-wbu2:20880"], quoted(unknown[0])


@pytest.mark.parametrize("name", sorted(p.name for p in SILENT.iterdir()))
def test_a_hunted_text_reads_the_same_in_any_chunking(name: str, monkeypatch) -> None:
    text = _silent(name).encode()
    reference = _reference(text, monkeypatch)
    assert _fast(text, 1 << 20) == reference
    assert _fast(text, 61) == reference
