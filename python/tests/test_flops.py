"""FLOPs per step, counted by fathom's session, against torch.utils.flop_counter.FlopCounterMode.

Each model trains under a fathom session for two epochs of STEPS + 1 steps. fathom counts the
first STEPS steps of each epoch; in the first epoch FlopCounterMode counts the same steps, phase by
phase, and the second runs fathom alone. Per phase and per op class the two must be equal, exactly.
On a CPU FlopCounterMode does not count scaled_dot_product_attention's CPU kernel: fathom does,
and those entries are checked against torch's own attention formulas instead.
"""
import contextlib
from collections import defaultdict

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

import fathom

STEPS = 3  # fathom counts the first 3 completed steps of each epoch (kFlopProfiledSteps)
CPU_ATTENTION = "aten::_scaled_dot_product_flash_attention_for_cpu"
CPU_ATTENTION_BACKWARD = CPU_ATTENTION + "_backward"

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="no CUDA device")),
]


class Mlp(nn.Module):
    """Linear layers on a 3-D input (linear folds it into addmm), one without bias (mm), and a
    product called directly (under autocast: cast, then the same mm again, inside)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 48, bias=False)
        self.head = nn.Parameter(torch.randn(48, 10) / 7)

    def forward(self, x):
        h = F.gelu(self.fc2(F.relu(self.fc1(x))))
        return torch.mm(h.reshape(-1, 48), self.head)

    @staticmethod
    def batch(device):
        return torch.randn(8, 5, 32, device=device)


class Cnn(nn.Module):
    """Convolutions strided, padded, grouped and transposed; the first needs no input gradient."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4), nn.ReLU(),
            nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

    def forward(self, x):
        return self.features(x)

    @staticmethod
    def batch(device):
        return torch.randn(4, 3, 16, 16, device=device)


class TransformerBlock(nn.Module):
    """Pre-norm attention (causal scaled_dot_product_attention) and an MLP."""

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.attention_shapes = []  # (q, k, v) of each call: for the CPU kernel's formula

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (m.view(b, t, self.heads, c // self.heads).transpose(1, 2) for m in (q, k, v))
        self.attention_shapes.append((q.shape, k.shape, v.shape))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))

    @staticmethod
    def batch(device):
        return torch.randn(2, 16, 32, device=device)


class Mixed(nn.Module):
    """Layers whose products sit inside ops of their own: Bilinear (_trilinear, which FlopCounterMode
    does not count), an LSTM (its CPU kernel), MultiheadAttention, einsum (bmm), baddbmm."""

    def __init__(self):
        super().__init__()
        self.bilinear = nn.Bilinear(16, 16, 8)
        self.lstm = nn.LSTM(16, 16, batch_first=True)
        self.attention = nn.MultiheadAttention(16, 4, batch_first=True)
        self.mix = nn.Parameter(torch.randn(16, 16) / 4)

    def forward(self, x):
        a = self.attention(x, x, x)[0] + self.lstm(x)[0]
        b = torch.einsum("btc,cd->btd", a, self.mix)
        c = torch.baddbmm(x, b, b.transpose(1, 2) @ x / 16)
        return self.bilinear(c, x)

    @staticmethod
    def batch(device):
        return torch.randn(2, 6, 16, device=device)


def op_name(packet):
    return str(packet).replace("aten.", "aten::", 1)


def train(model, device, tmp_path, autocast=None, count_flops=None):
    """Two epochs; returns fathom's report and FlopCounterMode's counts per phase and op (per
    step) over the first epoch's counted steps."""
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    reference = {phase: defaultdict(int) for phase in ("forward", "backward", "optimizer")}

    def counter(counting):
        return FlopCounterMode(display=False) if counting else contextlib.nullcontext(None)

    with fathom.Session(report_dir=tmp_path, mode="observe", print_report=False,
                        count_flops=count_flops) as session:
        for epoch in range(2):
            with session.epoch() as e:
                for i in range(STEPS + 1):
                    x = model.batch(device)
                    counting = epoch == 0 and i < STEPS
                    with e.step(len(x)) as step:
                        with step.forward(), counter(counting) as f:
                            cast = (torch.autocast(device, dtype=autocast) if autocast
                                    else contextlib.nullcontext())
                            with cast:
                                loss = model(x).float().square().mean()
                        with step.backward(), counter(counting) as b:
                            loss.backward()
                        with step.optimizer(), counter(counting) as o:
                            optimizer.step()
                            optimizer.zero_grad()
                    for phase, mode in (("forward", f), ("backward", b), ("optimizer", o)):
                        if mode is not None:
                            for packet, n in mode.get_flop_counts().get("Global", {}).items():
                                reference[phase][op_name(packet)] += n
        report = session.report
    per_step = {phase: {op: n / STEPS for op, n in ops.items()} for phase, ops in reference.items()}
    return report, per_step


def fathom_by_phase(flops, keep):
    out = defaultdict(lambda: defaultdict(float))
    for entry in flops["by_op"]:
        if keep(entry["op"]):
            out[entry["phase"]][entry["op"]] += entry["flops"]
    return {phase: dict(ops) for phase, ops in out.items()}


