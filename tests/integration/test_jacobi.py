"""The bundled Jacobi example, built by its own Makefile with Orrery's wrappers."""

from __future__ import annotations

import importlib.util
import json
import math
import tomllib

import pytest
from conftest import REPO, nvcc_available, orrery

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed"),
]

EXAMPLE = REPO / "examples" / "jacobi"
# rows of 8192 floats (32 KiB halo messages): the interior kernel of the overlapped variant
# (0.45 us + 6.84 ps a thread, examples/jacobi/costs.toml) outlasts the halo exchange it hides
NX, NY, NITER = 8192, 8194, 30


def run(jacobi, out, *extra):
    return orrery(
        "run",
        "--nodes",
        "2",
        "--costs",
        str(EXAMPLE / "costs.toml"),
        "--strict",
        "--out",
        str(out),
        *extra,
        "--",
        str(jacobi),
        "-nx",
        str(NX),
        "-ny",
        str(NY),
        "-niter",
        str(NITER),
    )


def test_eight_ranks_run_exactly_the_configured_iterations(jacobi, tmp_path):
    p = run(jacobi, tmp_path / "o")
    assert p.returncode == 0, p.stderr
    assert f"iterations: {NITER}" in p.stdout
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert len(res["ranks"]) == 8
    assert [r["host"] for r in res["ranks"][:5]] == ["n0-gpu0", "n0-gpu1", "n0-gpu2", "n0-gpu3", "n1-gpu0"]
    assert res["kernels_without_cost"] == {}
    cost = tomllib.loads((EXAMPLE / "costs.toml").read_text())["kernels"]["jacobi_kernel"]
    chunk = (NY - 2) // 8
    threads = ((NX + 31) // 32) * ((chunk + 31) // 32) * 1024  # the example's 32 x 32 blocks
    for r in res["ranks"]:
        k = r["kernels"]["jacobi_kernel(float*, float const*, float*, int, int, int, bool)"]
        assert k["count"] == NITER
        assert k["time_s"] == pytest.approx(NITER * (cost["alpha"] + cost["beta"] * threads), rel=1e-9)
        assert r["mpi"]["MPI_Sendrecv"]["count"] == 2 * NITER
        assert r["mpi"]["MPI_Allreduce"]["count"] == NITER
        assert r["copies"]["D2H"]["count"] == NITER
        # the parts of a rank's time add up to when it finished
        assert r["host_s"] + r["mpi_s"] + r["gpu_wait_s"] == pytest.approx(r["end_s"], rel=1e-12)
        assert r["end_s"] + r["idle_s"] == pytest.approx(res["makespan_s"], rel=1e-12)
        # and so do its terms; its halo exchange waits for nothing but the messages
        terms = r["terms"]
        assert math.fsum(v for k, v in terms.items() if k != "idle_s") == pytest.approx(r["end_s"], rel=1e-12)
        assert terms["exposed_p2p_s"] == pytest.approx(r["mpi"]["MPI_Sendrecv"]["time_s"], rel=1e-9)


def test_two_runs_give_identical_results(jacobi, tmp_path):
    assert run(jacobi, tmp_path / "a").returncode == 0
    assert run(jacobi, tmp_path / "b").returncode == 0
    assert (tmp_path / "a" / "results.json").read_bytes() == (tmp_path / "b" / "results.json").read_bytes()


def test_a_slower_fabric_slows_only_the_communication(jacobi, tmp_path):
    assert run(jacobi, tmp_path / "fast").returncode == 0
    assert run(jacobi, tmp_path / "slow", "--set", "nic.bandwidth=25Gbps").returncode == 0
    fast = json.loads((tmp_path / "fast" / "results.json").read_text())
    slow = json.loads((tmp_path / "slow" / "results.json").read_text())
    assert slow["run"]["overrides"] == ["nic.bandwidth=25Gbps"]
    assert slow["makespan_s"] > fast["makespan_s"]
    assert slow["ranks"][3]["kernel_s"] == pytest.approx(fast["ranks"][3]["kernel_s"], rel=1e-12)
    assert slow["ranks"][3]["mpi_s"] > fast["ranks"][3]["mpi_s"]


def test_overlapped_variant_hides_the_halo_exchange(jacobi, tmp_path):
    plain = run(jacobi, tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr
    p = orrery(
        "run",
        "--nodes",
        "2",
        "--costs",
        str(EXAMPLE / "costs.toml"),
        "--strict",
        "--out",
        str(tmp_path / "over"),
        "--",
        str(jacobi),
        "-nx",
        str(NX),
        "-ny",
        str(NY),
        "-niter",
        str(NITER),
        "-overlap",
    )
    assert p.returncode == 0, p.stderr
    assert "overlapped" in p.stdout and f"iterations: {NITER}" in p.stdout
    a = json.loads((tmp_path / "plain" / "results.json").read_text())["ranks"]
    b = json.loads((tmp_path / "over" / "results.json").read_text())["ranks"]
    for plain_rank, over_rank in zip(a, b):
        # plain: the exchange waits for the whole sweep, nothing computes meanwhile
        assert plain_rank["comm_hidden_s"] == 0
        # overlapped: each halo exchange runs entirely inside the interior kernel
        assert over_rank["comm_hidden_s"] == pytest.approx(over_rank["mpi"]["MPI_Sendrecv"]["time_s"], rel=1e-9)
        assert over_rank["comm_exposed_s"] < plain_rank["comm_exposed_s"]
        # so the exchange is kernel time in the terms: no point-to-point exposed
        assert over_rank["terms"]["exposed_p2p_s"] == 0
        assert plain_rank["terms"]["exposed_p2p_s"] == pytest.approx(plain_rank["mpi"]["MPI_Sendrecv"]["time_s"])
        assert (
            over_rank["kernels"]["jacobi_kernel(float*, float const*, float*, int, int, int, bool)"]["count"]
            == 3 * NITER
        )


def test_the_readme_shows_the_terms_examples_jacobi_terms_py_makes(jacobi, capsys):
    """README's tables of the Jacobi example's terms per iteration (on the built-in, and the change
    from the uncalibrated copy) are what examples/jacobi/terms.py makes now: its rows of 2 and 8
    GPUs (one node, two nodes) here. When a built-in's values change, rerun the script and paste."""
    spec = importlib.util.spec_from_file_location("jacobi_terms", EXAMPLE / "terms.py")
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    found = script.main(["--gpus", "2,8", "--jacobi", str(jacobi)])
    capsys.readouterr()
    section = (REPO / "README.md").read_text().split("## Where the time of an iteration goes")[1].split("\n## ")[0]
    tables = [block for block in section.split("\n\n") if block.startswith("| GPUs")]
    assert len(tables) == 2  # the built-in's, then the change
    for label, text in zip(("calibrated", "change"), tables):
        rows = {line.split("|")[1].strip(): line for line in text.splitlines()[2:]}
        made = script.table(found[label])
        assert made[0] == text.splitlines()[0]  # the same columns
        for line in made[2:]:
            assert rows[line.split("|")[1].strip()] == line, label
