"""`orrery validate`: measured sweeps against the simulator, numbers from the files and the runs."""

from __future__ import annotations

import json
import statistics

import pytest
from conftest import REPO, nvcc_available, orrery, voltage_park_copies

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed"),
]


def test_validate_h100_copies_against_bandwidth_test(tmp_path):
    from orrery import machines as machine

    p = orrery("validate", "--machine", "h100-ib200", "--out", str(tmp_path), cwd=REPO)
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "validation.json").read_text())
    sweeps = {s["name"].split(",")[0]: s for s in data["sweeps"]}
    assert set(sweeps) == {"H2D copy", "D2H copy", "D2D copy"}
    m = machine.load("h100-ib200")
    for name, test, scale in (
        ("H2D copy", "memcpy host->device", 1.0),
        ("D2H copy", "memcpy device->host", 1.0),
        ("D2D copy", "memcpy device->device (same GPU)", 0.5),
    ):
        s = sweeps[name]
        expected = voltage_park_copies(test, scale)
        assert dict(zip(s["sizes"], s["measured"])) == expected  # measured values as published
        errors = [(sim - meas) / meas for sim, meas in zip(s["simulated"], s["measured"])]
        assert s["errors"] == pytest.approx(errors, rel=1e-12)
        assert s["median_abs_error"] == pytest.approx(statistics.median(abs(e) for e in errors), rel=1e-12)
        assert s["max_abs_error"] == pytest.approx(max(abs(e) for e in errors), rel=1e-12)
        assert len(s["sizes"]) == 81
    # the simulated copy at 68 MB: overheads, two PCIe hops and the wire time
    o, pcie = m.overheads, m.pcie
    h2d = sweeps["H2D copy"]
    n = h2d["sizes"][-1]
    assert h2d["simulated"][-1] * 1e9 == pytest.approx(
        n / (o.memcpy + 2 * pcie.latency + n / pcie.bandwidth + o.sync), rel=2e-3
    )  # printed with 3 decimals
    assert "H2D copy, bandwidthTest pinned (Voltage Park H100 SXM5)" in p.stdout and "median" in p.stdout
    for i in range(3):
        assert (tmp_path / f"sweep{i}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_validate_needs_a_machine_with_measurements(tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text(
        (REPO / "orrery" / "machines" / "builtin" / "h100-pcie.toml").read_text().replace('"h100-pcie"', '"mine"')
    )
    p = orrery("validate", "--machine", str(mine), "--out", str(tmp_path / "v"), cwd=REPO)
    assert p.returncode == 2
    assert (
        f"--machine: got '{mine}', expected a machine with measured sweeps to compare against: dgx-h100, "
        "gh200-slingshot, h100-ib200, h100-pcie"
    ) in p.stderr
    assert not (tmp_path / "v").exists()


def test_gh200_as_shipped_matches_the_gh200_sweeps(tmp_path):
    """gh200-slingshot carries its calibration: the sweeps it was fitted on are within the targets
    (median 5 %, 95th percentile 15 %; alltoall through its correction, which can only add time),
    and the one sweep from another system that it cannot match says why."""
    p = orrery("validate", "--machine", "gh200-slingshot", "--out", str(tmp_path), cwd=REPO)
    assert p.returncode == 0, p.stderr
    sweeps = {s["name"]: s for s in json.loads((tmp_path / "validation.json").read_text())["sweeps"]}
    # every santis sweep: point-to-point, within a node too (through the NIC: mpi.intra_node = "nic"),
    # and osu_alltoall on device and on host buffers
    assert sum("santis" in name for name in sweeps) == 9
    assert {"osu_bw D D intra-node (Alps santis GH200)", "osu_bw H H intra-node (Alps santis GH200)"} <= set(sweeps)
    for name, s in sweeps.items():
        if "clariden" in name and "D D" in name:
            assert "compared, not fitted" in s["note"]
            continue
        assert s["median_abs_error"] <= 0.05, name
        if name.startswith("osu_alltoall"):
            # corrections only add time: the sizes SMPI's algorithms make too slow stay so
            for m, sim in zip(s["measured"], s["simulated"]):
                assert sim == pytest.approx(m, rel=0.01) or sim > m
            continue
        assert s["p95_abs_error"] <= 0.15, name


