"""A known message in an unknown frame (issue 30, item 1): a row's message is found wherever it
stands in a line, and a prefix is context (host, time) when it is there, never a gate.

The texts in tests/fixtures/frames/ were posted in public issues (each file's header names the
issue), copied verbatim as excerpts under the corpus's three-line header (tests/logs_expected.py).
Each is diagnosed the way `rdmadoctor diagnose FILE` diagnoses it, pasted outputs judged by the
same checks. Rows marked healthy are texts that must raise no problem at all.

The frames for which no public text was found (a log viewer's box characters, a `[host:pid=N]`
tag, `grep -r`'s file name and `grep -n`'s context lines before NCCL's prefix, settings in Python)
are held by lines made for the purpose at the end of this file, and say so.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from logs_expected import HEADER_END

from rdmadoctor.host import logs_only_host
from rdmadoctor.logs import Diagnoser, diagnose_bytes, prefix
from rdmadoctor.runner import Options, diagnose

FRAMES = Path(__file__).resolve().parents[2] / "fixtures" / "frames"
PROBLEM = ("error", "warning")

# file -> what a correct diagnosis says: codes it must report, codes it must not, the host and time
# the evidence of a code must carry (from a prefix that is not at the line's start), healthy (no
# problem at all).
EXPECTED: dict[str, dict] = {
    # inside prose or quotes
    "nccl-1129-typographic-quotes.txt": {"codes": {"NCCL_QP_CQ_CREATE_FAILED"}},
    "sichek-44-quoted-bracket-time.txt": {
        "codes": {"NCCL_IB_COMPLETION_ERROR"}, "root": "NCCL_IB_COMPLETION_ERROR",
        "where": {"NCCL_IB_COMPLETION_ERROR": ("test-ys-512-scaling-test-0104-1504-a7de2925-master-0", "2026-01-04 21:33:04")}},
    "nccl-2013-ibv-quoted-anonymized.txt": {
        "codes": {"NCCL_IB_MODIFY_QP_FAILED"}, "subjects": {"NCCL_IB_MODIFY_QP_FAILED": ["mlx_x:1", "ibv_modify_qp"]},
        "where_subject": {"mlx_x:1": ("host-01.example.com", "2026-03-13 22:26:02")}},
    "nccl-925-ibv-title.txt": {"codes": {"NCCL_IB_MODIFY_QP_FAILED"}},
    "nccl-342-shm-colon.txt": {"codes": {"NCCL_SHM_FAILED"}},
    "nccl-1170-title-paraphrase.txt": {"codes": {"NCCL_IB_COMPLETION_ERROR"},
                                       "subjects": {"NCCL_IB_COMPLETION_ERROR": ["IBV_WC_RETRY_EXC_ERR"]}},
    "kubernetes-91892-warn-in-sentence.txt": {"codes": {"VERBS_LIB_MISSING"}},
    # after a site's own prefix
    "ray-11675-actor-prefix.txt": {"codes": {"NCCL_REG_MR_FAILED"},
                                   "where": {"NCCL_REG_MR_FAILED": ("ray-default-worker-5ee698a00", None)}},
    "ray-40850-raytrainworker.txt": {"healthy": True, "absent": {"NCCL_GDR_DISABLED"}},
    "fastsafetensors-36-nested-ray-healthy.txt": {"healthy": True},
    "alpa-506-gpuhost-actor-healthy.txt": {"healthy": True},
    "nccl-1591-vllm-ray-first-lines-healthy.txt": {"healthy": True},
    # colour codes whose ESC the copy lost, a host replaced by "[pod-name]" (no host, not its pid as one)
    "vllm-2734-ray-colour-codes.txt": {"codes": {"NCCL_IB_NO_DEVICE"}, "where": {"NCCL_IB_NO_DEVICE": (None, None)},
                                       "hosts": []},
    # vLLM's logger prefix around a traceback's lines: the traceback is read (not each line an error), and
    # the string its code quotes is no message
    "nccl-1657-vllm-logger-prefix.txt": {"codes": {"NCCL_SYSTEM_ERROR"}, "root": "NCCL_SYSTEM_ERROR",
                                         "absent": {"LOG_ERROR_UNKNOWN"}},
    "nccl-1837-torchx-role-prefix.txt": {
        "codes": {"NCCL_BOOTSTRAP_FAILED"}, "where": {"NCCL_BOOTSTRAP_FAILED": ("twshared1016", None)},
        "setting": {"NCCL_BOOTSTRAP_FAILED": ("NCCL_SOCKET_IFNAME", "eth2", 1)}},
    # settings written in a shell
    "ray-44533-prompt-export.txt": {"codes": {"NCCL_IB_DISABLED_BY_ENV"}},
    "horovod-1097-shell-ib-enabled.txt": {"healthy": True, "absent": {"NCCL_IB_DISABLED_BY_ENV"}},
    # ... and in a markdown list, a Slurm script, a YAML config, a pod spec's two-line entry, a diff
    "pytorch-29482-bullet-setting.txt": {"codes": {"NCCL_NO_SOCKET_INTERFACE"},
                                         "setting": {"NCCL_NO_SOCKET_INTERFACE": ("NCCL_SOCKET_IFNAME", "eth0", 3)}},
    "pytorch-111424-slurm-exports.txt": {
        "codes": {"NCCL_IB_NO_DEVICE"}, "absent": {"NCCL_IB_DISABLED_BY_ENV"}, "setting": {"NCCL_IB_NO_DEVICE": None},
        "settings": {"NCCL_SOCKET_IFNAME": ("^lo,docker,virbr,vmnet,vboxnet,wl,ww,ppp,eth,bond", 10)}},
    "marin-6940-yaml-task-env.txt": {"codes": {"NCCL_NO_SOCKET_INTERFACE"},
                                     "settings": {"NCCL_SOCKET_IFNAME": ("=enp90s0np0", 10)}},
    "aicr-2315-pod-env-diff-healthy.txt": {"healthy": True, "settings": {"NCCL_SOCKET_IFNAME": ("eth0", 8)}},
    "coreweave-20-export-diff-healthy.txt": {"healthy": True, "settings": {"NCCL_SOCKET_IFNAME": ("eth0", 12),
                                                                           "NCCL_IB_HCA": ("ibp", 13)}},
    # ... and in DeepSpeed's launcher's log of the variables it starts the ranks with, both of its forms
    "deepspeed-736-launcher-env.txt": {"codes": {"NCCL_IB_DISABLED_BY_ENV"}, "settings": {"NCCL_SOCKET_IFNAME": ("lo", 5)}},
    "nccl-708-deepspeed-launcher-env-healthy.txt": {"healthy": True, "settings": {"NCCL_SOCKET_IFNAME": ("eth1", 8),
                                                                                  "NCCL_IB_GID_INDEX": ("3", 9)}},
    # a tool's rows without the lines they usually come with
    "nccl-523-acsctl-grep.txt": {"codes": {"PCIE_ACS_ENABLED"}},
    "nccl-629-acsctl-tabs.txt": {"codes": {"PCIE_ACS_ENABLED"}},
    "nccl-606-acsctl-no-redirect.txt": {"healthy": True, "absent": {"PCIE_ACS_ENABLED"}},
    "nccltests-167-rows-without-header.txt": {"healthy": True, "judged": "nccl-tests"},
    "nccltests-182-units-line-first.txt": {"healthy": True, "judged": "nccl-tests"},
    "nccl-340-old-rows.txt": {"healthy": True, "judged": "nccl-tests"},
    "travis-docker-17-df-in-ticket.txt": {"codes": {"SHM_TOO_SMALL"}},
}


def body(name: str) -> bytes:
    data = (FRAMES / name).read_bytes()
    head, sep, rest = data.partition(HEADER_END)
    assert sep and head.startswith(b"# source: https://github.com/"), name
    return rest


def report_of(name: str, data: bytes | None = None) -> tuple[dict, Diagnoser]:
    reader = Diagnoser()  # what `rdmadoctor diagnose FILE` hands the logs.diagnose check
    reader.feed(body(name) if data is None else data, source=name)
    reader.end_source()
    opts = Options(only=["logs"], logs=[name], log_diagnosis=reader)
    return diagnose(opts, host=logs_only_host(name)).report, reader


def findings(rep: dict) -> list[dict]:
    return [f for c in rep["checks"] for f in c["findings"]]


def test_table_and_folder_agree() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in FRAMES.glob("*.txt"))
    healthy = sum(1 for row in EXPECTED.values() if row.get("healthy"))
    assert healthy * 5 >= len(EXPECTED), "about a fifth of the texts are healthy ones"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_text(name: str) -> None:
    row = EXPECTED[name]
    rep, reader = report_of(name)
    shown = findings(rep)
    got = {f["code"] for f in shown}
    assert "LOGS_NOTHING_TO_JUDGE" not in got, shown
    missing = set(row.get("codes") or ()) - got
    assert not missing, f"missing {sorted(missing)}; got {sorted(got)}"
    wrong = set(row.get("absent") or ()) & got
    assert not wrong, f"reported {sorted(wrong)}, which the text does not show"
    if row.get("healthy"):
        problems = [(f["code"], f["subject"]) for f in shown if f["severity"] in PROBLEM]
        assert not problems, problems
    if row.get("root"):
        first = next(f["code"] for f in shown if f["severity"] in PROBLEM)
        assert first == row["root"], [(f["code"], f["subject"]) for f in shown]
    for code, parts in (row.get("subjects") or {}).items():
        subjects = [f["subject"] for f in shown if f["code"] == code]
        for part in parts:
            assert any(part in s for s in subjects), (code, part, subjects)
    for code, (host, time) in (row.get("where") or {}).items():
        ev = next(f for f in shown if f["code"] == code)["data"]["evidence"][0]
        assert (ev["host"], ev["time"]) == (host, time), ev
    for subject, (host, time) in (row.get("where_subject") or {}).items():
        ev = next(f for f in shown if f["subject"] == subject)["data"]["evidence"][0]
        assert (ev["host"], ev["time"]) == (host, time), ev
    for code, said in (row.get("setting") or {}).items():  # the setting joined to the failure it explains
        got_setting = next(f for f in shown if f["code"] == code)["data"].get("setting")
        assert (got_setting and (got_setting["name"], got_setting["value"], got_setting["line"])) == (said or None), got_setting
    if row.get("settings"):  # the settings read, wherever they were written
        said = {k: (v["value"], v["evidence"]["line"]) for k, v in reader.finish().settings.items()}
        assert said == row["settings"], said
    if "hosts" in row:
        assert ((reader.finish().nccl or {}).get("hosts") or []) == row["hosts"]
    if row.get("judged"):
        assert any(s.kind == row["judged"] for s in reader.segments), reader.segments
    for f in shown:  # every finding from the text quotes where it was seen
        if f["code"] in ("LOGS_READ", "LOG_UNREADABLE"):
            continue
        ev = (f.get("data") or {}).get("evidence")
        assert ev and ev[0]["file"] == name and ev[0]["line"] >= 1, f


def test_headerless_rows_keep_their_line_numbers_and_wrong_results_are_read() -> None:
    """nccl-tests-167's rows with one row's #wrong made non-zero: the table without its heading is
    judged, and the evidence is the row's own line."""
    lines = body("nccltests-167-rows-without-header.txt").decode().split("\n")
    at = next(i for i, x in enumerate(lines) if x.strip().startswith("201728"))
    lines[at] = lines[at].replace("3.04      0", "3.04     17", 1)
    rep, _ = report_of("nccltests-167-rows-without-header.txt", "\n".join(lines).encode())
    wrong = [f for f in findings(rep) if f["code"] == "NCCL_TEST_WRONG_RESULTS"]
    assert wrong and wrong[0]["data"]["evidence"][0]["line"] == at + 1, wrong


