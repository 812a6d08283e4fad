"""NCCL sweeps as calibration sweeps (issue 19, item 4): nccl-tests rows of the shared data read as
sweeps of dgx-h100's `nccl` set (sizes, units, times derived from busbw), nccl-tests' table with
both placements, and the fit's linear solve on points whose answer is known."""

from __future__ import annotations

import csv

import pytest

from orrery.calibration import measurements, nccl, report, sweeps

MEASURED = sweeps.measured_dir()


def rows(**where: str) -> list[dict[str, str]]:
    with (MEASURED / "collectives.csv").open(newline="") as f:
        return [r for r in csv.DictReader(f) if all(text in r[col] for col, text in where.items())]


def by_name(fragment: str) -> sweeps.Sweep:
    (found,) = [s for s in sweeps.sweeps_for("dgx-h100", "nccl") if fragment in s.name]
    return found


def test_voltage_park_allreduce_is_its_rows_time_us_from_8_bytes_on_one_process_of_8_gpus():
    sweep = by_name("allreduce out-of-place, 8 x H100 SXM5, -g 8 (Voltage Park)")
    expected = [
        (int(r["message_bytes"]), float(r["time_us"]))
        for r in rows(system="Voltage Park", collective="allreduce", placement="out-of-place")
        if r["nodes"] == "1"
    ]
    points = sweeps.measured_points(sweep)
    assert points == sorted(expected)
    assert [s for s, _ in points] == [2**k for k in range(3, 34)]  # -b 8 -e 8G -f 2
    assert sweep.kind == ("nccl_time", "allreduce", "out-of-place") and sweep.unit == "us" and sweep.fit
    # one process driving the node's 8 GPUs, as measured (-g 8)
    assert sweep.program[:4] == ("nccl_sweep", "allreduce", "-g", "8")
    assert (sweep.nodes, sweep.gpus_per_node, sweep.ranks_per_node, sweep.gpus) == (1, 8, 1, 8)


def test_allgather_leaves_out_the_zero_byte_row_and_is_compared_not_fitted():
    sweep = by_name("allgather in-place, 8 x H100 SXM5")
    sizes = [s for s, _ in sweeps.measured_points(sweep)]
    measured = sorted(
        int(r["message_bytes"]) for r in rows(system="Voltage Park", collective="allgather", placement="in-place")
    )
    assert measured[0] == 0 and sizes == [s for s in measured if s >= 8]
    assert not sweep.fit and "far below allreduce" in by_name("allgather out-of-place, 8 x H100 SXM5").note


def test_azure_times_are_derived_from_busbw_with_the_allreduce_factor_and_run_as_nvls():
    sweep = by_name("Azure ND H100 v5")
    points = dict(sweeps.measured_points(sweep))
    source = {int(r["message_bytes"]): float(r["busbw_GBps"]) for r in rows(system="Azure ND H100 v5")}
    assert set(points) == {s for s, b in source.items() if b > 0}
    # time = size / algbw, algbw = busbw / (2 (n - 1) / n) = busbw / 1.75 on 8 ranks; GB/s = 1e3 B/us
    for size in (1024, 8589934592):
        assert points[size] == pytest.approx(size * 1.75 / (source[size] * 1e3), rel=1e-12)
    assert dict(sweep.env) == {"NCCL_ALGO": "NVLS"} and not sweep.fit


def test_multi_node_sweeps_run_one_rank_per_gpu_and_are_only_compared():
    for fragment, layout in (("InfiniBand, 16 ranks", (2, 8, 8)), ("TCPXO", (2, 8, 8)), ("2 x 1 H100", (2, 1, 1))):
        for sweep in [s for s in sweeps.sweeps_for("dgx-h100", "nccl") if fragment in s.name]:
            assert (sweep.nodes, sweep.gpus_per_node, sweep.ranks_per_node) == layout
            assert sweep.program[2:4] == ("-g", "1") and not sweep.fit
    # what is fitted: the single-node allreduce sweeps with NCCL's own choice of algorithm
    fitted = [s for s in sweeps.sweeps_for("dgx-h100", "nccl") if s.fit]
    assert len(fitted) == 6
    assert all(s.kind[1] == "allreduce" and s.nodes == 1 and not s.env for s in fitted)


def test_busbw_derivation_per_collective_factor(tmp_path):
    """value_from = "busbw" on a file of one's own: allgather's factor is (n - 1) / n, broadcast's 1."""
    data = tmp_path / "calibration" / "data" / "measured"
    data.mkdir(parents=True)
    (data / "c.csv").write_text(
        "collective,message_bytes,busbw_GBps\nallgather,4096,0.00\nallgather,8192,3.5\nbroadcast,8192,2.0\n"
    )
    entry = {
        "name": "x",
        "file": "c.csv",
        "size_column": "message_bytes",
        "value_column": "busbw_GBps",
        "value_from": "busbw",
        "unit": "us",
        "metric": "nccl_time",
        "buffers": "out-of-place",
        "iterations": 2,
        "nodes": 1,
        "gpus_per_node": 4,
        "gpus_per_process": 2,
    }
    gather = sweeps._sweep({**entry, "path": "allgather", "select": {"collective": "=allgather"}})
    # 4 ranks: algbw = 3.5 / 0.75 GB/s; the 0.00 row has no time
    assert sweeps.measured_points(gather, tmp_path) == [(8192, pytest.approx(8192 * 0.75 / 3.5e3, rel=1e-12))]
    assert gather.ranks_per_node == 2 and gather.program == (
        "nccl_sweep",
        "allgather",
        "-g",
        "2",
        "-n",
        "2",
        "-w",
        "1",
    )
    bcast = sweeps._sweep({**entry, "path": "broadcast", "select": {"collective": "=broadcast"}})
    assert sweeps.measured_points(bcast, tmp_path) == [(8192, pytest.approx(8192 / 2.0e3, rel=1e-12))]


