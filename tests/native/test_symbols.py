"""__device__ and __constant__ variables through the symbol calls (programs/symbols.cu). A copy to
or from a variable is a copy to or from device memory: with measured copy models set, M + the
segment's latency + n / its bandwidth + S for a synchronous one (M: the copy's host overhead, S:
the synchronisation's, h100-ib200), M alone for the asynchronous one to return. Each rank has an
instance of each variable on each device it names it on, device memory of the variable's size;
bad calls get CUDA's errors."""

from __future__ import annotations

import pytest
from derivations import REL

pytestmark = pytest.mark.native

MODELS = (
    "copies.H2D=[{latency = '3us', bandwidth = '50GB/s'}]",
    "copies.D2H=[{latency = '2us', bandwidth = '40GB/s'}]",
)


def run(run_program, programs, *args, gpus=1, options=()):
    """One rank, on a node of `gpus` GPUs."""
    options = ("--gpus-per-node", str(gpus), "--ranks-per-node", "1", *options)
    r = run_program(programs["symbols"], *args, options=options)
    assert r.returncode == 0, r.stderr
    return r


def answers(r) -> dict[str, str]:
    """The program's "name value" lines (not the run's summary)."""
    return dict(line.split(" ") for line in r.stdout.splitlines() if len(line.split(" ")) == 2)


@pytest.mark.parametrize("n", [8, 8000])
def test_a_copy_to_or_from_a_variable_takes_a_device_copy_s_time(run_program, programs, h100, n):
    M, S = h100.overheads.memcpy, h100.overheads.sync
    options = tuple(a for m in MODELS for a in ("--set", m))
    r = run(run_program, programs, "copies", str(n), options=options)
    v = r.values()
    to_symbol = M + 3e-6 + n / 50e9 + S
    assert v["to"] == pytest.approx(to_symbol, rel=REL)
    assert v["from"] == pytest.approx(M + 2e-6 + n / 40e9 + S, rel=REL)
    assert v["async"] == pytest.approx(M, rel=REL)
    assert v["async_synced"] == pytest.approx(to_symbol, rel=REL)
    assert r.results["status"] == "completed"


def test_each_device_has_its_instance_and_bad_calls_get_cuda_s_errors(run_program, programs):
    out = answers(run(run_program, programs, "answers", gpus=2))
    assert {k: out[k] for k in ("size_coefficients", "size_counter")} == {
        "size_coefficients": "8000",
        "size_counter": "4",
    }
    assert {k: out[k] for k in ("beyond", "last_byte", "to_direction", "from_direction")} == {
        "beyond": "cudaErrorInvalidValue",
        "last_byte": "cudaSuccess",
        "to_direction": "cudaErrorInvalidMemcpyDirection",
        "from_direction": "cudaErrorInvalidMemcpyDirection",
    }
    assert out["not_a_symbol"] == out["size_not_a_symbol"] == "cudaErrorInvalidSymbol"
    flags = ("same_address_twice", "other_device_other_address", "distinct_variables", "type_device")
    assert [out[k] for k in flags] == ["1"] * 4
    assert (out["device_of_0"], out["device_of_1"]) == ("0", "1")
    # device 0 holds the instances of both variables (8000 + 4 bytes), nothing else
    assert out["used"] == "8004"


def test_the_device_cache_preference_is_kept_per_device(run_program, programs):
    out = answers(run(run_program, programs, "cache", gpus=2))
    # cudaFuncCachePreferNone 0, PreferShared 1; the bank size is four bytes (1) after Hopper ignores a set
    assert out == {
        "initial": "0",
        "set": "1",
        "bad": "cudaErrorInvalidValue",
        "other_device": "0",
        "bank": "1",
    }


def test_a_device_s_cache_preference_reaches_the_occupancy_of_kernels_without_their_own(run_program, programs):
    """Occupancy with a larger L1 cache needs the architecture's carveout steps, which Orrery does
    not model: preferred by the device, the query stops the run naming the call that set it."""
    r = run_program(programs["symbols"], "prefer-l1", options=("--gpus-per-node", "1"))
    assert r.returncode == 3
    assert r.stderr.splitlines()[-1] == (
        "orrery: error: cudaOccupancyMaxActiveBlocksPerMultiprocessor: kernel 'bump()' prefers a larger L1 cache "
        "(cudaDeviceSetCacheConfig), which Orrery's occupancy does not model"
    )