HELDOUT = Path(__file__).resolve().parents[2] / "fixtures" / "heldout"
TAGGED = "awsk8stester-503-mpi-tagged-rows.txt"


def tagged_rows() -> bytes:
    """nccl-tests under Open MPI's --tag-output, from https://github.com/aws/aws-k8s-tester/pull/503: the held-out
    text itself (tests/unit/logs/test_heldout.py measures it as healthy; here the table is what is asserted)."""
    return (HELDOUT / TAGGED).read_bytes().partition(HEADER_END)[2]


@pytest.mark.parametrize("tag", [
    None,  # the text as posted: "[1,0]<stdout>:"
    "[1,0]<stderr>:",  # the same rows on the other stream
    "[gpu-7:0] ",  # a "[host:rank]" tag
    "  0: ",  # srun --label
    "worker-1: ",  # pdsh's host name, as DeepSpeed's multi-node launcher runs the ranks
])
def test_a_table_behind_a_launchers_tag_is_judged(tag: str | None) -> None:
    """nccl-tests' table behind a launcher's tag on every line is read as the table (its busbw judged, said in
    LOGS_READ), not "nothing to judge"."""
    data = tagged_rows()
    if tag is not None:
        data = data.replace(b"[1,0]<stdout>:", tag.encode())
    rep, reader = report_of(TAGGED, data)
    assert [s.kind for s in reader.segments] == ["nccl-tests"], reader.segments
    assert reader.segments[0].text.startswith("#       size         count      type"), reader.segments[0].text
    read = next(f for f in findings(rep) if f["code"] == "LOGS_READ")
    assert read["data"]["judged"] == ["nccl-tests"]
    (table,) = read["data"]["nccl_tests"]
    assert (table["sizes"], table["smallest_bytes"], table["largest_bytes"], table["busbw_peak_gbs"], table["wrong"],
            table["line"]) == (3, 8, 32, 0.0, 0, 3), table
    assert "nccl-tests: 3 sizes (8 bytes to 32 bytes), peak bus bandwidth 0 GB/s, no wrong results" in read["message"]
    assert rep["status"] == "pass" and not [f for f in findings(rep) if f["severity"] in PROBLEM]


