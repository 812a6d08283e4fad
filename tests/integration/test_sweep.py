"""`orrery sweep`: a grid of Jacobi runs (tiny sizes, 1 to 4 GPUs) against the same points run one
by one with orrery.simulate, failed points, resuming, a real local Dask cluster, bad specs."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import shutil
import subprocess

import pytest
from conftest import REPO, nvcc_available, orrery

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed"),
]

EXAMPLE = REPO / "examples" / "jacobi"
COSTS = EXAMPLE / "costs.toml"
LAYOUTS = [(1, 2), (2, 2)]  # (nodes, gpus_per_node): 2 GPUs of one node, 4 GPUs of two
FABRICS = ["100Gb/s", "400Gb/s"]


def grid_spec(jacobi, fabrics=FABRICS) -> str:
    """Two layouts ([[points]]) x two fabrics ([grid]); -ny grows with the ranks (weak scaling,
    one series per fabric)."""
    entries = "".join(f"[[points]]\nnodes = {n}\ngpus_per_node = {g}\n\n" for n, g in LAYOUTS)
    return (
        f'program = "{jacobi}"\n'
        'args = ["-nx", "256", "-ny", "{64 * ranks + 2}", "-niter", "2"]\n'
        f'costs = "{COSTS}"\n'
        "strict = true\n\n"
        f"{entries}"
        f'[grid]\nset = {{ "nic.bandwidth" = {json.dumps(fabrics)} }}\n'
    )


def point_id(parameters: dict) -> str:
    """docs/sweeps.md: 12 hex digits of the SHA-256 of the point's parameters."""
    text = json.dumps(parameters, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def rows(path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def sweep(spec, out, *extra: str) -> subprocess.CompletedProcess:
    return orrery("sweep", str(spec), "--out", str(out), *extra)


@pytest.fixture(scope="module")
def grid(jacobi, tmp_path_factory):
    """The grid sweep, run once on the local pool (with its plots)."""
    d = tmp_path_factory.mktemp("grid")
    (d / "sweep.toml").write_text(grid_spec(jacobi))
    p = sweep(d / "sweep.toml", d / "out", "--workers", "2")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""  # off a terminal: no progress bar, no log, the runs' own output in their folders
    return d, p


def test_grid_table_is_in_spec_order_and_matches_single_runs(grid, jacobi, tmp_path):
    import orrery

    d, p = grid
    table = rows(d / "out" / "sweep.csv")
    order = [(n, g, f) for n, g in LAYOUTS for f in FABRICS]  # entries in turn, the grid within each
    assert [(int(r["nodes"]), int(r["gpus_per_node"]), r["set.nic.bandwidth"]) for r in table] == order
    assert [r["point"] for r in table] == [
        point_id({"nodes": n, "gpus_per_node": g, "set.nic.bandwidth": f}) for n, g, f in order
    ]
    for r, (n, g, f) in zip(table, order):
        ranks = n * g
        assert (int(r["gpus"]), int(r["ranks"]), r["status"], r["error"]) == (ranks, ranks, "completed", "")
        assert r["args"] == f"-nx 256 -ny {64 * ranks + 2} -niter 2"
        res = orrery.simulate(
            jacobi,
            ["-nx", "256", "-ny", str(64 * ranks + 2), "-niter", "2"],
            nodes=n,
            gpus_per_node=g,
            costs=COSTS,
            strict=True,
            set={"nic.bandwidth": f},
            out=tmp_path / r["point"],
        )
        assert float(r["makespan_s"]) == res.makespan_s
        mpi = [k.mpi_s for k in res.ranks]
        assert float(r["mpi_mean_s"]) == math.fsum(mpi) / len(mpi)
        assert float(r["mpi_max_s"]) == max(mpi)
        assert float(r["comm_exposed_max_s"]) == max(k.comm_exposed_s for k in res.ranks)
        # the point's own folder holds the same run
        assert (d / "out" / "points" / r["point"] / "results.json").read_text() == res.to_json()
    span = {(int(r["nodes"]), int(r["gpus_per_node"]), r["set.nic.bandwidth"]): float(r["makespan_s"]) for r in table}
    for n, g in LAYOUTS:
        if n == 1:  # nothing crosses the fabric
            assert span[n, g, "400Gb/s"] == span[n, g, "100Gb/s"]
        else:  # a faster fabric, a shorter run
            assert span[n, g, "400Gb/s"] < span[n, g, "100Gb/s"]
    # a series per fabric (the arguments follow the layout); speed-up and efficiency against 2 GPUs
    assert [int(r["series"]) for r in table] == [1, 2] * 2
    for r in table:
        ref = span[1, 2, r["set.nic.bandwidth"]]
        assert float(r["speedup"]) == ref / float(r["makespan_s"])
        assert float(r["efficiency"]) == ref / float(r["makespan_s"]) * 2 / int(r["gpus"])
    assert (
        p.stdout.splitlines()[0] == "orrery: sweep of 4 points: 4 completed, 0 failed (0 finished earlier, not rerun)"
    )


def test_plots_draw_the_table(grid):
    import pandas as pd

    from orrery.sweep import plots

    d, _ = grid
    for name in plots.PLOTS:
        for ext, magic in (("png", b"\x89PNG"), ("svg", b"<?xml")):
            assert (d / "out" / "plots" / f"{name}.{ext}").read_bytes().startswith(magic)
    table = pd.read_parquet(d / "out" / "sweep.parquet")
    lines = plots.time(table).axes[0].get_lines()
    assert [line.get_label() for line in lines] == [f"set.nic.bandwidth={f}" for f in FABRICS]
    for line, fabric in zip(lines, FABRICS):
        mine = table[table["set.nic.bandwidth"] == fabric]
        assert list(line.get_xdata()) == [2.0, 4.0]
        assert list(line.get_ydata()) == list(mine["makespan_s"].astype(float))
    # the stacked parts of each point's bar add up to its makespan
    bars = plots.breakdown(table).axes[0].patches
    tops = [0.0] * len(table)
    for i, bar in enumerate(bars):
        tops[i % len(table)] += bar.get_height()
    assert tops == pytest.approx(list(table.sort_values(["series", "gpus"])["makespan_s"]), rel=1e-12)


def test_failed_points_are_recorded_and_the_others_complete(jacobi, tmp_path):
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f'program = "{jacobi}"\nargs = ["-nx", "{{n}}", "-ny", "{{n}}", "-niter", "2"]\ncosts = "{COSTS}"\n'
        "[[points]]\nn = 256\n"
        "[[points]]\nn = 300000\n"  # 2 x 360 GB of device memory: cudaMalloc fails, the program aborts
        "[[points]]\nn = 256\ngpus_per_node = 8\n"  # bad input: h100-ib200 has 4 GPUs per node
        '[[points]]\nn = 256\nset = { "nic.bandwidth" = "200" }\n'  # bad input: no unit
    )
    p = sweep(spec, tmp_path / "out")
    assert p.returncode == 1, p.stderr
    table = rows(tmp_path / "out" / "sweep.csv")
    ids = [
        point_id(x)
        for x in ({"n": 256}, {"n": 300000}, {"gpus_per_node": 8, "n": 256}, {"set.nic.bandwidth": "200", "n": 256})
    ]
    assert [r["point"] for r in table] == ids
    assert [r["status"] for r in table] == ["completed", "aborted", "bad_input", "bad_input"]
    assert [r["makespan_s"] != "" for r in table] == [True, False, False, False]
    aborted = json.loads((tmp_path / "out" / "points" / ids[1] / "results.json").read_text())["failure"]["message"]
    assert aborted.startswith("rank 0 called MPI_Abort with error code 1 at simulated time")
    errors = [
        "",
        aborted,
        f"{spec} (point {ids[2]}): key 'gpus_per_node': got 8, expected between 1 and 4 (GPUs per node of h100-ib200)",
        f"{spec} (point {ids[3]}): key 'set.nic.bandwidth': got '200', expected a bandwidth with its unit, such as "
        "53.8GB/s, 200Gbps or 2.5e10B/s (a plain number has no unit)",
    ]
    assert [r["error"] for r in table] == errors
    # points with bad input are not run
    assert sorted(x.name for x in (tmp_path / "out" / "points").iterdir()) == sorted(ids[:2])
    assert (
        p.stdout.splitlines()[0] == "orrery: sweep of 4 points: 1 completed, 3 failed (0 finished earlier, not rerun)"
    )
    # off a terminal: no progress bar, no log; the programs' and SimGrid's output in the points' folders
    assert p.stderr.splitlines() == [
        f"orrery: point {ids[1]} (n=300000): aborted: {aborted}",
        f"orrery: point {ids[2]} (gpus_per_node=8, n=256): bad_input: {errors[2]}",
        f"orrery: point {ids[3]} (set.nic.bandwidth=200, n=256): bad_input: {errors[3]}",
    ]


def _mtimes(out):
    return {d.name: (d / "results.json").stat().st_mtime_ns for d in (out / "points").iterdir()}


def test_a_resumed_sweep_runs_only_the_points_not_finished(grid, jacobi, tmp_path):
    d, _ = grid
    out = tmp_path / "out"
    shutil.copytree(d / "out", out)  # copy2: the files keep their times
    spec = tmp_path / "sweep.toml"
    spec.write_text(grid_spec(jacobi))
    before = _mtimes(out)

    p = sweep(spec, out, "--no-plots", "-vv")
    assert p.returncode == 0, p.stderr
    assert (
        p.stdout.splitlines()[0] == "orrery: sweep of 4 points: 4 completed, 0 failed (4 finished earlier, not rerun)"
    )
    assert p.stderr.count("finished earlier with the same inputs, not rerun") == 4
    assert _mtimes(out) == before
    assert (out / "sweep.csv").read_bytes() == (d / "out" / "sweep.csv").read_bytes()
    assert not (out / "plots" / "time.png").exists()  # an earlier sweep's plots are not left looking current

    # a point stopped half-way (no point.json yet) runs again, alone
    stopped = next(iter(before))
    (out / "points" / stopped / "point.json").unlink()
    p = sweep(spec, out, "--no-plots")
    assert p.returncode == 0, p.stderr
    assert "(3 finished earlier, not rerun)" in p.stdout
    after = _mtimes(out)
    assert [k for k in before if after[k] != before[k]] == [stopped]

    # a changed spec: the points of the changed value run, the others are kept
    spec.write_text(grid_spec(jacobi, ["100Gb/s", "800Gb/s"]))
    listing = orrery("sweep", str(spec), "--out", str(out), "--dry-run")
    states = [line.split()[1] for line in listing.stdout.splitlines()[1::2]]
    assert states == ["finished", "run"] * 2
    assert (out / "sweep.csv").is_file()  # a dry run writes (and removes) nothing
    p = sweep(spec, out, "--no-plots")
    assert p.returncode == 0, p.stderr
    assert "(2 finished earlier, not rerun)" in p.stdout
    table = rows(out / "sweep.csv")
    assert [r["set.nic.bandwidth"] for r in table] == ["100Gb/s", "800Gb/s"] * 2
    kept = {r["point"] for r in table if r["set.nic.bandwidth"] == "100Gb/s"}
    assert {k: v for k, v in _mtimes(out).items() if k in kept} == {k: after[k] for k in kept}


def test_a_dask_cluster_gives_the_same_table_as_the_local_pool(grid, jacobi, tmp_path):
    import dask
    from distributed import Client, LocalCluster, get_task_stream

    d, _ = grid
    spec = tmp_path / "sweep.toml"
    spec.write_text(grid_spec(jacobi))
    with (
        dask.config.set({"temporary-directory": str(tmp_path)}),  # the servers' scratch space, not /tmp's
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
        get_task_stream(client) as tasks,
    ):
        p = sweep(spec, tmp_path / "out", "--no-plots", "--scheduler", cluster.scheduler_address)
        workers = set(cluster.scheduler.workers)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "sweep.csv").read_bytes() == (d / "out" / "sweep.csv").read_bytes()
    ids = [r["point"] for r in rows(d / "out" / "sweep.csv")]
    assert sorted(t["key"] for t in tasks.data) == sorted(f"orrery-point-{i}" for i in ids)
    assert {t["worker"] for t in tasks.data} <= workers


