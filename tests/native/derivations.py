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


# The routes' tests of host-buffer messages within a node derive the route alone: the built-ins'
# measured shared-memory overheads (mpi.*_overhead_host_intra) are derived in test_invariants.py.
NO_SHM_OVERHEADS = ("--set", "mpi.send_overhead_host_intra=0us", "--set", "mpi.recv_overhead_host_intra=0us")
# Likewise the routes' tests of device-buffer messages: the built-ins' per-message software times
# of a CUDA-aware MPI (mpi.*_overhead_device, mpi.*_overhead_device_intra: the H100 built-ins'
# are carried from measured stacks) are derived in test_invariants.py and test_paths.py.
NO_DEVICE_OVERHEADS = tuple(
    arg
    for side in ("send", "recv")
    for where in ("", "_intra")
    for arg in ("--set", f"mpi.{side}_overhead_device{where}=0us")
)


def cost_options(tmp_path) -> tuple[str, str]:
    """`--costs FILE` for the timing program's kernels: busy 100 us, brief 20 us,
    scaled 1 us + 1 ns per thread."""
    path = tmp_path / "costs.json"
    path.write_text(
        json.dumps(
            {
                "kernels": {
                    "busy": {"time": "100us"},
                    "brief": {"time": "20us"},
                    "scaled": {"alpha": "1us", "beta": "1ns"},
                }
            }
        )
    )
    return ("--costs", str(path))


def wire(latency: float, n: int, bandwidth: float, eager: float) -> float:
    """An n-byte MPI message alone on a route: its latency, then payload and envelope at the
    route's bandwidth; at or above the path's eager threshold a rendezvous handshake comes
    first (request to send, clear to send: the route's latency twice)."""
    handshake = 2 * latency if n >= eager else 0.0
    return latency + handshake + (n + SMPI_ENVELOPE) / bandwidth


def gpudirect_latency(h100) -> float:
    """The route between GPUs of two nodes under one leaf: GPU -> PCIe switch -> NIC -> leaf ->
    NIC -> PCIe switch -> GPU (GPUDirect RDMA)."""
    p, nic, f = h100.pcie, h100.nic, h100.fabric
    return 4 * p.latency + 2 * nic.latency + f.switch_latency


def gpudirect_message(h100, n: int) -> float:
    """An n-byte device message between GPUs of two nodes under one leaf, at the narrowest link."""
    return wire(
        gpudirect_latency(h100), n, min(h100.pcie.bandwidth, h100.nic.bandwidth), h100.mpi.eager_threshold_device
    )


def staged_message(h100, n: int) -> float:
    """An n-byte device message between nodes under one leaf without GPUDirect RDMA: GPU ->
    switch -> root -> NIC on each side (two more PCIe hops than GPUDirect), and the staging
    pipeline's fill and drain, one chunk's copy on each side (its issue overhead, the chunk over
    PCIe), or the whole message's when it is smaller than a chunk; the data then at the narrowest
    link, while the pipeline moves a chunk per stage faster than that. At or above the eager
    threshold the rendezvous handshake's control messages take the longer route, not staged."""
    o, chunk, p = h100.overheads.memcpy, h100.gpudirect.staging_chunk, h100.pcie
    assert chunk / (o + chunk / p.bandwidth) > min(p.bandwidth, h100.nic.bandwidth)  # not the pipeline's rate
    fill = o + min(chunk, n + SMPI_ENVELOPE) / p.bandwidth
    control = gpudirect_latency(h100) + 2 * p.latency
    handshake = 2 * control if n >= h100.mpi.eager_threshold_device else 0.0
    return control + 2 * fill + handshake + (n + SMPI_ENVELOPE) / min(p.bandwidth, h100.nic.bandwidth)


def run_ok(run_program, programs, *args, options=(), **kw):
    """Run the timing program; one rank on one GPU unless the options say otherwise."""
    if "--gpus-per-node" not in options:
        options = ("--gpus-per-node", "1", *options)
    r = run_program(programs["timing"], *args, options=tuple(options), **kw)
    assert r.returncode == 0, r.stderr
    return r
