"""What the native tests derive simulated times from: the kernels' costs, the
SMPI envelope, the GPUDirect route, and how the timing program is run."""

from __future__ import annotations

import json

REL = 1e-9
# SMPI (3.32) simulates a point-to-point message as its payload plus a 16-byte
# envelope: measured with 1 kB, 1 MB and 8 MB messages, the excess over
# latency + payload/bandwidth is 16 bytes' worth at every size.
SMPI_ENVELOPE = 16
US = 1e-6
BUSY, BRIEF = 100 * US, 20 * US


def cost_options(tmp_path) -> tuple[str, str]:
    """`--costs FILE` for the timing program's kernels: busy 100 us, brief 20 us,
    scaled 1 us + 1 ns per thread."""
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"kernels": {
        "busy": {"time": "100us"},
        "brief": {"time": "20us"},
        "scaled": {"alpha": "1us", "beta": "1ns"},
    }}))
    return ("--costs", str(path))


def gpudirect_message(h100, n: int) -> float:
    """An n-byte message between GPUs of two nodes under one leaf: GPU -> PCIe
    switch -> NIC -> leaf -> NIC -> PCIe switch -> GPU (GPUDirect RDMA), at the
    narrowest link."""
    p, nic, f = h100.pcie, h100.nic, h100.fabric
    latency = 4 * p.latency + 2 * nic.latency + f.switch_latency
    return latency + (n + SMPI_ENVELOPE) / min(p.bandwidth, nic.bandwidth)


def run_ok(run_program, programs, *args, options=(), **kw):
    """Run the timing program; one rank on one GPU unless the options say otherwise."""
    if "--gpus-per-node" not in options:
        options = ("--gpus-per-node", "1", *options)
    r = run_program(programs["timing"], *args, options=tuple(options), **kw)
    assert r.returncode == 0, r.stderr
    return r
