"""Measured copy models (machine key ``copies.*``, written by ``orrery calibrate``):
a copy of s bytes takes the latency + s / bandwidth of its segment, plus the
host overheads of issuing it (M) and returning from the synchronisation (S);
a segment latency below the latency of the copy's route is raised to it.
Without a model, the route's own latency and bandwidth apply (test_timing.py)."""

from __future__ import annotations

import csv
import statistics

import pytest
from conftest import REPO
from derivations import REL, run_ok

from orrery import machines

pytestmark = pytest.mark.native

# Two regimes for D2H (like the Voltage Park H100's NUMA drop above ~2 MB), one each for H2D and D2D.
MODELS = (
    "copies.H2D=[{latency = '3us', bandwidth = '50GB/s'}]",
    "copies.D2H=[{up_to = '2MB', latency = '2us', bandwidth = '45GB/s'}, {latency = '0us', bandwidth = '20GB/s'}]",
    "copies.D2D=[{latency = '4us', bandwidth = '1.5TB/s'}]",
)


def _times(run_program, programs, n: int) -> dict[str, float]:
    options = tuple(a for m in MODELS for a in ("--set", m))
    return run_ok(run_program, programs, "copy-kinds", str(n), options=options).values()


@pytest.mark.parametrize("n", [1_000_000, 8_000_000])
def test_each_copy_takes_its_segment_time(run_program, programs, h100, n):
    M, S = h100.overheads.memcpy, h100.overheads.sync
    v = _times(run_program, programs, n)
    assert v["h2d"] == pytest.approx(M + 3e-6 + n / 50e9 + S, rel=REL)
    # The large-copy segment's latency (0) is below the route's (two PCIe hops): the route's applies.
    d2h = 2e-6 + n / 45e9 if n <= 2e6 else 2 * h100.pcie.latency + n / 20e9
    assert v["d2h"] == pytest.approx(M + d2h + S, rel=REL)
    assert v["d2d"] == pytest.approx(M + 4e-6 + n / 1.5e12 + S, rel=REL)


def test_a_model_without_an_open_last_segment_is_refused(run_program, programs):
    r = run_program(
        programs["timing"],
        "copy-kinds",
        "1000",
        options=("--set", "copies.H2D=[{up_to = '1MB', latency = '3us', bandwidth = '50GB/s'}]"),
    )
    assert r.returncode == 2
    assert r.stderr == (
        "orrery: error: --set copies.H2D (on built-in machine h100-ib200): key 'copies.H2D.0.up_to': "
        "got 1000000.0, expected no up_to on the last segment: it covers every larger size\n"
    )


def test_peer_copy_takes_its_model_over_nvlink(run_program, programs, h100):
    n = 4_000_000
    model = "copies.peer=[{latency = '3us', bandwidth = '100GB/s'}]"  # slower than the 150 GB/s NVLink pair
    v = run_ok(
        run_program, programs, "peer", str(n), options=("--gpus-per-node", "2", "--ranks-per-node", "1", "--set", model)
    ).values()
    o = h100.overheads
    assert v["peer"] == pytest.approx(o.memcpy + 3e-6 + n / 100e9 + o.sync, rel=REL)


def test_a_segment_with_a_negative_latency_takes_its_time(run_program, programs, h100):
    """A later segment may have a negative latency (orrery calibrate fits one where the time
    grows faster than the size, e.g. buffers falling out of a cache): its copies take
    latency + s / bandwidth like any, on top of the route's latency as a zero latency would."""
    n = 8_000_000
    model = (
        "copies.D2H=[{up_to = '2MB', latency = '2us', bandwidth = '45GB/s'}, {latency = '-40us', bandwidth = '20GB/s'}]"
    )
    v = run_ok(run_program, programs, "copy-kinds", str(n), options=("--set", model)).values()
    o = h100.overheads
    assert v["d2h"] == pytest.approx(o.memcpy + 2 * h100.pcie.latency + n / 20e9 - 40e-6 + o.sync, rel=REL)


