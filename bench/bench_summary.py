"""Summarizes bench/gpu-bench.sh's runs as a markdown table (docs/benchmarks.md).

    bench_summary.py torch.txt zcc.jsonl WARMUP compile.txt report zcc.log [z3.report z3.log]

Tokens per step: the PyTorch run's batch x seq (its "config").
tokens/s of zcc: the mean step time of the steps after WARMUP (as the PyTorch
script times the steps after its warm-up); MFU with the PyTorch script's FLOP
count per token (6N + 12LHT) and peak; memory: what zrun measured on the device
(cudaMemGetInfo) next to the plan's arenas from zcc's report.
"""
import json, os, re, sys

torch_txt, zcc_jsonl, warmup, compile_txt, report, zcc_log = sys.argv[1:7]
warmup = int(warmup)
torch, config = {}, {"batch": 16, "seq": 1024}
for line in open(torch_txt):
    if line.startswith('{"config"'):
        whole = json.loads(line)
        config, torch = whole["config"], whole["results"]
        continue
    mode, _, rest = line.partition(" ")
    if mode in ("eager", "compile") and rest.startswith("{"):
        torch[mode] = json.loads(rest)
steps = [json.loads(l) for l in open(zcc_jsonl) if l.strip()]
timed = steps[warmup:]
step_ms = sum(s["step_ms"] for s in timed) / len(timed)
tokens = config["batch"] * config["seq"]
tps = tokens / (step_ms / 1e3)
ref = torch.get("compile") or torch.get("eager")
flops_per_token = ref["tflops"] * 1e12 / ref["tokens_per_s"]
mfu = tps * flops_per_token / 1e12 / (ref["tflops"] / ref["mfu"])


def measured(log):
    m = re.search(r"device \d+: (\d+) bytes .*? at most(?:, for (\d+) ranks)?", open(log).read())
    return (int(m.group(1)), int(m.group(2) or 1)) if m else (None, 1)


def planned(report_path):
    m = re.search(r"^\s*peak\s+(\d+) B", open(report_path).read(), re.M)
    return int(m.group(1))


compile_s = re.search(r"([\d.]+) s", open(compile_txt).read()).group(1)
dev, _ = measured(zcc_log)
plan = planned(report)
gib = 2 ** 30
print("| | tokens/s | step | MFU (6N + 12LHT) | peak memory | warm-up / compile |")
print("|---|---|---|---|---|---|")
for mode in ("eager", "compile"):
    if mode in torch:
        r = torch[mode]
        print(f"| PyTorch {'torch.compile' if mode == 'compile' else 'eager'} | {r['tokens_per_s']:,.0f} | "
              f"{r['step_ms']:.1f} ms | {100 * r['mfu']:.1f}% | {r['peak_mem_gib']:.2f} GiB | {r['warmup_s']:.1f} s |")
label = os.environ.get("ZCC_LABEL", "zcc (zrun --backend cuda)")
print(f"| {label} | {tps:,.0f} | {step_ms:.1f} ms | {100 * mfu:.1f}% | "
      f"{dev / gib:.2f} GiB measured, {plan / gib:.2f} GiB planned | {compile_s} s compile (2-core machine) |")
print()
print(f"zcc: steps {warmup + 1}-{len(steps)} timed; first loss {steps[0]['loss']:.4f}, last {steps[-1]['loss']:.4f}; "
      f"PyTorch's last loss (eager) {torch.get('eager', {}).get('loss', float('nan')):.4f}")
print(f"memory: measured {dev} B vs planned arenas {plan} B: {100 * (dev - plan) / plan:+.2f}%")
if len(sys.argv) > 8:
    dev3, ranks = measured(sys.argv[8])
    plan3 = planned(sys.argv[7])
    print(f"ZeRO-3, {ranks} in-process ranks on the GPU: measured {dev3} B for {ranks} ranks = "
          f"{dev3 // ranks} B per rank vs planned {plan3} B per rank: {100 * (dev3 / ranks - plan3) / plan3:+.2f}%")
