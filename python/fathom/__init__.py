"""fathom for PyTorch: the same engine, scopes and reports as fathom's C++ API.

    import fathom
    with fathom.Session(report_dir="reports") as session:
        session.watch(model)                      # NVTX range per module (forward hooks)
        for epoch in range(epochs):
            with session.epoch() as e:            # report written when the block ends
                for x, y in loader:
                    with e.step(len(x)) as step:
                        x = step.to_device(x, device)
                        y = step.to_device(y, device)
                        with step.forward():
                            loss = criterion(model(x), y)
                        with step.backward():
                            loss.backward()
                        with step.optimizer():
                            optimizer.step()
                            optimizer.zero_grad()

FATHOM_* environment variables override the arguments, as in C++.
"""

import json as _json

import torch  # loads LibTorch before the extension that links it

from . import _C

__version__ = _C.__version__
Error = _C.Error
Epoch = _C.Epoch
Step = _C.Step
Phase = _C.Phase
ModuleRange = _C.ModuleRange

if torch.__version__.split("+")[0] != _C.torch_version.split("+")[0]:
    raise ImportError(
        f"fathom was built against torch {_C.torch_version} but torch {torch.__version__} is "
        "installed: reinstall fathom (pip install --no-build-isolation ./python) with this torch"
    )

__all__ = ["Session", "Epoch", "Step", "Phase", "ModuleRange", "Error", "module_range", "read_report",
           "__version__"]