BAD_SPECS = [
    (
        "a misspelt layout key",
        "[grid]\nnode = [1, 2]\n",
        "{spec}: key 'grid.node': got [1, 2], expected a key of the layout (nodes, gpus_per_node, "
        "ranks_per_node), machine, costs, calibration, set, or a program parameter that args uses as {{node}} "
        "(did you mean 'nodes'?)",
    ),
    (
        "a grid key that is not a list",
        "[grid]\nnodes = 2\n",
        "{spec}: key 'grid.nodes': got 2, expected a list of the values this key takes, e.g. [1, 2, 4]",
    ),
    (
        "a placeholder without a value at one point",
        'args = ["-niter", "{n}"]\n[[points]]\nn = 2\n[[points]]\nnodes = 2\n',
        "{spec}: key 'args.1': got '{{n}}', expected a placeholder with a value at every point: n in "
        "[parameters], [grid] or each [[points]] entry (points.1 has none)",
    ),
    (
        "a machine parameter that does not exist",
        '[grid.set]\nnic.bandwdth = ["1Gb/s"]\n',
        "{spec}: key 'grid.set.nic.bandwdth': got 'nic.bandwdth', expected a parameter of the machine "
        "(did you mean 'nic.bandwidth'?)",
    ),
    (
        "a value twice in a grid list",
        "[grid]\nnodes = [1, 2, 1]\n",
        "{spec}: key 'grid.nodes.2': got 1, expected a value not already in grid.nodes",
    ),
    (
        "a key both in the grid and in a point",
        "[grid]\nnodes = [1, 2]\n[[points]]\nnodes = 4\n",
        "{spec}: key 'points.0.nodes': got 4, expected a key [grid] does not also sweep (nodes)",
    ),
    (
        "arithmetic a placeholder cannot hold",
        'args = ["{ranks.real}"]\n',
        "{spec}: key 'args.0': got '{{ranks.real}}', expected literal text and placeholders: {{name}}, or "
        "arithmetic on parameters and numbers (+ - * / // % **), e.g. {{4096 * ranks}}; {{{{ and }}}} for braces "
        "({{ranks.real}} is not one)",
    ),
]


