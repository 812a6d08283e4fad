"""Wrong pointers, sizes and devices handed to the CUDA memory calls: the error codes the CUDA 13
runtime documents, recorded as the last error, with no simulated time charged and no data
touched; valid calls at the same limits still succeed. The program is
tests/native/programs/pointers.cu; each of its calls prints
``case NAME RETURNED PEEK LAST SECONDS``."""

from __future__ import annotations

from typing import NamedTuple

import pytest

pytestmark = pytest.mark.native

INVALID = "cudaErrorInvalidValue"
ONE_GPU = ("--gpus-per-node", "1", "--ranks-per-node", "1")
KIB, MIB = 1024, 1024 * 1024


class Call(NamedTuple):
    returned: str
    peek: str  # cudaPeekAtLastError after the call
    last: str  # cudaGetLastError after that
    seconds: float


def calls(stdout: str) -> dict[str, Call]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("case "):
            _, name, returned, peek, last, seconds = line.split()
            out[name] = Call(returned, peek, last, float(seconds))
    return out


def run(run_program, programs, mode: str, options=ONE_GPU):
    r = run_program(programs["pointers"], mode, options=options)
    assert r.returncode == 0, r.stderr
    return r, calls(r.stdout)


def assert_rejected(c: Call, error: str = INVALID) -> None:
    """Returned, kept as the last error until read, and not a simulated instant spent."""
    assert (c.returned, c.peek, c.last) == (error, error, error)
    assert c.seconds == 0.0


def assert_succeeded(c: Call) -> None:
    assert (c.returned, c.peek, c.last) == ("cudaSuccess",) * 3


def test_copies_from_or_to_bad_pointers_are_invalid_values_and_cost_nothing(run_program, programs, h100):
    r, c = run(run_program, programs, "copy")
    expected = [
        "h2d_to_bogus",
        "h2d_to_null",
        "h2d_from_null",
        "h2d_from_bogus",
        "h2d_1mib_into_4kib",
        "h2d_interior_past_end",
        "h2d_from_device",
        "h2d_to_pageable",
        "d2h_from_bogus",
        "d2h_to_bogus",
        "d2h_to_null",
        "d2h_8kib_from_4kib",
        "d2h_past_pinned_end",
        "d2h_to_read_only",
        "d2d_from_pageable",
        "d2d_past_end",
        "default_two_bogus",
        "default_device_past_end",
        "h2h_to_bogus",
        "async_h2d_to_bogus",
        "async_d2h_past_end",
    ]
    assert sorted(c) == sorted(expected)
    for name in expected:
        assert_rejected(c[name])
    # No data touched: a D2H copy would have written the fill pattern (0x7f) into them.
    assert "pinned_untouched 1" in r.stdout and "pageable_untouched 1" in r.stdout
    rank = r.results["ranks"][0]
    assert rank["copies"] == {}
    # The only host API time is the final cudaDeviceSynchronize's, no copy's issue overhead.
    assert rank["host_api_s"] == pytest.approx(h100.overheads.sync, rel=1e-12)
    assert rank["gpu_wait_s"] == 0.0


def test_pitched_copies_must_fit_their_rows_and_pitches(run_program, programs):
    r, c = run(run_program, programs, "copy2d")
    assert_rejected(c["2d_rows_past_end"])
    assert_rejected(c["2d_width_over_pitch"], "cudaErrorInvalidPitchValue")
    assert_rejected(c["2d_to_bogus"])
    assert_rejected(c["2d_async_from_bogus"])
    assert_rejected(c["2d_last_row_one_past"])
    # Rows may leave the padding after the last one outside the allocation.
    assert_succeeded(c["2d_last_row_at_end"])
    assert c["2d_last_row_at_end"].seconds > 0
    copies = r.results["ranks"][0]["copies"]
    assert list(copies) == ["H2D"] and (copies["H2D"]["count"], copies["H2D"]["bytes"]) == (1, 4 * 496)


def test_memsets_must_lie_inside_one_device_allocation(run_program, programs):
    r, c = run(run_program, programs, "memset")
    for name in (
        "memset_past_end",
        "memset_interior_past_end",
        "memset_bogus",
        "memset_pageable",
        "memset_async_past_end",
    ):
        assert_rejected(c[name])
    assert_succeeded(c["memset_interior_to_end"])
    memset = r.results["ranks"][0]["copies"]["memset"]
    assert (memset["count"], memset["bytes"]) == (1, 96)


def test_peer_copies_check_devices_then_pointers_on_those_devices(run_program, programs):
    r, c = run(run_program, programs, "peer", options=("--gpus-per-node", "2", "--ranks-per-node", "1"))
    for name in ("peer_to_bogus", "peer_past_end", "peer_wrong_device", "peer_from_pinned", "peer_async_past_end"):
        assert_rejected(c[name])
    assert_rejected(c["peer_bad_ordinal"], "cudaErrorInvalidDevice")
    assert_rejected(c["peer_async_bad_ordinal"], "cudaErrorInvalidDevice")
    assert_succeeded(c["peer_valid"])
    copies = r.results["ranks"][0]["copies"]
    # the program never enabled peer access: the driver stages the copy through host memory
    assert list(copies) == ["peer_staged"] and (copies["peer_staged"]["count"], copies["peer_staged"]["bytes"]) == (
        1,
        4 * KIB,
    )


