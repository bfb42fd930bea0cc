"""What a Python loop's session prints, and in which language its fixes are (issue 16)."""
import re
import time

import pytest
import torch

import fathom


def train(session, model, epochs=2, steps=4):
    """Steps that spend most of their time outside any phase scope: a finding every epoch."""
    for _ in range(epochs):
        with session.epoch() as e:
            for _ in range(steps):
                with e.step(4) as step:
                    with step.forward():
                        model(torch.randn(4, 8))
                    time.sleep(0.005)  # outside the scopes


def test_default_prints_a_short_summary_on_stderr_and_the_full_report_at_close(
        report_dir, tiny_model, capfd, monkeypatch):
    monkeypatch.delenv("FATHOM_PRINT", raising=False)
    with fathom.Session(report_dir=report_dir, run_name="quiet") as session:
        train(session, tiny_model)
    out, err = capfd.readouterr()
    assert out == ""  # the program's own stream is left alone
    assert err.count("fathom | quiet | epoch 0 |") == 1
    assert err.count("fathom | quiet | epoch 1 |") == 1
    summaries, full = err.split("fathom report | quiet | epoch 1", 1)
    assert summaries.count("\n") < 16
    assert "fix:" not in summaries
    # The findings said in epoch 0 are one line in epoch 1. Other findings may share it (on a CPU
    # with bf16 units whose forward takes enough of the step, the bf16 suggestion comes first: CI).
    still_true = [line for line in summaries.splitlines() if line.startswith("  still true: ")]
    assert len(still_true) == 1, summaries
    assert "Part of each step runs outside any phase scope" in still_true[0]
    assert "fix:" in full


@pytest.mark.parametrize("mode,expected", [("full", 2), ("off", 0)])
def test_print_keyword(report_dir, tiny_model, capfd, monkeypatch, mode, expected):
    monkeypatch.delenv("FATHOM_PRINT", raising=False)
    with fathom.Session(report_dir=report_dir, run_name="p", print=mode) as session:
        train(session, tiny_model)
    out, err = capfd.readouterr()
    assert out == ""
    assert err.count("step time by phase") == expected


def test_a_bad_print_value_names_the_accepted_ones(report_dir):
    with pytest.raises(fathom.Error, match="summary, full, off"):
        fathom.Session(report_dir=report_dir, print="loud")


def test_a_python_loop_gets_python_fixes(report_dir, tiny_model):
    with fathom.Session(report_dir=report_dir, run_name="py", print_report=False) as session:
        train(session, tiny_model, epochs=1)
        report = session.report
    assert report["environment"]["language"] == "python"
    findings = report["epochs"][0]["findings"]
    assert findings
    for f in findings:
        assert not re.search(r"::|\bauto [a-z]|->|^//|;$", f["fix"], re.M), f["fix"]
    scopes = next(f for f in findings if f["id"] == "scopes.unaccounted")
    assert "with step.forward():" in scopes["fix"]