def check_against_flop_counter_mode(report, reference):
    expected = {phase: ops for phase, ops in reference.items() if ops}
    assert expected, "FlopCounterMode counted nothing: the comparison would be empty"
    for epoch in report["epochs"]:
        flops = epoch["flops"]
        assert flops is not None and flops["profiled_steps"] == STEPS, flops
        counted = fathom_by_phase(flops, lambda op: op not in (CPU_ATTENTION, CPU_ATTENTION_BACKWARD))
        assert counted == expected
        # The totals add up from the same entries.
        assert flops["per_step"] == sum(e["flops"] for e in flops["by_op"])
        assert flops["forward"] == sum(e["flops"] for e in flops["by_op"] if e["phase"] == "forward")
        assert flops["backward"] == sum(e["flops"] for e in flops["by_op"]
                                        if e["phase"] == "backward")
        assert [e["flops"] for e in flops["by_op"]] == sorted(
            (e["flops"] for e in flops["by_op"]), reverse=True)


@pytest.mark.parametrize("device", DEVICES)
def test_mlp_flops_equal_flop_counter_mode(device, tmp_path):
    report, reference = train(Mlp(), device, tmp_path)
    check_against_flop_counter_mode(report, reference)
    flops = report["epochs"][0]["flops"]
    # 40 rows: fc1 (addmm), fc2 (mm: no bias), head (mm), forward; backward twice that except
    # fc1's input gradient (x needs none).
    forward = 2 * 40 * (32 * 64 + 64 * 48 + 48 * 10)
    assert flops["forward"] == forward
    assert flops["backward"] == 2 * forward - 2 * 40 * 32 * 64
    assert flops["dominant_dtype"] == "float32"
    assert {e["dtype"] for e in flops["by_op"]} == {"float32"}


@pytest.mark.parametrize("device", DEVICES)
def test_cnn_flops_equal_flop_counter_mode(device, tmp_path):
    report, reference = train(Cnn(), device, tmp_path)
    check_against_flop_counter_mode(report, reference)
    ops = {e["op"] for e in report["epochs"][0]["flops"]["by_op"]}
    # Counted once, at aten::convolution: not again at _convolution or the backend's kernel.
    assert {"aten::convolution", "aten::convolution_backward", "aten::addmm"} <= ops
    assert not ops & {"aten::_convolution", "aten::mkldnn_convolution", "aten::cudnn_convolution"}


@pytest.mark.parametrize("device", DEVICES)
def test_transformer_block_flops_equal_flop_counter_mode(device, tmp_path):
    model = TransformerBlock()
    report, reference = train(model, device, tmp_path)
    check_against_flop_counter_mode(report, reference)
    if device == "cpu":
        # FlopCounterMode counts nothing for the CPU kernel; fathom counts it with torch's formula.
        assert not any("attention" in op for ops in reference.values() for op in ops)
        q, k, v = model.attention_shapes[0]
        for epoch in report["epochs"]:
            by_op = {(e["phase"], e["op"]): e for e in epoch["flops"]["by_op"]}
            assert by_op[("forward", CPU_ATTENTION)]["flops"] == sdpa_flop_count(q, k, v)
            assert by_op[("forward", CPU_ATTENTION)]["calls"] == 1
            assert by_op[("backward", CPU_ATTENTION_BACKWARD)]["flops"] == \
                sdpa_backward_flop_count(q, q, k, v)
    else:
        assert any("attention" in op for op in reference["forward"])


@pytest.mark.parametrize("device", DEVICES)
def test_products_inside_other_ops_count_as_flop_counter_mode_counts_them(device, tmp_path):
    # Counted at the outermost op with a kernel of its own, as FlopCounterMode sees ops: what a
    # fused kernel does inside itself is not counted twice, nor at all where torch does not.
    report, reference = train(Mixed(), device, tmp_path)
    check_against_flop_counter_mode(report, reference)


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_counts_the_type_that_ran(device, tmp_path):
    # Under autocast the product runs in bfloat16 after a cast: fathom names that type, and the
    # counts still equal FlopCounterMode's (which sees the product once, below autocast).
    report, reference = train(Mlp(), device, tmp_path, autocast=torch.bfloat16)
    check_against_flop_counter_mode(report, reference)
    flops = report["epochs"][0]["flops"]
    assert {e["dtype"] for e in flops["by_op"] if e["phase"] == "forward"} == {"bfloat16"}
    assert flops["dominant_dtype"] == "bfloat16"


def test_counting_turned_off_says_so(tmp_path):
    report, reference = train(Mlp(), "cpu", tmp_path, count_flops=False)
    assert reference["forward"], "FlopCounterMode still counts"
    for epoch in report["epochs"]:
        flops = epoch["flops"]
        assert flops["profiled_steps"] == 0 and flops["per_step"] == 0 and flops["by_op"] == []
        assert "count_flops" in flops["not_measured"][0]["why"]
