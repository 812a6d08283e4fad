"""NVML's stand-in (interpose/nvml/, libnvidia-ml.so.1): a program that asks NVML about its GPUs
(monitoring code, BabelStream's memory clock, nvbandwidth's device matching) gets the answers the
CUDA runtime gives for the same GPUs, for every GPU of its node; calls it does not answer stop the
run naming them.

programs/nvml_query.cu is compiled against NVML's real header (the nvidia-nvml-dev-cu12 wheel's,
scripts/setup.sh) and linked with -lnvidia-ml, as a program is on a GPU machine. Every expected
value is derived here from the machine description (h100-ib200) and Orrery's numbering of GPUs:
its PCI bus ids (orrery/machines/platform.py: 0x18 + 0x20 x index), its UUIDs ("ORRY", the node
and the index, big-endian), the memory each rank allocated.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orrery import _paths

pytestmark = pytest.mark.native

MIB = 1 << 20


def uuid(node: int, index: int) -> str:
    """A GPU's UUID as NVML and the program print it: bytes "ORRY", node, index, zeros; 8-4-4-4-12."""
    raw = b"ORRY" + node.to_bytes(4, "big") + index.to_bytes(4, "big") + bytes(4)
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def lines(stdout: str, prefix: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("visibility", ["node", "bound"])
def test_nvml_sees_every_gpu_of_the_node_as_cuda_describes_it(run_program, programs, h100, visibility):
    """Four ranks on a node of four GPUs; rank r allocates r + 1 MiB on device r mod (its devices):
    under `bound` visibility each rank sees one device, its own, so the allocations land on the
    same GPUs either way, and NVML, which ignores CUDA_VISIBLE_DEVICES, sees all four."""
    r = run_program(programs["nvml_query"], "query", options=("--gpus-per-node", "4", "--gpu-visibility", visibility))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert lines(out, "driver ") == ["driver 580.65.06"]
    assert lines(out, "nvml ") == ["nvml 13.580.65.06 cuda 13000"]
    devices = 4 if visibility == "node" else 1
    assert lines(out, "count ") == [f"count 4 cuda {devices}"]
    total = int(h100.gpu.memory)
    clock, memory_clock = round(h100.gpu.clock_rate / 1e6), round(h100.gpu.memory_clock_rate / 1e6)
    for i in range(4):
        bus = 0x18 + 0x20 * i
        used = (i + 1) * MIB  # rank i's allocation, on GPU i in both visibilities
        assert lines(out, f"gpu {i} ") == [
            f"gpu {i} name {h100.gpu.model}",
            f"gpu {i} uuid {uuid(0, i)}",
            f"gpu {i} pci 00000000:{bus:02X}:00.0 0000:{bus:02X}:00.0 0 {bus} 0 000010de",
            f"gpu {i} cc {h100.gpu.compute_capability}",
            f"gpu {i} memory {total} {used} {total - used} v2 {total} 0 {used} {total - used}",
            f"gpu {i} clocks {clock} {memory_clock} {clock} {memory_clock}",
            f"gpu {i} index {i} {i} affinity 0",
        ]
    # each CUDA device of rank 0 found by its UUID and by its PCI bus id: the same GPU
    cuda = lines(out, "cuda ")
    assert len(cuda) == devices
    for c, line in enumerate(cuda):
        assert line == f"cuda {c} uuid {uuid(0, c)} bus 0000:{0x18 + 0x20 * c:02x}:00.0 nvml {c} {c}"


def test_nvml_numbers_the_gpus_of_each_node_apart(run_program, programs):
    """Two nodes of two GPUs: rank 0 is on node 0, whose GPUs NVML lists; their UUIDs carry node 0
    (those of node 1, another machine, are not NVML's to list here)."""
    r = run_program(programs["nvml_query"], "query", options=("--gpus-per-node", "2"), nodes=2)
    assert r.returncode == 0, r.stderr
    assert lines(r.stdout, "count ") == ["count 2 cuda 2"]
    assert [line.split()[-1] for line in lines(r.stdout, "gpu ") if " uuid " in line] == [uuid(0, 0), uuid(0, 1)]


def test_nvml_s_errors_are_its_own(run_program, programs):
    r = run_program(programs["nvml_query"], "errors", options=("--gpus-per-node", "2"))
    assert r.returncode == 0, r.stderr
    answers = dict(re.match(r"(.*?) (-?\d+(?: -?\d+)*|\S+\|.*)$", line).groups() for line in r.stdout.splitlines()[:16])
    assert answers == {
        "count before init": "1",  # NVML_ERROR_UNINITIALIZED
        "shutdown before init": "1",
        "init": "0 0",  # counted: the second shutdown undoes the first init
        "shutdown": "0",
        "count": "0",
        "index past the last": "2",  # NVML_ERROR_INVALID_ARGUMENT
        "unknown uuid": "6",  # NVML_ERROR_NOT_FOUND
        "unknown bus": "6",
        "bad bus": "2",
        "short name": "7",  # NVML_ERROR_INSUFFICIENT_SIZE
        "null memory": "2",
        "memory v2 of version one": "25",  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        "init flags": "2",
        "strings": "Success|Not Found|Insufficient Size",
        "after shutdown": "1",
    }


def test_a_program_that_opens_nvml_by_name_gets_orrery_s(run_program, programs):
    """NCCL and monitoring libraries dlopen("libnvidia-ml.so.1"): `orrery run` preloads the
    stand-in, so the name finds it (there is no other on this machine, and a GPU machine's
    would answer for its own GPUs)."""
    r = run_program(programs["nvml_query"], "dlopen", options=("--gpus-per-node", "3"))
    assert r.returncode == 0, r.stderr
    assert "dlopen count 3" in r.stdout


def test_a_call_nvml_s_stand_in_does_not_answer_stops_the_run_naming_it(run_program, programs):
    r = run_program(programs["nvml_query"], "refused", options=("--gpus-per-node", "1"))
    assert r.returncode == 3, r.stderr
    assert r.results["status"] == "orrery_error"
    assert r.stderr.splitlines()[-1] == (
        "orrery: error: the program called nvmlDeviceGetPowerUsage, which Orrery does not simulate (actor 0): "
        "Orrery's NVML answers the calls docs/supported-calls.md lists, not this one"
    )
    assert "not reached" not in r.stdout


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHIM = Path(__file__).resolve().parents[2] / "interpose"
gen = _module("gen_exports", SHIM / "gen_exports.py")
lister = _module("list_nvml_symbols", SHIM / "nvml" / "list_nvml_symbols.py")


def test_the_library_exports_every_function_nvml_s_header_declares_once():
    """libnvidia-ml.so.1 as installed: each of nvml_symbols.txt's functions defined, a row or a
    refusing stub, and nothing else of NVML's name; the list itself is what list_nvml_symbols.py
    reads from a header (checked here on a header of three declarations, one in a comment)."""
    lib = _paths.lib_dir() / "libnvidia-ml.so.1"
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
    exported = sorted(line.split()[-1] for line in nm.stdout.splitlines() if line.split()[-1].startswith("nvml"))
    assert exported == sorted(gen.NVML.real(SHIM))
    assert {c.symbol for c in gen.NVML.calls(SHIM)} <= set(exported)
    header = (
        "nvmlReturn_t DECLDIR nvmlInit_v2(void);\n/* nvmlReturn_t DECLDIR nvmlExample(void); */\n"
        "const DECLDIR char* nvmlErrorString(nvmlReturn_t result);\n"
        "nvmlReturn_t DECLDIR nvmlDeviceGetCount(unsigned int *deviceCount);\n"
    )
    assert lister.symbols(header) == ["nvmlDeviceGetCount", "nvmlErrorString", "nvmlInit_v2"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            "ORR_NVML(nvmlDeviceGetEverything, int, (void), (), devices, ANSWER)",
            "nvml_api.def: nvmlDeviceGetEverything is not a function libnvidia-ml.so.1 exports (nvml_symbols.txt)",
        ),
        (
            "ORR_NVML(nvmlDeviceGetPowerUsage, int, (void* d), (d), power, ANSWER)",
            "nvml_api.def: nvmlDeviceGetPowerUsage: family 'power', expected one of system, devices, generated",
        ),
    ],
)
def test_an_nvml_row_the_build_would_get_wrong_stops_the_generator_naming_it(tmp_path, row, message):
    tables = tmp_path / "interpose"
    shutil.copytree(SHIM / "nvml", tables / "nvml")
    with (tables / "nvml" / "nvml_api.def").open("a") as f:
        f.write(row + "\n")
    out = tmp_path / "generated"
    p = subprocess.run(
        [sys.executable, str(SHIM / "gen_exports.py"), "--nvml", str(tables), str(out)], capture_output=True, text=True
    )
    assert (p.returncode, p.stderr) == (1, f"gen_exports.py: {message}\n")
    assert not out.exists()
