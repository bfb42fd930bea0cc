"""The trace file and the progress line from Python: Session(trace_file=..., progress=...)."""
import json
import subprocess
import sys

import torch

import fathom


def check_trace(text):
    """The Trace Event Format as the viewers read it: B/E balanced per thread, ts never back."""
    events = json.loads(text)
    depth, last = {}, {}
    for e in events:
        assert e["ph"] in "BEXiM", e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "M":
            continue
        track = (e["pid"], e["tid"])
        assert e["ts"] >= last.get(track, float("-inf")), e
        last[track] = e["ts"]
        if e["ph"] == "B":
            depth[track] = depth.get(track, 0) + 1
        elif e["ph"] == "E":
            depth[track] = depth.get(track, 0) - 1
            assert depth[track] >= 0, e
    assert all(d == 0 for d in depth.values()), depth
    return events


def test_a_python_loop_writes_a_perfetto_trace_with_its_modules(report_dir, tiny_model):
    report_dir.mkdir(parents=True, exist_ok=True)
    trace = report_dir / "run.trace.json"
    opt = torch.optim.SGD(tiny_model.parameters(), lr=0.01)
    with fathom.Session(report_dir=report_dir, print_report=False, trace_file=trace) as session:
        session.watch(tiny_model)
        with session.epoch() as e:
            for _ in range(3):
                with e.step(4) as step:
                    with step.forward():
                        loss = tiny_model(torch.randn(4, 8)).sum()
                    with step.backward():
                        opt.zero_grad()
                        loss.backward()
                    with step.optimizer():
                        opt.step()
        findings = len(session.report["epochs"][0]["findings"])
    events = check_trace(trace.read_text())
    begins = [e for e in events if e["ph"] == "B"]
    assert [e["name"] for e in begins if e["cat"] == "step"] == ["step 0", "step 1", "step 2"]
    assert sum(e["cat"] == "phase" for e in begins) == 9
    assert any(e["cat"] == "module" for e in begins)
    assert sum(e["ph"] == "i" and e["cat"] == "finding" for e in events) == findings


def test_a_bad_trace_name_is_an_error_that_says_what_is_accepted(report_dir):
    try:
        fathom.Session(report_dir=report_dir, trace_file=report_dir / "run.txt")
    except fathom.Error as e:
        assert ".json or .json.gz" in str(e)
    else:
        raise AssertionError("no error")


def test_progress_line_only_where_asked(report_dir):
    code = (
        "import time, torch, fathom\n"
        f"s = fathom.Session(report_dir={str(report_dir)!r}, print_report=False, progress='on')\n"
        "with s.epoch() as e:\n"
        "    for _ in range(2):\n"
        "        with e.step(4):\n"
        "            time.sleep(0.01)\n"
        "s.close()\n"
    )
    # Bytes, not text: universal newlines would turn the line's "\r" into "\n".
    drawn = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert b"\r\x1b[Kfathom  epoch 0  step 0" in drawn.stderr
    auto = subprocess.run([sys.executable, "-c", code.replace("'on'", "'auto'")],
                          capture_output=True, check=True)
    assert b"fathom  epoch" not in auto.stderr  # a pipe is not a terminal