def test_wrong_results_behind_a_tag_are_read_from_their_own_line() -> None:
    """The same rows with one row's #wrong made non-zero: the finding quotes that row, its tag gone."""
    lines = tagged_rows().decode().split("\n")
    at = next(i for i, x in enumerate(lines) if x.startswith("[1,0]<stdout>:          16 "))
    lines[at] = lines[at][:-1] + "5"
    rep, _ = report_of(TAGGED, "\n".join(lines).encode())
    wrong = next(f for f in findings(rep) if f["code"] == "NCCL_TEST_WRONG_RESULTS")
    ev = wrong["data"]["evidence"][0]
    assert ev["line"] == at + 1 and ev["text"].split()[:1] == ["16"], ev


def test_only_the_opening_lines_tag_is_removed() -> None:
    """An output opened behind a tag loses that tag only: a line of another program (another tag, or none) ends the
    table and is read as a line of its own."""
    data = tagged_rows() + b"[1,1]<stderr>:node-2:40:40 [0] NCCL INFO NET/IB : No device found.\n"
    d = diagnose_bytes(data)
    assert [s.kind for s in d.segments] == ["nccl-tests"] and "No device" not in d.segments[0].text
    assert prefix.launcher_tag("node-1:4127:4127 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>") == 0


# ---- frames for which no public text was found: lines made for the purpose -------------------

