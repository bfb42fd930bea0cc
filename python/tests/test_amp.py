"""Mixed precision from Python: the session's autocast around forward phases, its report section."""
import pytest
import torch

import fathom


def test_always_runs_forward_phases_under_bf16_autocast_on_cpu(report_dir, tiny_model):
    with fathom.Session(report_dir=report_dir, print_report=False) as session:
        session.configure_amp(when="always", dtype="bf16")
        opt = torch.optim.SGD(tiny_model.parameters(), lr=0.1)
        with session.epoch() as e:
            for _ in range(3):
                with e.step(4) as step:
                    with step.forward():
                        assert torch.is_autocast_enabled("cpu")
                        out = tiny_model(torch.randn(4, 8))
                        assert out.dtype == torch.bfloat16
                        loss = out.float().pow(2).mean()
                    assert not torch.is_autocast_enabled("cpu")  # only inside forward phases
                    step.loss(loss)
                    with step.backward():
                        opt.zero_grad()
                        loss.backward()
                    with step.optimizer():
                        opt.step()
        mp = session.report["epochs"][0]["mixed_precision"]
    assert (mp["dtype"], mp["device_type"], mp["grad_scaling"]) == ("bf16", "cpu", False)
    assert (mp["steps_low_precision"], mp["steps_fp32"]) == (3, 0)
    assert tiny_model[0].weight.dtype == torch.float32  # the weights stay fp32


def test_never_keeps_fp32(report_dir, tiny_model):
    with fathom.Session(report_dir=report_dir, mode="auto", print_report=False) as session:
        session.configure_amp(when="never")
        with session.epoch() as e, e.step(4) as step, step.forward():
            assert not torch.is_autocast_enabled("cpu")
            assert tiny_model(torch.randn(4, 8)).dtype == torch.float32


def test_amp_options_are_checked(report_dir):
    with fathom.Session(report_dir=report_dir, print_report=False) as session:
        with pytest.raises(fathom.Error, match="when='sometimes' is not one of: mode, always, never"):
            session.configure_amp(when="sometimes")
        with pytest.raises(fathom.Error, match="dtype='int8'"):
            session.configure_amp(dtype="int8")
        with session.epoch():
            with pytest.raises(fathom.Error, match="before `with session.epoch\\(\\)`"):
                session.configure_amp(when="always")


def test_amp_numbers_no_step_could_use_are_refused_also_when_off(report_dir):
    # issue 25: NaN or infinite tolerance and a negative warm-up were accepted.
    for mode in ["auto", "off"]:
        with fathom.Session(report_dir=report_dir, mode=mode, print_report=False) as session:
            for t in [float("nan"), float("inf"), -0.5]:
                with pytest.raises(fathom.Error, match="tolerance must be a finite number >= 0"):
                    session.configure_amp(tolerance=t)
            with pytest.raises(fathom.Error, match="warmup_steps must be >= 0"):
                session.configure_amp(warmup_steps=-1)
            with pytest.raises(fathom.Error, match="watch_steps must be >= 0"):
                session.configure_amp(watch_steps=-1)


def _auto_amp_events(report_dir, tiny_model, through_session):
    with fathom.Session(report_dir=report_dir, mode="auto", print_report=False) as session:
        # native_only=False: the refusal tested here comes after the check for bf16 units, which
        # refuses first on a CPU without them (issue 28: the path forced, on every host).
        session.configure_amp(warmup_steps=3, watch_steps=4, native_only=False)
        with session.epoch() as e:
            for _ in range(6):
                with e.step(4) as step:
                    with step.forward():
                        x = torch.randn(4, 8)
                        out = session.forward(tiny_model, x) if through_session else tiny_model(x)
                        loss = out.float().pow(2).mean()
                    step.loss(loss)
                    with step.backward():
                        loss.backward()
        return session.report["epochs"][0]["mixed_precision"]["events"]


def test_auto_tries_mixed_precision_only_where_a_failure_can_run_again(report_dir, tiny_model):
    # issue 24: a 16-bit failure in a plain `model(x)` would reach the loop; Auto does not try
    # there, and says to run the model through session.forward.
    events = _auto_amp_events(report_dir, tiny_model, through_session=False)
    assert [e["kind"] for e in events] == ["not_enabled"]
    assert "session.forward(model, x)" in events[0]["detail"]
    events = _auto_amp_events(report_dir, tiny_model, through_session=True)
    assert events, "Auto decided something"
    assert "outside fathom::forward" not in events[0]["detail"]
