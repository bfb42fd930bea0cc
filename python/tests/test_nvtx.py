"""The same NVTX ranges as C++: epoch > step > phase, module ranges from forward hooks, op ranges."""
import pytest
import torch

import fathom


def one_step(session, model):
    with session.epoch() as e, e.step(4) as step:
        x = step.to_device(torch.randn(4, 8), "cpu")
        with step.forward():
            loss = model(x).sum()
        with step.backward():
            loss.backward()
        with step.optimizer():
            pass


def test_phases_nest_in_steps_in_epochs(nvtx, report_dir, tiny_model):
    with fathom.Session(report_dir=report_dir, nvtx="phases", print_report=False) as session:
        session.watch(tiny_model)
        one_step(session, tiny_model)
    ranges = nvtx.ranges()
    assert ("epoch 0", ()) in ranges
    assert ("step 0", ("epoch 0",)) in ranges
    for phase in ("copy", "forward", "backward", "optimizer"):
        assert (phase, ("epoch 0", "step 0")) in ranges
    assert not [m for m, _ in ranges if "Linear" in m]  # phases level: no module ranges


def test_watched_modules_get_ranges_named_like_the_cpp_ones(nvtx, report_dir):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Sequential(torch.nn.Linear(16, 4)))
    with fathom.Session(report_dir=report_dir, print_report=False) as session:
        assert session.watch(model) is model
        one_step(session, model)
    ranges = nvtx.ranges()
    fwd = ("epoch 0", "step 0", "forward")
    assert ("Sequential", fwd) in ranges
    assert ("0 (Linear)", fwd + ("Sequential",)) in ranges
    assert ("1 (ReLU)", fwd + ("Sequential",)) in ranges
    assert ("2.0 (Linear)", fwd + ("Sequential", "2 (Sequential)")) in ranges


def test_a_module_range_closes_when_forward_raises(nvtx, report_dir):
    class Boom(torch.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), Boom())
    with fathom.Session(report_dir=report_dir, print_report=False) as session:
        session.watch(model)
        with pytest.raises(ValueError):
            one_step(session, model)
    names = [m for m, _ in nvtx.ranges()]  # ranges() asserts every push was popped
    assert "1 (Boom)" in names


def test_close_removes_the_hooks(nvtx, report_dir, tiny_model):
    session = fathom.Session(report_dir=report_dir, print_report=False)
    session.watch(tiny_model)
    assert len(tiny_model[0]._forward_pre_hooks) == 1
    session.close()
    assert len(tiny_model[0]._forward_pre_hooks) == 0 and len(tiny_model[0]._forward_hooks) == 0
    tiny_model(torch.randn(2, 8))
    assert nvtx.ranges() == []


def test_module_range_for_blocks_called_by_hand(nvtx, report_dir):
    with fathom.Session(report_dir=report_dir, print_report=False) as session:
        with session.epoch() as e, e.step() as step, step.forward():
            with fathom.module_range("head"):
                torch.ones(2) * 2
    assert ("head", ("epoch 0", "step 0", "forward")) in nvtx.ranges()
    nvtx.clear()
    with fathom.module_range("no session"):  # no active session: no range, no error
        pass
    assert nvtx.ranges() == []


def test_ops_level_adds_aten_op_ranges_inside_modules(nvtx, report_dir, tiny_model):
    with fathom.Session(report_dir=report_dir, nvtx="ops", print_report=False) as session:
        session.watch(tiny_model)
        one_step(session, tiny_model)
    ranges = nvtx.ranges()
    in_linear = [m for m, a in ranges if a and a[-1] == "0 (Linear)"]
    assert any(m.startswith("aten::linear") for m in in_linear), in_linear
    # backward ops carry the sequence number that ties them to their forward op, as the payload
    # of a range named by the op alone
    payloads = nvtx.payloads()
    assert any("Backward" in m and seq is not None and ", seq = " not in m for m, seq in payloads)
    forward_seqs = {seq for m, seq in payloads if m.startswith("aten::") and seq is not None}
    assert any(seq in forward_seqs for m, seq in payloads if "Backward" in m), payloads
    # closing the session removed the op callback
    nvtx.clear()
    torch.ones(3).sum()
    assert nvtx.ranges() == []
