"""The driver stand-in's table (interpose/driver/driver_api.def) and what `gen_exports.py --driver`
makes of it: a row the build would get wrong stops the generator naming it, with nothing written;
the committed symbol lists are what list_driver_symbols.py says they are made from."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SHIM = Path(__file__).resolve().parents[2] / "interpose"
_spec = importlib.util.spec_from_file_location("gen_exports", SHIM / "gen_exports.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

INIT = "ORR_CU(cuInit, CUresult, (unsigned int Flags), (Flags), device, BOOKKEEP)"
FILES = ["driver_api.def", "cuda13_driver_symbols.txt", "cuda13_driver_versions.txt"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            INIT.replace("cuInit,", "cuInitEverything,"),
            "driver_api.def: cuInitEverything is not a function libcuda.so.1 exports (cuda13_driver_symbols.txt)",
        ),
        (
            INIT.replace("device,", "devices,"),
            "driver_api.def: cuInit: family 'devices', expected one of device, context, memory, stream, module, vmm, "
            "entry, errors, generated",
        ),
        (
            INIT.replace("BOOKKEEP", "FORWARD_TIMED"),
            "driver_api.def: cuInit: policy 'FORWARD_TIMED', expected one of SIMULATE, ANSWER, BOOKKEEP, REFUSE",
        ),
        (
            INIT.replace("device, BOOKKEEP", "generated, ANSWER"),
            "driver_api.def: cuInit: a generated body can only refuse (policy REFUSE)",
        ),
        (INIT + "\n" + INIT, "driver_api.def: cuInit has two rows"),
    ],
)
def test_a_driver_row_the_build_would_get_wrong_stops_the_generator_naming_it(tmp_path, row, message):
    (tmp_path / "driver").mkdir()
    for name in FILES:
        shutil.copy(SHIM / "driver" / name, tmp_path / "driver" / name)
    table = tmp_path / "driver" / "driver_api.def"
    assert INIT in table.read_text()
    table.write_text(table.read_text().replace(INIT, row, 1))
    out = tmp_path / "generated"
    p = subprocess.run(
        [sys.executable, str(SHIM / "gen_exports.py"), "--driver", str(tmp_path), str(out)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert (p.returncode, p.stderr) == (1, f"gen_exports.py: {message}\n")
    assert not out.exists()


def test_every_versioned_entry_point_is_an_exported_symbol_and_every_row_has_its_name():
    real = set(gen.real_driver(SHIM))
    versions = gen.driver_versions(SHIM)
    assert {s for _, _, s in versions} <= real
    by_base = {}
    for base, version, symbol in versions:
        by_base.setdefault(base, []).append((version, symbol))
    # cuda.h's macro mapping, newest last: cuMemAlloc -> cuMemAlloc_v2 (CUDA 3.2), cuGetProcAddress_v2 (12.0)
    assert by_base["cuMemAlloc"] == [(2000, "cuMemAlloc"), (3020, "cuMemAlloc_v2")]
    assert by_base["cuGetProcAddress"][-1] == (12000, "cuGetProcAddress_v2")
    assert by_base["cuMemcpyHtoD_ptds"] == [(7000, "cuMemcpyHtoD_v2_ptds")]
    # a row is named as the library exports it, and a versioned row is the newest of its base, or
    # an older one beside a row for the newest (cuCtxCreate_v2, which programs that load the
    # driver themselves still name, beside cuCtxCreate_v4)
    newest = {symbols[-1][1] for symbols in by_base.values()}
    rows = {call.symbol for call in gen.driver_calls(SHIM)}
    for call in gen.driver_calls(SHIM):
        if "_v" in call.symbol and call.symbol not in newest:
            base = next(b for b, symbols in by_base.items() if call.symbol in {s for _, s in symbols})
            assert by_base[base][-1][1] in rows, call.symbol
