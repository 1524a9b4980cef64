"""Hostile and unusual log inputs (an adversarial sweep): random or compressed bytes, bzip2 / xz /
zstd logs, CR-only line endings, a closed stdin, endless devices, and what is said about each.
Real processes where the defect was seen through the CLI, bounded by timeouts."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from rdmadoctor.logs import Diagnoser, diagnose_paths
from rdmadoctor.logs.reader import chunks

HERE = Path(__file__).resolve().parents[2]  # tests/
FIXTURES = HERE / "fixtures" / "logs"

ERR = ("node-1:330:401 [0] transport/net_ib.cc:1019 NCCL WARN NET/IB : Got completion with error 12, "
       "opcode 0, len 0, vendor err 129\n")
CODE = "NCCL_IB_COMPLETION_ERROR"


def rd(*args: str, stdin=None, timeout: float = 120, cwd=None, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run([sys.executable, "-m", "rdmadoctor", *args], stdin=stdin, capture_output=True, env=env,
                          timeout=timeout, cwd=cwd, **kw)


def codes(d) -> list[str]:
    return [f.code for f in d.findings]


# ---- 3. random and compressed bytes are not a log ----------------------------------------------


def _random(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


@pytest.mark.parametrize("n", [20, 100, 4096, 200_000])
@pytest.mark.parametrize("seed", range(20))
def test_random_bytes_are_binary_data_not_a_passing_log(tmp_path, n, seed) -> None:
    p = tmp_path / "notgz.gz"
    p.write_bytes(_random(n, seed))
    d = diagnose_paths([str(p)])
    src = d.sources[0]
    assert not d.read_any and "binary data: not a text log" in src["error"], src
    assert codes(d) == []


def test_random_bytes_exit_2_not_pass(tmp_path) -> None:
    p = tmp_path / "notgz.gz"
    p.write_bytes(_random(100, 7))
    out = rd("diagnose", str(p))
    err = out.stderr.decode()
    assert out.returncode == 2 and "binary data: not a text log" in err and "PASS" not in out.stdout.decode(), err


def test_dev_urandom_stops_at_once() -> None:
    # Read forever before: a stream of random bytes has few NULs. The timeout bounds the old hang.
    out = rd("diagnose", "/dev/urandom", timeout=60)
    assert out.returncode == 2 and "binary data: not a text log" in out.stderr.decode()


@pytest.mark.parametrize("pack", [
    lambda b: __import__("zipfile") and _zip(b),
    lambda b: __import__("zlib").compress(b),  # raw zlib: no gzip header
])
def test_other_compressed_data_is_binary(tmp_path, pack) -> None:
    p = tmp_path / "job.log.z"
    p.write_bytes(pack((ERR * 50 + "".join(f"step {i} loss {random.Random(i).random()}\n" for i in range(3000))).encode()))
    d = diagnose_paths([str(p)])
    assert not d.read_any and "binary data" in d.sources[0]["error"]


def _zip(b: bytes) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("job.log", b)
    return buf.getvalue()


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.log")), ids=lambda p: p.name)
def test_every_real_log_still_reads_as_text(path) -> None:
    d = diagnose_paths([str(path)])
    assert d.read_any and not d.sources[0]["error"], d.sources[0]


@pytest.mark.parametrize("text", [
    ERR.encode() * 3,
    b"\x1b[31m" + ERR.encode() + b"\x1b[0m" * 20,  # colours
    ERR.replace("\n", "\r\n").encode() * 10,  # CRLF
    "gpu-a:1:1 [0] NCCL INFO Ger\u00e4t d\u00e9fini \u2014 \u6e2c\u8a66\n".encode() * 50 + ERR.encode(),  # UTF-8
    "Ger\u00e4t d\u00e9fini pr\u00eat \u00e0 \u00e9crire\n".encode("latin-1") * 50 + ERR.encode(),  # Latin-1
    b"step 1 loss \xff\xfe 0.3\n" * 3 + ERR.encode(),  # a few bytes that are not UTF-8
    b"\x08\x07\x0c\t" + ERR.encode(),  # backspace, bell, form feed
])
def test_text_with_colours_crlf_and_stray_bytes_is_read(text) -> None:
    d = Diagnoser()
    d.read_stream("job.log", __import__("io").BytesIO(text))
    r = d.finish()
    assert r.read_any and not r.sources[0]["error"] and CODE in codes(r), r.sources


# ---- 4. bzip2, xz, zstd --------------------------------------------------------------------------


@pytest.mark.parametrize("pack,name", [(bz2.compress, "err.log.bz2"), (lzma.compress, "err.log.xz"),
                                       (bz2.compress, "err.log"), (lzma.compress, "err.txt")])
def test_bzip2_and_xz_logs_are_read_by_their_magic(tmp_path, pack, name) -> None:
    p = tmp_path / name
    p.write_bytes(pack(ERR.encode()))
    out = rd("diagnose", str(p))
    assert out.returncode == 1 and "FAIL" in out.stdout.decode(), out
    assert CODE in out.stdout.decode()


@pytest.mark.parametrize("pack,kind", [(bz2.compress, "bzip2"), (lzma.compress, "xz")])
def test_several_streams_and_zero_padding_are_read_whole(tmp_path, pack, kind) -> None:
    body = ("x NCCL INFO filler\n" * 40000).encode()
    p = tmp_path / f"job.{kind}"
    p.write_bytes(pack(body) + pack(ERR.encode()) + b"\x00" * 12)
    d = diagnose_paths([str(p)])
    src = d.sources[0]
    assert src["error"] is None and src["bytes"] == len(body) + len(ERR) and src["lines"] == 40001
    assert codes(d) == [CODE] and d.findings[0].data["evidence"][0]["line"] == 40001


def test_decompressed_chunks_stay_bounded(tmp_path) -> None:
    # 64 MiB of text from a few KiB of xz: never more than one chunk at a time.
    p = tmp_path / "bomb.xz"
    p.write_bytes(lzma.compress(b"a" * (64 << 20)))
    sizes = []
    with open(p, "rb") as f:
        for c in chunks(f, size=1 << 20):
            sizes.append(len(c))
    assert max(sizes) <= 1 << 20 and sum(sizes) == 64 << 20


@pytest.mark.parametrize("pack,kind", [(bz2.compress, "bzip2"), (lzma.compress, "xz")])
def test_a_cut_stream_says_so_and_what_was_diagnosed(tmp_path, pack, kind) -> None:
    body = "".join(f"step {i} loss {random.Random(i).random():.6f}\n" for i in range(200_000)) + ERR
    data = pack(body.encode())
    p = tmp_path / f"cut.{kind}"
    p.write_bytes(data[: len(data) // 2])
    d = diagnose_paths([str(p)])
    err = d.sources[0]["error"]
    assert f"the {kind} stream is cut short" in err and "Traceback" not in err
    if d.read_any:
        assert f"the {d.sources[0]['bytes']} bytes before it were diagnosed" in err
    else:
        assert "nothing before it could be read" in err


def test_zstd_says_decompress_it_first(tmp_path) -> None:
    p = tmp_path / "err.log.zst"
    # zstd's magic and frame header; what follows does not matter: it is never read.
    p.write_bytes(bytes.fromhex("28b52ffd0458") + ERR.encode())
    out = rd("diagnose", str(p))
    err = out.stderr.decode()
    assert out.returncode == 2 and "zstd-compressed: decompress it first (zstd -d FILE" in err, err


# ---- 5. CR-only line endings ---------------------------------------------------------------------


def _cr_log(end: str) -> str:
    lines = [f"x NCCL INFO filler {i}" for i in range(5000)] + [ERR.rstrip("\n")]
    return end.join(lines) + end


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"])
def test_cr_only_logs_are_read_past_64_kib(tmp_path, end) -> None:
    p = tmp_path / "cr.log"
    p.write_bytes(_cr_log(end).encode())
    d = diagnose_paths([str(p)])
    assert codes(d) == [CODE] and d.findings[0].data["evidence"][0]["line"] == 5001
    assert d.sources[0]["lines"] == 5001 and not any("longer than" in n for n in d.notes), d.notes


@pytest.mark.parametrize("size", [1, 2, 3, 7, 4096])
def test_crlf_cut_between_chunks_is_one_line_end(size) -> None:
    text = _cr_log("\r\n").encode()
    d = Diagnoser()
    for i in range(0, len(text), size):
        d.feed(text[i:i + size], source="job.log")
    r = d.finish()
    assert r.sources[0]["lines"] == 5001 and r.findings[0].data["evidence"][0]["line"] == 5001


def test_a_progress_bar_rewriting_its_line_then_an_error(tmp_path) -> None:
    # tqdm: one "line" of 200 000 CR-separated redraws (far over 64 KiB), then the error.
    bar = "".join(f"\r{i // 2000:3d}%|{'#' * (i // 20000):10s}| {i}/200000 [00:01<00:00, 9000it/s]" for i in range(200_000))
    p = tmp_path / "train.log"
    p.write_bytes(("epoch 1\n" + bar + "\n" + ERR).encode())
    d = diagnose_paths([str(p)])
    assert codes(d) == [CODE] and not any("longer than" in n for n in d.notes)
    # Each redraw counts as a line, as short CR-separated lines always did.
    assert d.findings[0].data["evidence"][0]["line"] == 200_003


# ---- 1. a closed stdin -----------------------------------------------------------------------------


def _close_stdin() -> None:
    os.close(0)


def test_diagnose_dash_with_stdin_closed_is_an_error_not_a_traceback() -> None:
    out = rd("diagnose", "-", preexec_fn=_close_stdin, timeout=60)
    err = out.stderr.decode()
    assert out.returncode == 2 and "stdin is closed" in err and "Traceback" not in err, err
    assert "nothing could be read" in err


def test_diagnose_dash_with_stdin_closed_among_good_files_is_a_warning(tmp_path) -> None:
    good = tmp_path / "err.log"
    good.write_text(ERR)
    out = rd("diagnose", str(good), "-", preexec_fn=_close_stdin, timeout=60)
    err = out.stderr.decode()
    assert out.returncode == 1 and "warning: -: stdin is closed" in err and "Traceback" not in err, err


def test_collect_log_dash_with_stdin_closed_is_an_error(tmp_path) -> None:
    out = rd("collect", "-o", str(tmp_path / "c.tar.gz"), "--log", "-", preexec_fn=_close_stdin, timeout=60)
    err = out.stderr.decode()
    assert out.returncode == 2 and "--log -: stdin is closed" in err and "Traceback" not in err, err
    assert not (tmp_path / "c.tar.gz").exists()


# ---- 2. collect --log on binary or endless input ----------------------------------------------------


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/urandom"])
def test_collect_log_of_a_binary_device_stops_at_once(tmp_path, dev) -> None:
    out = rd("collect", "-o", str(tmp_path / "c.tar.gz"), "--log", dev, timeout=60)
    err = out.stderr.decode()
    assert out.returncode == 2 and f"--log {dev}: binary data: not a text log" in err, err


def test_collect_log_of_an_endless_stream_stops_at_the_budget(monkeypatch) -> None:
    from rdmadoctor.collect import logs as collect_mod

    monkeypatch.setattr(collect_mod, "MAX_LOG_BYTES", 3 << 20)
    monkeypatch.setattr(collect_mod, "LOG_HEAD", 1000)
    monkeypatch.setattr(collect_mod, "LOG_TAIL", 4000)

    class Yes:  # `yes NCCL INFO filler | rdmadoctor collect --log -`: never ends
        def __init__(self) -> None:
            self.given = 0

        def read(self, n: int = -1) -> bytes:
            if self.given >= 64 << 20:  # an end after all, so that a reader with no budget fails, not hangs
                return b""
            self.given += n
            return (b"x NCCL INFO filler\n" * (n // 19 + 1))[:n]

    src = Yes()
    log = collect_mod.read_log("-", set(), stdin=src)
    assert src.given <= (3 << 20) + (1 << 20)  # stopped within a chunk of the budget
    assert log.error and "reading stopped after" in log.error and "log budget (3 MiB)" in log.error
    assert 0 < len(log.data) < 6000 and log.cut > 0


def test_collect_log_of_a_regular_file_is_read_to_its_end(tmp_path, monkeypatch) -> None:
    from rdmadoctor.collect import logs as collect_mod

    monkeypatch.setattr(collect_mod, "MAX_LOG_BYTES", 1 << 20)
    p = tmp_path / "big.log"
    p.write_bytes(b"x NCCL INFO filler\n" * 200_000 + ERR.encode())
    with open(p, "rb") as f:  # a regular file given as stdin (`< big.log`) ends too
        log = collect_mod.read_log("-", set(), stdin=f)
    assert log.error is None and log.data.endswith(ERR.encode())


@pytest.mark.parametrize("pack,ext", [(bz2.compress, "bz2"), (lzma.compress, "xz")])
def test_collect_keeps_bzip2_and_xz_logs_unpacked(tmp_path, pack, ext) -> None:
    from rdmadoctor.collect import read_log

    p = tmp_path / f"rank0.log.{ext}"
    p.write_bytes(pack(ERR.encode()))
    log = read_log(str(p), set())
    assert log.data == ERR.encode() and log.name == "logs/rank0.log" and log.error is None


def test_collect_log_zstd_says_decompress_it_first(tmp_path) -> None:
    from rdmadoctor.collect import CollectError, read_log

    p = tmp_path / "rank0.log.zst"
    p.write_bytes(bytes.fromhex("28b52ffd0458") + ERR.encode())
    with pytest.raises(CollectError, match=r"zstd-compressed: decompress it first"):
        read_log(str(p), set())


# ---- 6. what is said of a cut input, and of the tools ----------------------------------------------


def test_a_gzip_cut_before_any_output_does_not_claim_a_diagnosis(tmp_path) -> None:
    p = tmp_path / "trunc.gz"
    p.write_bytes(gzip.compress(b"x" * 100000)[:12])
    out = rd("diagnose", str(p))
    err = out.stderr.decode()
    assert out.returncode == 2 and "nothing before it could be read" in err and "diagnosed" not in err, err


def test_a_gzip_cut_after_some_output_says_that_part_was_diagnosed(tmp_path) -> None:
    body = "".join(f"step {i} loss {random.Random(i).random():.6f}\n" for i in range(100_000)) + ERR
    data = gzip.compress(body.encode())
    p = tmp_path / "trunc.gz"
    p.write_bytes(data[: len(data) // 2])
    d = diagnose_paths([str(p)])
    n = d.sources[0]["bytes"]
    assert n > 0 and d.sources[0]["error"].endswith(f"cut short (no end of stream); the {n} bytes before it were diagnosed")


def test_collect_of_a_cut_gzip_says_kept_not_diagnosed(tmp_path) -> None:
    from rdmadoctor.collect import read_log

    body = "".join(f"step {i} loss {random.Random(i).random():.6f}\n" for i in range(100_000))
    data = gzip.compress(body.encode())
    p = tmp_path / "trunc.gz"
    p.write_bytes(data[: len(data) // 2])
    log = read_log(str(p), set())
    assert "cut short" in log.error and "kept in the bundle" in log.error and "diagnosed" not in log.error
    p.write_bytes(data[:12])
    # Nothing of it to keep: collect stops, as for a file it cannot read (it wrote a bundle
    # without the log and exited 0 before).
    from rdmadoctor.collect import CollectError

    with pytest.raises(CollectError, match="nothing before it could be read") as e:
        read_log(str(p), set())
    assert "diagnosed" not in str(e.value)


def test_the_commands_summary_names_each_tool_once_under_what_happened() -> None:
    from rdmadoctor.collect import Collected

    failed = {
        "df-shm": {"error": "df -h /dev/shm exited, but ... past the 0.0001 s deadline", "timed_out": False, "output_recorded": True},
        "dpkg-l": {"error": "did not finish", "timed_out": True},
        "ibstat": {"error": "exit 1", "timed_out": False, "output_recorded": True},
        "ulimit": {"error": "did not finish", "timed_out": True},
        "lspci": {"error": "x", "timed_out": False, "truncated": True, "output_recorded": True},
    }
    res = Collected("c.tar.gz", 10, ["df-shm", "env", "ibstat", "lspci"], failed, 100)
    text = res.commands_summary()
    assert text.startswith("4 commands recorded (df-shm, env, ibstat, lspci), 3 of them incomplete or with an error (")
    ok, _, lost = text.partition("; not recorded: ")
    assert lost == "dpkg-l, ulimit: timed out"
    for name in ("df-shm", "env", "ibstat", "lspci", "dpkg-l", "ulimit"):
        assert text.count(name) == (2 if name in ("df-shm", "ibstat", "lspci") else 1), (name, text)
    assert "dpkg-l" not in ok and "ulimit" not in ok
    assert Collected("c", 1, ["env"], {}, 1).commands_summary() == "1 command recorded (env)"


# ---- text around NULs and binary data (issue 21, item 9) --------------------------------------

_WARN_A = b"h-1:10:10 [0] misc/socket.cc:1 NCCL WARN NET/IB : No device found.\n"
_WARN_B = b"h-1:10:11 [0] misc/socket.cc:2 NCCL WARN Call to recv failed : Connection reset by peer\n"


def _diag_file(tmp_path, data: bytes):
    p = tmp_path / "job.log"
    p.write_bytes(data)
    return diagnose_paths([str(p)])


def test_a_log_truncated_in_place_starts_with_nuls_and_is_read(tmp_path):
    """logrotate's copytruncate: the writer keeps its offset, the file starts with a hole of NULs
    (here longer than a read chunk), then the new text."""
    d = _diag_file(tmp_path, b"\x00" * (3 << 20) + b"step 1\n" + _WARN_A)
    assert d.sources[0]["error"] is None
    assert {f.code for f in d.findings} == {"NCCL_IB_NO_DEVICE"}
    assert any(f"{3 << 20} NUL bytes were skipped" in n for n in d.notes)


@pytest.mark.parametrize("where", ["end", "middle", "start"])
def test_a_log_with_a_nul_on_every_line_is_read_around_them(tmp_path, where):
    """A program that writes C strings whole (their NUL included) puts a NUL on every line: the text
    is read around them, as around a run of them, and what was dropped is said; nothing is refused."""
    def nul(line: bytes) -> bytes:
        body = line.rstrip(b"\n")
        at = {"end": len(body), "middle": len(body) // 2, "start": 0}[where]
        return body[:at] + b"\x00" + body[at:] + b"\n"

    lines = [b"step %d loss 0.%d\n" % (i, i) for i in range(3000)] + [_WARN_A] + [b"step x\n"] * 3000 + [_WARN_B]
    d = _diag_file(tmp_path, b"".join(nul(x) for x in lines))
    assert d.sources[0]["error"] is None and d.sources[0]["lines"] == len(lines)
    assert {f.code for f in d.findings} == {"NCCL_IB_NO_DEVICE", "NCCL_SOCKET_ERROR"}
    if where == "end":  # the WARN's own words are whole
        assert [f.data["evidence"][0]["text"] for f in d.findings if f.code == "NCCL_IB_NO_DEVICE"] == [_WARN_A.decode().rstrip()]
    assert any(f"{len(lines)} NUL bytes were skipped" in n for n in d.notes), d.notes


def test_nuls_in_long_runs_inside_lines_are_still_binary_data(tmp_path):
    """A few NULs a line is text; a line of thousands of them among text is binary data, skipped."""
    d = _diag_file(tmp_path, _WARN_A * 200 + b"x" + b"\x00" * 20000 + b"y\n" + _WARN_B)
    assert d.sources[0]["error"] is None
    assert {f.code for f in d.findings} == {"NCCL_IB_NO_DEVICE", "NCCL_SOCKET_ERROR"}
    assert any("bytes of binary data in" in n for n in d.notes), d.notes


def test_a_gzip_member_after_text_is_read(tmp_path):
    """`cat a.log b.log.gz > all.log`: the text, then the member, inflated, then text again."""
    d = _diag_file(tmp_path, _WARN_A + gzip.compress(_WARN_B * 3) + b"after\n")
    assert d.sources[0]["error"] is None
    assert {f.code for f in d.findings} == {"NCCL_IB_NO_DEVICE", "NCCL_SOCKET_ERROR"}
    assert d.sources[0]["lines"] == 5
    assert any("a gzip member after text was decompressed" in n for n in d.notes)


def test_text_before_and_after_binary_data_is_read(tmp_path):
    garbage = random.Random(21).randbytes(100_000)
    d = _diag_file(tmp_path, b"start\n" + _WARN_A + garbage + b"\n" + _WARN_B)
    assert d.sources[0]["error"] is None
    assert {f.code for f in d.findings} == {"NCCL_IB_NO_DEVICE", "NCCL_SOCKET_ERROR"}
    assert any("bytes of binary data in" in n and "the text around them was diagnosed" in n for n in d.notes)


def test_an_input_binary_from_its_start_is_still_refused(tmp_path):
    d = _diag_file(tmp_path, b"\x7fELF" + b"\x00" * 9000 + random.Random(3).randbytes(9000) + _WARN_A)
    assert "binary data: not a text log" in d.sources[0]["error"] and not d.findings
    d = _diag_file(tmp_path, b"\x00" * 5000 + random.Random(4).randbytes(20000) + _WARN_A)
    assert "binary data: not a text log" in d.sources[0]["error"] and not d.findings


def test_a_gzip_magic_before_bytes_that_are_not_gzip_is_binary_data_not_a_crash(tmp_path) -> None:
    # /dev/urandom holds "\x1f\x8b\x08" about once in 16 MiB: zlib refuses what follows, which is then
    # read as the binary data it is (the check once asked zlib's object for a count it does not keep).
    from rdmadoctor.logs import diagnose_paths

    p = tmp_path / "a.log"
    p.write_bytes(b"gpu-a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" * 100 + b"\x1f\x8b\x08\x00"
                  + bytes(range(256)) * 64 + b"more text\n" * 10)
    d = diagnose_paths([str(p)])
    assert d.sources[0]["error"] is None and d.nccl["version"] == "2.21.5"
    assert any("binary data in one place were skipped" in n for n in d.notes)