WC = ("transport/net_ib.cc:2360 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<53393> with status=12 opcode=1 "
      "len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_0")


@pytest.mark.parametrize("line,host,time", [
    # a log viewer's frame around the line (k9s, lnav, a terminal multiplexer)
    ("\u2502 gpu-7:617:2799 [3] " + WC + " \u2502", "gpu-7", None),
    ("\u2503 gpu-7:617:2799 [3] " + WC, "gpu-7", None),
    ("| gpu-7:617:2799 [3] " + WC + " |", "gpu-7", None),
    # a [host:pid=N] tag in place of NCCL's prefix
    ("[gpu-7:pid=617] " + WC.split(" ", 1)[1], "gpu-7", None),
    # `grep -rn` over a job's folder: the file name and line number, then a bracketed time
    ("logs/rank-3.out:1042:[2026-01-04 21:33:04] gpu-7:617:2799 [3] " + WC, "gpu-7", "2026-01-04 21:33:04"),
    # `grep -n -C` over a job's folder: a context line's file name and line number end in dashes
    ("logs/rank-3.out-1043-gpu-7:617:2799 [3] " + WC, "gpu-7", None),
    ("rank-3.log-7-[2026-01-04 21:33:04] gpu-7:617:2799 [3] " + WC, "gpu-7", "2026-01-04 21:33:04"),
    # Ray's actor prefix with its ip
    ("(RayTrainWorker pid=617, ip=10.0.0.1) gpu-7:617:2799 [3] " + WC, "gpu-7", None),
])
def test_site_prefixes_are_context(line: str, host: str, time: str | None) -> None:
    d = diagnose_bytes(line.encode() + b"\n")
    wc = [f for f in d.findings if f.code == "NCCL_IB_COMPLETION_ERROR"]
    assert wc, [(f.code, f.subject) for f in d.findings]
    ev = wc[0].data["evidence"][0]
    assert (ev["host"], ev["time"]) == (host, time), ev


