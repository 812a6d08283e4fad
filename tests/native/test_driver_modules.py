"""Modules through the CUDA driver (interpose/driver/module.cpp, cudart/module.cpp): the kernels of
programs/modules/kernels.cu, compiled by the real nvcc into a cubin, fat binaries (cubins for sm_80
and sm_90 with PTX; PTX only, which nvcc 13 compresses; cubins compressed by -Xfatbin
-compress-all) and PTX text, loaded by programs/driver_modules.cu by path, from memory, with JIT
options and as a library, on h100-ib200 (sm_90).

Each kernel's resources are checked against what ptxas printed when nvcc compiled the cubin (PTX is
compiled by the same ptxas as the module loads, so its kernels have the same), and each launch's
time is derived by hand: L, the launch overhead, then the kernel's cost (busy 100 us, brief 20 us,
scaled 1 us + 1 ns per thread; derivations.cost_options), between runtime events around it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import HERE, built_once, orrery, real_nvcc, session_dir
from derivations import BRIEF, BUSY, US, cost_options

pytestmark = pytest.mark.native

KERNELS = HERE / "native" / "programs" / "modules" / "kernels.cu"
ONE_GPU = ("--gpus-per-node", "1")
SCALED = "_Z6scaledIdEvPT_S0_"  # scaled<double>'s mangled name
CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_CONTEXT = 1, 200, 201
CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_INVALID_PTX, CUDA_ERROR_FILE_NOT_FOUND = 209, 218, 301
CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_READY = 400, 500, 600
CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
CU_MEMORYTYPE_DEVICE = 2


@pytest.fixture(scope="session")
def images(tmp_path_factory) -> Path:
    """The kernels as the real nvcc builds them, with ptxas's report of the sm_90 cubin."""

    def make(d: Path) -> None:
        d.mkdir()

        def nvcc(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([real_nvcc(), *args, str(KERNELS)], capture_output=True, text=True, check=True)

        (d / "ptxas.txt").write_text(nvcc("-cubin", "-arch=sm_90", "-Xptxas", "-v", "-o", str(d / "sm90.cubin")).stderr)
        gencode = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
        nvcc("-fatbin", *gencode, "-o", str(d / "all.fatbin"))
        nvcc("-fatbin", "-arch=compute_90", "-o", str(d / "ptx.fatbin"))
        nvcc("-fatbin", "-arch=sm_90", "-Xfatbin", "-compress-all", "-o", str(d / "compressed.fatbin"))
        nvcc("-ptx", "-arch=sm_90", "-o", str(d / "kernels.ptx"))
        nvcc("-cubin", "-arch=sm_80", "-o", str(d / "sm80.cubin"))
        nvcc("-ptx", "-arch=sm_100", "-o", str(d / "sm100.ptx"))
        ptx = (d / "kernels.ptx").read_text()
        assert ptx.count("ret;") >= 3
        (d / "bad.ptx").write_text(ptx.replace("ret;", "bogus;", 1))  # an instruction ptxas does not know

    return built_once(session_dir(tmp_path_factory, "built") / "driver_modules", make)


def ptxas(images: Path) -> dict[str, tuple[int, int]]:
    """Per kernel, ptxas's registers and static shared memory for sm_90."""
    out: dict[str, tuple[int, int]] = {}
    kernel = None
    for line in (images / "ptxas.txt").read_text().splitlines():
        if m := re.search(r"Compiling entry function '(\w+)' for 'sm_90'", line):
            kernel = m.group(1)
        elif kernel and (m := re.search(r"Used (\d+) registers, used \d+ barriers(?:, (\d+) bytes smem)?", line)):
            out[kernel] = (int(m.group(1)), int(m.group(2) or 0))
    assert set(out) == {"busy", "brief", SCALED}, out
    return out


def fields(stdout: str, tag: str) -> list[str]:
    """The words after `tag` on its line."""
    return next(line.split()[len(tag.split()) :] for line in stdout.splitlines() if line.startswith(tag + " "))


@pytest.mark.parametrize(
    "image, how",
    [
        ("sm90.cubin", "file"),
        ("all.fatbin", "data"),  # its sm_90 cubin
        ("compressed.fatbin", "library"),  # a zstd-compressed cubin, through cuLibrary*
        ("ptx.fatbin", "data"),  # PTX only, compressed: compiled by ptxas as it loads
        ("kernels.ptx", "ex"),  # PTX text, with the JIT options of the CUDA samples
    ],
)
def test_a_module_s_kernels_run_and_answer_as_their_compiled_code(
    run_program, programs, images, h100, tmp_path, image, how
):
    r = run_program(
        programs["driver_modules"], "run", str(images / image), how, options=(*ONE_GPU, *cost_options(tmp_path))
    )
    assert r.returncode == 0, r.stderr
    v = r.values()
    functions = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("function ")]
    assert sorted(functions) == sorted(["busy", "brief", SCALED]) and v["functions"] == 3
    assert v["owner_is_module"] == 1 and v["missing"] == CUDA_ERROR_NOT_FOUND and v["first_is_first"] == 1
    compiled = ptxas(images)
    # registers, static shared memory, the most threads a block may have (brief's launch bounds:
    # 256), local memory, PTX and binary versions, the dynamic shared memory left of 48 KiB
    for kernel, bound in (("busy", 1024), ("brief", 256)):
        regs, shared = compiled[kernel]
        assert [int(x) for x in fields(r.stdout, f"attr {kernel}")] == [
            regs,
            shared,
            bound,
            0,
            90,
            90,
            48 * 1024 - shared,
        ]
        # 256 threads: 8 blocks fill a multiprocessor's 2048 threads before its registers or
        # shared memory run out (8 blocks x 256 threads x at most 16 registers, 8 x 3 KiB)
        assert regs <= 16 and v[f"occupancy_{kernel}_256"] == 8
        # the largest block the kernel allows fills a multiprocessor's 2048 threads (with 1 KiB
        # of dynamic shared memory): busy 2 blocks of 1024, brief 8 of 256; a grid of that many
        # blocks per multiprocessor
        blocks = 2048 // bound
        assert fields(r.stdout, f"potential {kernel}") == [str(blocks * h100.gpu.sm_count), str(bound)]
    if how == "library":
        assert v["kernel_brief_regs"] == compiled["brief"][0]
    # brief's variables (kernels.cu): 8 floats and an int of device memory, found again at one
    # address, given back with their module
    assert fields(r.stdout, "coefficients") == ["32", str(CU_MEMORYTYPE_DEVICE)]
    assert fields(r.stdout, "counter") == ["4", "1"] and v["global_missing"] == CUDA_ERROR_NOT_FOUND
    assert v["globals_freed"] == 32 + 4
    if how == "ex":  # no log to write: both sizes are 0 bytes
        assert fields(r.stdout, "ex_logs") == ["0", "0"]
    L = h100.overheads.launch
    assert v["busy_ms"] * 1e-3 == pytest.approx(L + BUSY, rel=1e-6)  # (cudaEventElapsedTime's float)
    assert v["brief_ms"] * 1e-3 == pytest.approx(L + BRIEF, rel=1e-6)
    assert v["scaled_ms"] * 1e-3 == pytest.approx(L + 1 * US + 10 * 100 * 1e-9, rel=1e-6)
    assert v["brief_512"] == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES  # past its launch bounds
    assert v["both_params"] == CUDA_ERROR_INVALID_VALUE  # kernelParams and extra at once
    assert v["stream_query"] == CUDA_ERROR_NOT_READY and v["runtime_last_error"] == 0
    assert v["unload_again"] == CUDA_ERROR_INVALID_HANDLE and v["launch_unloaded"] == CUDA_ERROR_INVALID_HANDLE
    # the kernels by their demangled names, as the cost file and the report name them
    counts = {name: k["count"] for name, k in r.results["ranks"][0]["kernels"].items()}
    assert counts == {"busy": 2, "brief": 1, "void scaled<double>(double*, double)": 1}


