"""Device management and memory as a program built against the real CUDA 13 headers sees them."""

from __future__ import annotations

import resource
import struct

import pytest

pytestmark = pytest.mark.native


def test_device_properties_come_from_the_machine_description(run_program, programs, h100):
    r = run_program(programs["device_query"], options=("--gpus-per-node", "4", "--ranks-per-node", "1"))
    assert r.returncode == 0, r.stderr
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    g = h100.gpu
    # Each value sits at its own offset of cudaDeviceProp: a layout slip shows here.
    assert out["count"] == "4"
    assert out["set_invalid"] == "cudaErrorInvalidDevice"
    assert out["last_error"] == "invalid device ordinal"
    assert out["device"] == "3"
    assert out["name"] == g.model
    assert int(out["sms"]) == g.sm_count == int(out["attr_sms"])
    assert int(out["mem"]) == g.memory
    assert out["cc"] == g.compute_capability
    assert int(out["attr_major"]) == int(g.compute_capability.split(".")[0])
    assert int(out["l2"]) == g.l2_cache
    assert int(out["engines"]) == g.copy_engines
    assert int(out["threads_per_sm"]) == g.max_threads_per_sm
    assert out["warp"] == "32"
    assert out["ptr_device"] == "2 3"  # cudaMemoryTypeDevice, on device 3 (current at cudaMalloc)
    assert out["ptr_host"] == "1"  # cudaMemoryTypeHost (pinned)
    assert out["ptr_unregistered"] == "0"  # pageable memory
    free_b, total_b = map(int, out["meminfo"].split())
    assert (free_b, total_b) == (g.memory - (1 << 20), g.memory)
    assert out["oom"] == "cudaErrorMemoryAllocation"


def test_d2h_copies_fill_large_values_so_residual_loops_run_to_their_limit(run_program, programs):
    r = run_program(programs["timing"], "fill", options=("--gpus-per-node", "1"))
    assert r.returncode == 0, r.stderr
    v = r.values()
    large_float = struct.unpack("<f", b"\x7f" * 4)[0]
    large_double = struct.unpack("<d", b"\x7f" * 8)[0]
    assert v["float"] == pytest.approx(large_float, rel=1e-7)
    assert v["double"] == pytest.approx(large_double, rel=1e-15)
    assert v["pinned_last"] == pytest.approx(large_float, rel=1e-7)  # a folded pinned buffer, last element
    assert v["iterations"] == 25


def test_d2h_fill_zero_lets_the_same_loop_stop_at_once(run_program, programs):
    r = run_program(programs["timing"], "fill", options=("--gpus-per-node", "1", "--d2h-fill", "zero"))
    assert r.returncode == 0, r.stderr
    v = r.values()
    assert (v["float"], v["double"], v["pinned_last"], v["iterations"]) == (0, 0, 0, 1)


def test_32_ranks_with_10_gib_each_fit_in_4_gib_of_rss(run_program, programs):
    """2 x 4 GiB device + 2 x 1 GiB pinned per rank, halos exchanged from them."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = run_program(programs["fold"], nodes=8)
    assert r.returncode == 0, r.stderr
    assert "halo exchanges 10" in r.stdout
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert len(r.results["ranks"]) == 32
    assert r.results["ranks"][5]["copies"]["D2H"]["count"] == 20
    assert r.results["ranks"][5]["mpi"]["MPI_Sendrecv"]["count"] == 20
    # ru_maxrss of children is the largest child's peak: the simulation process.
    assert max(peak_kib, before) < 4 * 1024 * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB"
