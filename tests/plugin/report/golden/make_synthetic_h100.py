#!/usr/bin/env python3
"""Writes synthetic_h100.report.json: a made-up two-epoch run on an H100 80GB with every
section a GPU session can fill (telemetry, footprint, copies, device memory). It is synthetic:
no GPU recorded it. The golden test recomputes its findings with the advisor, so the golden
outputs also pin the advisor's text on a realistic epoch. Run it from this folder."""
import json
import math

GiB = 1 << 30


def phase(count, total, mx, device=None, mem=None, rss=None, inferred=False):
    return {"count": count, "aborted": 0, "inferred": inferred, "wall_ms_total": total,
            "wall_ms_mean": total / count if count else 0.0, "wall_ms_max": mx,
            "device_ms_total": device, "device_memory": mem, "rss_bytes_max": rss}


def memory(alloc, resv, retries=0, ooms=0):
    return {"peak_allocated_bytes": alloc, "peak_reserved_bytes": resv,
            "alloc_retries": retries, "ooms": ooms}


def telemetry(epoch):
    series = []
    for i in range(40):
        t = i * 0.5
        util = 55 + 30 * math.sin(i / 3.0 + epoch)
        series.append({"t_s": t, "gpu_utilization_pct": round(util, 1),
                       "memory_used_bytes": float(74 * GiB + (i % 5) * 256 * 2**20),
                       "power_w": round(420 + 2.5 * util, 1), "sm_clock_mhz": 1755.0 if i % 3 else 1980.0,
                       "pcie_tx_bytes_per_s": 0.4e9, "pcie_rx_bytes_per_s": round(6.0e9 + 1e8 * (i % 7), 0)})
    return {"source": "nvml", "device_name": "NVIDIA H100 80GB HBM3", "samples": 200, "duration_s": 19.5,
            "gpu_utilization_pct_mean": 55.0 + epoch, "gpu_utilization_pct_max": 100.0,
            "memory_utilization_pct_mean": 31.0, "memory_used_bytes_max": 76 * GiB,
            "memory_total_bytes": 81559 * 2**20, "power_w_mean": 560.0, "power_w_max": 699.0,
            "power_limit_w": 700.0, "energy_j": 10920.0, "sm_clock_mhz_mean": 1780.0,
            "sm_clock_mhz_max": 1980.0, "memory_clock_mhz_mean": 2619.0,
            "throttle": [{"reason": "sw_power_cap", "share": 0.3}, {"reason": "gpu_idle", "share": 0.05}],
            "pcie": {"gen": 4, "width": 16, "max_gen": 5, "max_width": 16, "under_load": True},
            "pcie_tx_bytes_per_s_mean": 0.4e9, "pcie_rx_bytes_per_s_mean": 6.3e9,
            "pcie_rx_bytes_per_s_max": 11.8e9, "nvlinks_active": 0, "series": series,
            "not_measured": [{"what": "PCIe transmit throughput (NVML)",
                              "why": "nvmlDeviceGetPcieThroughput(TX): Not Supported (NVML error 3)"}]}


def epoch(index, data_ms):
    steps = 50
    fwd, bwd, opt, copy = 2100.0, 4300.0, 650.0, 310.0
    step_total = fwd + bwd + opt + copy + 90.0
    return {
        "index": index, "steps": steps, "failed_steps": 0, "samples": steps * 32,
        "wall_ms": step_total + data_ms + 40.0, "step_ms_total": step_total, "step_ms_mean": step_total / steps,
        "step_ms_max": 182.5, "samples_per_second": 0, "ended_by_exception": False,
        "phases": {
            "data": phase(steps, data_ms, data_ms / steps * 1.8, inferred=True),
            "copy": phase(steps, copy, 9.1, device=280.0, mem=memory(70 * GiB, 72 * GiB)),
            "forward": phase(steps, fwd, 45.2, device=2050.0, mem=memory(73 * GiB + index * GiB, 75 * GiB)),
            "backward": phase(steps, bwd, 91.0, device=4280.0, mem=memory(74 * GiB + index * GiB, 75 * GiB)),
            "optimizer": phase(steps, opt, 14.0, device=640.0, mem=memory(71 * GiB, 75 * GiB, retries=2)),
        },
        "copies": [
            {"direction": "host_to_device", "pinned": False, "non_blocking": False, "count": 100,
             "bytes": 100 * 12 * 2**20, "wall_ms_total": 300.0},
            {"direction": "device_to_host", "pinned": False, "non_blocking": False, "count": 50,
             "bytes": 50 * 4, "wall_ms_total": 10.0},
        ],
        "device_memory": memory(74 * GiB + index * GiB, 75 * GiB, retries=2),
        "peak_rss_bytes": 9 * GiB,
        "telemetry": telemetry(index),
        "footprint": {"parameter_count": 1_300_000_000, "parameter_bytes": 5200 * 2**20,
                      "gradient_bytes": 5200 * 2**20, "optimizer_state_bytes": 10400 * 2**20,
                      "activation_bytes": 52 * GiB, "checkpointable_blocks": 24,
                      "mixed_precision": False, "checkpointing": False},
        "findings": [],
    }


report = {
    "schema": "fathom.report", "schema_version": 1, "run_name": "synthetic_h100_gpt",
    "environment": {
        "fathom_version": "0.1.0", "torch_version": "2.11.0", "device": "cuda:0",
        "device_name": "NVIDIA H100 80GB HBM3", "device_memory_bytes": 81559 * 2**20, "hostname": "synthetic",
        "pid": 4242, "started_at": "2026-11-30T00:00:00Z", "mode": "suggest", "nvtx": "phases",
        "not_measured": [{"what": "GPU kernels, transfers and Tensor Core use (CUPTI)",
                          "why": "synthetic report: no GPU activity records"}],
    },
    "epochs": [epoch(0, 1100.0), epoch(1, 900.0)],
}
with open("synthetic_h100.report.json", "w") as f:
    json.dump(report, f, indent=2, sort_keys=True)
    f.write("\n")
