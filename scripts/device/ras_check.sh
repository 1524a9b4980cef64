#!/usr/bin/env bash
# The live-hang path on a real GPU job: NOT RUN YET (no GPU was lent to the session that wrote it;
# docs/live-hangs.md). For a machine with 2+ NVIDIA GPUs (H100/H200), PyTorch with NCCL 2.28+.
#
#   OUT=/tmp/out scripts/device/ras_check.sh        # from the repository root; the device tool sets $OUT
#
# A 2-process torchrun job with NCCL_RAS_ENABLE=1 all-reduces a few steps, then hangs on purpose:
# rank 1 stops before the next all-reduce (alive: a straggler, RAS counts differ), rank 0 waits in
# it. `rdmadoctor run --set hang_after_s=20` must ask the job's RAS (JSON on 2.28.7+) and name
# rank 1. Everything lands under $OUT: the versions, the job's output, rdmadoctor's stderr and
# report, a raw RAS answer in JSON and in text (rdmadoctor's client), and `ncclras`'s own when the
# binary is there. Copy them to tests/fixtures/ncclras/ with the NCCL version, driver and command.
set -u
OUT=${OUT:-/tmp/ras_check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 2
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

{
  date -u; uname -r; nvidia-smi --query-gpu=name,driver_version --format=csv
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
  "$PY" -c 'import rdmadoctor, typer, rich, psutil, prometheus_client; print("rdmadoctor", rdmadoctor.__version__)'
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"
if ! "$PY" -c 'import torch, typer, rich, psutil, prometheus_client' 2>/dev/null; then
  echo "missing Python packages (torch, or rdmadoctor's: typer rich psutil prometheus_client): see $OUT/versions.txt" >&2
  exit 3
fi
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$NGPU" -lt 1 ]; then
  echo "no GPU" >&2
  exit 3
fi
NPROC=$(( NGPU >= 2 ? 2 : 1 ))

cat > "$OUT/job.py" <<'PYEOF'
import datetime, os, sys, time
import torch, torch.distributed as dist
rank = int(os.environ["RANK"])
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=600))  # the watchdog after RAS
x = torch.ones(1 << 20, device="cuda")
for step in range(20):
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print(f"rank {rank} step {step}", flush=True)
if rank == dist.get_world_size() - 1:
    print(f"rank {rank} stops here on purpose (the straggler)", flush=True)
    time.sleep(3600)
dist.all_reduce(x)  # rank 0 waits here for rank 1
torch.cuda.synchronize()
print("never printed", flush=True)
PYEOF

export NCCL_RAS_ENABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,RAS
echo "$PY -m rdmadoctor run --no-gate --set hang_after_s=20 --report-file $OUT/run.json --metrics-port 0 -- $PY -m torch.distributed.run --standalone --nproc_per_node=$NPROC $OUT/job.py" > "$OUT/command.txt"
"$PY" -m rdmadoctor run --no-gate --set hang_after_s=20 --report-file "$OUT/run.json" --metrics-port 0 -- \
  "$PY" -m torch.distributed.run --standalone --nproc_per_node="$NPROC" "$OUT/job.py" > "$OUT/job.out" 2> "$OUT/rdmadoctor.err" &
RUN=$!

# Wait (at most 240 s) for rdmadoctor to have asked RAS, then ask it ourselves in both formats.
for _ in $(seq 240); do
  grep -q "the job looks hung" "$OUT/rdmadoctor.err" 2>/dev/null && break
  sleep 1
done
"$PY" - "$OUT" <<'PYEOF'
import json, os, sys
from rdmadoctor.supervise.ras import RasError, address, ask
out = sys.argv[1]
host, port = address(os.environ)
for fmt in ("json", "text"):
    try:
        got = ask(host, port, json=fmt == "json", nccl_timeout=5)
        open(os.path.join(out, f"ras-raw.{'json' if got['format'] == 'json' else 'txt'}"), "w").write(got["text"])
        print(fmt, "->", got["format"], got["seconds"], "s")
    except RasError as e:
        print(fmt, "failed:", e)
PYEOF
command -v ncclras >/dev/null && { ncclras > "$OUT/ncclras.txt" 2>&1; ncclras -f json > "$OUT/ncclras.json" 2>&1; }
grep -h "^rdmadoctor: metrics on" "$OUT/rdmadoctor.err" | sed 's/.*:\([0-9]*\)\/metrics.*/\1/' | head -1 | while read -r p; do
  "$PY" -c "import urllib.request,sys; print(urllib.request.urlopen('http://127.0.0.1:$p/metrics', timeout=5).read().decode())" \
    | grep '^rdmadoctor_' > "$OUT/metrics.txt"
done

kill -TERM "$RUN" 2>/dev/null   # forwarded to the job's process group
for _ in $(seq 60); do kill -0 "$RUN" 2>/dev/null || break; sleep 1; done
kill -KILL "$RUN" 2>/dev/null
wait "$RUN"; echo "rdmadoctor run exited $?" >> "$OUT/command.txt"
tail -n 40 "$OUT/rdmadoctor.err"
