#!/usr/bin/env python3
"""Writes issue 25's kernel-name reproducers: a trace whose every kernel has a name of its own.

    bench/kernel_name_trace.py kineto      2000000 /tmp/names_2m.json
    bench/kernel_name_trace.py kineto-lean 2000000 /tmp/names_2m_lean.json
    bench/kernel_name_trace.py activity     300000 /tmp/names_300k.jsonl

`kineto` is a PyTorch profiler (Kineto) Chrome trace shaped as tests/data/traces are: a device
table, then "traceEvents" with one ProfilerStep#N annotation per 2,000 kernels and kernel events
carrying Kineto's args (grid, block, stream, correlation, occupancy): 575 bytes a kernel.
`kineto-lean` keeps only the args fathom reads (device, stream, correlation, external id): 355
bytes a kernel, near the 333 of the first reproducer's 300k-name trace. `activity` is a fathom
activity file (the JSON lines FATHOM_RECORD_ACTIVITY writes: a header, one record a line, an end
line that counts them) holding the same records. Every kernel name is distinct and ~210 bytes,
drawn from four real shapes (an elementwise template, a cuBLAS GEMM, a cutlass Tensor Core GEMM,
an NCCL kernel) so the classifier's rows and the aggregator's folded rows all see work.

Measure with `/usr/bin/time -v build/tools/fathom analyze FILE --json out.json` (max RSS and
user + sys CPU; BENCHMARKS.md, "Kernel-name classification"). Standard library only.
"""
import json
import sys

KERNELS_PER_STEP = 2000

SHAPES = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>) /* variant {:08d} of a generated kernel */",
    "ampere_sgemm_128x64_nn_variant_{:08d}_splitK_batched_strided_fp32_accumulate_"
    "with_bias_and_relu_epilogue_generated_for_the_issue_25_reproducer_of_distinct_names_"
    "padding_to_two_hundred_bytes",
    "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8"
    "_variant_{:08d}>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8::Params)"
    " /* generated */",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*) "
    "/* variant {:08d} of the ring all-reduce, a name of its own for the issue 25 reproducer "
    "of distinct kernel names */",
]


def name(i: int) -> str:
    return SHAPES[i % len(SHAPES)].format(i)


def kineto(n: int, out, lean: bool = False) -> None:
    out.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n')
    out.write('    {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85097971712,'
              ' "computeMajor": 8, "computeMinor": 0, "numSms": 108}\n  ],\n')
    out.write('  "traceEvents": [\n')
    t0 = 1694039994139246
    first = True
    for i in range(n):
        ts = t0 + 10 * i
        if i % KERNELS_PER_STEP == 0:
            step = i // KERNELS_PER_STEP
            ev = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                  "pid": 493459, "tid": 493459, "ts": ts,
                  "dur": 10 * min(KERNELS_PER_STEP, n - i), "args": {"External id": step + 1}}
            out.write(("" if first else ",\n") + "  " + json.dumps(ev))
            first = False
        args = {"External id": 100000 + i, "device": 0, "stream": 7, "correlation": 100000 + i}
        if not lean:
            args = {"External id": 100000 + i, "queued": 0, "device": 0, "context": 1,
                    "stream": 7, "correlation": 100000 + i, "registers per thread": 47,
                    "shared memory": 0, "blocks per SM": 8, "warps per SM": 64,
                    "grid": [864, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 63}
        ev = {"ph": "X", "cat": "kernel", "name": name(i), "pid": 0, "tid": 7, "ts": ts, "dur": 7,
              "args": args}
        out.write(",\n  " + json.dumps(ev))
    out.write('\n  ],\n  "traceName": "issue 25 reproducer"\n}\n')


def activity(n: int, out) -> None:
    line = lambda r: out.write(json.dumps(r, separators=(",", ":")) + "\n")  # noqa: E731
    line({"format": "fathom.gpu_activity", "version": 1})
    line({"type": "device", "id": 0, "name": "NVIDIA A100-SXM4-80GB", "compute_major": 8,
          "compute_minor": 0, "total_memory_bytes": 85097971712})
    records = 1
    t0 = 1_000_000_000
    for s in range((n + KERNELS_PER_STEP - 1) // KERNELS_PER_STEP):
        start = t0 + 10_000 * s * KERNELS_PER_STEP
        line({"type": "annotation", "name": f"step {s}", "thread": 1, "start_ns": start,
              "end_ns": start + 10_000 * KERNELS_PER_STEP})
        records += 1
    for i in range(n):
        start = t0 + 10_000 * i
        line({"type": "kernel", "name": name(i), "device": 0, "stream": 7, "start_ns": start,
              "end_ns": start + 7_000, "correlation_id": 100000 + i, "external_id": 0,
              "phase": None, "grid": [864, 1, 1], "block": [256, 1, 1]})
        records += 1
    line({"type": "end", "records": records})


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[1] not in ("kineto", "kineto-lean", "activity"):
        print("usage: kernel_name_trace.py kineto|kineto-lean|activity COUNT OUT", file=sys.stderr)
        return 2
    n = int(sys.argv[2])
    with open(sys.argv[3], "w", buffering=1 << 20) as out:
        if sys.argv[1] == "activity":
            activity(n, out)
        else:
            kineto(n, out, lean=sys.argv[1] == "kineto-lean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
