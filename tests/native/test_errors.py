"""Error paths: each stops with a message naming the culprit and a non-zero status."""

from __future__ import annotations

import pytest
from conftest import orrery

pytestmark = pytest.mark.native


def test_unknown_machine_is_named(programs, tmp_path):
    p = orrery("run", "--machine", "h200-nowhere", "--out", str(tmp_path / "o"), "--", str(programs["timing"]))
    assert p.returncode == 2
    assert "h200-nowhere" in p.stderr and "h100-ib200" in p.stderr
    assert not (tmp_path / "o").exists()  # nothing half-written


def test_malformed_cost_file_names_file_key_and_value(programs, tmp_path):
    bad = tmp_path / "costs.toml"
    bad.write_text('[kernels.busy]\ntime = "12 parsecs"\n')
    p = orrery("run", "--costs", str(bad), "--out", str(tmp_path / "o"), "--", str(programs["timing"]), "h2d")
    assert p.returncode == 2
    assert str(bad) in p.stderr and "kernels.busy.time" in p.stderr and "12 parsecs" in p.stderr
    assert not (tmp_path / "o").exists()


def test_unimplemented_cuda_call_stops_the_run_naming_it(run_program, programs):
    r = run_program(programs["timing"], "unsupported", options=("--gpus-per-node", "1"))
    assert r.returncode == 3
    last = r.stderr.splitlines()[-1]
    assert last.startswith("orrery: error: ") and "cudaMallocPitch" in last and "does not simulate" in last
    assert r.stderr.count("cudaMallocPitch") == 1  # said once
    # results.json says it was Orrery that stopped, in which rank and when (before any simulated work)
    res = r.results
    assert res["status"] == "orrery_error" and res["run"]["exit_code"] == 3
    assert res["failure"]["ranks"] == [0] and res["failure"]["time_s"] == 0
    assert "cudaMallocPitch" in res["failure"]["message"]


def test_program_exit_status_is_passed_through(run_program, programs):
    r = run_program(programs["timing"], "exit", options=("--gpus-per-node", "1"))
    assert r.returncode == 7
    assert r.results["run"]["exit_code"] == 7


def test_strict_mode_rejects_a_kernel_without_cost(run_program, programs):
    r = run_program(programs["timing"], "one-stream", options=("--gpus-per-node", "1", "--strict"))
    assert r.returncode == 3
    assert "busy(float*)" in r.stderr and "--strict" in r.stderr


def test_kernels_without_cost_are_listed_with_their_launch_count(run_program, programs, h100):
    r = run_program(programs["timing"], "one-stream", options=("--gpus-per-node", "1"))
    assert r.returncode == 0, r.stderr
    assert r.results["kernels_without_cost"] == {"brief(float*)": 1, "busy(float*)": 1}
    assert "kernels without a cost" in r.stdout
    # Each got the documented default time (5 us).
    assert r.results["ranks"][0]["kernels"]["busy(float*)"]["time_s"] == pytest.approx(5e-6, rel=1e-9)


def test_a_program_not_built_for_smpi_is_refused(tmp_path):
    p = orrery("run", "--out", str(tmp_path / "o"), "--", "/bin/true")
    assert p.returncode == 2
    assert "/bin/true" in p.stderr and "orrery mpicxx" in p.stderr
    assert not (tmp_path / "o").exists()
