"""The Python API: orrery.simulate() is `orrery run` as a function, orrery.load() reads a run back,
Results.to_frame() gives its tables (docs/api.md)."""

from __future__ import annotations

import json
import math
import tempfile

import pytest
from conftest import REPO, orrery

import orrery as api
from orrery.errors import InputError

pytestmark = pytest.mark.native

JACOBI = REPO / "examples" / "jacobi"
SMALL = ["-nx", "512", "-ny", "512", "-niter", "3"]


@pytest.fixture(scope="module")
def run_pair(jacobi, tmp_path_factory):
    """The same job through the CLI and through simulate()."""
    d = tmp_path_factory.mktemp("api")
    cli = orrery(
        "run", "--nodes", "2", "--costs", str(JACOBI / "costs.toml"), "--out", str(d / "cli"), "--", str(jacobi), *SMALL
    )
    assert cli.returncode == 0, cli.stderr
    res = api.simulate(jacobi, SMALL, nodes=2, costs=JACOBI / "costs.toml", out=d / "api")
    return d, res


def test_simulate_is_orrery_run(run_pair):
    d, res = run_pair
    from_cli = json.loads((d / "cli" / "results.json").read_text())
    # the same run: every figure bit-identical, the same record of what was run
    assert json.loads(res.to_json()) == from_cli
    assert res.status == "completed" and res.run["ranks"] == 8
    assert res.out == (d / "api").resolve()
    # the program's output is kept (the CLI lets it through)
    assert "Jacobi relaxation: 512 x 512 grid on 8 ranks" in res.stdout


def test_load_reads_a_run_back(run_pair):
    d, res = run_pair
    back = api.load(d / "api")
    assert back == res  # every field, nested dataclasses included
    assert type(back.ranks[0]).__name__ == "RankResult" and back.out == res.out
    assert api.load(d / "api" / "results.json") == res


def test_frames(run_pair):
    _, res = run_pair
    ranks = res.to_frame()
    assert list(ranks["rank"]) == list(range(8))
    for r, row in zip(res.ranks, ranks.itertuples()):
        assert (row.end_s, row.mpi_s, row.kernel_s, row.comm_exposed_s) == (
            r.end_s,
            r.mpi_s,
            r.kernel_s,
            r.comm_exposed_s,
        )
        assert row.engine_compute_s == r.engines["compute"]
    # the tables add up to the per-rank figures they break down
    mpi = res.to_frame("mpi")
    kernels = res.to_frame("kernels")
    for r in res.ranks:
        assert math.fsum(mpi[mpi["rank"] == r.rank]["time_s"]) == pytest.approx(r.mpi_s, rel=1e-12)
        assert math.fsum(kernels[kernels["rank"] == r.rank]["time_s"]) == pytest.approx(r.kernel_s, rel=1e-12)
    # 3 iterations of the halo exchange: two MPI_Sendrecv each, of one row of 512 floats each way
    sendrecv = mpi[(mpi["rank"] == 3) & (mpi["call"] == "MPI_Sendrecv")].iloc[0]
    assert (sendrecv["count"], sendrecv["bytes"]) == (6, 6 * 2 * 512 * 4)
    assert set(res.to_frame("copies")["kind"]) >= {"memset", "D2H"}
    with pytest.raises(
        InputError, match=r"to_frame: got 'rank', expected one of ranks, kernels, mpi, copies, nccl, links"
    ):
        res.to_frame("rank")


def test_overrides_as_mapping_or_strings(jacobi, tmp_path):
    common = {"nodes": 2, "costs": JACOBI / "costs.toml"}
    slow = api.simulate(jacobi, SMALL, set={"nic.bandwidth": "10Gb/s"}, out=tmp_path / "a", **common)
    same = api.simulate(jacobi, SMALL, set=["nic.bandwidth=10Gb/s"], out=tmp_path / "b", **common)
    fast = api.simulate(jacobi, SMALL, out=tmp_path / "c", **common)
    assert slow.makespan_s == same.makespan_s and slow.ranks == same.ranks
    assert slow.run["overrides"] == same.run["overrides"] == ["nic.bandwidth=10Gb/s"]
    assert slow.makespan_s > fast.makespan_s  # halos between the nodes cross the slower NICs


def test_failed_program_raises_unless_check_false(programs, tmp_path):
    with pytest.raises(api.RunFailed) as err:
        api.simulate(programs["failures"], ["abort7"], gpus_per_node=2, out=tmp_path / "a")
    assert err.value.results.status == "aborted"
    assert str(err.value).startswith("the run ended (aborted): rank 1 called MPI_Abort with error code 7")
    res = api.simulate(programs["failures"], ["abort7"], gpus_per_node=2, out=tmp_path / "b", check=False)
    assert res.status == "aborted" and res.run["exit_code"] == err.value.results.run["exit_code"] != 0


def test_bad_input_and_default_folder(jacobi, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the default folder, made in the test's own
    with pytest.raises(InputError, match=r"^--machine: got 'nope', expected a built-in machine"):
        api.simulate(jacobi, SMALL, machine="nope")
    with pytest.raises(
        InputError, match=r"^--set: key 'nic.bandwith': got '1Gb/s', expected .*did you mean 'nic.bandwidth'"
    ):
        api.simulate(jacobi, SMALL, set={"nic.bandwith": "1Gb/s"})
    res = api.simulate(jacobi, SMALL, gpus_per_node=1, costs=JACOBI / "costs.toml")
    assert res.out.name.startswith("orrery-run-") and res.out.parent == tmp_path
    assert (res.out / "results.json").is_file()
    assert api.load(res.out) == res


def test_load_refuses_what_is_not_a_run(tmp_path):
    (tmp_path / "results.json").write_text('{"status": "completed"}')
    with pytest.raises(InputError, match=r"results.json: key 'failure': got None, expected results.json written by"):
        api.load(tmp_path)
    (tmp_path / "results.json").write_text("{")
    with pytest.raises(InputError, match=r"results.json: got 'invalid JSON'"):
        api.load(tmp_path)