def test_allocations_beyond_the_gpu_fail_and_frees_of_foreign_pointers_are_refused(run_program, programs):
    r, c = run(run_program, programs, "alloc")
    for name in ("malloc_size_max", "malloc_free_plus_one", "malloc_half_of_size_max"):
        assert_rejected(c[name], "cudaErrorMemoryAllocation")
    assert "size_max_pointer (nil)" in r.stdout
    for name in (
        "memgetinfo_null_free",
        "memgetinfo_null_total",
        "free_interior",
        "free_bogus",
        "free_pinned",
        "freehost_device",
        "free_d4k_again",
        "copy_to_freed",
    ):
        assert_rejected(c[name])
    assert_succeeded(c["free_d4k"])
    assert "freed_bytes 4096" in r.stdout  # the failed allocations took nothing from the GPU


def test_freeing_pinned_memory_waits_for_the_copy_still_filling_it(run_program, programs, h100):
    r, c = run(run_program, programs, "freehost")
    assert_succeeded(c["freehost_while_copying"])
    d2h = r.results["ranks"][0]["copies"]["D2H"]
    assert (d2h["count"], d2h["bytes"]) == (1, MIB)
    # The copy started when cudaMemcpyAsync returned: cudaFreeHost returns once it is done.
    assert c["freehost_while_copying"].seconds == pytest.approx(d2h["time_s"] + h100.overheads.sync, rel=1e-9)


def test_calls_at_an_allocations_limits_succeed_and_one_byte_more_fails(run_program, programs):
    r, c = run(run_program, programs, "edges")
    valid = [
        "h2d_ending_at_end",
        "d2h_interior_to_end",
        "h2d_zero_bytes",
        "h2d_zero_bytes_at_end",
        "h2d_zero_bytes_null",
        "d2h_to_pageable",
        "h2d_from_pageable",
        "default_pinned_to_device_end",
        "d2d_whole",
        "memset_whole",
    ]
    over = [
        "h2d_ending_one_past",
        "d2h_interior_one_past",
        "h2d_one_byte_at_end",
        "h2d_from_pageable_past_end",
        "default_pinned_one_past",
        "d2d_whole_one_past",
        "memset_whole_one_past",
    ]
    assert sorted(c) == sorted(valid + over)
    for name in valid:
        assert_succeeded(c[name])
        assert c[name].seconds > 0  # charged as before: the issue overhead at least
    for name in over:
        assert_rejected(c[name])
    tallies = {kind: (t["count"], t["bytes"]) for kind, t in r.results["ranks"][0]["copies"].items()}
    assert tallies == {
        "H2D": (6, 100 + 0 + 0 + 0 + MIB + 8),  # three zero-byte copies, counted as before
        "D2H": (2, KIB + 4 * KIB),
        "D2D": (1, 4 * KIB),
        "memset": (1, 4 * KIB),
    }


def _attributes(stdout: str) -> dict[str, str]:
    """'rank1 pinned_ptr 1 0' -> {'rank1 pinned_ptr': '1 0'}"""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("rank") and not line.startswith("rank "):
            rank, what, rest = line.split(" ", 2)
            out[f"{rank} {what}"] = rest
    return out


def test_bound_ranks_are_told_device_0_for_their_own_memory(run_program, programs):
    r = run_program(
        programs["pointers"],
        "attributes",
        options=("--gpus-per-node", "2", "--ranks-per-node", "2", "--gpu-visibility", "bound"),
    )
    assert r.returncode == 0, r.stderr
    a = _attributes(r.stdout)
    for rank in ("rank0", "rank1"):
        # one device, current 0; device memory (type 2) and pinned memory (type 1) on device 0
        assert a[f"{rank} count"] == "1 current 0 device_ptr 2 0"
        assert a[f"{rank} pinned_ptr"] == "1 0"
    # rank 1 runs beside the node's second GPU, its only device
    assert r.results["ranks"][1]["host"] == "n0-gpu1"


def test_pinned_memory_is_reported_on_the_device_current_at_its_allocation(run_program, programs):
    r = run_program(programs["pointers"], "attributes", options=("--gpus-per-node", "2", "--ranks-per-node", "2"))
    assert r.returncode == 0, r.stderr
    a = _attributes(r.stdout)
    for rank in ("rank0", "rank1"):
        assert a[f"{rank} count"] == "2 current 0 device_ptr 2 0"
        assert a[f"{rank} pinned_on_1"] == "1 1"  # allocated on device 1, queried from device 0
        # malloc'd memory: unregistered (type 0), its host pointer the pointer itself
        assert a[f"{rank} pageable_ptr"] == "0 1"
