"""`orrery report` of a real run (the overlapped Jacobi example, tiny): its tables and figures
carry the numbers of the run's results.json, read here on their own."""

from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ORRERY, REPO, nvcc_available, orrery
from svg_bars import bar_heights

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed"),
]

EXAMPLE = REPO / "examples" / "jacobi"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """Eight ranks on two nodes, three iterations of the overlapped variant: communication
    partly hidden, ranks of the second node finishing later (SMPI's default allreduce, a reduce
    to rank 0 and a broadcast from it; Open MPI's, the built-in's, lets all ranks end together)."""
    d = tmp_path_factory.mktemp("jacobi")
    for f in ("jacobi.cu", "Makefile"):
        shutil.copy(EXAMPLE / f, d / f)
    subprocess.run(["make", "-s", f"NVCC={ORRERY} nvcc", f"MPICXX={ORRERY} mpicxx"], cwd=d, check=True)
    out = d / "run"
    args = ["--nodes", "2", "--costs", str(EXAMPLE / "costs.toml"), "--strict", "--out", str(out)]
    args += ["--set", "mpi.collective_selector=default"]
    # 4096 x 4096: the interior kernel lasts long enough to hide part of the halo exchange
    orrery("run", *args, "--", str(d / "jacobi"), "-nx", "4096", "-ny", "4096", "-niter", "3", "-overlap", check=True)
    return out


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_a_real_run_s_report_carries_its_numbers(run):
    p = orrery("report", str(run), check=True)
    res = json.loads((run / "results.json").read_text())
    ranks = {r["rank"]: r for r in res["ranks"]}
    out = run / "report"
    # time by category: the CSV holds results.json's own numbers, the figure draws them to scale
    rows = read_csv(out / "time_by_category.csv")
    assert [int(r["rank"]) for r in rows] == sorted(ranks) == list(range(8))
    for row in rows:
        for column in ("end_s", "kernel_s", "mpi_s", "gpu_wait_s", "host_s", "idle_s"):
            assert float(row[column]) == ranks[int(row["rank"])][column]
    heights = bar_heights(out / "time_by_category.svg")
    scale = heights["kernel_s-rank0"] / ranks[0]["kernel_s"]
    for n, r in ranks.items():
        for column in ("host_s", "mpi_s", "gpu_wait_s", "idle_s", "kernel_s"):
            assert heights[f"{column}-rank{n}"] == pytest.approx(r[column] * scale, abs=2e-3), (n, column)
        timeline = sum(heights[f"{c}-rank{n}"] for c in ("host_s", "mpi_s", "gpu_wait_s", "idle_s"))
        assert timeline == pytest.approx(res["makespan_s"] * scale, abs=5e-3)
    # the slowest rank: the last to finish, against the lower median rank by end time
    last = max(ranks.values(), key=lambda r: (r["end_s"], -r["rank"]))
    median = sorted(ranks.values(), key=lambda r: (r["end_s"], r["rank"]))[3]
    diffs = {c: last[c] - median[c] for c in ("host_s", "mpi_s", "gpu_wait_s")}
    slowest = read_csv(out / "slowest_ranks.csv")[0]
    assert (int(slowest["rank"]), int(slowest["median_rank"])) == (last["rank"], median["rank"])
    assert slowest["cause"] == max(diffs, key=lambda c: diffs[c])
    assert float(slowest["behind_s"]) == pytest.approx(last["end_s"] - median["end_s"], rel=1e-9)
    assert f"- rank {last['rank']} finished " in p.stdout
    # top kernels: device time per kernel summed over the ranks, most first (-overlap launches
    # jacobi_kernel three times an iteration: the two boundary rows, then the interior)
    totals: dict[str, float] = {}
    for r in ranks.values():
        for name, k in r["kernels"].items():
            totals[name] = totals.get(name, 0.0) + k["time_s"]
    kernels = read_csv(out / "top_kernels.csv")
    assert [k["kernel"] for k in kernels] == sorted(totals, key=lambda n: -totals[n])
    assert [float(k["total_s"]) for k in kernels] == pytest.approx([totals[k["kernel"]] for k in kernels], rel=1e-12)
    (jacobi,) = [k for k in kernels if k["kernel"].startswith("jacobi_kernel")]
    assert int(jacobi["count"]) == 8 * 3 * 3
    # communication: the run's hidden fraction weighs the ranks by their communication
    hidden = math.fsum(r["comm_hidden_s"] for r in ranks.values()) / math.fsum(r["comm_s"] for r in ranks.values())
    assert 0 < hidden < 1
    assert f"{100 * hidden:.1f}% of the run's communication" in p.stdout
    comm = bar_heights(out / "communication.svg")
    per_s = comm["comm_exposed_s-rank0"] / ranks[0]["comm_exposed_s"]
    for n, r in ranks.items():
        assert comm[f"comm_hidden_s-rank{n}"] == pytest.approx(r["comm_hidden_s"] * per_s, abs=2e-3)
    # links: the busiest by utilisation where the run has link statistics, else says it has none
    if res["links"]:
        span = res["makespan_s"]
        busiest = max(res["links"], key=lambda link: link["bytes"] / (link["capacity_Bps"] * span))
        assert read_csv(out / "links.csv")[0]["link"] == busiest["name"]
    else:
        assert "No link statistics in this run." in p.stdout and not (out / "links.svg").exists()
    for name in ("time_by_category", "top_kernels", "communication"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert p.stdout.endswith(
        f"orrery: report in {out / 'report.md'}, its tables (CSV) and figures (png, svg) beside it\n"
    )
