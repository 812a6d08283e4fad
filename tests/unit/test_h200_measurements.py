"""The measurements Orrery's own tools made on a real H200 (calibration/data/h200-harness)
load as they are, and their copy sweeps fit: the GPU path of the harness and the
microbenchmarks' output, read by the calibration from what a real GPU printed."""

from __future__ import annotations

from conftest import REPO

from orrery.calibration import fit, measurements

DATA = REPO / "calibration" / "data" / "h200-harness"


def by_key(*names):
    return {(s.metric, s.path, s.buffers): s for name in names for s in measurements.load(DATA / name)}


def fits_within_5_percent(s) -> bool:
    times = [n / v for n, v in zip(s.sizes, s.values)]
    segments = fit.fit_piecewise(s.sizes, times)
    errors = sorted(abs(fit.predict(segments, n) / t - 1) for n, t in zip(s.sizes, times))
    return errors[len(errors) // 2] < 0.05


def test_harness_gpu_output_loads_and_its_copy_sweeps_fit():
    series = by_key("harness.csv")
    sizes = [2**k for k in range(23)]  # --sizes 1:4194304
    for path, buffers in (("H2D", "pinned"), ("D2H", "pinned"), ("D2D", "D D")):
        s = series[("copy_bandwidth", path, buffers)]
        assert s.sizes == sizes and s.unit == "GB/s"
        assert fits_within_5_percent(s), path
    kernel = series[("kernel_time", "GPU", "D")]
    assert kernel.sizes == sizes and all(v > 0 for v in kernel.values)
    # the MPI there was not CUDA-aware: no device-buffer MPI row was made up
    assert not any(
        b in ("D D", "D") and m in ("latency", "bandwidth", "bibw", "collective_latency") for m, _, b in series
    )
    assert {"latency", "bandwidth", "bibw", "collective_latency"} <= {m for m, _, b in series if b in ("H H", "H")}


def test_microbenchmark_output_from_the_real_runtime_loads_as_copy_and_api_sweeps():
    """memcpy_sweep's output is read as copy bandwidth per direction (not as an OSU
    bandwidth), api_overheads' CSV as API costs, osu_p2p's as a host latency sweep."""
    series = by_key("memcpy_h2d.txt", "memcpy_d2h.txt", "memcpy_d2d.txt", "api_overheads.csv", "osu_latency_hh.txt")
    assert set(series) == {
        ("copy_bandwidth", "H2D", "pinned"),
        ("copy_bandwidth", "D2H", "pinned"),
        ("copy_bandwidth", "D2D", "D D"),
        ("api_time", "launch", "D"),
        ("api_time", "sync", "D"),
        ("api_time", "memcpy", "pinned"),
        ("latency", "", "H H"),
    }
    for direction, buffers in (("H2D", "pinned"), ("D2H", "pinned"), ("D2D", "D D")):
        s = series[("copy_bandwidth", direction, buffers)]
        assert s.sizes == [1024 << k for k in range(19)] and s.unit == "GB/s"
        assert fits_within_5_percent(s), direction
    osu = series[("latency", "", "H H")]
    assert osu.sizes[0] == 1 and osu.sizes[-1] == 4 << 20


CUDA_AWARE = REPO / "calibration" / "data" / "h200-cuda-aware"


def test_with_a_cuda_aware_mpi_the_harness_measures_device_buffer_messages():
    """With a CUDA-aware Open MPI (calibration/data/h200-cuda-aware) the harness's device-buffer
    MPI sweeps ran: its CSV loads with ping-pong, both windows and the collectives on device
    buffers, and its ping-pong agrees with osu_p2p's, another tool on the same GPU: slower at
    every size, as calls from Python are, by at most 15 % (one way, microseconds)."""
    loaded = measurements.load(CUDA_AWARE / "harness.csv")
    series = {(s.metric, s.path, s.buffers): s for s in loaded}
    sizes = [2**k for k in range(23)]
    for metric in ("latency", "bandwidth", "bibw"):
        assert series[(metric, "intra-node", "D D")].sizes == sizes, metric
    assert {s.benchmark for s in loaded if s.metric == "collective_latency" and s.buffers == "D"} == {
        "allreduce",
        "allgather",
        "alltoall",
        "bcast",
        "reduce_scatter",
    }
    harness = series[("latency", "intra-node", "D D")]
    (osu,) = measurements.load(CUDA_AWARE / "osu_latency_dd.txt")
    assert osu.metric == "latency" and osu.buffers == "D D" and osu.sizes == harness.sizes
    assert all(0 < h / o - 1 < 0.15 for h, o in zip(harness.values, osu.values))