@pytest.mark.parametrize(("what", "text", "error"), BAD_SPECS, ids=[c[0] for c in BAD_SPECS])
def test_a_bad_spec_is_refused_in_one_line_and_nothing_is_written(jacobi, tmp_path, capsys, what, text, error):
    from orrery import cli

    spec = tmp_path / "sweep.toml"
    spec.write_text(f'program = "{jacobi}"\n{text}')
    assert cli.main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 2  # in this process: no start-up
    got = capsys.readouterr()
    assert got.out == ""
    assert got.err.splitlines() == ["orrery: error: " + error.format(spec=spec)]
    assert not (tmp_path / "out").exists()


def test_a_refused_sweep_leaves_no_earlier_table_and_keeps_the_points(jacobi, tmp_path):
    out = tmp_path / "out"
    (out / "points" / "0123456789ab").mkdir(parents=True)
    (out / "sweep.csv").write_text("point\n")
    spec = tmp_path / "sweep.toml"
    spec.write_text('program = "missing"\n')
    p = sweep(spec, out)
    assert p.returncode == 2
    assert p.stderr.splitlines() == [
        f"orrery: error: {spec}: key 'program': got 'missing', expected an existing program built with Orrery's "
        "wrappers (build it first)"
    ]
    assert sorted(x.name for x in out.iterdir()) == ["points"]
    assert [x.name for x in (out / "points").iterdir()] == ["0123456789ab"]


