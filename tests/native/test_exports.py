"""The shim as built against its call tables (interpose/cudart/cuda_api.def, interpose/mpi/mpi_api.def):
the installed libcudart.so.13 exports every row and every function of the real runtime, refuses
what the tables refuse, and answers each call's policy as the tables say."""

from __future__ import annotations

import importlib.util
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from orrery import _paths

pytestmark = pytest.mark.native

SHIM = Path(__file__).resolve().parents[2] / "interpose"
_spec = importlib.util.spec_from_file_location("gen_exports", SHIM / "gen_exports.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)
CUDA, MPI, REAL = gen.cuda_calls(SHIM), gen.mpi_calls(SHIM), gen.real_cudart(SHIM)
DRIVER, REAL_DRIVER = gen.driver_calls(SHIM), gen.real_driver(SHIM)


def exported(library: str = "libcudart.so.13") -> dict[str, str]:
    """An installed library's defined dynamic symbols, name -> version ("" for none)."""
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(_paths.lib_dir() / library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    symbols = {}
    for line in out.splitlines():
        kind, name = line.split()[-2:]
        if kind == "A":  # the version node itself
            continue
        symbol, _, version = name.partition("@@")
        symbols[symbol] = version
    return symbols


def environment_exports() -> dict[str, str]:
    """interpose/core/environment.cpp's getenv and its kin, name -> the glibc version its map gives."""
    text = (SHIM / "core" / f"environment-{platform.machine()}.map").read_text()
    nodes = re.findall(r"^(GLIBC_[\d.]+) \{ global: ([^}]*)\};", text, re.MULTILINE)
    return {name: node for node, names in nodes for name in re.findall(r"\w+", names)}


def test_library_exports_every_row_and_every_function_of_the_real_runtime():
    symbols = exported()
    environment = environment_exports()
    assert {name: symbols.pop(name, None) for name in environment} == environment
    # what the sibling stand-ins call (libcuda.so.1, libnccl.so.2), under a version no program links against
    private = {s for s, v in symbols.items() if v == "ORRERY_PRIVATE"}
    # (functions named orrery_private_*, and the core's C++ interface, for libnccl.so.2)
    assert private and all(s.startswith(("orrery_private_", "_ZN6orrery", "_ZNK6orrery")) for s in private)
    assert any(s.startswith("_ZN6orrery9rank_self") for s in private)
    symbols = {s: v for s, v in symbols.items() if s not in private}
    rows = {c.symbol for c in CUDA + MPI}
    # the parser dropped no row (each row is one line starting with its macro)
    assert len(CUDA) == len(re.findall(r"^ORR_CUDA\(", (SHIM / "cudart" / "cuda_api.def").read_text(), re.MULTILINE))
    assert len(MPI) == len(re.findall(r"^ORR_MPI\w*\(", (SHIM / "mpi" / "mpi_api.def").read_text(), re.MULTILINE)) == 88
    assert rows <= set(symbols), f"rows the library does not define: {rows - set(symbols)}"
    # the rest are the refusal stubs: exactly libcudart.so.13's other functions, nothing else
    assert set(symbols) - rows == set(REAL) - rows
    assert set(symbols.values()) == {"libcudart.so.13"}


def test_driver_library_exports_every_row_and_every_function_of_the_real_driver_unversioned():
    symbols = exported("libcuda.so.1")
    rows = {c.symbol for c in DRIVER}
    assert len(DRIVER) == len(re.findall(r"^ORR_CU\(", (SHIM / "driver" / "driver_api.def").read_text(), re.MULTILINE))
    assert set(symbols) == set(REAL_DRIVER) and rows < set(symbols)
    # the real libcuda.so.1's symbols carry no version, and programs linked against it ask for none
    assert set(symbols.values()) == {""}
    # the list is cuda.h's: the macro-mapped names and the plain ones, per-thread variants too
    assert {"cuMemAlloc", "cuMemAlloc_v2", "cuMemcpy", "cuMemcpy_ptds", "cuLaunchKernel_ptsz"} <= set(REAL_DRIVER)
    assert len(REAL_DRIVER) == 672


@pytest.mark.parametrize("name", [c.symbol for c in CUDA if c.policy == "REFUSE" and c.family == "generated"])
def test_a_refused_call_stops_the_run_naming_it(run_program, programs, name):
    r = run_program(programs["refused"], name, options=("--gpus-per-node", "1"))
    assert r.returncode == 3, r.stderr
    assert r.stderr.splitlines()[-1].startswith(
        f"orrery: error: the program called {name}, which Orrery does not simulate (actor 0)"
    )
    assert f"refused: {name} returned" not in r.stdout
    assert r.results["failure"]["ranks"] == [0]


def test_every_refused_call_of_the_table_is_generated():
    # a hand-written REFUSE row would need a test of its own here (__cudaRegisterManagedVar was one:
    # __managed__ variables are tested in test_managed_memory.py)
    assert {c.symbol for c in CUDA if c.policy == "REFUSE" and c.family != "generated"} == set()


CALL_POLICY_MAIN = r"""
#include "call_policy.hpp"
#include <iostream>
#include <string>
int main() {
  const char* names[] = {"SIMULATE", "ANSWER", "BOOKKEEP", "FORWARD_TIMED", "REFUSE"};
  for (std::string name; std::cin >> name;) {
    auto p = orrery::call_policy(name);
    std::cout << name << ' ' << (p ? names[(int)*p] : "none") << '\n';
  }
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_call_policy_answers_each_exported_call_as_its_table_says(tmp_path):
    gen.write_build(SHIM, tmp_path)
    (tmp_path / "main.cpp").write_text(CALL_POLICY_MAIN)
    subprocess.run(
        [
            "g++",
            "-std=c++17",
            "-I",
            str(tmp_path),
            str(tmp_path / "main.cpp"),
            str(tmp_path / "call_policy.cpp"),
            "-o",
            str(tmp_path / "policy"),
        ],
        check=True,
    )
    expected = {c.symbol: c.policy for c in CUDA + MPI} | {
        s: "REFUSE" for s in REAL if s not in {c.symbol for c in CUDA}
    }
    asked = [*expected, "cudaNotACall", "MPI_Send_", "a", "zzz"]
    out = subprocess.run(
        [str(tmp_path / "policy")], input="\n".join(asked), capture_output=True, text=True, check=True
    ).stdout
    answered = dict(line.split() for line in out.splitlines())
    assert answered == expected | {"cudaNotACall": "none", "MPI_Send_": "none", "a": "none", "zzz": "none"}
    assert answered["cudaMalloc"] == "BOOKKEEP" and answered["cudaMallocPitch"] == "REFUSE"
    assert answered["MPI_Allreduce"] == "SIMULATE" and answered["MPI_Finalize"] == "BOOKKEEP"