def test_vllm_worker_prefix_gives_the_rank() -> None:
    d = diagnose_bytes(b"(VllmWorker rank=3 pid=617) gpu-7:617:2799 [3] " + WC.encode() + b"\n")
    ev = next(f for f in d.findings if f.code == "NCCL_IB_COMPLETION_ERROR").data["evidence"][0]
    assert (ev["host"], ev["rank"]) == ("gpu-7", 3), ev


@pytest.mark.parametrize("line,code", [
    ('os.environ["NCCL_IB_DISABLE"] = "1"', "NCCL_IB_DISABLED_BY_ENV"),
    ("os.environ.setdefault('NCCL_NET', 'Socket')", "NCCL_IB_DISABLED_BY_ENV"),
    ("os.environ['NCCL_IB_DISABLE'] = '1'", "NCCL_IB_DISABLED_BY_ENV"),
    ('        - {"name": "NCCL_IB_DISABLE", "value": "1"}', "NCCL_IB_DISABLED_BY_ENV"),
    ('      NCCL_IB_DISABLE: "1"', "NCCL_IB_DISABLED_BY_ENV"),
    ("  - NCCL_NET=Socket", "NCCL_IB_DISABLED_BY_ENV"),
    ("setenv NCCL_IB_DISABLE 1", "NCCL_IB_DISABLED_BY_ENV"),
    ("ENV NCCL_IB_DISABLE 1", "NCCL_IB_DISABLED_BY_ENV"),
    ("env NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=eth0 torchrun --nproc_per_node 8 train.py", "NCCL_IB_DISABLED_BY_ENV"),
    # a pod spec's env entry on two lines, the value quoted or not
    ("        - name: NCCL_IB_DISABLE\n          value: \"1\"", "NCCL_IB_DISABLED_BY_ENV"),
    ("- name: 'NCCL_NET'\n  value: Socket", "NCCL_IB_DISABLED_BY_ENV"),
])
def test_settings_in_code_and_config(line: str, code: str) -> None:
    """Settings as Python, a pod spec, compose, csh and a Dockerfile write them (lines made for the
    purpose: no public ticket with one was found)."""
    d = diagnose_bytes(line.encode() + b"\n")
    assert code in {f.code for f in d.findings}, [(f.code, f.subject) for f in d.findings]


def test_a_two_line_setting_read_across_chunks() -> None:
    """The value line of a pod spec's entry in the next chunk (a block of its own) reads the same."""
    d = Diagnoser()
    d.feed(b"env:\n  - name: NCCL_IB_DISABLE\n", source="pod.yaml")
    d.feed(b'    value: "1"\n', source="pod.yaml")
    got = [(f.code, f.data["evidence"][0]["line"]) for f in d.finish().findings]
    assert ("NCCL_IB_DISABLED_BY_ENV", 3) in got, got


