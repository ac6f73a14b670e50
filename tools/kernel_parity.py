"""Every kernel case on the GPU against the CPU (GPU suite, tools/gpu-check.sh).

    kernel_parity.py ZRUN CASES_DIR
CASES_DIR is test/e2e/Inputs/kernel_cases.py's work directory, made on the
CPU machine: per case a plan, its inputs and the CPU's output y.npy (which
that script checked against NumPy). Here each plan runs with --backend cuda
and its y is compared with the CPU's: 1e-5 relative for float32, 1e-2 for
bfloat16/float16 cases, exact for integer and bool results.
"""
import json, os, subprocess, sys
import numpy as np

zrun, root = sys.argv[1:3]
ok = total = 0
for name in sorted(os.listdir(root)):
    d = os.path.join(root, name)
    if not os.path.exists(os.path.join(d, "y.npy")):
        continue
    total += 1
    args = []
    for n in json.load(open(os.path.join(d, "inputs.json"))):
        args += ["--data", f"{n}={os.path.join(d, n + '.npy')}"]
    r = subprocess.run([zrun, "eval", os.path.join(d, "m.zplan"), "--backend", "cuda", "--output",
                        f"y={os.path.join(d, 'gpu.npy')}"] + args, capture_output=True, text=True)
    if r.returncode:
        print(f"FAIL {name}: {r.stderr.strip()[:300]}")
        continue
    cpu, gpu = np.load(os.path.join(d, "y.npy")), np.load(os.path.join(d, "gpu.npy"))
    native = [l for l in r.stderr.splitlines() if "zrun: cuda" in l]
    if cpu.dtype.kind == "f":
        err = np.linalg.norm(gpu.astype(np.float64) - cpu) / max(np.linalg.norm(cpu.astype(np.float64)), 1e-30)
        tol = 1e-2 if name.startswith(("bf16_", "fp16_")) else 1e-5
        good = cpu.shape == gpu.shape and err <= tol
        detail = f"relative error {err:.2e} (tolerance {tol:g})"
    else:
        good = cpu.shape == gpu.shape and np.array_equal(cpu, gpu)
        detail = "exact" if good else "values differ"
    ok += good
    print(f"{'ok  ' if good else 'FAIL'} {name}: {detail} | {native[0] if native else ''}")
print(f"{ok} of {total} kernel cases match the CPU on the GPU")
sys.exit(0 if ok == total else 1)
