#!/usr/bin/env bash
# On a GPU host: run the sidecar ~40 s beside a GPU workload and show memory/utilisation move.
#   bash benchmarks/gpu_sidecar_smoke.sh [OUT_DIR]
# Phases: 8 s idle, ~20 s bf16 matmul loop holding ~20 GB, then idle again. Needs torch.
set -uo pipefail
out=${1:-${OUT:-/tmp/tokenstorm-gpu-smoke}}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
python3 benchmarks/bench_monitor_overhead.py --samples 50 2>&1 | tee "$out/overhead.txt"
python3 -m tokenstorm.monitors gpu --interval 1 --out "$out/gpu.jsonl" --port 9400 --duration 40 >"$out/sidecar.log" 2>&1 &
sidecar=$!
sleep 8
python3 - <<'PY'
import time, torch
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
hold = torch.empty(int(20e9) // 2, device="cuda", dtype=torch.bfloat16)  # ~20 GB held
t0 = time.time(); n = 0
while time.time() - t0 < 20:
    y = x @ x; n += 1
    if n % 50 == 0: torch.cuda.synchronize()
torch.cuda.synchronize()
print(f"workload: {n} matmuls of 8192^3 bf16 in {time.time() - t0:.1f} s")
del hold, x, y; torch.cuda.empty_cache()
PY
python3 - <<'PY' >"$out/served.txt" 2>&1
import json, urllib.request
rows = json.load(urllib.request.urlopen("http://127.0.0.1:9400/samples?since=0", timeout=5))
print(f"served over HTTP: {len(rows)} samples")
PY
wait $sidecar
cat "$out/sidecar.log" "$out/served.txt"
python3 - "$out/gpu.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
t0 = rows[0]["epoch_s"]
print(" t(s)  util%  mem_used_MiB  power_W  temp_C  sm_MHz  throttle")
for r in rows:
    print(f"{r['epoch_s']-t0:5.1f}  {r['util_gpu_pct']:5.0f}  {r['mem_used_mib']:12.0f}  {r['power_w']:7.1f}  "
          f"{r['temp_c']:6.0f}  {r['sm_clock_mhz']:6.0f}  {r['throttle_reasons']:#x}")
busy = [r for r in rows if r["util_gpu_pct"] and r["util_gpu_pct"] > 50]
print(f"samples {len(rows)}; busy {len(busy)}; mem used min {min(r['mem_used_mib'] for r in rows):.0f} "
      f"max {max(r['mem_used_mib'] for r in rows):.0f} MiB; util max {max(r['util_gpu_pct'] for r in rows):.0f}%; "
      f"power max {max(r['power_w'] for r in rows):.0f} W")
PY
