"""Shared fixtures: a report folder per test, a tiny model, and fathom's NVTX events.

The NVTX events come from the project's test NVTX tool (tests/support/nvtx_recorder.cpp). NVTX
loads the tool named in NVTX_INJECTION64_PATH at fathom's first range, so it is set here, before
any test runs. The tool is found in NVTX_RECORDER_LIB, or in the build folder scripts/test uses
(FATHOM_BUILD_DIR, default <repo>/build); tests that need it skip, saying so, where it is absent.
"""
import ctypes
import os
import pathlib

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]


def _find_recorder():
    explicit = os.environ.get("NVTX_RECORDER_LIB")
    if explicit:
        return pathlib.Path(explicit)
    build = pathlib.Path(os.environ.get("FATHOM_BUILD_DIR", REPO / "build"))
    return build / "tests" / "libfathom_nvtx_recorder.so"


_RECORDER_PATH = _find_recorder()
if _RECORDER_PATH.is_file():
    os.environ.setdefault("NVTX_INJECTION64_PATH", str(_RECORDER_PATH))


class _Event(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_char), ("thread", ctypes.c_uint64), ("domain", ctypes.c_char_p),
                ("category", ctypes.c_uint32), ("color", ctypes.c_uint32), ("id", ctypes.c_uint64),
                ("message", ctypes.c_char_p), ("registered", ctypes.c_bool),
                ("has_payload", ctypes.c_bool), ("payload", ctypes.c_int64)]


class NvtxEvents:
    """fathom's NVTX events since the fixture started, read from the recorder in this process."""

    def __init__(self, lib):
        self._lib = lib
        lib.fathom_nvtx_recorder_count.restype = ctypes.c_size_t
        lib.fathom_nvtx_recorder_event.argtypes = [ctypes.c_size_t, ctypes.POINTER(_Event)]
        lib.fathom_nvtx_recorder_event.restype = ctypes.c_bool
        lib.fathom_nvtx_recorder_clear()

    def clear(self):
        self._lib.fathom_nvtx_recorder_clear()

    def events(self):
        out, e = [], _Event()
        for i in range(self._lib.fathom_nvtx_recorder_count()):
            if self._lib.fathom_nvtx_recorder_event(i, ctypes.byref(e)) and e.domain == b"fathom":
                out.append((e.kind.decode(), e.thread, e.id, (e.message or b"").decode()))
        return out

    def payloads(self):
        """(message, int64 payload or None) of every push and start: an op's sequence number."""
        out, e = [], _Event()
        for i in range(self._lib.fathom_nvtx_recorder_count()):
            if (self._lib.fathom_nvtx_recorder_event(i, ctypes.byref(e)) and e.domain == b"fathom"
                    and e.kind in (b"P", b"S")):
                out.append(((e.message or b"").decode(), e.payload if e.has_payload else None))
        return out

    def ranges(self):
        """Every push/pop range as (message, ancestors outermost first); raises if unbalanced."""
        stacks, ranges = {}, []
        for kind, thread, _, message in self.events():
            stack = stacks.setdefault(thread, [])
            if kind == "P":
                ranges.append((message, tuple(stack)))
                stack.append(message)
            elif kind == "p":
                assert stack, "pop without a push"
                stack.pop()
        assert all(not s for s in stacks.values()), f"unbalanced ranges left open: {stacks}"
        return ranges


@pytest.fixture
def nvtx():
    if os.environ.get("NVTX_INJECTION64_PATH") != str(_RECORDER_PATH) or not _RECORDER_PATH.is_file():
        pytest.skip(f"the NVTX test tool is not built ({_RECORDER_PATH}); build fathom_nvtx_recorder "
                    "or set NVTX_RECORDER_LIB")
    return NvtxEvents(ctypes.CDLL(str(_RECORDER_PATH)))


@pytest.fixture
def report_dir(tmp_path):
    return tmp_path / "reports"


@pytest.fixture(autouse=True)
def _no_fathom_env(monkeypatch):
    # FATHOM_* variables win over arguments, and an unknown one (FATHOM_BUILD_DIR of the scripts)
    # is an error: a developer's shell must not change what the tests see.
    for name in list(os.environ):
        if name.startswith("FATHOM_"):
            monkeypatch.delenv(name)


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
