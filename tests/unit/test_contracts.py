"""The C shim and the Python package describe some things twice: keep them equal."""

import re
from pathlib import Path

import pytest

from orrery import machines as machine
from orrery.machines import platform
from orrery.run import results

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "interpose"


def test_every_gpu_property_the_shim_reads_is_generated():
    read = set(re.findall(r'"(orrery:\w+)"', "".join(p.read_text() for p in SHIM.rglob("*.cpp"))))
    # optional copy models, one property per direction (the shim builds the key from copy_kind_name)
    assert "orrery:copy_model_" in read
    read.discard("orrery:copy_model_")
    read |= {f"orrery:copy_model_{kind}" for kind in re.findall(r'return "(\w+)";', (SHIM / "core" / "engine.cpp").read_text())
             if kind != "H2H"}
    # ... and message models, one per path (the shim builds the key from kMessagePathNames)
    assert "orrery:message_model_" in read
    read.discard("orrery:message_model_")
    paths = re.search(r"kMessagePathNames\[MESSAGE_PATHS\] = \{([^}]*)\}", (SHIM / "core" / "engine.cpp").read_text())
    read |= {f"orrery:message_model_{p}" for p in re.findall(r'"(\w+)"', paths.group(1))}
    # ... and gaps, one per path (the shim builds the key from the buffer kind and "_inter"/"_intra")
    assert "orrery:message_gap_" in read
    read.discard("orrery:message_gap_")
    read |= {f"orrery:message_gap_{p}" for p in re.findall(r'"(\w+)"', paths.group(1))}
    # ... and collective corrections, per collective (named by the .def's ORR_MPI_COLL entries) and kind
    assert "orrery:collective_correction_" in read
    read.discard("orrery:collective_correction_")
    colls = re.findall(r"^ORR_MPI_COLL\((\w+),", (SHIM / "mpi" / "mpi_api.def").read_text(), re.M)
    read |= {f"orrery:collective_correction_{c.lower()}{kind}" for c in colls for kind in ("", "_device", "_host")}
    fix = "[{extra = '2us'}]"
    one = "[{latency = '1us', bandwidth = '10GB/s'}]"
    m = machine.load("h100-ib200", machine.parse_overrides(
                     [f"copies.{d}={one}" for d in ("H2D", "D2H", "D2D", "peer")] +
                     [f"{section}.{p}={one}" for section in ("messages", "gaps")
                      for p in ("device_intra", "device_inter", "host_intra", "host_inter")] +
                     [f"collectives.{c.lower()}{kind}={fix}" for c in colls for kind in ("", "_device", "_host")] + ["gpudirect.rdma=false", 'mpi.intra_node="nic"']))
    written = set(platform.gpu_properties(m, platform.Layout(1, 1, 1), 0, 0))
    assert read <= written, f"the shim reads properties the platform lacks: {read - written}"
    assert "orrery:node" in read


def test_report_header_matches_the_reader():
    engine = (SHIM / "core" / "engine.cpp").read_text()
    header = re.search(r'fprintf\(f, "(rank\\t[^"]*)\\n"\);', engine).group(1)
    assert tuple(header.split("\\t")) == results.REPORT_COLUMNS
