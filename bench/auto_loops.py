#!/usr/bin/env python3
"""Issue 24's done-when table: each loop kind's total CPU time under FATHOM_MODE=auto against the
same run under FATHOM_MODE=off (fathom's calls in place, nothing done), and Auto's mixed-precision
decision from the run's report. Runs alternate off/auto so a change in machine load hits both;
the table gives the median of --repeat runs of each.

  bench/auto_loops.py BUILD [--repeat N] [--avx2] [--python VENV_PYTHON]

--avx2 runs everything with ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 (the kernels of a CPU
without bf16 units). --python adds the Python loop (python/tests' style: a small MLP on MNIST-sized
data through fathom's Python package), when that interpreter imports fathom.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

LOOPS = ["linreg", "mnist", "gan", "lstm", "resnet", "transformer"]

PY_LOOP = r"""
import torch, fathom
torch.set_num_threads(1); torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x_all, y_all = torch.randn(512, 1, 28, 28), torch.randint(0, 10, (512,))
with fathom.Session(report_dir="/tmp/fathom-auto-loops/python", run_name="python", print_report=False) as session:
    session.watch(model)
    with session.epoch() as e:
        for s in range(600):
            i = (s * 32) % 512
            x, y = x_all[i:i + 32], y_all[i:i + 32]
            with e.step(32) as step:
                with step.forward():
                    loss = torch.nn.functional.cross_entropy(session.forward(model, x).float(), y)
                step.loss(loss)
                with step.backward():
                    opt.zero_grad(); loss.backward()
                with step.optimizer():
                    opt.step()
"""


def cpu_seconds(cmd, env):
    """User + system CPU time of the command and its children."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read()
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{err}")
    return usage.ru_utime + usage.ru_stime


def decision(loop):
    """What Auto did, from the run's last report: the mixed-precision events, kinds only."""
    files = sorted(glob.glob(f"/tmp/fathom-auto-loops/{loop}/**/*.json", recursive=True),
                   key=os.path.getmtime)
    for path in reversed(files):
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            continue
        for epoch in report.get("epochs", []):
            mp = epoch.get("mixed_precision")
            if mp is not None:
                kinds = [f"{e['kind']}@{e['step']}" for e in mp.get("events", [])]
                return ", ".join(kinds) or mp.get("state", "")
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--avx2", action="store_true")
    ap.add_argument("--python")
    ap.add_argument("--loops", default=",".join(LOOPS))
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "auto_loops_bench")
    base = dict(os.environ, FATHOM_PRINT="off", FATHOM_PROGRESS="off", OMP_NUM_THREADS="1")
    if a.avx2:
        base.update(ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2")
    runs = [(loop, [exe, loop]) for loop in a.loops.split(",")]
    if a.python:
        runs.append(("python", [a.python, "-c", PY_LOOP]))
    print(f"{'loop':<12} {'off s':>7} {'auto s':>7} {'ratio':>6}  auto's mixed precision"
          f"{'  (AVX2 kernels)' if a.avx2 else ''}")
    worst = 0.0
    for loop, cmd in runs:
        off, auto = [], []
        for _ in range(a.repeat):
            off.append(cpu_seconds(cmd, dict(base, FATHOM_MODE="off")))
            auto.append(cpu_seconds(cmd, dict(base, FATHOM_MODE="auto")))
        o, u = statistics.median(off), statistics.median(auto)
        worst = max(worst, u / o)
        print(f"{loop:<12} {o:7.2f} {u:7.2f} {u / o:6.3f}  {decision(loop)}", flush=True)
    print(f"worst ratio {worst:.3f} (target <= 1.1)")


if __name__ == "__main__":
    main()