TABLE = """# nccl-tests-like sweep (Orrery calibration/bench/nccl_sweep), NCCL 23007
# Collective test starting: allreduce
#         size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
            8             2     float     sum      -1    30.50    0.00    0.00     N/A    29.25    0.00    0.00     N/A
     1048576        262144     float     sum      -1  31348.2   33.45   58.54     N/A    123.00    8.53   14.92     N/A
"""


def test_nccl_tests_table_gives_both_placements_and_load_the_out_of_place_one(tmp_path):
    path = tmp_path / "ar.txt"
    path.write_text(TABLE)
    table = measurements.nccl_tests_table(path, TABLE)
    assert table["out-of-place"].sizes == [8, 1048576] == table["in-place"].sizes
    assert table["out-of-place"].values == pytest.approx([30.5e-6, 31348.2e-6])
    assert table["in-place"].values == pytest.approx([29.25e-6, 123e-6])
    (s,) = measurements.load(path)
    assert (s.benchmark, s.values) == ("nccl-tests allreduce", table["out-of-place"].values)
    # a table cut after the out-of-place columns has no in-place series
    cut = "\n".join(" ".join(ln.split()[:9]) if not ln.startswith("#") else ln for ln in TABLE.splitlines())
    assert set(measurements.nccl_tests_table(path, cut)) == {"out-of-place"}


def test_solve_recovers_latencies_and_efficiencies_of_a_linear_model():
    """Points of a model t = L[k] + b / e[link] (b known per point, as the probes find it): from
    times simulated at other keys, one solve lands on the keys that reproduce the measurements."""
    true = {"nccl.base_latency_ring_ll": 20e-6, "nccl.base_latency_nvls_simple": 5e-6, "nccl.efficiency_nvlink": 0.8}
    start = {"nccl.base_latency_ring_ll": 6.6e-6, "nccl.base_latency_nvls_simple": 0.0, "nccl.efficiency_nvlink": 1.0}
    points, times = [], {}
    for i, (key, b) in enumerate(
        [("ring_ll", 1e-6), ("ring_ll", 4e-6), ("ring_ll", 2e-5), ("nvls_simple", 1e-4), ("nvls_simple", 1e-3)]
    ):
        k = f"nccl.base_latency_{key}"
        p = nccl.Point("s", i, true[k] + b / true["nccl.efficiency_nvlink"], latency_key=k, latency_slope=1.0)
        p.efficiency_slopes = {"nccl.efficiency_nvlink": b}
        points.append(p)
        times[("s", i)] = start[k] + b / start["nccl.efficiency_nvlink"]
    solved = nccl._solve(points, times, start, [k for k in start if "latency" in k], ["nccl.efficiency_nvlink"])
    assert solved == pytest.approx(true, rel=1e-6)


def test_nccl_fit_report_names_each_range_of_sizes_with_its_algorithm_and_protocol():
    found = {
        "method": "m",
        "choices": {
            "a @ 8": "ring_ll",
            "a @ 16": "ring_ll",
            "a @ 32": "ring_ll128",
            "a @ 64": "?",
            "b @ 8": "nvls_simple",
        },
        "rounds": [
            {"score": 0.5, "targets": 0.4},
            {"score": 0.04, "targets": 0.03},
            {"targets": 0.02, "refining": "k", "keys": {"k": 0.9}},
        ],
        "fitted": {"nccl.base_latency_ring_ll": 2.5e-05},
        "left": {"nccl.efficiency_net": 1.0},
    }
    lines = report.nccl_fit_lines(found)
    assert lines[1] == "    a: 8-16 B ring_ll, 32 B ring_ll128, 64 B ?"
    assert lines[2] == "    b: 8 B nvls_simple"
    assert lines[3].endswith("0.500, 0.040")
    assert lines[4].endswith(": 0.400, 0.030, 0.020 (k = 0.9)")
    assert lines[5] == "    fitted: nccl.base_latency_ring_ll = 2.5e-05"