@pytest.mark.parametrize("engines", [2, 1])
def test_measured_copies_queue_for_their_engine(run_program, programs, h100, engines):
    """Two copies in two streams, the second issued M after the first: each holds its engine for
    its whole measured time, latency included, so the second starts when the first frees it. The
    first runs without its stream's actor (a timer of SimGrid's kernel for the latency beyond the
    route's, then the transfer); the second finds the engine taken and waits in the actor, which
    the first's completion wakes. With opposite directions on one engine they queue the same way."""
    n = 4_000_000
    M, S = h100.overheads.memcpy, h100.overheads.sync
    h2d = 3e-6 + n / 50e9
    d2h = 2 * h100.pcie.latency + n / 20e9  # above 2 MB: the route's latency (as in the first test)
    options = ("--set", MODELS[0], "--set", MODELS[1], "--set", f"gpu.copy_engines={engines}")
    same = run_ok(run_program, programs, "copy-same", str(n), options=options).values()
    assert same["first"] == pytest.approx(M + h2d + S, rel=REL)
    assert same["second"] == pytest.approx(M + 2 * h2d + S, rel=REL)
    opposite = run_ok(run_program, programs, "copy-opposite", str(n), options=options).values()
    assert opposite["first"] == pytest.approx(M + h2d + S, rel=REL)
    second = M + h2d + d2h if engines == 1 else 2 * M + d2h  # queued behind the first, or on its own engine
    assert opposite["second"] == pytest.approx(max(M + h2d + S, second) + S, rel=REL)


# ---- peer copies without peer access: staged through host memory by the driver ----


def test_a_peer_copy_without_peer_access_is_staged_through_host_memory(run_program, programs, h100):
    """A rank that never enabled peer access between two GPUs gets its cudaMemcpyPeer staged by
    the driver through host memory: GPU 0 to host memory over its PCIe route (two hops), then on to
    GPU 1 over GPU 1's, the inward half starting once the outward half's latency has passed.
    Peer access enabled either way (from the destination's device too) takes NVLink."""
    n = 4_000_000
    M, S, p = h100.overheads.memcpy, h100.overheads.sync, h100.pcie
    layout = ("--gpus-per-node", "2", "--ranks-per-node", "1")
    staged = run_ok(run_program, programs, "peer-staged", str(n), options=layout)
    assert staged.values()["peer"] == pytest.approx(M + 2 * p.latency + 2 * p.latency + n / p.bandwidth + S, rel=REL)
    copies = staged.results["ranks"][0]["copies"]
    assert copies["peer_staged"]["count"] == 1 and copies["peer_staged"]["bytes"] == n and "peer" not in copies
    nvlink = M + h100.nvlink.latency + n / h100.nvlink_pair_bandwidth + S
    for mode in ("peer", "peer-enabled-by-1"):
        r = run_ok(run_program, programs, mode, str(n), options=layout)
        assert r.values()["peer"] == pytest.approx(nvlink, rel=REL), mode
        assert (
            r.results["ranks"][0]["copies"]["peer"]["bytes"] == n
            and "peer_staged" not in r.results["ranks"][0]["copies"]
        )


def test_a_staged_peer_copy_takes_its_model_on_each_half(run_program, programs, h100):
    """copies.peer_staged: each half takes latency + s / bandwidth (the 3 us latency above the
    route's 1 us), the inward one starting after the outward one's latency."""
    n = 4_000_000
    M, S = h100.overheads.memcpy, h100.overheads.sync
    model = "copies.peer_staged=[{latency = '3us', bandwidth = '30GB/s'}]"
    v = run_ok(
        run_program,
        programs,
        "peer-staged",
        str(n),
        options=("--gpus-per-node", "2", "--ranks-per-node", "1", "--set", model),
    ).values()
    assert v["peer"] == pytest.approx(M + 3e-6 + 3e-6 + n / 30e9 + S, rel=REL)


ENABLED = "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s) - GPU-GPU"
DISABLED = "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s) - GPU-GPU"


@pytest.mark.parametrize(
    "machine, system, tests",
    [
        ("dgx-h100", "HGX H100", {"peer": ENABLED, "peer-staged": DISABLED}),
        ("dgx-a100", "author's 8x A100", {"peer": ENABLED}),  # no P2P=Disabled figure in the data
    ],
)
def test_built_in_peer_copies_move_what_p2pBandwidthLatencyTest_measured(run_program, programs, machine, system, tests):
    """The DGX built-ins' peer copies against the p2pBandwidthLatencyTest figures of the measured
    data (unidirectional, P2P writes enabled and P2P disabled, the medians over the GPU pairs),
    with its copy size (40 000 000 ints): each copy's rate within 1 % of the median."""
    rows = [
        r
        for r in csv.DictReader((REPO / "calibration/data/measured/device_bandwidth.csv").open())
        if r["benchmark"] == "CUDA samples p2pBandwidthLatencyTest" and r["system"].startswith(system)
    ]
    n = 160_000_000
    m = machines.load(machine)
    M, S = m.overheads.memcpy, m.overheads.sync
    layout = ("--machine", machine, "--gpus-per-node", "2", "--ranks-per-node", "1")
    for mode, test in tests.items():
        measured = statistics.median(float(r["bandwidth_GBps"]) for r in rows if r["test"] == test) * 1e9
        t = run_ok(run_program, programs, mode, str(n), options=layout).values()["peer"] - M - S
        assert n / t == pytest.approx(measured, rel=0.01), mode