def test_a_name_line_without_its_value_sets_nothing() -> None:
    d = diagnose_bytes(b"- name: NCCL_IB_DISABLE\n- name: NCCL_DEBUG\n  value: INFO\n")
    assert "NCCL_IB_DISABLED_BY_ENV" not in {f.code for f in d.findings}


FAILURE = ("node-1:40:40 [0] NCCL INFO comm 0x5 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"
           "node-1:40:40 [0] NCCL INFO NET/IB : No device found.\n")


@pytest.mark.parametrize("line,value", [
    ("export NCCL_IB_HCA=mlx5_9", "mlx5_9"),
    ("+export NCCL_IB_HCA=mlx5_9", "mlx5_9"),
    ('os.environ["NCCL_IB_HCA"] = "mlx5_9"', "mlx5_9"),
    ("os.environ.setdefault('NCCL_IB_HCA', '=mlx5_9')", "=mlx5_9"),
    ("$ mpirun -np 16 -x NCCL_DEBUG=INFO -x NCCL_IB_HCA=mlx5_9:1 ./build/all_reduce_perf -b 8 -e 1G", "mlx5_9:1"),
    ("env NCCL_DEBUG=INFO NCCL_IB_HCA=^mlx5_0,mlx5_1 torchrun --nnodes 2 train.py", "^mlx5_0,mlx5_1"),
    ("srun --export=ALL,NCCL_IB_HCA=mlx5_9 python train.py", "mlx5_9"),
    ("srun --export=ALL,NCCL_SOCKET_IFNAME=eth0,NCCL_IB_HCA=mlx5_9 python train.py", "mlx5_9"),
    ("        - name: NCCL_IB_HCA\n          value: \"mlx5_9\"", "mlx5_9"),
    ('      NCCL_IB_HCA: "mlx5_9"', "mlx5_9"),
])
def test_a_setting_in_code_or_a_launch_joins_the_failure(line: str, value: str) -> None:
    """NCCL_IB_HCA as a script, a launch or a pod spec sets it (lines made for the purpose; the texts
    above hold the markdown list, the Slurm script, the YAML config and the diff), before NCCL finds no device."""
    d = diagnose_bytes((line + "\n" + FAILURE).encode(), name="job.log")
    f = next(f for f in d.findings if f.code == "NCCL_IB_NO_DEVICE")
    assert f.data.get("setting", {}).get("value") == value, f.data.get("setting")
    assert f.message.startswith(f"NCCL_IB_HCA is set to {value} (line ")
    assert d.settings["NCCL_IB_HCA"]["value"] == value


