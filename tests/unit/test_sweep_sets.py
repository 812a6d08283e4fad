"""Which shared measurements `orrery validate` and `orrery calibrate` line up against."""

import csv
from pathlib import Path

import pytest

from orrery import machines as machine
from orrery.calibration import merge, sweeps

pytestmark = pytest.mark.unit

MEASURED = Path(__file__).resolve().parents[2] / "calibration" / "data" / "measured"


def every_sweep():
    for name, sets in sweeps.catalogue().items():
        for set_name, (_, found) in sets.items():
            yield name, None if set_name == "default" else set_name, found


def test_every_shared_point_to_point_row_belongs_to_a_sweep_of_one_set():
    """Each row of p2p_mpi.csv is reproduced by exactly one sweep: the default set of a machine
    or one of its --sweeps sets (a system and MPI stack each), so every point-to-point
    measurement is validated, and none twice within a set."""
    with (MEASURED / "p2p_mpi.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    homes = {i: [] for i in range(len(rows))}
    for name, set_name, found in every_sweep():
        for sweep in found:
            if sweep.file != "p2p_mpi.csv":
                continue
            for i, row in enumerate(rows):
                if sweeps.selects(sweep, row):
                    homes[i].append((name, set_name, sweep.name))
    missing = [
        (
            rows[i]["system"][:40],
            rows[i]["mpi_or_lib"][:40],
            rows[i]["path"][:20],
            rows[i]["buffers"],
            rows[i]["metric"],
        )
        for i, h in homes.items()
        if not h
    ]
    assert not missing, f"shared point-to-point rows no sweep reproduces: {sorted(set(missing))}"
    for i, h in homes.items():
        per_set = [(name, set_name) for name, set_name, _ in h]
        assert len(per_set) == len(set(per_set)), f"row {i} is in two sweeps of one set: {h}"


def test_every_shared_mpi_collective_row_belongs_to_a_sweep_of_one_set():
    """Each MPI collective run of collectives.csv (the OSU rows: osu_alltoall on santis and on
    clariden's four MPI stacks, device and host buffers) is reproduced by exactly one sweep."""
    with (MEASURED / "collectives.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["benchmark"].startswith("OSU ")]
    assert len(rows) == 210
    homes = {i: [] for i in range(len(rows))}
    for name, set_name, found in every_sweep():
        for sweep in found:
            if sweep.file == "collectives.csv":
                for i, row in enumerate(rows):
                    if sweeps.selects(sweep, row):
                        homes[i].append((name, set_name, sweep.name))
    missing = sorted(
        {(rows[i]["system"][:30], rows[i]["library"][:40], rows[i]["benchmark"]) for i, h in homes.items() if not h}
    )
    assert not missing, f"shared collective rows no sweep reproduces: {missing}"
    twice = {i: h for i, h in homes.items() if len(h) > 1}
    assert not twice, f"rows in two sweeps: {twice}"


@pytest.mark.parametrize(
    "name, set_name", sorted((m, s) for m, sets in sweeps.catalogue().items() for s, (d, _) in sets.items() if d)
)
def test_each_set_s_description_changes_its_machine(name, set_name):
    """A set's statement of its MPI stack or hardware (its description in the sweep catalogue)
    loads as overrides of its machine and changes what the built-in says."""
    changes = sweeps.set_description(name, set_name)
    built_in, m = machine.load(name), merge.candidate(name, changes)
    for key, value in changes.items():
        section, field = key.split(".")
        assert getattr(getattr(m, section), field) == value != getattr(getattr(built_in, section), field)


def test_a_measured_series_reaches_seconds_per_transfer_through_its_benchmark_s_unit(tmp_path):
    """A measurement file's values go to SI (measurements), to the reproducing benchmark's unit
    (sweeps.sweep_for: what the simulator's run prints) and to seconds per transfer (what the fits
    model): osu_bibw moves its size both ways, osu_latency's time is the transfer's own."""
    from orrery.calibration import measurements

    f = tmp_path / "m.csv"
    f.write_text(
        "benchmark,metric,path,buffers,size_bytes,value,unit\n"
        "window64,bibw,inter-node,D D,1024,2.5,GB/s\nwindow64,bibw,inter-node,D D,4096,5000,MB/s\n"
        "pingpong,latency,intra-node,H H,8,3.5,us\n"
    )
    with pytest.raises(Exception, match="units may not be mixed"):
        measurements.load(f)
    f.write_text(
        "benchmark,metric,path,buffers,size_bytes,value,unit\n"
        "window64,bibw,inter-node,D D,1024,2.5,GB/s\nwindow64,bibw,inter-node,D D,4096,5,GB/s\n"
        "pingpong,latency,intra-node,H H,8,3.5,us\n"
    )
    bibw, lat = (sweeps.sweep_for(s) for s in measurements.load(f))
    sweep, points = bibw
    assert sweep.unit == "MB/s" and sweep.program[:2] == ("osu_p2p", "bibw") and sweep.nodes == 2
    assert points == [(1024, pytest.approx(2500.0, rel=1e-15)), (4096, pytest.approx(5000.0, rel=1e-15))]
    _sizes, seconds = sweeps.seconds_per_transfer(sweep.unit, points, sweep.kind[0])
    assert seconds == [pytest.approx(2 * 1024 / 2.5e9, rel=1e-15), pytest.approx(2 * 4096 / 5e9, rel=1e-15)]
    sweep, points = lat
    assert sweep.unit == "us" and sweep.gpus_per_node == 2 and sweep.kind == ("latency", "intra-node", "H H")
    assert sweeps.seconds_per_transfer(sweep.unit, points, "latency") == ([8], [pytest.approx(3.5e-6, rel=1e-15)])


def test_the_catalogue_s_d2d_copy_counts_each_byte_once():
    """bandwidthTest counts a device-to-device copy's bytes twice: the catalogue's D2D sweep halves
    the published rates (measured_scale) and runs memcpy_sweep d2d 100 times a size."""
    (d2d,) = [s for s in sweeps.sweeps_for("h100-ib200") if s.kind[1] == "D2D"]
    assert d2d.program == ("memcpy_sweep", "d2d", "-i", "100") and d2d.measured_scale == 0.5
    with (MEASURED / "device_bandwidth.csv").open(newline="") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if "Voltage Park" in r["system"] and r["test"].startswith("memcpy device->device")
        ]
    first = {}
    for r in rows:
        first.setdefault(int(r["transfer_bytes"]), float(r["bandwidth_GBps"]) / 2)
    assert dict(sweeps.measured_points(d2d)) == first