def test_each_rank_loads_and_launches_its_own_module(run_program, programs, images, h100, tmp_path):
    """Two ranks on one node, each on its GPU, compiling the same PTX (once for the process)."""
    options = ("--gpus-per-node", "2", "--ranks-per-node", "2", *cost_options(tmp_path))
    r = run_program(programs["driver_modules"], "run", str(images / "kernels.ptx"), "ex", options=options)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("function busy") == 2
    for rank in r.results["ranks"]:
        assert rank["kernels"]["busy"]["count"] == 2


def test_bad_modules_get_the_driver_s_errors(run_program, programs, images):
    r = run_program(programs["driver_modules"], "errors", str(images), options=ONE_GPU)
    assert r.returncode == 0, r.stderr
    v = r.values()
    assert v["missing_file"] == CUDA_ERROR_FILE_NOT_FOUND
    assert v["not_an_image"] == CUDA_ERROR_INVALID_IMAGE
    assert v["sm80_cubin"] == CUDA_ERROR_NO_BINARY_FOR_GPU  # sm_80 code does not run on sm_90
    assert fields(r.stdout, "no_binary_name") == ["CUDA_ERROR_NO_BINARY_FOR_GPU"]
    assert v["sm100_ptx"] == CUDA_ERROR_NO_BINARY_FOR_GPU  # PTX for a later GPU does not compile for it
    # ptxas's message, naming its input as the driver does, in the program's error log
    assert v["bad_ptx"] == CUDA_ERROR_INVALID_PTX
    log = fields(r.stdout, "bad_ptx_log")
    assert " ".join(log).startswith("ptxas application ptx input, line ")
    assert "Not a name of any known instruction: 'bogus'" in " ".join(log)
    assert v["bad_ptx_log_bytes"] >= len(" ".join(log))
    assert fields(r.stdout, "export_table") == [str(CUDA_ERROR_INVALID_VALUE), "1"]  # no private table
    assert v["no_context"] == CUDA_ERROR_INVALID_CONTEXT


