"""The C shim and the Python package describe some things twice: keep them equal."""

import importlib.util
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


def written_out_mpi_calls() -> list[str]:
    """The MPI calls mpi.cpp writes out (gen_exports.py's list), each checked to be defined there."""
    spec = importlib.util.spec_from_file_location("gen_exports", SHIM / "gen_exports.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    source = (SHIM / "mpi" / "mpi.cpp").read_text()
    for name in gen.WRITTEN_OUT:
        assert re.search(rf"ORR_EXPORT int MPI_{name}\(|^ORR_SEND(_REQUEST)?\({name},", source, re.MULTILINE), name
    return gen.WRITTEN_OUT


def test_readme_lists_exactly_the_supported_calls():
    readme = (REPO / "README.md").read_text()
    cuda = [n for n in re.findall(r"^ORR_CUDA\((\w+),", (SHIM / "cudart" / "cuda_api.def").read_text(), re.M)
            if not n.startswith("__")]
    mpi = ["MPI_" + n for n in re.findall(r"^ORR_MPI(?:_POST|_DATA|_COLL)?\((\w+),", (SHIM / "mpi" / "mpi_api.def").read_text(), re.M)]
    mpi += ["MPI_" + n for n in written_out_mpi_calls()]
    section = readme.split("### Supported CUDA calls", 1)[1].split("## Machines", 1)[0]
    listed = set(re.findall(r"\b(cuda[A-Z]\w+|MPI_\w+)\b", section))
    listed -= {"cudaGraphCreate", "cudaErrorMemoryAllocation"}
    assert listed == set(cuda) | set(mpi)
