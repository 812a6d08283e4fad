"""`orrery report RUN_DIR` on results.json files written here by hand: every figure of its tables
derived from the times put in, the figures' bars from the same numbers, the same bytes twice."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest
from svg_bars import bar_heights, bar_widths

from orrery import cli, report

pytestmark = pytest.mark.unit

MS = 1e-3
MAKESPAN = 10 * MS


def tally(count: int, ms: float, nbytes: int = 0) -> dict:
    return {"count": count, "time_s": ms * MS, "bytes": nbytes}


def rank(n: int, host: float, mpi: dict, gpu_wait: float, kernels: dict, comm: float, hidden: float) -> dict:
    """A rank as results.json holds it, times in ms; its MPI time is its calls' time, its end host + MPI + GPU wait.
    Its terms: its GPU wait all kernel time, its MPI_Allreduce a collective, its other calls
    point-to-point, 0.1 ms of its host time CUDA API overheads."""
    mpi_ms = math.fsum(t["time_s"] for t in mpi.values()) / MS
    end = host + mpi_ms + gpu_wait
    collectives = mpi["MPI_Allreduce"]["time_s"] if "MPI_Allreduce" in mpi else 0.0
    return {
        "rank": n,
        "host": f"n0-gpu{n}",
        "finished": True,
        "end_s": end * MS,
        "host_s": host * MS,
        "host_api_s": 0.1 * MS,
        "gpu_wait_s": gpu_wait * MS,
        "mpi_s": mpi_ms * MS,
        "idle_s": MAKESPAN - end * MS,
        "kernel_s": math.fsum(t["time_s"] for t in kernels.values()),
        "engines": {"compute": 1 * MS, "H2D": 0.0, "D2H": 0.0},
        "comm_s": comm * MS,
        "comm_hidden_s": hidden * MS,
        "comm_exposed_s": (comm - hidden) * MS,
        "hidden_fraction": hidden / comm,
        "mixed_placement_calls": 0,
        "kernels": kernels,
        "copies": {"H2D": tally(1, 0.2, 1 << 20)},
        "mpi": mpi,
        "nccl": {},
        "nccl_s": 0.0,
        "managed": {},
        "terms": {
            "kernels_s": gpu_wait * MS,
            "exposed_p2p_s": mpi_ms * MS - collectives,
            "exposed_collectives_s": collectives,
            "copies_sync_s": 0.0,
            "host_overheads_s": 0.1 * MS,
            "host_s": (host - 0.1) * MS,
            "idle_s": MAKESPAN - end * MS,
        },
    }


def calls(allreduce: float, sendrecv: float) -> dict:
    return {"MPI_Allreduce": tally(3, allreduce, 24), "MPI_Sendrecv": tally(6, sendrecv, 6 << 10)}


#: Four ranks that finish at 8, 8.5, 9 and 10 ms: the median rank (the lower median) is rank 1;
#: rank 3 is late by 1.5 ms, 1 ms of it more MPI (0.8 of it MPI_Allreduce), rank 2 by 0.5 ms, for
#: 1 ms more GPU wait (its k_big took 1 ms longer). k_big 13 ms in all, k_mid 2.5 (one rank),
#: k_small 2 (40 launches): ordered by total, neither by count nor by a rank's time.
RANKS = [
    rank(
        0,
        2.0,
        calls(2.0, 2.0),
        2.0,
        {"k_big": tally(3, 3.0), "k_small": tally(10, 0.5), "k_mid": tally(1, 2.5)},
        4.0,
        1.0,
    ),
    rank(1, 2.0, calls(2.2, 2.3), 2.0, {"k_big": tally(3, 3.0), "k_small": tally(10, 0.5)}, 4.5, 0.0),
    rank(2, 2.0, calls(2.0, 2.0), 3.0, {"k_big": tally(3, 4.0), "k_small": tally(10, 0.5)}, 4.0, 2.0),
    rank(3, 2.5, calls(3.0, 2.5), 2.0, {"k_big": tally(3, 3.0), "k_small": tally(10, 0.5)}, 6.0, 3.0),
]
#: Utilisation bytes / (capacity x makespan): the NIC 0.6, PCIe 0.5, NVLink 0.2, though NVLink
#: carried the most bytes (results.json lists links by bytes)
LINKS = [
    {"name": "n0-gpu0-nvlink_UP", "kind": "nvlink", "capacity_Bps": 450e9, "bytes": 9e8, "busy_s": 3 * MS},
    {"name": "n0-gpu0-pcie_UP", "kind": "pcie", "capacity_Bps": 64e9, "bytes": 3.2e8, "busy_s": 6 * MS},
    {"name": "n0-nic0_UP", "kind": "nic", "capacity_Bps": 25e9, "bytes": 1.5e8, "busy_s": 8 * MS},
]


def results_json(ranks=RANKS, links=LINKS, status="completed", failure=None, makespan=MAKESPAN, iterations=None) -> str:
    return json.dumps(
        {
            "status": status,
            "failure": failure,
            "makespan_s": makespan,
            "ranks": ranks,
            "kernels_without_cost": {},
            "run": {"machine": "h100-ib200", "exit_code": 0, "iterations": iterations},
            "physics_violations": [],
            "links": links,
            "terms": None,  # (what orrery run writes here, the report computes from the ranks' own)
        }
    )


def make_run(folder: Path, **kw) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(results_json(**kw))
    return folder


def orrery_report(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["report", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def row(*cells: str) -> re.Pattern:
    """A Markdown table row of these cells, however padded."""
    return re.compile(r"\|\s*" + r"\s*\|\s*".join(map(re.escape, cells)) + r"\s*\|")


def test_the_slowest_ranks_are_named_with_the_category_and_call_that_make_them_late(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    code, out, err = orrery_report(capsys, run, "--format", "svg")
    assert code == 0, err
    assert (
        "- rank 3 finished 1.500 ms after the median rank (rank 1): 1.000 ms more in MPI (MPI_Allreduce +800.000 us)"
        in out
    )
    assert (
        "- rank 2 finished 500.000 us after the median rank (rank 1): 1.000 ms more waiting for its GPU (k_big +1.000 ms)"
        in out
    )
    assert "- rank 1 is the median rank (finished at 8.500 ms)" in out
    assert "- rank 0 finished 500.000 us before the median rank (rank 1)" in out
    rows = read_csv(run / "report" / "slowest_ranks.csv")
    assert [int(r["rank"]) for r in rows] == [3, 2, 1, 0]
    assert [r["cause"] for r in rows[:2]] == ["mpi_s", "gpu_wait_s"]
    assert float(rows[0]["behind_s"]) == pytest.approx(1.5 * MS, rel=1e-12)
    assert float(rows[0]["cause_s"]) == pytest.approx(1.0 * MS, rel=1e-12)
    assert (rows[0]["detail"], float(rows[0]["detail_s"])) == ("MPI_Allreduce", pytest.approx(0.8 * MS, rel=1e-9))
    assert out.index("## Slowest ranks") < out.index("- rank 3") < out.index("- rank 2") < out.index("## Top kernels")


def test_top_kernels_are_ordered_by_total_device_time_over_ranks(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    assert orrery_report(capsys, run, "--top", "2", "--format", "svg")[0] == 0
    rows = read_csv(run / "report" / "top_kernels.csv")  # every kernel, the table's first --top
    assert [r["kernel"] for r in rows] == ["k_big", "k_mid", "k_small"]
    assert [float(r["total_s"]) for r in rows] == pytest.approx([13 * MS, 2.5 * MS, 2 * MS], rel=1e-12)
    assert [int(r["count"]) for r in rows] == [12, 1, 40]
    assert [float(r["mean_s"]) for r in rows] == pytest.approx([13 / 12 * MS, 2.5 * MS, 0.05 * MS], rel=1e-12)
    assert float(rows[0]["share"]) == pytest.approx(13 / 17.5, rel=1e-12)
    md = (run / "report" / "report.md").read_text()
    section = md[md.index("## Top kernels") : md.index("## Communication")]
    assert row("k_big", "13.000 ms", "12", "1.083 ms", "74.3%").search(section)
    assert "k_mid" in section and "k_small" not in section  # --top 2


def test_hidden_fractions_per_rank_and_over_the_run(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    code, out, _ = orrery_report(capsys, run, "--format", "svg")
    assert code == 0
    rows = read_csv(run / "report" / "communication.csv")
    assert [float(r["hidden_fraction"]) for r in rows] == pytest.approx([1 / 4, 0, 2 / 4, 3 / 6], rel=1e-12)
    assert [float(r["comm_exposed_s"]) for r in rows] == pytest.approx([3 * MS, 4.5 * MS, 2 * MS, 3 * MS], rel=1e-12)
    # the run's fraction weighs ranks by their communication: 6 ms hidden of 18.5
    assert f"{100 * 6 / 18.5:.1f}% of the run's communication (18.500 ms over all ranks)" in out
    assert "12.500 ms was exposed" in out


def test_busiest_links_are_ordered_by_utilisation_not_bytes(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    assert orrery_report(capsys, run, "--format", "svg")[0] == 0
    rows = read_csv(run / "report" / "links.csv")
    assert [r["link"] for r in rows] == ["n0-nic0_UP", "n0-gpu0-pcie_UP", "n0-gpu0-nvlink_UP"]
    assert [float(r["utilisation"]) for r in rows] == pytest.approx([0.6, 0.5, 0.2], rel=1e-12)
    assert [float(r["busy_fraction"]) for r in rows] == pytest.approx([0.8, 0.6, 0.3], rel=1e-12)
    md = (run / "report" / "report.md").read_text()
    assert row("n0-nic0_UP", "nic", "25.000 GB/s", "150.000 MB", "8.000 ms", "80.0%", "60.0%").search(md)
    widths = bar_widths(run / "report" / "links.svg")  # horizontal bars
    assert widths["utilisation0"] / widths["busy_fraction0"] == pytest.approx(0.6 / 0.8, rel=1e-4)
    assert widths["utilisation2"] / widths["utilisation0"] == pytest.approx(0.2 / 0.6, rel=1e-4)


def test_a_run_without_link_statistics_says_so_and_draws_no_link_figure(tmp_path, capsys):
    run = make_run(tmp_path / "run", links=[])
    (run / "report").mkdir()
    (run / "report" / "links.png").write_bytes(b"an earlier report's")
    code, out, _ = orrery_report(capsys, run)
    assert code == 0
    assert "## Busiest links\n\nNo link statistics in this run.\n" in out
    assert not (run / "report" / "links.png").exists() and not (run / "report" / "links.svg").exists()
    assert (run / "report" / "time_by_category.svg").is_file()


def test_time_by_category_table_and_bars_are_the_ranks_times(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    code, out, _ = orrery_report(capsys, run, "--format", "svg")
    assert code == 0
    rows = read_csv(run / "report" / "time_by_category.csv")
    assert [list(r)[:4] for r in rows][:1] == [["rank", "host", "finished", "end_s"]]
    for r, given in zip(rows, RANKS):
        for column in ("end_s", "kernel_s", "mpi_s", "gpu_wait_s", "host_s", "idle_s"):
            assert float(r[column]) == given[column]  # the CSV writes every digit
    assert row("3", "10.000 ms", "3.500 ms", "5.500 ms", "2.000 ms", "2.500 ms", "0 s").search(out)
    # the figure's bars: heights proportional to the times, on one scale; a rank's timeline is the makespan
    heights = bar_heights(run / "report" / "time_by_category.svg")
    per_ms = heights["host_s-rank0"] / 2.0
    for given in RANKS:
        n = given["rank"]
        for column in ("host_s", "mpi_s", "gpu_wait_s", "idle_s", "kernel_s"):
            assert heights[f"{column}-rank{n}"] == pytest.approx(given[column] / MS * per_ms, abs=2e-3)
        timeline = sum(heights[f"{c}-rank{n}"] for c in ("host_s", "mpi_s", "gpu_wait_s", "idle_s"))
        assert timeline == pytest.approx(10 * per_ms, abs=5e-3)


def test_two_reports_of_a_run_are_the_same_bytes(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    assert orrery_report(capsys, run, "--out", tmp_path / "a")[0] == 0
    assert orrery_report(capsys, run, "--out", tmp_path / "b")[0] == 0
    a, b = sorted(p.name for p in (tmp_path / "a").iterdir()), sorted(p.name for p in (tmp_path / "b").iterdir())
    assert a == b and {
        f"{n}.{e}" for n in ("time_by_category", "top_kernels", "communication", "links") for e in ("png", "svg")
    } <= set(a)
    for name in a:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    svg = (tmp_path / "a" / "links.svg").read_text()
    assert "<dc:date>" not in svg and (tmp_path / "a" / "links.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_format_chooses_the_figure_files(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    assert orrery_report(capsys, run, "--format", "svg", "--out", tmp_path / "o")[0] == 0
    assert not list((tmp_path / "o").glob("*.png")) and len(list((tmp_path / "o").glob("*.svg"))) == 4
    assert "![time by category per rank](time_by_category.svg)" in (tmp_path / "o" / "report.md").read_text()


def test_a_failed_run_is_reported_with_its_failure_first(tmp_path, capsys):
    failure = {
        "message": "at simulated time 9.000 ms no rank can go on: rank 2 in MPI_Recv from rank 3 (tag 0) since 8.000 ms",
        "ranks": [2],
        "time_s": 9 * MS,
        "code": None,
        "blocked": [],
        "pending": [],
        "running": [],
    }
    ranks = [dict(r, finished=r["rank"] != 2) for r in RANKS]
    run = make_run(tmp_path / "run", ranks=ranks, status="deadlock", failure=failure)
    code, out, _ = orrery_report(capsys, run, "--format", "svg")
    assert code == 0
    assert out.index("## Failure") < out.index("## Time by category")
    assert f"The run did not complete: **deadlock**: {failure['message']}" in out
    assert row("rank", "ended", "kernels", "MPI", "GPU wait", "host", "idle").search(out)
    assert "rank 2 was stopped, unfinished, 500.000 us after the median rank (rank 1)" in out


def test_managed_memory_taken_as_resident_is_said_under_the_makespan(tmp_path, capsys):
    # ranks 0 and 2 allocated managed memory (1 MB + 2 kB and 3 B, under --managed resident);
    # rank 1 only prefetched, which is no allocation
    managed = {
        0: {"cudaMallocManaged": tally(2, 0.0, 1_000_000), "__managed__": tally(1, 0.0, 2_000)},
        1: {"cudaMemPrefetchAsync": tally(4, 0.0, 4096)},
        2: {"__managed__": tally(1, 0.0, 3)},
    }
    ranks = [dict(r, managed=managed.get(r["rank"], {})) for r in RANKS]
    code, out, _ = orrery_report(capsys, make_run(tmp_path / "run", ranks=ranks), "--format", "svg")
    assert code == 0
    note = (
        "Managed memory: 1.002 MB in 4 allocations on 2 ranks, taken as resident on their devices "
        "(--managed resident): its migrations between host and device are not in these times "
        "(results.json: ranks[].managed)."
    )
    assert out.index("Simulated makespan") < out.index(note) < out.index("## Time by category")
    code, out, _ = orrery_report(capsys, make_run(tmp_path / "plain"), "--format", "svg")
    assert "Managed memory" not in out


def test_beyond_64_ranks_groups_give_min_mean_max(tmp_path, capsys):
    # 130 ranks: groups of 3 consecutive ranks (44 groups, the last of one rank)
    ranks = []
    for n in range(130):
        mpi = {"MPI_Allreduce": tally(1, 1.0 + 0.01 * n)}
        ranks.append(rank(n, 2.0, mpi, 1.0, {"k": tally(1, 1.0)}, 1.0 + 0.01 * n, 0.5))
    run = make_run(tmp_path / "run", ranks=ranks, links=[])
    code, out, _ = orrery_report(capsys, run, "--format", "svg")
    assert code == 0
    groups = read_csv(run / "report" / "time_by_category_groups.csv")
    assert len(groups) == 44 and (groups[1]["first_rank"], groups[1]["last_rank"], groups[-1]["ranks"]) == (
        "3",
        "5",
        "1",
    )
    # ranks 3, 4, 5: MPI 1.03, 1.04, 1.05 ms
    assert [float(groups[1][f"mpi_s_{s}"]) for s in ("min", "mean", "max")] == pytest.approx(
        [1.03 * MS, 1.04 * MS, 1.05 * MS], rel=1e-12
    )
    assert row("3-5", "4.030 ms / 4.040 ms / 4.050 ms", "1.000 ms / 1.000 ms / 1.000 ms").search(out)
    assert len(read_csv(run / "report" / "time_by_category.csv")) == 130  # the CSV keeps every rank
    heights = bar_heights(run / "report" / "time_by_category.svg")
    assert heights["mpi_s-group3-5"] / heights["host_s-group3-5"] == pytest.approx(1.04 / 2.0, rel=1e-4)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["{tmp}/missing"],
            "orrery: error: RUN_DIR: got '{tmp}/missing', expected a run's folder, as `orrery run --out` writes it (no such folder)",
        ),
        (
            ["{tmp}/empty"],
            "orrery: error: {tmp}/empty/results.json: got '{tmp}/empty/results.json', expected results.json written by orrery run that can be read (No such file or directory)",
        ),
        (
            ["{tmp}/broken"],
            "orrery: error: {tmp}/broken/results.json: key 'links': got None, expected results.json written by this orrery run",
        ),
        (["{tmp}/run", "--format", "pdf"], "orrery: error: --format: got 'pdf', expected png, svg or png,svg"),
        (["{tmp}/run", "--top", "0"], "orrery: error: --top: got 0, expected a positive whole number"),
        (
            ["{tmp}/run", "--iterations", "0"],
            "orrery: error: --iterations: got 0, expected a positive whole number (the iterations the run's "
            "terms are divided by)",
        ),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, args, message):
    make_run(tmp_path / "run")
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    data = json.loads(results_json())
    del data["links"]
    (tmp_path / "broken" / "results.json").write_text(json.dumps(data))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code, out, err = orrery_report(capsys, *(a.format(tmp=tmp_path) for a in args))
    assert (code, out, err) == (2, "", message.format(tmp=tmp_path) + "\n")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_the_report_of_a_run_is_a_python_api_too(tmp_path):
    run = make_run(tmp_path / "run")
    rep = report.build(report.load(run), top=1)
    assert rep.hidden_fraction == pytest.approx(6 / 18.5, rel=1e-12)
    fig = report.plot_top_kernels(rep)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["k_big"]


def test_a_call_that_took_more_than_all_the_extra_mpi_time_is_named_with_the_one_that_took_less(tmp_path):
    # rank 1 is 1 ms later, all of it in MPI: 3 ms more MPI_Allreduce, 2 ms less MPI_Sendrecv
    ranks = [
        rank(0, 2.0, calls(1.0, 3.0), 2.0, {"k": tally(1, 1.0)}, 4.0, 0.0),
        rank(1, 2.0, calls(4.0, 1.0), 2.0, {"k": tally(1, 1.0)}, 5.0, 0.0),
    ]
    rep = report.build(report.load(make_run(tmp_path / "run", ranks=ranks)))
    assert list(rep.slowest["why"]) == [
        "rank 1 finished 1.000 ms after the median rank (rank 0): 1.000 ms more in MPI "
        "(MPI_Allreduce +3.000 ms, MPI_Sendrecv -2.000 ms)",
        "rank 0 is the median rank (finished at 8.000 ms)",
    ]
    assert (rep.slowest["detail"][0], rep.slowest["detail_s"][0]) == ("MPI_Allreduce", pytest.approx(3 * MS))


def test_a_run_that_left_no_report_of_its_ranks_gives_its_failure_and_says_so(tmp_path, capsys):
    failure = {
        "message": "the simulation was killed by signal 9 (SIGKILL: Killed)",
        "ranks": [],
        "time_s": None,
        "code": 9,
        "blocked": [],
        "pending": [],
        "running": [],
    }
    run = make_run(tmp_path / "run", ranks=[], links=[], status="crashed", failure=failure, makespan=None)
    code, out, _ = orrery_report(capsys, run)
    assert code == 0
    assert out.index("The run did not complete: **crashed**: the simulation was killed by signal 9") < out.index(
        "## Time by category"
    )
    assert out.count("No per-rank report in this run.") == 5 and "No link statistics in this run." in out
    assert not list((run / "report").glob("*.png")) and not list((run / "report").glob("*.svg"))
    assert (run / "report" / "slowest_ranks.csv").read_text() == ",".join(report.SLOWEST_COLUMNS) + "\n"


TERMS = (
    "kernels_s",
    "exposed_p2p_s",
    "exposed_collectives_s",
    "copies_sync_s",
    "host_overheads_s",
    "host_s",
    "idle_s",
)


def test_time_by_term_shows_the_critical_rank_and_the_mean_per_iteration(tmp_path, capsys):
    """Rank 3 finishes last (10 ms): its terms, the mean over the four ranks, each divided by the
    4 iterations --iterations gives (the run itself was given none)."""
    run = make_run(tmp_path / "run")
    code, out, _ = orrery_report(capsys, run, "--iterations", "4", "--format", "svg")
    assert code == 0
    rows = read_csv(run / "report" / "terms.csv")
    assert list(rows[0]) == ["row", "rank", "per", "iterations", *TERMS, "total_s"]
    assert [(r["row"], r["rank"], r["per"], r["iterations"]) for r in rows] == [
        ("critical", "3", "run", "4"),
        ("mean", "", "run", "4"),
        ("critical", "3", "iteration", "4"),
        ("mean", "", "iteration", "4"),
    ]
    # rank 3: GPU wait 2 ms (kernels), MPI_Allreduce 3 ms, MPI_Sendrecv 2.5 ms, host 2.5 ms of which 0.1 API
    critical = {"kernels_s": 2.0, "exposed_p2p_s": 2.5, "exposed_collectives_s": 3.0, "host_overheads_s": 0.1}
    critical.update(copies_sync_s=0.0, host_s=2.4, idle_s=0.0)
    # the means: GPU wait (2 + 2 + 3 + 2) / 4, MPI_Allreduce (2 + 2.2 + 2 + 3) / 4, MPI_Sendrecv
    # (2 + 2.3 + 2 + 2.5) / 4, host (2 + 2 + 2 + 2.5) / 4 - 0.1, idle 10 ms less the ends (8, 8.5, 9, 10) / 4
    mean = {"kernels_s": 2.25, "exposed_p2p_s": 2.2, "exposed_collectives_s": 2.3, "host_overheads_s": 0.1}
    mean.update(copies_sync_s=0.0, host_s=2.025, idle_s=1.125)
    for r, expected, scale in zip(rows, (critical, mean, critical, mean), (1, 1, 4, 4)):
        for name in TERMS:
            assert float(r[name]) == pytest.approx(expected[name] * MS / scale, rel=1e-12, abs=1e-18), (r["row"], name)
        assert float(r["total_s"]) == pytest.approx(MAKESPAN / scale, rel=1e-12)
    per_rank = read_csv(run / "report" / "terms_by_rank.csv")
    assert list(per_rank[0]) == ["rank", "end_s", *TERMS, "total_s"]
    assert [float(r["end_s"]) for r in per_rank] == pytest.approx([8 * MS, 8.5 * MS, 9 * MS, 10 * MS], rel=1e-12)
    assert all(float(r["total_s"]) == pytest.approx(MAKESPAN, rel=1e-12) for r in per_rank)
    assert "## Time by term" in out and "Rank 3 finished last" in out and "divided by 4 iterations" in out
    assert row(
        "rank 3 per iteration", "500.000 us", "625.000 us", "750.000 us", "0 s", "25.000 us", "600.000 us", "0 s"
    ).search(out)
    assert row(
        "mean", "2.250 ms", "2.200 ms", "2.300 ms", "0 s", "100.000 us", "2.025 ms", "1.125 ms", "10.000 ms"
    ).search(out)


def test_time_by_term_per_iteration_takes_the_run_s_own_iterations(tmp_path, capsys):
    run = make_run(tmp_path / "run", iterations=2)
    assert orrery_report(capsys, run, "--format", "svg")[0] == 0
    rows = read_csv(run / "report" / "terms.csv")
    assert [(r["row"], r["per"]) for r in rows][2:] == [("critical", "iteration"), ("mean", "iteration")]
    assert float(rows[2]["kernels_s"]) == pytest.approx(1 * MS, rel=1e-12)  # rank 3's 2 ms over 2 iterations
    # without them, the whole run only
    plain = make_run(tmp_path / "plain")
    code, out, _ = orrery_report(capsys, plain, "--format", "svg")
    assert code == 0
    assert [r["per"] for r in read_csv(plain / "report" / "terms.csv")] == ["run", "run"]
    assert row(
        "rank 3", "2.000 ms", "2.500 ms", "3.000 ms", "0 s", "100.000 us", "2.400 ms", "0 s", "10.000 ms"
    ).search(out)