def test_without_ptxas_ptx_kernels_run_but_their_resources_are_not_known(run_program, programs, images, monkeypatch):
    """ORRERY_PTXAS empty: no JIT. The kernels load and launch unchecked, as where a program has no
    code for the GPU; a question about their resources stops the run naming the call."""
    monkeypatch.setenv("ORRERY_PTXAS", "")
    r = run_program(programs["driver_modules"], "run", str(images / "kernels.ptx"), "data", options=ONE_GPU)
    assert r.returncode == 3
    assert "functions 3" in r.stdout
    assert (
        "orrery: error: cuFuncGetAttribute: kernel 'busy': its resources are not known: its code is PTX, which the "
        "driver compiles for the GPU as the module loads, and Orrery found no ptxas to compile it"
    ) in r.stderr


def test_a_jit_option_ptxas_is_not_given_stops_the_run_naming_it(run_program, programs, images):
    r = run_program(programs["driver_modules"], "threads", str(images / "kernels.ptx"), options=ONE_GPU)
    assert r.returncode == 3
    assert "loaded" not in r.stdout
    assert (
        "orrery: error: cuModuleLoadDataEx: JIT option 1 (CUjit_option), which Orrery does not give its PTX "
        "compiler (ptxas)"
    ) in r.stderr


def test_a_created_context_is_its_device_s_and_stacks_as_cuda_s(run_program, programs, images, h100, tmp_path):
    """cuCtxCreate (the CUDA samples' *Drv programs): a context of its own, current over the primary
    one, holding the memory, streams and modules made in it; cuCtxPushCurrent/PopCurrent stack;
    destroying it waits for its work and makes the context below current. From the busy kernel's
    launch to the destroy's return: its launch overhead L, the kernel (BUSY), then the wait's
    synchronisation overhead S; nothing between them takes simulated time."""
    r = run_program(
        programs["driver_modules"], "contexts", str(images / "sm90.cubin"), options=(*ONE_GPU, *cost_options(tmp_path))
    )
    assert r.returncode == 0, r.stderr
    v = r.values()
    for key in ("created_differs", "created_current", "memory_context_is_created", "stream_context_is_created"):
        assert v[key] == 1, key
    assert v["created_device"] == 0
    assert fields(r.stdout, "heap") == [str(16 << 20), "1"]  # the runtime's limit, set through the driver
    assert fields(r.stdout, "cache") == ["1", "1"] and v["priorities_are_runtime_s"] == 1  # CU_FUNC_CACHE_PREFER_SHARED
    assert (v["pushed_primary_current"], v["popped_primary"], v["created_current_again"]) == (1, 1, 1)
    assert v["primary_current_after_destroy"] == 1 and v["none_after_pop"] == 1
    assert v["destroy_again"] == v["destroy_primary"] == v["pop_empty"] == CUDA_ERROR_INVALID_CONTEXT
    assert v["destroyed_after"] == pytest.approx(h100.overheads.launch + BUSY + h100.overheads.sync, rel=1e-9)


def test_a_second_created_context_on_one_gpu_stops_the_run_naming_why(run_program, programs):
    r = run_program(programs["driver_modules"], "second_context", options=ONE_GPU)
    assert r.returncode == 3
    assert "first 0" in r.stdout and "second" not in r.stdout
    assert (
        "orrery: error: cuCtxCreate_v4: a second context on one GPU: contexts sharing a GPU take turns on it "
        "(time-slicing), which Orrery does not simulate"
    ) in r.stderr


def test_an_orrery_ptxas_that_is_no_program_stops_the_run_in_one_line(mpi_only, tmp_path):
    out = tmp_path / "out"
    missing = str(tmp_path / "no-ptxas")
    proc = orrery("run", "--out", str(out), "--", str(mpi_only), "eager", "1", env={"ORRERY_PTXAS": missing})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"orrery: error: environment variable ORRERY_PTXAS: got '{missing}', expected the CUDA toolkit's ptxas "
        "(an executable), or empty for none"
    ]
    assert not out.exists()
