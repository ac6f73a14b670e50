"""Shared by the *_matrix.py checks: compile a plan, read its report, train it."""
import json, re, subprocess


def compile_and_train(zcc_command, zrun, plan, data, steps=6):
    """Compiles zcc_command (a zcc argv without -o) into plan, trains it for
    steps; returns ([(loss, grad_norm) per step], report text)."""
    subprocess.run(zcc_command + ["-o", plan], check=True)
    report = subprocess.run(zcc_command + ["--emit=report"], check=True, capture_output=True,
                            text=True).stdout
    metrics = plan + ".jsonl"
    subprocess.run([zrun, "train", plan, *data, "--steps", str(steps), "--metrics", metrics],
                   check=True, capture_output=True)
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    return [(r["loss"], r["grad_norm"]) for r in rows], report


def report_bytes(report, name):
    """The bytes of the report row |name| (0 if absent)."""
    m = re.search(r"^\s*" + re.escape(name) + r"\s+(\d+) B", report, re.M)
    return int(m.group(1)) if m else 0


def tiny_models(shared, examples, micro_batch):
    """(model, zcc flags, zrun data flags) of gpt2-tiny and llama-tiny."""
    def model(path, data_dir, name, frozen):
        return (path, ["--micro-batch", str(micro_batch), "--frozen", frozen],
                ["--data", f"input_ids={data_dir}/{name}.input_ids.npy",
                 "--data", f"labels={data_dir}/{name}.labels.npy"])
    return (model(f"{shared}/gpt2-tiny.onnx", shared, "gpt2-tiny", "lifted_tensor"),
            model(f"{examples}/models/llama-tiny.onnx", f"{examples}/models", "llama-tiny",
                  "inv_freq|lifted_tensor"))