def test_the_example_spec_is_five_layouts_by_two_fabrics_by_gpudirect(jacobi, tmp_path):
    import orrery.sweep

    for f in (jacobi, EXAMPLE / "sweep.toml", COSTS):  # the spec's paths are relative to it
        shutil.copy(f, tmp_path / f.name)
    sweep = orrery.sweep.load(tmp_path / "sweep.toml")
    layouts = [
        {"nodes": 1, "gpus_per_node": 1},
        {"nodes": 1, "gpus_per_node": 2},
        {"nodes": 1},
        {"nodes": 2},
        {"nodes": 4},
    ]
    assert [p.parameters for p in sweep.points] == [
        {**layout, "set.nic.bandwidth": bw, "set.gpudirect.rdma": rdma}
        for layout in layouts
        for bw in ("200Gb/s", "400Gb/s")
        for rdma in (True, False)
    ]
    plan = orrery.sweep.plan(sweep, tmp_path / "out")
    assert [p.args for p, _ in plan] == [["-nx", "16384", "-ny", "16384", "-niter", "20"]] * 20
    assert [(p.point.nodes * p.gpus_per_node, state) for p, state in plan][::4] == [
        (1, "run"),
        (2, "run"),
        (4, "run"),
        (8, "run"),
        (16, "run"),
    ]
    assert not (tmp_path / "out").exists()