class Session:
    """A fathom session: NVTX ranges, measurements, and a report at the end of each epoch.

    Arguments left as None take fathom's defaults (report_dir "fathom-reports", mode "suggest",
    nvtx "modules", cupti on, the terminal report printed, FLOPs counted); FATHOM_* variables win
    over both. mode: off | observe | suggest | auto.  nvtx: off | phases | modules | ops.
    count_flops: count the FLOPs of the first steps of each epoch (the report's "flops").
    trace_file: also write a Chrome / Perfetto trace of the run there (.json or .json.gz), for
    ui.perfetto.dev; FATHOM_TRACE. progress: auto | on | off, the live line on standard error
    (auto: when it is a terminal); FATHOM_PROGRESS. print: summary | full | off, what is printed
    on standard error at each epoch end (summary: a few lines, and the full report at the end);
    FATHOM_PRINT.
    """

    def __init__(self, report_dir=None, run_name=None, mode=None, nvtx=None, record_shapes=None,
                 cupti=None, print_report=None, count_flops=None, trace_file=None,
                 progress=None, print=None):
        self._c = _C.Session(report_dir=None if report_dir is None else str(report_dir),
                             run_name=run_name, mode=mode, nvtx=nvtx, record_shapes=record_shapes,
                             cupti=cupti, print_report=print_report, count_flops=count_flops,
                             trace_file=None if trace_file is None else str(trace_file),
                             progress=progress, print=print)
        self._hooks = []
        self._epochs = []  # the report's ended epochs, each read once (see report)

    # -- the loop ------------------------------------------------------------------------------
    def epoch(self):
        """An epoch scope: `with session.epoch() as e:`; its end writes the report."""
        return self._c.epoch()

    def watch(self, model):
        """Opens an NVTX range around the forward of `model` and of each of its submodules,
        named like the C++ ranges: "ResNet" for the root, "layer1.0.conv1 (Conv2d)" below it.
        Its parameters and gradients go into the report's memory footprint, as in C++.
        Returns the model. The hooks go when the session closes."""
        if self._c.active:
            self._c.watch_parameters(id(model), type(model).__name__, list(model.parameters()))
        if not self._c.active or self._c.nvtx not in ("modules", "ops"):
            return model
        for name, module in model.named_modules():
            kind = type(module).__name__
            r = _C.ModuleRange(f"{name} ({kind})" if name else kind)
            self._hooks.append(module.register_forward_pre_hook(r.pre_hook))
            self._hooks.append(module.register_forward_hook(r.post_hook, always_call=True))
        return model

    def forward(self, module, *args, **kwargs):
        """Runs module(*args, **kwargs) as fathom::forward does in C++: when Auto mode's mixed
        precision made it fail (an op with no 16-bit kernel), mixed precision is off for good and
        it runs again at once in fp32, so Auto never ends the loop. Auto tries mixed precision
        only in loops whose forwards run through here: elsewhere such a failure would reach the
        loop. Call it inside `with step.forward():`."""
        self._c.amp_region_runs()
        try:
            return module(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 (fathom decides whether it was its own doing)
            if not self._c.amp_region_failed(str(e)):
                raise
        return module(*args, **kwargs)

    def configure_amp(self, when="mode", dtype=None, warmup_steps=None, watch_steps=None,
                      tolerance=None, rollback_if_slower=None, native_only=None):
        """Mixed precision, as fathom::configure_amp in C++; call it before the first epoch.

        when: "mode" (mode="auto" runs the first steps in fp32, then turns autocast on around
        every `step.forward()` and rolls it back if the loss goes non-finite, drifts or the steps
        get slower), "always" (from the first step), or "never". dtype: "bf16" or "fp16"; None
        picks bf16 where the device has it. Give the loss with `step.loss(loss)` so the policy can
        watch it. fathom cannot scale the loss for a Python optimizer: in "mode" it never picks
        fp16; with when="always", dtype="fp16" bring torch.amp.GradScaler. native_only (default
        True): in "mode", try 16 bits only where the device runs them natively (Tensor Cores; a
        CPU's AMX or AVX-512 BF16 units within ONEDNN_MAX_CPU_ISA); False tries them anywhere.
        """
        self._c.configure_amp(when=when, dtype=dtype, warmup_steps=warmup_steps, watch_steps=watch_steps,
                              tolerance=tolerance, rollback_if_slower=rollback_if_slower,
                              native_only=native_only)

    def close(self):
        """Ends the session: removes module hooks and op callbacks; the report stays readable."""
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    # -- what it knows -------------------------------------------------------------------------
    @property
    def active(self):
        """False when fathom is off (mode "off" or FATHOM_MODE=off): every scope is then a no-op."""
        return self._c.active

    @property
    def mode(self):
        return self._c.mode

    @property
    def nvtx(self):
        return self._c.nvtx

    @property
    def report_dir(self):
        return self._c.report_dir

    @property
    def report_path(self):
        """Where the JSON report is written when the session ends ("" when fathom is off); while
        it runs, each ended epoch is a line of the journal `report_path + "l"` (read_report reads
        either)."""
        return self._c.report_path

    def flush_report(self):
        """Waits until every ended epoch is on disk (an epoch's end never waits for the disk)."""
        self._c.flush_report()

    @property
    def report(self):
        """The report so far (every ended epoch) as a dict, schema docs/report-schema.md. Each
        ended epoch is read from the session once, so a read costs the epochs ended since the
        last one, not the run; the dicts of earlier epochs are the same objects at every read.
        The session holds only its last epochs in memory: epochs ended since a read many epochs
        ago come from its report on disk. For the latest epoch alone, last_epoch is cheaper; for
        the document's text, report_json()."""
        doc = _json.loads(self._c.report_head_json())
        epochs = self._epochs
        after = epochs[-1]["index"] if epochs else -1
        epochs.extend(_json.loads(line)["epoch"] for line in self._c.epoch_jsons_after(after))
        doc["epochs"] = list(epochs)
        return doc

    @property
    def last_epoch(self):
        """The last ended epoch's report as a dict (None before the first): one epoch's JSON,
        whatever the run's length."""
        line = self._c.last_epoch_json()
        if not line:
            return None
        epoch = _json.loads(line)["epoch"]
        if self._epochs and self._epochs[-1]["index"] == epoch["index"]:
            return self._epochs[-1]
        return epoch

    def report_json(self):
        """The whole run as the JSON document the session writes at its end (the same bytes as
        read_report's file once it ended): text, serialized on request only."""
        return self._c.report_json()

    def terminal_report(self, epoch=-1):
        """The terminal summary of one epoch (the last one by default); "" before the first."""
        return self._c.terminal_report(epoch)


def read_report(path):
    """A report on disk as a dict: the `<run>.json` a session wrote at its end, or, while it runs
    or after it was killed, the journal `<run>.jsonl` it appends each ended epoch to (passing the
    `.json` path reads the journal when the document is not there)."""
    return _json.loads(_C.read_report_json(str(path)))


def module_range(label):
    """An NVTX module range for a block you call by hand: `with fathom.module_range("head"):`."""
    return _C.ModuleRange(label)
