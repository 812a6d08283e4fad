"""`orrery calibrate`: fits on the shared measurements, closed loop, and `orrery run --calibration`."""

from __future__ import annotations

import hashlib
import json

import pytest

from conftest import REPO, nvcc_available, orrery

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed")]


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal")
    p = orrery("calibrate", "--machine", "h100-ib200", "--out", str(out), cwd=REPO)
    assert p.returncode == 0, p.stderr
    return out, p.stdout


def test_calibration_file_has_provenance_fits_and_overrides(calibration):
    out, stdout = calibration
    cal = json.loads((out / "calibration.json").read_text())
    (inp,) = cal["inputs"]
    data = REPO / inp["file"]
    assert inp["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    fits = {f["sweep"].split(",")[0]: f for f in cal["fits"]}
    h2d = fits["H2D copy"]["segments"][-1]
    assert cal["overrides"]["pcie.bandwidth"] == h2d["bandwidth_Bps"]
    # D2H has two regimes on that machine (20.5 GB/s above ~2 MB): the fit finds the break
    assert len(fits["D2H copy"]["segments"]) == 2
    assert fits["D2H copy"]["segments"][1]["bandwidth_Bps"] == pytest.approx(20e9, rel=0.05)
    # closed loop: copies to the host cannot match with one PCIe rate, and say so
    closed = json.loads((out / "closed-loop" / "validation.json").read_text())
    by_name = {s["name"].split(",")[0]: s for s in closed["sweeps"]}
    assert by_name["H2D copy"]["median_abs_error"] < 0.05
    assert "NOT MATCHED: D2H copy" in stdout
    assert "NOT MATCHED: H2D copy" not in stdout


def test_run_applies_a_calibration(calibration, programs, tmp_path):
    out, _ = calibration
    cal = json.loads((out / "calibration.json").read_text())
    from orrery import machine

    m = machine.load("h100-ib200")
    n = 4_000_000
    p = orrery("run", "--gpus-per-node", "1", "--calibration", str(out / "calibration.json"), "--out",
               str(tmp_path / "o"), "--", str(programs["timing"]), "h2d", str(n))
    assert p.returncode == 0, p.stderr
    elapsed = float(next(line.split()[1] for line in p.stdout.splitlines() if line.startswith("elapsed")))
    o = cal["overrides"]
    assert elapsed == pytest.approx(o["overheads.memcpy"] + 2 * m.pcie.latency + n / o["pcie.bandwidth"]
                                    + m.overheads.sync, rel=1e-9)
    wrong = orrery("run", "--machine", "dgx-h100", "--calibration", str(out / "calibration.json"), "--out",
                   str(tmp_path / "w"), "--", str(programs["timing"]), "h2d")
    assert wrong.returncode == 2 and "expected a calibration of dgx-h100" in wrong.stderr
