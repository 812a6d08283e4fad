"""The measurements Orrery's own tools made on a real H200 (calibration/data/h200-harness)
load as they are, and the copy sweeps fit: the GPU path of the harness and of the
microbenchmarks, checked against their real output (this machine has no GPU)."""

from __future__ import annotations

import pytest

from conftest import REPO
from orrery import calibrate, measurements

DATA = REPO / "calibration" / "data" / "h200-harness"


def by_key(path):
    return {(s.metric, s.path, s.buffers): s for s in measurements.load(path)}


def test_harness_gpu_output_loads_and_its_copy_sweeps_fit():
    series = by_key(DATA / "harness.csv")
    sizes = [2**k for k in range(23)]  # --sizes 1:4194304
    for path, buffers in (("H2D", "pinned"), ("D2H", "pinned"), ("D2D", "D D")):
        s = series[("copy_bandwidth", path, buffers)]
        assert s.sizes == sizes and s.unit == "GB/s"
        times = [n / v for n, v in zip(s.sizes, s.values)]
        segments = calibrate.fit_piecewise(s.sizes, times)
        errors = sorted(abs(calibrate.predict(segments, n) / t - 1) for n, t in zip(s.sizes, times))
        assert errors[len(errors) // 2] < 0.05, (path, segments)
    kernel = series[("kernel_time", "GPU", "D")]
    assert kernel.sizes == sizes and all(v > 0 for v in kernel.values)
    # the MPI there was not CUDA-aware: no device-buffer MPI row was made up
    assert not any(b in ("D D", "D") and m in ("latency", "bandwidth", "bibw", "collective_latency")
                   for m, _, b in series)
    assert {"latency", "bandwidth", "bibw", "collective_latency"} <= {m for m, _, b in series if b in ("H H", "H")}


def test_microbenchmark_output_from_the_real_runtime_loads():
    api = by_key(DATA / "api_overheads.csv")
    assert set(api) == {("api_time", "launch", "D"), ("api_time", "sync", "D"), ("api_time", "memcpy", "pinned")}
    osu = measurements.load(DATA / "osu_latency_hh.txt")
    assert len(osu) == 1 and osu[0].metric == "latency" and osu[0].sizes[0] == 1 and osu[0].sizes[-1] == 4 << 20
    for name in ("memcpy_h2d.txt", "memcpy_d2h.txt", "memcpy_d2d.txt"):
        sweep = (DATA / name).read_text().splitlines()
        rows = [line.split() for line in sweep if line[:1].isdigit()]
        assert [int(r[0]) for r in rows] == [1024 << k for k in range(19)]
    # with the final synchronisation, a D2D sweep beyond the L2 cache (50 MB) cannot beat the
    # H200's HBM (4.8 TB/s, read + write); without it, it printed 12523 GB/s at 64 MiB
    d2d = {int(r[0]): float(r[1]) for r in (line.split() for line in
           (DATA / "memcpy_d2d.txt").read_text().splitlines()) if r and r[0].isdigit()}
    assert d2d[256 << 20] * 2 < 4800
    assert "cudaSetDevice(1) failed: invalid device ordinal" in (DATA / "log.txt").read_text()
