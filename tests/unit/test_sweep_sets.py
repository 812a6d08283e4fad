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
    missing = [(rows[i]["system"][:40], rows[i]["mpi_or_lib"][:40], rows[i]["path"][:20], rows[i]["buffers"],
                rows[i]["metric"]) for i, h in homes.items() if not h]
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
    missing = sorted({(rows[i]["system"][:30], rows[i]["library"][:40], rows[i]["benchmark"])
                      for i, h in homes.items() if not h})
    assert not missing, f"shared collective rows no sweep reproduces: {missing}"
    twice = {i: h for i, h in homes.items() if len(h) > 1}
    assert not twice, f"rows in two sweeps: {twice}"


@pytest.mark.parametrize("name, set_name", sorted((m, s) for m, sets in sweeps.catalogue().items()
                                                   for s, (d, _) in sets.items() if d))
def test_each_set_s_description_changes_its_machine(name, set_name):
    """A set's statement of its MPI stack or hardware (its description in the sweep catalogue)
    loads as overrides of its machine and changes what the built-in says."""
    changes = sweeps.set_description(name, set_name)
    built_in, m = machine.load(name), merge.candidate(name, changes)
    for key, value in changes.items():
        section, field = key.split(".")
        assert getattr(getattr(m, section), field) == value != getattr(getattr(built_in, section), field)