@pytest.mark.parametrize("line,said", [
    ("srun --export=ALL,NCCL_IB_HCA=mlx5_0,NCCL_SOCKET_IFNAME=eth0 python train.py",
     {"NCCL_IB_HCA": "mlx5_0", "NCCL_SOCKET_IFNAME": "eth0"}),
    # a value with commas, a variable not joined between, one at the end
    ("srun --export=ALL,NCCL_DEBUG=INFO,NCCL_IB_HCA=mlx5_0,mlx5_1,NCCL_DEBUG_SUBSYS=INIT,NCCL_SOCKET_IFNAME=eth0,NCCL_NET=IB ./train",
     {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_NET": "IB"}),
    ("$ mpirun -np 16 -x NCCL_IB_HCA=mlx5_0 -x NCCL_DEBUG=INFO -x NCCL_SOCKET_IFNAME=eth0 ./build/all_reduce_perf",
     {"NCCL_IB_HCA": "mlx5_0", "NCCL_SOCKET_IFNAME": "eth0"}),
    ("worker-1: [2025-06-15 05:28:14,713] [INFO] [launch.py:139:main] 0 NCCL_IB_HCA=mlx5_0,mlx5_1",
     {"NCCL_IB_HCA": "mlx5_0,mlx5_1"}),
])
def test_every_setting_a_launch_makes_is_read(line: str, said: dict) -> None:
    """srun's --export list and mpirun's -x options naming several NCCL variables: each is read, not the first only
    (lines made for the purpose: no public ticket with such a list was found)."""
    d = diagnose_bytes(line.encode() + b"\n")
    assert {k: v["value"] for k, v in d.settings.items()} == said


@pytest.mark.parametrize("line", [
    "I also tried NCCL_IB_HCA=mlx5_9 but it did not help",  # told in prose: not this job's setting
    "#export NCCL_IB_HCA=mlx5_9",  # a script's comment
    "export NCCL_IB_HCA_EXTRA=mlx5_9",
])
def test_a_setting_not_made_joins_nothing(line: str) -> None:
    d = diagnose_bytes((line + "\n" + FAILURE).encode())
    f = next(f for f in d.findings if f.code == "NCCL_IB_NO_DEVICE")
    assert "setting" not in f.data and "NCCL_IB_HCA" not in d.settings


def test_a_setting_after_the_failure_joins_nothing() -> None:
    d = diagnose_bytes((FAILURE + "export NCCL_IB_HCA=mlx5_9\n").encode())
    f = next(f for f in d.findings if f.code == "NCCL_IB_NO_DEVICE")
    assert "setting" not in f.data


@pytest.mark.parametrize("line", [
    'os.environ["NCCL_IB_DISABLE"] = "0"',
    "os.environ['NCCL_NET'] = 'IB'",
    '      NCCL_IB_DISABLE: "0"',
    "node-1:4127:4127 [0] NCCL INFO NCCL_NET set by environment to IB",
])
def test_settings_that_leave_rdma_on_say_nothing(line: str) -> None:
    d = diagnose_bytes(line.encode() + b"\n")
    assert "NCCL_IB_DISABLED_BY_ENV" not in {f.code for f in d.findings}


def test_punctuation_a_writer_changed() -> None:
    """A message with no space before its colon, without NCCL's full stop, with a full stop after."""
    for line, code in (("NCCL WARN NET/IB: No device found", "NCCL_IB_NO_DEVICE"),
                       ('He said: "NCCL WARN Call to ibv_reg_mr failed." and left.', "NCCL_REG_MR_FAILED"),
                       ("we get \u2018NCCL WARN Call to ibv_create_qp failed\u2019 on one node", "NCCL_QP_CQ_CREATE_FAILED")):
        d = diagnose_bytes(line.encode() + b"\n")
        assert code in {f.code for f in d.findings}, (line, [(f.code, f.subject) for f in d.findings])


def test_quoted_spans_are_bounded_and_single_words_are_not_messages() -> None:
    assert prefix.quoted("NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'") == ()
    assert prefix.quoted('x "' + "a " * 5000 + '"') == ()  # longer than a span may be
    assert len(prefix.quoted(' '.join('"a b c d e f"' for _ in range(40)))) == prefix.MAX_SPANS


def test_a_logger_prefix_is_context_around_a_traceback_only() -> None:
    """vLLM's logger prefix: removed from a traceback's lines (their indentation reads the traceback),
    kept on any other line (its ERROR level is what makes the line an error)."""
    frame = 'ERROR 03-23 21:43:38 [worker_base.py:620]   File "/opt/venv/vllm/worker.py", line 99, in init_device'
    assert prefix.split(frame)[0].startswith('File "')
    old = "(RayWorkerVllm pid=7500) ERROR 04-07 00:57:46 ray_utils.py:45] Traceback (most recent call last):"
    assert prefix.split(old)[0] == "Traceback (most recent call last):"
    said = "ERROR 03-23 21:43:38 [worker_base.py:620] Error executing method 'init_device'. This might cause deadlock"
    assert prefix.split(said)[0] == said
    d = diagnose_bytes(said.encode() + b"\n")
    assert "LOG_ERROR_UNKNOWN" in {f.code for f in d.findings}


def test_a_placeholder_for_the_host_is_no_host() -> None:
    """NVIDIA/nccl#952 (https://github.com/NVIDIA/nccl/issues/952) replaced the host with
    `<cluster_name>`: the line is NCCL's, with no host (not its pid taken for one)."""
    body, meta = prefix.split("<cluster_name>:924:1152 [5] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so")
    assert (meta.host, meta.pid, meta.level) == (None, "924", "INFO") and body.startswith("Plugin Path")