def test_validate_with_a_calibration_gives_its_closed_loop(tmp_path):
    """`orrery validate --calibration FILE` runs the sweeps on the calibrated machine: the same
    figures as the closed loop `orrery calibrate` wrote with that file."""
    committed = REPO / "calibration" / "h100-ib200"
    p = orrery(
        "validate",
        "--machine",
        "h100-ib200",
        "--calibration",
        str(committed / "calibration.json"),
        "--out",
        str(tmp_path),
        cwd=REPO,
    )
    assert p.returncode == 0, p.stderr
    got = json.loads((tmp_path / "validation.json").read_text())["sweeps"]
    closed = json.loads((committed / "closed-loop" / "validation.json").read_text())["sweeps"]
    assert [s["simulated"] for s in got] == [s["simulated"] for s in closed]
    wrong = orrery(
        "validate",
        "--machine",
        "gh200-slingshot",
        "--calibration",
        str(committed / "calibration.json"),
        "--out",
        str(tmp_path / "w"),
        cwd=REPO,
    )
    assert wrong.returncode == 2 and "expected a calibration of gh200-slingshot" in wrong.stderr


def test_calibrate_builds_its_benchmarks_outside_a_read_only_repository(tmp_path):
    """orrery calibrate (and validate) build calibration/bench in a folder of their own: a
    read-only copy of the repository works, and no file appears in it (as root, whom the file
    modes do not stop, the second check is the one that counts)."""
    import os
    import shutil

    repo = tmp_path / "repo"
    (repo / "calibration" / "bench").mkdir(parents=True)
    src = REPO / "calibration" / "bench"
    for f in [*src.glob("*.cu"), *src.glob("*.h"), src / "Makefile"]:
        shutil.copy(f, repo / "calibration" / "bench" / f.name)
    shutil.copytree(REPO / "calibration" / "data" / "measured", repo / "calibration" / "data" / "measured")
    before = sorted(p.relative_to(repo) for p in repo.rglob("*"))
    for p in [repo, *repo.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        c = orrery("calibrate", "--machine", "h100-ib200", "--repo", str(repo), "--out", str(tmp_path / "cal"))
        after = sorted(p.relative_to(repo) for p in repo.rglob("*"))
    finally:
        for p in [repo, *repo.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
    assert c.returncode == 0, c.stderr
    assert after == before
    closed = json.loads((tmp_path / "cal" / "closed-loop" / "validation.json").read_text())["sweeps"]
    assert len(closed) == 3 and all(s["simulated"] for s in closed)  # the benchmarks ran


def test_validate_and_calibrate_run_from_the_installed_package_outside_a_checkout(tmp_path):
    """The measured data and calibration/bench's sources ship with the package: run from a
    folder with no checkout above it, `orrery validate` compares the published H100 copy rates
    (the same rows as the checkout's CSV) with simulated copies whose time is derived by hand,
    and `orrery calibrate` names its input as the repository does, with the checkout's file's
    SHA-256 (shipped byte for byte), and writes the committed calibration again."""
    import hashlib

    from conftest import assert_same_calibration

    from orrery import machines as machine

    assert not any((d / "calibration" / "bench").exists() for d in [tmp_path, *tmp_path.parents])
    p = orrery("validate", "--machine", "h100-ib200", "--out", str(tmp_path / "v"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    h2d = json.loads((tmp_path / "v" / "validation.json").read_text())["sweeps"][0]
    assert dict(zip(h2d["sizes"], h2d["measured"])) == voltage_park_copies("memcpy host->device")
    m = machine.load("h100-ib200")
    o, pcie, n = m.overheads, m.pcie, h2d["sizes"][-1]
    assert h2d["simulated"][-1] * 1e9 == pytest.approx(
        n / (o.memcpy + 2 * pcie.latency + n / pcie.bandwidth + o.sync), rel=2e-3
    )
    c = orrery("calibrate", "--machine", "h100-ib200", "--out", str(tmp_path / "cal"), cwd=tmp_path)
    assert c.returncode == 0, c.stderr
    cal = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    source = REPO / "calibration" / "data" / "measured" / "device_bandwidth.csv"
    assert cal["inputs"] == [
        {
            "file": "calibration/data/measured/device_bandwidth.csv",
            "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        }
    ]
    assert_same_calibration(cal, json.loads((REPO / "calibration" / "h100-ib200" / "calibration.json").read_text()))