def test_fit_finds_the_choice_per_size_and_recovers_the_keys_of_a_simulator(monkeypatch):
    """nccl.fit on a stand-in simulator whose time per call is the chosen algorithm/protocol's base
    latency plus the bytes at the efficiency of its link class (NVLS at nvls_efficiency): the
    probes find which key each size depends on, and the fitted keys reproduce the measurements."""
    bandwidth = 400e9
    true = {
        "nccl.base_latency_ring_ll": 30e-6,
        "nccl.base_latency_ring_ll128": 40e-6,
        "nccl.base_latency_nvls_simple": 12e-6,
        "nccl.efficiency_nvlink": 0.7,
        "nccl.nvls_efficiency": 0.6,
    }

    def choice(size: int) -> tuple[str, str]:
        if size < 65536:
            return "nccl.base_latency_ring_ll", "nccl.efficiency_nvlink"
        if size < 4 << 20:
            return "nccl.base_latency_ring_ll128", "nccl.efficiency_nvlink"
        return "nccl.base_latency_nvls_simple", "nccl.nvls_efficiency"

    def simulated(keys, size: int) -> float:
        latency, efficiency = choice(size)
        return keys(latency) + size / (bandwidth * keys(efficiency))

    sizes = [2**k for k in range(3, 31, 3)]
    sweep = by_name("allreduce out-of-place, 8 x H100 SXM5, -g 8 (Voltage Park)")
    measured = [(s, simulated(true.__getitem__, s) * 1e6) for s in sizes]
    runs = []

    def fake(repo, m, pairs):
        runs.append(m)
        # nccl_sweep prints 2 decimals of a microsecond
        return {
            (sw.name, s): round(simulated(lambda k: nccl.value(m, k), s) * 1e6, 2) * 1e-6
            for sw, pts in pairs
            for s, _ in pts
        }

    monkeypatch.setattr(nccl, "simulate_all", fake)
    monkeypatch.setattr(nccl.validate, "build_bench", lambda repo, nccl=False: None)
    overrides: dict = {}
    found = nccl.fit("dgx-h100", None, [(sweep, measured)], overrides)
    assert found["choices"] == {f"{sweep.name} @ {s}": choice(s)[0].removeprefix("nccl.base_latency_") for s in sizes}
    assert overrides == pytest.approx(true, rel=2e-3)
    assert set(found["fitted"]) == set(true) and "nccl.efficiency_net" in found["left"]
    # it starts from NCCL's constants, not from the built-in's (calibrated) values
    from orrery.machines import description

    assert found["rounds"][0]["keys"] == {f"nccl.{k}": v for k, v in description.Nccl().model_dump().items()}
    assert found["rounds"][0]["targets"] > 1 and min(r["targets"] for r in found["rounds"]) < 0.02


def test_dgx_h100_ships_its_committed_nccl_calibration():
    """dgx-h100's [nccl] keys are calibration/dgx-h100-nccl's (sync_builtin.py), value for value,
    each fitted key's source naming it; the keys it did not fit keep NCCL's defaults."""
    import json
    from pathlib import Path

    from orrery import machines as machine
    from orrery.machines import description

    committed = Path(__file__).resolve().parents[2] / "calibration" / "dgx-h100-nccl" / "calibration.json"
    cal = json.loads(committed.read_text())
    assert cal["machine"] == "dgx-h100" and cal["command"] == "orrery calibrate --machine dgx-h100 --sweeps nccl"
    m = machine.load("dgx-h100")
    fitted = cal["overrides"]
    assert fitted and set(fitted) <= {f"nccl.{k}" for k in type(m.nccl).model_fields}
    defaults = description.Nccl()
    for key in type(m.nccl).model_fields:
        shipped = getattr(m.nccl, key)
        if f"nccl.{key}" in fitted:
            assert shipped == pytest.approx(fitted[f"nccl.{key}"], rel=1e-12)
            assert m.sources[f"nccl.{key}"].startswith("fitted: calibration/dgx-h100-nccl/calibration.json")
        else:
            assert shipped == pytest.approx(getattr(defaults, key), rel=1e-12)


@pytest.mark.parametrize(("fixed", "expected"), [(30e-6, (5e-6, 25e-6)), (15e-6, (0.0, 15e-6))])
def test_solve_moves_nvls_step_latency_only_where_the_base_latency_alone_cannot(fixed, expected):
    """NVLS sizes depend on nccl.base_latency_nvls_simple and nccl.step_latency_nvls alike (once per
    call): t = base + step + b / e. The solve keeps the step at NCCL's 25 us while the base latency
    (0 or more) can give the fixed time, and lowers it only for a fixed time below 25 us."""
    base, step, eff = "nccl.base_latency_nvls_simple", "nccl.step_latency_nvls", "nccl.nvls_efficiency"
    start = {base: 0.0, step: 25e-6, eff: 0.85}
    points, times = [], {}
    for i, b in enumerate([1e-5, 1e-4, 1e-3]):
        p = nccl.Point("s", i, fixed + b / 0.7, latency_key=base, latency_slope=1.0)
        p.efficiency_slopes, p.step_slopes = {eff: b}, {step: 1.0}
        points.append(p)
        times[("s", i)] = start[base] + start[step] + b / start[eff]
    solved = nccl._solve(points, times, start, [base, step], [eff], start)
    assert (solved[base], solved[step]) == pytest.approx(expected, abs=1e-9)
    assert solved[eff] == pytest.approx(0.7, rel=1e-4)
