"""A run's limits (`orrery run --sim-time-limit`, `--wall-time-limit`; docs/running.md, "Limits"):
a run that would go on for ever (a loop on data the kernels would have changed, as Quicksilver's
done-test in skeleton mode) stops, named, with the report of where every rank was.

The program is programs/failures.cu: `forever-gpu` has every rank launch `busy` (1 ms, from the
test's cost file) and wait for it, for ever; `forever-mpi` has the last rank do so and every rank
then reduce; `spin` has rank 0 loop in its own code, where SimGrid's clock never advances.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time

import pytest
from conftest import orrery
from derivations import REL, US

from orrery.run import launch, limits

pytestmark = pytest.mark.native

BUSY = 1000 * US


@pytest.fixture
def costs(tmp_path):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"kernels": {"busy": {"time": "1ms"}}}))
    return ("--costs", str(path))


def forever(run_program, programs, costs, mode="forever-gpu", ranks=1, limits=()):
    return run_program(programs["failures"], mode, options=(*costs, "--gpus-per-node", str(ranks), *limits))


def test_a_run_past_its_simulated_time_limit_stops_at_the_first_event_past_it(run_program, programs, costs, h100):
    """Each iteration takes P = L + BUSY + S (launch, kernel, synchronisation: the rank's host
    overheads are no events of SimGrid's). The limit, 10.5 ms, falls inside the 11th kernel,
    [10 P + L, 10 P + L + BUSY] (P is 1 ms and some microseconds): the first event past it is that
    kernel's end, where the run stops; the rank waits in its synchronisation, outside MPI."""
    launch_s, sync_s = h100.overheads.launch, h100.overheads.sync
    period = launch_s + BUSY + sync_s
    assert 10 * period + launch_s < 10.5e-3 < 10 * period + launch_s + BUSY  # the derivation's premise
    stop = 10 * period + launch_s + BUSY
    r = forever(run_program, programs, costs, limits=("--sim-time-limit", "10.5ms"))
    assert r.returncode == 6, r.stderr
    res = r.results
    assert res["status"] == "sim_time_limit" and res["run"]["exit_code"] == 6
    assert res["run"]["sim_time_limit_s"] == pytest.approx(10.5e-3, rel=1e-15)
    assert res["run"]["wall_time_limit_s"] is None
    failure = res["failure"]
    assert failure["time_s"] == pytest.approx(stop, rel=REL)
    assert res["makespan_s"] == failure["time_s"]
    assert failure["ranks"] == [0]
    assert failure["running"] == [{"rank": 0, "call": None, "peer": None, "tag": None, "since_s": failure["time_s"]}]
    at = f"{failure['time_s'] * 1e3:.3f} ms"
    assert failure["message"] == (
        f"the run reached its simulated time limit of 10.500 ms (--sim-time-limit) at simulated time {at}, "
        "with rank 0 outside MPI"
    )
    assert r.stderr.splitlines()[-1] == f"orrery: sim_time_limit: {failure['message']}"
    # The kernel whose end stopped the run counts, as the MPI call a rank is in does: eleven
    # kernels, and the rank waited for each in its synchronisation, up to the stop. Its terms are
    # those kernels and its host overheads (11 launches, 10 synchronisations that returned).
    (rank,) = res["ranks"]
    assert not rank["finished"]
    assert rank["kernels"]["busy(float*)"]["count"] == 11
    assert rank["kernels"]["busy(float*)"]["time_s"] == pytest.approx(11 * BUSY, rel=REL)
    assert rank["gpu_wait_s"] == pytest.approx(11 * BUSY, rel=REL)
    terms = res["terms"]["critical"]
    assert terms["kernels_s"] == pytest.approx(11 * BUSY, rel=REL)
    assert terms["host_overheads_s"] == pytest.approx(11 * launch_s + 10 * sync_s, rel=REL)
    assert terms["copies_sync_s"] == terms["host_s"] == 0


def test_a_run_stopped_at_its_simulated_time_limit_is_the_same_every_time(run_program, programs, costs):
    texts = [
        (
            forever(run_program, programs, costs, "forever-mpi", 2, ("--sim-time-limit", "3ms")).out / "results.json"
        ).read_bytes()
        for _ in range(2)
    ]
    assert texts[0] == texts[1]


def test_the_ranks_of_a_run_stopped_at_a_limit_are_named_where_they_were(run_program, programs, costs, h100):
    """forever-mpi on 2 ranks: rank 1 runs busy while rank 0 waits in MPI_Allreduce for it; the
    limit falls inside a kernel, whose end (the first event past it) finds them so."""
    r = forever(run_program, programs, costs, "forever-mpi", 2, ("--sim-time-limit", "5.5ms"))
    assert r.returncode == 6, r.stderr
    failure = r.results["failure"]
    assert failure["message"].endswith(", with rank 0 in MPI_Allreduce, rank 1 outside MPI")
    waiting, working = failure["running"]
    assert waiting["rank"] == 0 and waiting["call"] == "MPI_Allreduce" and waiting["peer"] is None
    assert working == {"rank": 1, "call": None, "peer": None, "tag": None, "since_s": failure["time_s"]}
    # rank 0 entered its reduction as rank 1 launched the kernel whose end stopped the run (the two
    # left the reduction before it a few nanoseconds apart: an intra-node message's latency)
    assert failure["time_s"] - waiting["since_s"] == pytest.approx(h100.overheads.launch + BUSY, abs=0.1 * US)
    assert 5.5e-3 < failure["time_s"] <= 5.5e-3 + BUSY
    # the sixth kernel's end stopped the run: it counts, and so does rank 0's sixth reduction, the
    # one it was in, as a deadlock's blocked call does
    assert r.results["ranks"][1]["kernels"]["busy(float*)"]["count"] == 6
    assert r.results["ranks"][0]["mpi"]["MPI_Allreduce"]["count"] == 6


def test_a_limit_the_run_does_not_reach_changes_nothing_but_its_record(run_program, programs):
    plain = run_program(programs["timing"], "one-stream", options=("--gpus-per-node", "1"))
    limited = run_program(
        programs["timing"],
        "one-stream",
        options=("--gpus-per-node", "1", "--sim-time-limit", "1s", "--wall-time-limit", "10min"),
    )
    assert plain.returncode == limited.returncode == 0, limited.stderr
    a, b = plain.results, limited.results
    assert (b["run"]["sim_time_limit_s"], b["run"]["wall_time_limit_s"]) == (1.0, 600.0)
    for res in (a, b):
        del res["run"]["sim_time_limit_s"], res["run"]["wall_time_limit_s"]
    assert a == b


def test_a_run_past_its_wall_time_limit_stops_where_simgrid_s_clock_next_advances(run_program, programs, costs):
    start = time.monotonic()
    r = forever(run_program, programs, costs, "forever-mpi", 2, ("--wall-time-limit", "1s"))
    took = time.monotonic() - start
    assert r.returncode == 124, r.stderr
    res = r.results
    assert res["status"] == "wall_time_limit" and res["run"]["wall_time_limit_s"] == 1.0
    failure = res["failure"]
    assert failure["ranks"] == [0, 1]
    assert failure["message"].startswith("the run reached its wall-time limit of 1.000 s (--wall-time-limit) at ")
    # where the wall clock found them: both in the reduction, or rank 1 in its synchronisation
    assert re.fullmatch(
        r"the run reached its wall-time limit of 1\.000 s \(--wall-time-limit\) at simulated time [0-9.]+ m?s, "
        r"with (ranks 0 and 1 in MPI_Allreduce|rank 0 in MPI_Allreduce, rank 1 outside MPI)",
        failure["message"],
    ), failure["message"]
    assert res["makespan_s"] == failure["time_s"] > 0
    # the shim stopped it, not orrery run from outside (WALL_GRACE_S later)
    assert 1.0 < took < 1.0 + launch.WALL_GRACE_S


def test_a_run_stuck_where_simgrid_s_clock_stands_still_is_stopped_from_outside(run_program, programs, costs):
    """`spin`: rank 0 loops in its own code; no step of SimGrid's comes to check the deadline, so
    orrery run ends the simulation's session WALL_GRACE_S past it. Nothing of the ranks was
    reported; nothing of the simulation is left running."""
    start = time.monotonic()
    r = forever(run_program, programs, costs, "spin", 1, ("--wall-time-limit", "1s"))
    took = time.monotonic() - start
    assert r.returncode == 124, r.stderr
    res = r.results
    assert res["status"] == "wall_time_limit"
    assert res["failure"]["message"] == (
        "the run passed its wall-time limit of 1.000 s (--wall-time-limit) where SimGrid's clock stood still "
        "(SimGrid's start-up, or the program's own code looping without a CUDA or MPI call that waits) and "
        f"was stopped from outside {launch.WALL_GRACE_S:.3f} s later: nothing of it was reported"
    )
    assert res["makespan_s"] is None and res["ranks"] == [] and res["failure"]["time_s"] is None
    assert 1.0 + launch.WALL_GRACE_S <= took < 1.0 + 3 * launch.WALL_GRACE_S
    assert not (r.out / "report.tsv").exists()
    left = subprocess.run(["pgrep", "-f", str(r.out)], capture_output=True, text=True).stdout
    assert left == ""


def test_the_api_takes_limits_with_units_or_seconds(programs, costs, tmp_path):
    import orrery
    from orrery.errors import InputError

    res = orrery.simulate(
        programs["failures"],
        ["forever-gpu"],
        gpus_per_node=1,
        costs=costs[1],
        sim_time_limit=0.0105,
        out=tmp_path / "a",
        check=False,
    )
    again = orrery.simulate(
        programs["failures"],
        ["forever-gpu"],
        gpus_per_node=1,
        costs=costs[1],
        sim_time_limit="10.5ms",
        out=tmp_path / "b",
        check=False,
    )
    assert res.status == again.status == "sim_time_limit"
    assert res.failure.time_s == again.failure.time_s
    with pytest.raises(orrery.RunFailed):
        orrery.simulate(
            programs["failures"], ["forever-gpu"], gpus_per_node=1, sim_time_limit="1ms", out=tmp_path / "c"
        )
    with pytest.raises(InputError, match=r"^--wall-time-limit: got -5, expected a positive time such as "):
        orrery.simulate(programs["failures"], ["forever-gpu"], wall_time_limit=-5, out=tmp_path / "d")
    assert not (tmp_path / "d").exists()
    assert math.isclose(limits.parse("1.5h"), 5400.0) and math.isclose(limits.parse("90min"), 5400.0)


def test_a_sweep_gives_every_point_its_limits_and_runs_again_a_point_the_wall_clock_stopped(programs, costs, tmp_path):
    """The simulated limit is an input of a point (a point it stopped is that point's result, kept
    on resuming); the wall-time limit is not (a point it stopped runs again)."""
    import csv

    def sweep(limits: str) -> list[dict]:
        spec = tmp_path / "sweep.toml"
        spec.write_text(
            f'program = "{programs["failures"]}"\nargs = ["{{mode}}"]\ngpus_per_node = 1\n'
            f'costs = "{costs[1]}"\n{limits}[grid]\nmode = ["forever-gpu"]\n'
        )
        p = orrery("sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "1")
        assert p.returncode != 0 and "Traceback" not in p.stderr
        return list(csv.DictReader((tmp_path / "out" / "sweep.csv").open()))

    def point_results(row: dict):
        return tmp_path / "out" / "points" / row["point"] / "results.json"

    (row,) = sweep('sim_time_limit = "10.5ms"\n')
    assert row["status"] == "sim_time_limit"
    assert row["error"].startswith("the run reached its simulated time limit of 10.500 ms (--sim-time-limit) at ")
    record = json.loads((point_results(row).parent / "point.json").read_text())
    assert record["inputs"]["sim_time_limit_s"] == 0.0105
    first = point_results(row).stat().st_mtime_ns
    (row,) = sweep('sim_time_limit = "10.5ms"\n')  # resumed: the point is finished
    assert row["status"] == "sim_time_limit" and point_results(row).stat().st_mtime_ns == first

    (row,) = sweep("wall_time_limit = 1\n")
    assert row["status"] == "wall_time_limit"
    record = json.loads((point_results(row).parent / "point.json").read_text())
    assert record["inputs"]["sim_time_limit_s"] is None and "wall_time_limit" not in json.dumps(record)
    first = point_results(row).stat().st_mtime_ns
    (row,) = sweep("wall_time_limit = 1\n")  # resumed: the wall clock's verdict is run again
    assert row["status"] == "wall_time_limit" and point_results(row).stat().st_mtime_ns != first


def test_a_sweep_spec_s_bad_limit_is_one_line(tmp_path):
    spec = tmp_path / "sweep.toml"
    spec.write_text('program = "/bin/true"\nsim_time_limit = "soon"\n')
    p = orrery("sweep", str(spec), "--out", str(tmp_path / "out"))
    assert p.returncode == 2
    assert p.stderr == (
        f"orrery: error: {spec}: key 'sim_time_limit': got 'soon', expected a positive time such as 500ms, 2.5s, "
        "30min or 2h (a plain number: seconds)\n"
    )
    assert not (tmp_path / "out").exists()
