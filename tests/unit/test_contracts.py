"""The C shim and the Python package describe some things twice: keep them equal."""

import re
from pathlib import Path

import pytest

from orrery import machines as machine
from orrery.run import results

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "interpose"


def test_every_collective_the_shim_corrects_has_its_machine_keys():
    """The shim looks a collective's correction up in the run description by its lower-case name,
    alone or with _device or _host (engine's collective_correction): each must be a machine key."""
    colls = re.findall(r"^ORR_MPI_COLL\((\w+),", (SHIM / "mpi" / "mpi_api.def").read_text(), re.MULTILINE)
    assert colls
    keys = {f"{c.lower()}{kind}" for c in colls for kind in ("", "_device", "_host")}
    assert keys == set(machine.description.Collectives.model_fields)


def test_report_header_matches_the_reader():
    engine = (SHIM / "core" / "report.cpp").read_text()
    header = re.search(r'fprintf\(f, "(rank\\t[^"]*)\\n"\);', engine).group(1)
    assert tuple(header.split("\\t")) == results.REPORT_COLUMNS
