"""How a run's outcome is read from what the shim left (orrery/results.py, read_run): the paths a
native test cannot provoke on purpose (a crash that left no report, a process killed from
outside, Orrery's own limits)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest

from orrery.run import results

pytestmark = pytest.mark.unit

HEADER = "\t".join(results.REPORT_COLUMNS) + "\n"


def rank_rows(rank: int, end: float, finished: bool) -> str:
    rows = [
        ("rank", "host_api", 0, 0),
        ("rank", "gpu_wait", 0, 0),
        ("rank", "end", 0, end),
        ("rank", "finished", int(finished), 0),
        ("engine", "compute", 0, 0),
        ("engine", "H2D", 0, 0),
        ("engine", "D2H", 0, 0),
        ("overlap", "communication", 0, 0),
        ("overlap", "hidden", 0, 0),
        ("placement", f"n0-gpu{rank}", 0, 0),
        ("mixed", "placements", 0, 0),
    ]
    return "".join(f"{rank}\t{cat}\t{name}\t{count}\t0\t{t!r}\n" for cat, name, count, t in rows)


def report(tmp_path, status_row: str, ranks=((0, 2e-6, True), (1, 2e-6, False))) -> None:
    text = HEADER + "-1\trun\tmakespan\t0\t0\t2e-06\n" + status_row + "".join(rank_rows(*r) for r in ranks)
    (tmp_path / "report.tsv").write_text(text)


def test_a_crash_that_left_only_its_row_names_the_rank(tmp_path):
    (tmp_path / "report.tsv.crash").write_text("1\tstatus\tcrashed\t6\t0\t3e-06\n")
    res = results.read_run(tmp_path, {}, 0)
    assert (res.status, res.run["exit_code"]) == ("crashed", 128 + 6)
    assert res.failure.ranks == [1] and res.failure.time_s == 3e-06 and res.failure.code == 6
    assert res.failure.message == "rank 1 was killed by signal 6 (SIGABRT: Aborted) at simulated time 3.000 us"
    assert res.ranks == [] and res.makespan_s is None


def test_a_process_killed_before_the_shim_could_tell_is_a_crash_of_no_known_rank(tmp_path):
    res = results.read_run(tmp_path, {}, 128 + 9)
    assert (res.status, res.run["exit_code"], res.failure.code, res.failure.ranks) == ("crashed", 137, 9, [])


def test_no_report_and_no_reason_is_orrery_s_error(tmp_path):
    res = results.read_run(tmp_path, {}, 1)
    assert (res.status, res.run["exit_code"]) == ("orrery_error", results.EXIT_ORRERY_ERROR)
    assert "wrote no report" in res.failure.message and "exited with status 1" in res.failure.message


def test_an_exit_after_finalize_that_cuts_others_short_is_orrery_s_limit(tmp_path):
    report(tmp_path, "0\tstatus\texit_after_finalize\t0\t0\t2e-06\n")
    res = results.read_run(tmp_path, {}, 0)
    assert (res.status, res.run["exit_code"]) == ("orrery_error", 3)
    assert res.failure.message.startswith(
        "rank 0 called exit(0) after MPI_Finalize at simulated time 2.000 us while rank 1 had not finished"
    )


@pytest.mark.parametrize("code, exit_code", [(7, 7), (256 + 7, 7), (0, 1), (256, 1)])
def test_an_abort_exits_with_its_code_as_a_shell_sees_it_never_zero(tmp_path, code, exit_code):
    report(tmp_path, f"1\tstatus\taborted\t{code}\t0\t2e-06\n")
    res = results.read_run(tmp_path, {}, 0)
    assert res.status == "aborted" and res.run["exit_code"] == exit_code and res.failure.code == code


def test_exit_zero_before_finalize_is_a_failure(tmp_path):
    report(tmp_path, "1\tstatus\texited\t0\t0\t2e-06\n")
    res = results.read_run(tmp_path, {}, 0)
    assert (res.status, res.run["exit_code"]) == ("exited", 1)
    assert "exit(0)" in res.failure.message and "before MPI_Finalize" in res.failure.message


def test_an_error_of_orrery_wins_over_the_report_s_status(tmp_path):
    report(tmp_path, "0\tstatus\torrery_error\t0\t0\t2e-06\n")
    (tmp_path / "error.txt").write_text("the program called cudaMallocPitch, which Orrery does not simulate\n")
    res = results.read_run(tmp_path, {}, 0)
    assert (res.status, res.run["exit_code"]) == ("orrery_error", 3)
    assert res.failure.message == "the program called cudaMallocPitch, which Orrery does not simulate"
    assert res.failure.ranks == [0] and [r.finished for r in res.ranks] == [True, False]


def test_a_deadlock_with_no_rank_blocked_is_orrery_s_error(tmp_path):
    report(tmp_path, "-1\tstatus\tdeadlock\t0\t0\t2e-06\n", ranks=((0, 2e-6, True),))
    res = results.read_run(tmp_path, {}, 0)
    assert (res.status, res.run["exit_code"], res.failure.ranks) == ("orrery_error", 3, [])
    assert "after every rank had finished" in res.failure.message


def test_a_run_stopped_at_a_limit_names_its_unfinished_ranks_by_call_in_spans(tmp_path):
    """Twelve ranks: 0-7 and 9 in MPI_Allreduce (a span of three or more is written as one), 8 and
    10 outside MPI (two in a row are two ranks), 11 finished (not named)."""
    blocked = "".join(f"{r}\tblocked\t{'' if r in (8, 10) else 'MPI_Allreduce'}\t-1\t-1\t1e-06\n" for r in [*range(11)])
    ranks = [(r, 2e-6, r == 11) for r in range(12)]
    report(tmp_path, "-1\tstatus\tsim_time_limit\t0\t0\t2e-06\n" + blocked, ranks=ranks)
    res = results.read_run(tmp_path, {"sim_time_limit_s": 1.5e-6}, 0)
    assert (res.status, res.run["exit_code"]) == ("sim_time_limit", results.EXIT_SIM_TIME_LIMIT)
    assert res.failure.message == (
        "the run reached its simulated time limit of 1.500 us (--sim-time-limit) at simulated time 2.000 us, "
        "with ranks 0-7 and 9 in MPI_Allreduce, ranks 8 and 10 outside MPI"
    )
    assert res.failure.ranks == list(range(11)) and res.failure.blocked == []
    assert res.failure.running[8] == {"rank": 8, "call": None, "peer": None, "tag": None, "since_s": 1e-06}
    report(tmp_path, "-1\tstatus\twall_time_limit\t0\t0\t2e-06\n1\tblocked\tMPI_Recv\t0\t5\t1e-06\n")
    res = results.read_run(tmp_path, {"wall_time_limit_s": 90.0}, 0)
    assert (res.status, res.run["exit_code"]) == ("wall_time_limit", 124)
    assert res.failure.message.endswith(
        "limit of 90.000 s (--wall-time-limit) at simulated time 2.000 us, with rank 1 in MPI_Recv"
    )
    assert res.failure.running == [{"rank": 1, "call": "MPI_Recv", "peer": 0, "tag": 5, "since_s": 1e-06}]


def approx_terms(*seconds: float):
    return pytest.approx(asdict(results.Terms(*seconds)), rel=1e-12, abs=1e-18)


def term_rows(rank: int, **seconds: float) -> str:
    return "".join(f"{rank}\tterm\t{name}\t0\t0\t{t!r}\n" for name, t in seconds.items())


def test_the_critical_rank_and_the_mean_terms_per_iteration_in_results_and_summary(tmp_path):
    """Two ranks ending at 2 us and 3 us (the makespan): rank 1 is the critical rank; the mean of
    each term is the two ranks' over 2, idle rank 0's 1 us over 2; per iteration each over 4."""
    us = 1e-6
    terms = {
        0: {"kernels": 1 * us, "exposed_p2p": 0.5 * us, "host": 0.5 * us},
        1: {"kernels": 1 * us, "exposed_collectives": 1.5 * us, "copies_sync": 0.25 * us, "host_overheads": 0.25 * us},
    }
    text = HEADER + "-1\trun\tmakespan\t0\t0\t3e-06\n0\tstatus\tcompleted\t0\t0\t3e-06\n"
    for rank, end in ((0, 2 * us), (1, 3 * us)):
        text += rank_rows(rank, end, True) + term_rows(rank, **terms[rank])
    (tmp_path / "report.tsv").write_text(text)
    res = results.read_run(tmp_path, {"machine": "h100-ib200", "iterations": 4}, 0)
    t = res.terms
    assert t is not None and (t.critical_rank, t.iterations) == (1, 4)
    assert asdict(t.critical) == approx_terms(1 * us, 0, 1.5 * us, 0.25 * us, 0.25 * us, 0, 0)
    assert asdict(t.mean) == approx_terms(1 * us, 0.25 * us, 0.75 * us, 0.125 * us, 0.125 * us, 0.25 * us, 0.5 * us)
    assert asdict(t.mean_per_iteration) == approx_terms(
        0.25 * us, 0.0625 * us, 0.1875 * us, 0.03125 * us, 0.03125 * us, 0.0625 * us, 0.125 * us
    )
    assert t.mean.total_s() == pytest.approx(3 * us, rel=1e-12)
    lines = results.summary(res).splitlines()
    i = lines.index(
        "time by term, per iteration (4 iterations): the critical rank (last to finish) and the mean over 2 ranks"
    )
    assert lines[i + 2].split() == [
        "rank",
        "1",
        "250.0",
        "ns",
        "0",
        "375.0",
        "ns",
        "62.5",
        "ns",
        "62.5",
        "ns",
        "0",
        "0",
        "750.0",
        "ns",
    ]
    assert lines[i + 3].split()[:3] == ["mean", "250.0", "ns"]
    assert results.Results.from_json(res.to_json()).terms == t


@pytest.mark.parametrize(
    "returncode, status, message",
    [
        (255, "exited", "a rank returned 255 from main (SMPI does not say which)"),  # main's return -1
        (128 + 11, "crashed", "the simulation completed, then its process was killed by signal 11 (SIGSEGV"),
    ],
)
def test_a_status_above_128_after_a_completed_run_is_a_signal_only_where_one_exists(
    tmp_path, returncode, status, message
):
    """SMPI's launcher exits with main's status, or as a shell does for a killed process (128 + the
    signal): 255 (main's -1, the CUDA samples' failure) is no signal. It read as 'killed by signal 127'."""
    report(tmp_path, "-1\tstatus\tcompleted\t0\t0\t2e-06\n", ranks=((0, 2e-6, True),))
    res = results.read_run(tmp_path, {}, returncode)
    assert (res.status, res.run["exit_code"]) == (status, returncode)
    assert res.failure.message.startswith(message)


def test_results_json_has_every_key_sorted_and_reads_back_to_the_very_floats(tmp_path):
    """results.json's text as json.dumps(indent=1, sort_keys=True) wrote it before the Rust
    encoder: the same keys in the same order at every level, ASCII only, and every float (times
    that need all 17 digits, a tiny one, infinity) read back to the same bits."""
    report(tmp_path, "-1\tstatus\tcompleted\t0\t0\t0\n", ranks=((0, 5.341376000001165e-05, True),))
    res = results.read_run(tmp_path, {"program": ["jacobi-\u00e9", "-n", "3"]}, 0, {})
    res.links = [results.LinkResult("n0-up0_UP", "pcie", math.inf, 0.1 + 0.2, 1e-300)]
    text = res.to_json()
    before = json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"
    assert text.isascii()
    assert json.loads(text) == json.loads(before)
    key_order = [line.split('"')[1] for line in text.splitlines() if line.lstrip().startswith('"')]
    assert key_order == [line.split('"')[1] for line in before.splitlines() if line.lstrip().startswith('"')]
    link = json.loads(text)["links"][0]
    assert (link["capacity_Bps"], link["bytes"], link["busy_s"]) == (math.inf, 0.30000000000000004, 1e-300)
    assert json.loads(text)["ranks"][0]["end_s"] == 5.341376000001165e-05
