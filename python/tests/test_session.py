"""The Python scopes drive the same session as the C++ ones: same report, same failure rules."""
import json

import pytest
import torch

import fathom


def train(session, model, epochs=2, steps=3, batch=4, fail_at=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        with session.epoch() as e:
            for i in range(steps):
                x, y = torch.randn(batch, 8), torch.randn(batch, 4)
                with e.step(batch) as step:
                    x = step.to_device(x, "cpu")
                    with step.forward():
                        if fail_at == (epoch, i):
                            raise RuntimeError("injected failure in forward")
                        loss = torch.nn.functional.mse_loss(model(x), y)
                    with step.backward():
                        opt.zero_grad()
                        loss.backward()
                    with step.optimizer():
                        opt.step()


def test_a_loop_writes_the_json_report_of_every_epoch(report_dir, tiny_model):
    with fathom.Session(report_dir=report_dir, run_name="loop", print_report=False) as session:
        session.watch(tiny_model)
        train(session, tiny_model, epochs=2, steps=3, batch=4)
        assert session.report_path == str(report_dir / "loop.json")
        # While the session runs, each ended epoch is a line of the journal loop.jsonl.
        session.flush_report()
        assert not (report_dir / "loop.json").exists()
        assert fathom.read_report(session.report_path) == session.report
        assert fathom.read_report(report_dir / "loop.jsonl") == session.report
        in_memory = session.report
    # The session's end writes the whole run once, as one JSON document, and the HTML page.
    on_disk = json.loads((report_dir / "loop.json").read_text())
    assert on_disk == in_memory
    assert not (report_dir / "loop.jsonl").exists()
    assert (report_dir / "loop.html").exists()
    assert on_disk["schema"] == "fathom.report"
    assert on_disk["environment"]["torch_version"].split("+")[0] == torch.__version__.split("+")[0]
    assert [e["index"] for e in on_disk["epochs"]] == [0, 1]
    for epoch in on_disk["epochs"]:
        assert (epoch["steps"], epoch["failed_steps"], epoch["samples"]) == (3, 0, 12)
        assert not epoch["ended_by_exception"]
        for phase in ("forward", "backward", "optimizer"):
            assert epoch["phases"][phase]["count"] == 3
            assert epoch["phases"][phase]["aborted"] == 0
            assert epoch["phases"][phase]["wall_ms_total"] > 0
        # to_device to the tensor's own device copies nothing: a copy phase, no copy record
        assert epoch["phases"]["copy"]["count"] == 3
        assert epoch["copies"] == []
        assert epoch["samples_per_second"] > 0


def test_a_long_run_is_read_an_epoch_at_a_time(report_dir, tiny_model):
    # issue 24: session.report serialized the whole run at each read, and the session kept every
    # epoch in memory. The session now keeps its last epochs (the earlier ones are in its journal),
    # last_epoch is one epoch's JSON, and report_json() is the whole document, on request.
    session = fathom.Session(report_dir=report_dir, run_name="long", print_report=False)
    assert session.last_epoch is None
    train(session, tiny_model, epochs=3, steps=1, batch=2)
    assert session.last_epoch["index"] == 2
    first = session.report
    assert [e["index"] for e in first["epochs"]] == [0, 1, 2]
    train(session, tiny_model, epochs=37, steps=1, batch=2)
    session.flush_report()
    train(session, tiny_model, epochs=1, steps=1, batch=2)  # the early epochs leave memory here
    assert session.last_epoch["index"] == 40
    # 38 epochs ended since the last read, most of them no longer in memory: read from the journal.
    report = session.report
    assert [e["index"] for e in report["epochs"]] == list(range(41))
    assert report["epochs"][0] is first["epochs"][0]  # an epoch is read once
    assert json.loads(session.report_json()) == report
    assert fathom.read_report(session.report_path) == report
    session.close()
    assert session.last_epoch["index"] == 40
    document = (report_dir / "long.json").read_text()
    assert session.report_json() == document
    assert json.loads(document) == session.report


def test_the_report_survives_an_exception_in_forward(report_dir, tiny_model):
    session = fathom.Session(report_dir=report_dir, run_name="fail", print_report=False)
    with pytest.raises(RuntimeError, match="injected failure"):
        train(session, tiny_model, epochs=1, steps=3, fail_at=(0, 1))
    # On disk before the exception left the epoch: an epoch ended by one waits for the disk.
    epoch = fathom.read_report(report_dir / "fail.json")["epochs"][0]
    assert epoch["ended_by_exception"]
    assert (epoch["steps"], epoch["failed_steps"]) == (2, 1)
    assert (epoch["phases"]["forward"]["count"], epoch["phases"]["forward"]["aborted"]) == (2, 1)
    assert epoch["phases"]["backward"]["count"] == 1
    # The session goes on: the next epoch is measured as usual.
    train(session, tiny_model, epochs=1, steps=2)
    assert [e["steps"] for e in session.report["epochs"]] == [2, 2]
    session.close()


def test_off_mode_measures_nothing_and_changes_nothing(report_dir, tiny_model):
    session = fathom.Session(report_dir=report_dir, mode="off")
    assert not session.active
    assert session.report_path == ""
    train(session, tiny_model, epochs=1, steps=2)
    assert session.report["epochs"] == []
    assert not report_dir.exists()


def test_environment_variables_win_over_arguments(report_dir, monkeypatch):
    monkeypatch.setenv("FATHOM_MODE", "off")
    assert not fathom.Session(report_dir=report_dir, mode="suggest").active
    monkeypatch.setenv("FATHOM_MODE", "observe")
    monkeypatch.setenv("FATHOM_NVTX", "ops")
    s = fathom.Session(report_dir=report_dir, print_report=False)
    assert (s.active, s.mode, s.nvtx) == (True, "observe", "ops")
    s.close()


def test_bad_values_name_the_value_and_the_accepted_ones(report_dir, monkeypatch):
    with pytest.raises(fathom.Error, match=r"mode='fast' is not one of: off, observe, suggest, auto"):
        fathom.Session(report_dir=report_dir, mode="fast")
    with pytest.raises(fathom.Error, match=r"nvtx='all'.*ops"):
        fathom.Session(report_dir=report_dir, nvtx="all")
    monkeypatch.setenv("FATHOM_NVTX", "loud")
    with pytest.raises(fathom.Error, match="FATHOM_NVTX='loud'"):
        fathom.Session(report_dir=report_dir)
    assert issubclass(fathom.Error, RuntimeError)


def test_run_names_are_checked_like_fathom_run_name(report_dir, tmp_path):
    # issue 17: run_name='../escape' wrote outside the report folder.
    for bad in ["../escape", ".", "..", "a\nb", "r" * 192]:
        with pytest.raises(fathom.Error, match=r"run_name.*not a valid run name.*1 to 191 bytes"):
            fathom.Session(report_dir=report_dir, run_name=bad)
    assert not (tmp_path / "escape.json").exists()


def test_an_empty_run_name_and_a_nul_in_a_path_are_refused(report_dir, tmp_path):
    # issue 25: run_name="" silently took the default name; a NUL cut report_dir short, and the
    # report went to the folder before it.
    with pytest.raises(fathom.Error, match="run_name='' is empty"):
        fathom.Session(report_dir=report_dir, run_name="")
    with pytest.raises(fathom.Error, match="NUL"):
        fathom.Session(report_dir=str(tmp_path / "reports") + "\0elsewhere")
    assert not (tmp_path / "reports").exists()


def test_a_sample_count_no_batch_has_is_refused(report_dir):
    # issue 25: `samples: -24` and a negative throughput reached the report.
    for mode in ["suggest", "off"]:
        with fathom.Session(report_dir=report_dir, mode=mode, print_report=False) as session:
            with session.epoch() as e:
                with pytest.raises(fathom.Error, match="a step of -24 samples is not valid"):
                    e.step(-24)
                with pytest.raises(fathom.Error, match="not valid"):
                    e.step(2**62)


def test_an_unwritable_report_folder_fails_at_start(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(fathom.Error, match=str(blocker)):
        fathom.Session(report_dir=blocker / "reports")


def test_scopes_used_out_of_place_raise_with_the_fix(report_dir):
    session = fathom.Session(report_dir=report_dir, print_report=False)
    e = session.epoch()
    with pytest.raises(fathom.Error, match="step outside an epoch"):
        with e.step(1):
            pass
    with e:
        with pytest.raises(fathom.Error, match="epoch inside an epoch"):
            with session.epoch():
                pass
        step = e.step(1)
        with pytest.raises(fathom.Error, match="outside its step"):
            step.to_device(torch.ones(1), "cpu")
        with pytest.raises(fathom.Error, match="forward\\(\\) phase outside its step"):
            with step.forward():
                pass
        with step:
            with pytest.raises(fathom.Error, match="step inside a step"):
                with e.step(1):
                    pass
            with pytest.raises(fathom.Error, match="phase 'fwd' is not one of"):
                step.phase("fwd")
            with step.phase("forward"):
                pass
        with pytest.raises(fathom.Error, match="step scope entered twice"):
            with step:
                pass
    with pytest.raises(fathom.Error, match="epoch scope entered twice"):
        with e:
            pass
    assert session.report["epochs"][0]["phases"]["forward"]["count"] == 1
    session.close()


def test_a_phase_inside_another_raises_with_the_fix(report_dir):
    # C++ warns for the same mistake (tests/hooks/session/session_models_test.cpp): one phase's time
    # would be counted in both.
    session = fathom.Session(report_dir=report_dir, print_report=False)
    with session.epoch() as e:
        with e.step(1) as step:
            with step.forward():
                with pytest.raises(fathom.Error,
                                   match=r"backward\(\) phase inside the open forward\(\) phase: "
                                         r"leave the `with step.forward\(\):` block first"):
                    with step.backward():
                        pass
            with step.backward():  # after the forward block: fine
                pass
    phases = session.report["epochs"][0]["phases"]
    assert phases["forward"]["count"] == 1 and phases["backward"]["count"] == 1
    session.close()


def test_close_keeps_the_report_and_makes_old_scopes_harmless(report_dir, tiny_model):
    session = fathom.Session(report_dir=report_dir, run_name="closed", print_report=False)
    train(session, tiny_model, epochs=1, steps=2)
    session.close()
    assert not session.active
    assert session.report_path == str(report_dir / "closed.json")
    assert len(session.report["epochs"]) == 1
    train(session, tiny_model, epochs=1, steps=2)  # scopes of a closed session are no-ops
    assert len(session.report["epochs"]) == 1
    assert "forward" in session.terminal_report()


def test_to_device_is_tensor_to(report_dir):
    with fathom.Session(report_dir=report_dir, print_report=False) as session:
        with session.epoch() as e, e.step(2) as step:
            t = torch.arange(6.0).reshape(2, 3)
            out = step.to_device(t, torch.device("cpu"))
            assert out.data_ptr() == t.data_ptr()  # same device: .to() returns the tensor itself
            with pytest.raises(fathom.Error):
                step.phase("nope")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (host-to-device copies)")
def test_to_device_records_host_to_device_copies_gpu(report_dir):
    with fathom.Session(report_dir=report_dir, print_report=False) as session:
        with session.epoch() as e, e.step(2) as step:
            pageable = torch.ones(1024, 256)
            pinned = torch.ones(1024, 256).pin_memory()
            a = step.to_device(pageable, "cuda")
            b = step.to_device(pinned, "cuda", non_blocking=True)
            assert a.is_cuda and b.is_cuda and torch.equal(a, b)
        copies = session.report["epochs"][0]["copies"]
    assert {(c["direction"], c["pinned"], c["non_blocking"], c["bytes"]) for c in copies} == {
        ("host_to_device", False, False, 1024 * 256 * 4),
        ("host_to_device", True, True, 1024 * 256 * 4),
    }


def test_the_report_reads_each_epoch_once_and_sizes_a_python_model(report_dir, tiny_model):
    # Issue 24: session.report serialized the whole run at every read, and a watched Python model
    # had footprint and hardware_fit null with no reason.
    with fathom.Session(report_dir=report_dir, run_name="twice", print_report=False) as session:
        session.watch(tiny_model)
        train(session, tiny_model, epochs=2, steps=2)
        first, second = session.report, session.report
        assert first["epochs"][0] is second["epochs"][0]  # read once, not serialized again
        session.flush_report()
        assert fathom.read_report(report_dir / "twice.jsonl") == first
        footprint = first["epochs"][-1]["footprint"]
        assert footprint["parameter_count"] == sum(p.numel() for p in tiny_model.parameters())
        assert footprint["gradient_bytes"] > 0
        # Python's forward runs where fathom sees no saved tensors: said, not zero.
        assert footprint["activation_bytes"] is None
        assert footprint["activation_bytes_why"]
        assert first["epochs"][-1]["hardware_fit"] is not None
