"""Measured copy models (machine key ``copies.*``, written by ``orrery calibrate``):
a copy of s bytes takes the latency + s / bandwidth of its segment, plus the
host overheads of issuing it (M) and returning from the synchronisation (S);
a segment latency below the latency of the copy's route is raised to it.
Without a model, the route's own latency and bandwidth apply (test_timing.py)."""

from __future__ import annotations

import pytest
from derivations import REL, run_ok

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
