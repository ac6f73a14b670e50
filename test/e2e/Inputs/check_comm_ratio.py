"""Stage 3 moves 1.5x stage 0's bytes (the ZeRO paper's 3 Psi vs 2 Psi).

    check_comm_ratio.py STAGE0.report STAGE3.report
Both reports are of one model, world size and bucket size, stage 3 with every
parameter partitioned. Checks, exactly: stage 3's bytes = 1.5 x stage 0's,
less the backward gathers zcc skips (buckets the backward does not read; the
report lists them), plus the 4-byte gradient-norm all-reduce of sharded
gradients.
"""
import re, sys


def numbers(path):
    text = open(path).read()
    total = float(re.search(r"communication per step\s+(\d+) B", text).group(1))
    ar = re.search(r"all-reduce (\d+) B", text)
    skipped = re.search(r"backward all-gathers skipped: \d+ elements \((\d+) B\)", text)
    return total, float(ar.group(1)), float(skipped.group(1)) if skipped else 0.0


s0, _, _ = numbers(sys.argv[1])
s3, norm, skipped = numbers(sys.argv[2])
expected = 1.5 * s0 - skipped + norm
print(f"stage 0 {s0:.0f} B, stage 3 {s3:.0f} B = 1.5 x stage 0 - {skipped:.0f} B skipped "
      f"+ {norm:.0f} B norm: {'exact' if s3 == expected else f'MISMATCH (expected {expected:.0f})'}")
sys.exit(0 if s3 == expected else 1)
