"""calibration/bench/nccl_sweep under `orrery run` on dgx-h100 (issue 19, item 4): its table read as
the calibration reads it, and its printed times consistent with the run's own NCCL results: the
calls and bytes the report counts, the CUDA-event and host timings apart by the synchronisations
alone, and a base latency's change moving every printed time by exactly that much."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import ORRERY, bench_sources, nvcc_available

from orrery import machines as machine
from orrery.calibration import measurements, validate

pytestmark = pytest.mark.native

ITERS, WARMUP = 2, 1
SIZES = (8, 4096, 1048576)


@pytest.fixture(scope="module")
def nccl_sweep(tmp_path_factory) -> Path:
    if not nvcc_available():
        pytest.skip("nvcc (CUDA toolkit compiler) is not installed")
    home = validate.nccl_home()
    if home is None:
        pytest.skip("NCCL's header is not there (scripts/setup.sh keeps it in .venv/nccl)")
    d = bench_sources(tmp_path_factory.mktemp("nccl-bench"))
    make = ["make", "-s", f"NVCC={ORRERY} nvcc", f"MPICXX={ORRERY} mpicxx", f"NCCL_HOME={home}", "nccl_sweep"]
    subprocess.run(make, cwd=d, check=True, stdout=subprocess.DEVNULL)
    return d / "nccl_sweep"


def sweep(program: Path, out: Path, gpus: int, sizes=SIZES, timing: str = "host", options=()):
    """nccl_sweep allreduce on one dgx-h100 node, `gpus` GPUs per process (8 in all): its table
    (placement -> size -> us) and the rank results of results.json."""
    layout = ("--gpus-per-node", "8", "--ranks-per-node", str(8 // gpus))
    args = ["-g", str(gpus), "-l", ",".join(map(str, sizes)), "-n", str(ITERS), "-w", str(WARMUP), "-T", timing]
    cmd = [ORRERY, "run", "--machine", "dgx-h100", *layout, *options, "--out", str(out), "--", str(program)]
    proc = subprocess.run([*cmd, "allreduce", *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    table = measurements.nccl_tests_table(out / "stdout.txt", proc.stdout)
    times = {p: dict(zip(s.sizes, (v * 1e6 for v in s.values))) for p, s in table.items()}
    return times, json.loads((out / "results.json").read_text())["ranks"], proc.stdout


def test_one_rank_per_gpu_prints_a_table_of_both_placements_the_report_counts(nccl_sweep, tmp_path):
    times, ranks, stdout = sweep(nccl_sweep, tmp_path, 1)
    assert set(times) == {"out-of-place", "in-place"} and all(list(t) == list(SIZES) for t in times.values())
    assert len(ranks) == 8
    for r in ranks:
        rows = r["nccl"]
        assert all(name.startswith("ncclAllReduce ") and "/" in name for name in rows)
        # every size, both placements, warmup and timed iterations, one call each
        calls = len(SIZES) * 2 * (WARMUP + ITERS)
        assert sum(t["count"] for t in rows.values()) == calls
        assert sum(t["bytes"] for t in rows.values()) == 2 * (WARMUP + ITERS) * sum(SIZES)
    # nccl-tests' columns: algbw = size / time, busbw = algbw x 2 (n - 1) / n on 8 ranks
    for line in stdout.splitlines():
        parts = line.split()
        if line.startswith("#") or not parts or not parts[0].isdigit():
            continue
        size = int(parts[0])
        for time_us, algbw, busbw in ((parts[5], parts[6], parts[7]), (parts[9], parts[10], parts[11])):
            assert float(algbw) == pytest.approx(size / float(time_us) / 1e3, abs=0.006)
            assert float(busbw) == pytest.approx(size / float(time_us) / 1e3 * 1.75, abs=0.006)


@pytest.mark.parametrize("gpus", [1, 8])
def test_host_time_is_the_event_time_and_the_synchronisations(nccl_sweep, tmp_path, gpus):
    """Host timing runs from the start of the timed iterations to the return of the last stream's
    synchronisation; CUDA events span the same work on each stream. A process synchronises each of
    its GPUs' streams in turn, so the two differ by that many synchronisations' cost, spread over
    the iterations. One process driving 8 GPUs counts all their calls as its own."""
    host, ranks, _ = sweep(nccl_sweep, tmp_path / "host", gpus)
    events, _, _ = sweep(nccl_sweep, tmp_path / "events", gpus, timing="events")
    sync = machine.load("dgx-h100").overheads.sync
    for placement in host:
        for size in SIZES:
            assert host[placement][size] == pytest.approx(
                events[placement][size] + gpus * sync * 1e6 / ITERS, abs=0.011
            ), (placement, size)
    assert len(ranks) == 8 // gpus
    assert sum(t["count"] for t in ranks[0]["nccl"].values()) == gpus * len(SIZES) * 2 * (WARMUP + ITERS)


def test_a_base_latency_moves_every_printed_time_by_itself(nccl_sweep, tmp_path):
    """The sizes below run with one algorithm and protocol (the report's row names it); its base
    latency 5 us longer makes each call, and so each printed time per iteration, 5 us longer."""
    small = (8, 4096)
    before, ranks, _ = sweep(nccl_sweep, tmp_path / "before", 1, small)
    (name,) = ranks[0]["nccl"]
    algo, proto = name.split()[1].split("/")
    key = f"nccl.base_latency_{algo.lower().replace('nvlstree', 'nvls_tree')}_{proto.lower()}"
    was = getattr(machine.load("dgx-h100").nccl, key.removeprefix("nccl."))
    after, later, _ = sweep(nccl_sweep, tmp_path / "after", 1, small, options=("--set", f"{key}={was * 1e6 + 5}us"))
    for placement in before:
        for size in small:
            assert after[placement][size] - before[placement][size] == pytest.approx(5.0, abs=0.011)
    calls = ranks[0]["nccl"][name]["count"]
    assert later[0]["nccl"][name]["time_s"] - ranks[0]["nccl"][name]["time_s"] == pytest.approx(calls * 5e-6, rel=1e-6)


def test_the_committed_nccl_calibration_is_what_the_simulator_gives_now(nccl_sweep, monkeypatch):
    """calibration/dgx-h100-nccl's closed loop on Voltage Park's out-of-place allreduce (one run of
    nccl_sweep at its 31 sizes), simulated again on the calibrated machine: the same times, so
    the committed figures (within the targets) are current. The closed loop's own path
    (validate.compare), with the nccl_sweep built here from the same sources."""
    from conftest import REPO

    from orrery.calibration import merge, sweeps

    folder = REPO / "calibration" / "dgx-h100-nccl"
    cal = json.loads((folder / "calibration.json").read_text())
    committed = json.loads((folder / "closed-loop" / "validation.json").read_text())["sweeps"]
    (sweep,) = [
        s
        for s in sweeps.sweeps_for("dgx-h100", "nccl")
        if s.name.startswith("nccl-tests allreduce out-of-place, 8 x H100 SXM5")
    ]
    (was,) = [r for r in committed if r["name"] == sweep.name]
    monkeypatch.setattr(validate, "build_bench", lambda repo=None, nccl=False: nccl_sweep.parent)
    now = validate.compare(None, merge.candidate("dgx-h100", cal["overrides"]), sweep, sweeps.measured_points(sweep))
    assert now.sizes == was["sizes"] and now.simulated == pytest.approx(was["simulated"], rel=1e-9)
    assert now.median_abs_error <= sweeps.MEDIAN_TOLERANCE and now.p95_abs_error <= sweeps.P95_TOLERANCE
