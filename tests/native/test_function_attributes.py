"""cudaFuncGetAttributes and the occupancy calls (programs/function_attributes/).

Each figure is checked against an independent source: the kernel resources against what ptxas
printed when it compiled the same kernels (nvcc -Xptxas -v), the occupancy answers against the CUDA
toolkit's own occupancy calculator (cuda_occupancy.h, built into occupancy_oracle.cpp) given those
resources and the machine description's GPU, over every kernel and a grid of block sizes and
dynamic shared memory sizes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import HERE, built_once, orrery, real_nvcc, session_dir

from orrery import machines

pytestmark = pytest.mark.native

SRC = HERE / "native" / "programs" / "function_attributes"
KERNELS = ("empty_kernel", "shared_kernel", "local_kernel", "register_kernel", "dynamic_kernel")
MACHINE = "dgx-h100"


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Path:
    """The program built for sm_90 with ptxas's report beside it, and the oracle."""

    def make(d: Path) -> None:
        d.mkdir()
        p = orrery(
            "nvcc",
            "-arch=sm_90",
            "-Xptxas",
            "-v",
            str(SRC / "function_attributes.cu"),
            "-o",
            str(d / "sm90"),
            check=True,
        )
        (d / "ptxas.txt").write_text(p.stderr)
        # relocatable device code, compiled and device-linked by one command: the linked cubin
        p = orrery(
            "nvcc",
            "-arch=sm_90",
            "-rdc=true",
            "-Xptxas",
            "-v",
            str(SRC / "function_attributes.cu"),
            "-o",
            str(d / "rdc"),
        )
        assert p.returncode == 0, p.stderr
        (d / "ptxas-rdc.txt").write_text(p.stderr)
        # the same compiled with -dc and linked by nvcc without -rdc (Quicksilver's build): nvcc's
        # link device-links objects of relocatable device code whatever its own options
        dc = ["nvcc", "-arch=sm_90", "-dc", "-Xptxas", "-v", str(SRC / "function_attributes.cu"), "-o", str(d / "dc.o")]
        (d / "ptxas-dc.txt").write_text(orrery(*dc, check=True).stderr)
        orrery("nvcc", "-arch=sm_90", str(d / "dc.o"), "-o", str(d / "dc"), check=True)
        orrery("nvcc", str(SRC / "function_attributes.cu"), "-o", str(d / "default_arch"), check=True)
        # what the default build carries for an sm_90 GPU: its PTX for compute_75, compiled by ptxas
        ptx = ["-ptx", "-arch=compute_75", str(SRC / "function_attributes.cu"), "-o", str(d / "default.ptx")]
        subprocess.run([real_nvcc(), *ptx], check=True)
        jit = [str(Path(real_nvcc()).resolve().parent / "ptxas"), "-arch=sm_90", "-v", str(d / "default.ptx")]
        p = subprocess.run([*jit, "-o", str(d / "default.cubin")], capture_output=True, text=True, check=True)
        (d / "ptxas-default.txt").write_text(p.stderr)
        # a cubin for sm_80 and no PTX: nothing an sm_90 GPU can run
        sm80 = ["-gencode", "arch=compute_80,code=sm_80", str(SRC / "function_attributes.cu")]
        orrery("nvcc", *sm80, "-o", str(d / "sm80_only"), check=True)
        compressed = ["-arch=sm_90", "-Xfatbin", "-compress-all", str(SRC / "function_attributes.cu")]
        orrery("nvcc", *compressed, "-o", str(d / "compressed"), check=True)
        subprocess.run([real_nvcc(), str(SRC / "occupancy_oracle.cpp"), "-o", str(d / "oracle")], check=True)
        orrery("nvcc", "-arch=sm_90", "-std=c++17", str(SRC / "cub_sort.cu"), "-o", str(d / "cub_sort"), check=True)

    return built_once(session_dir(tmp_path_factory, "built") / "function_attributes", make)


def ptxas(built: Path, build: str = "sm90") -> dict[str, dict[str, int]]:
    """Per kernel, what ptxas said: registers, barriers, static shared bytes, stack frame."""
    out: dict[str, dict[str, int]] = {}
    kernel = None
    for line in (built / ("ptxas.txt" if build == "sm90" else f"ptxas-{build}.txt")).read_text().splitlines():
        if m := re.search(r"Compiling entry function '(\w+)' for 'sm_90'", line):
            kernel = next(k for k in KERNELS if k in m.group(1))
            out[kernel] = {"smem": 0}
        elif kernel and (m := re.search(r"(\d+) bytes stack frame", line)):
            out[kernel]["stack"] = int(m.group(1))
        elif kernel and (m := re.search(r"Used (\d+) registers, used (\d+) barriers(?:, (\d+) bytes smem)?", line)):
            out[kernel].update(regs=int(m.group(1)), barriers=int(m.group(2)), smem=int(m.group(3) or 0))
    assert set(out) == set(KERNELS), out
    return out


def run(run_program, program: Path, *args: str):
    return run_program(program, *args, options=("--machine", MACHINE, "--ranks-per-node", "1"))


def lines(r, tag: str) -> list[list[str]]:
    assert r.returncode == 0, r.stderr
    return [line.split()[1:] for line in r.stdout.splitlines() if line.startswith(tag + " ")]


def attributes(run_program, built, build: str = "sm90") -> dict[str, dict[str, int]]:
    names = ("shared", "const", "local", "maxthreads", "regs", "ptx", "binary", "maxdyn", "carveout")
    rows = lines(run(run_program, built / build, "attributes"), "attr")
    return {row[0]: dict(zip(names, map(int, row[1:]))) for row in rows}


def max_threads_by_registers(regs: int) -> int:
    """By hand: registers are allocated per warp in units of 256, and a block's warps, rounded up to
    the 4 sub-partitions, must fit the 65536 registers of a block; at most 1024 threads."""
    per_warp = -(-regs * 32 // 256) * 256
    warps = 32
    while per_warp * (-(-warps // 4) * 4) > 65536:
        warps -= 1
    return warps * 32


@pytest.mark.parametrize("build", ["sm90", "rdc", "dc"])
def test_each_kernel_s_resources_are_what_ptxas_compiled(run_program, built, build):
    """For a whole program's cubin and for relocatable device code's linked one (-rdc=true on a
    compile-and-link line, or objects compiled with -dc that nvcc links)."""
    got = attributes(run_program, built, build)
    for kernel, p in ptxas(built, build).items():
        a = got[kernel]
        assert (a["regs"], a["shared"], a["local"]) == (p["regs"], p["smem"], p["stack"]), kernel
        assert (a["ptx"], a["binary"]) == (90, 90)  # -arch=sm_90: compute_90 compiled for sm_90
        assert a["maxdyn"] == 48 * 1024 - p["smem"]  # the default limit, less the static part
        assert a["carveout"] == -1
    # __launch_bounds__(256) on shared_kernel; register_kernel's registers allow 256 threads too
    assert got["shared_kernel"]["maxthreads"] == 256
    for kernel in ("empty_kernel", "local_kernel", "register_kernel", "dynamic_kernel"):
        assert got[kernel]["maxthreads"] == max_threads_by_registers(got[kernel]["regs"]), kernel
    assert got["register_kernel"]["maxthreads"] < 1024  # the case the registers decide


def oracle(built: Path, queries: list[str]) -> list[str]:
    g = machines.load(MACHINE).gpu
    major, minor = g.compute_capability.split(".")
    args = [major, minor, g.sm_count, g.max_threads_per_sm, int(g.shared_per_block), int(g.shared_per_sm)]
    args += [int(g.shared_per_block_optin), int(g.shared_per_sm - g.shared_per_block_optin)]
    p = subprocess.run(
        [str(built / "oracle"), *map(str, args)], input="\n".join(queries) + "\n", capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    return p.stdout.split("\n")[: len(queries)]


def _described(kernel: str, a: dict[str, int], p: dict[str, dict[str, int]]) -> str:
    return f"{a['regs']} {a['shared']} {a['maxdyn']} {p[kernel]['barriers']} {a['maxthreads']}"


PAIRS = [(b, d) for b in (1, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024) for d in (0, 1000, 8192, 40000, 49152)]


def test_active_blocks_are_the_occupancy_calculator_s(run_program, built):
    a, p = attributes(run_program, built), ptxas(built)
    rows = lines(run(run_program, built / "sm90", "occupancy", *(f"{b}:{d}" for b, d in PAIRS)), "occ")
    assert len(rows) == len(KERNELS) * len(PAIRS)
    want = oracle(built, [f"occ {_described(k, a[k], p)} {b} {d}" for k, b, d, *_ in rows])
    got = [row[3] for row in rows]
    assert all(row[4] == "0" for row in rows)
    assert got == want
    # The limits each kernel exercises: registers, launch bounds, shared memory, barriers.
    blocks = {(k, int(b), int(d)): int(n) for (k, b, d, n, _) in rows}
    assert blocks["register_kernel", 32, 0] == 8  # 8192 registers a warp
    assert blocks["shared_kernel", 512, 0] == 4  # as the calculator: the launch bounds are not its limit
    assert blocks["empty_kernel", 32, 49152] == 4  # (48 KiB + 1 KiB reserved) x 4 in 228 KiB
    assert blocks["dynamic_kernel", 32, 0] == 16  # 4 barriers: 2 x 32 / 4


def test_potential_block_size_is_the_calculator_s(run_program, built):
    a, p = attributes(run_program, built), ptxas(built)
    rows = lines(run(run_program, built / "sm90", "potential"), "potential")
    want = oracle(built, [f"potential {_described(k, a[k], p)}" for k, *_ in rows])
    assert [f"{grid} {block}" for _, grid, block, e in rows] == want
    assert all(e == "0" for *_, e in rows)


def test_available_dynamic_shared_memory_is_the_calculator_s(run_program, built):
    a, p = attributes(run_program, built), ptxas(built)
    pairs = ["1:128", "2:256", "3:128", "4:64", "8:32", "40:32"]
    rows = lines(run(run_program, built / "sm90", "available", *pairs), "available")
    want = oracle(built, [f"available {_described(k, a[k], p)} {n} {b}" for k, n, b, *_ in rows])
    # where the calculator refuses (the blocks do not fit even without dynamic memory), the call
    # returns cudaErrorInvalidValue (1)
    assert [bytes_ if e == "0" else "-1" for _, _, _, bytes_, e in rows] == want
    assert "-1" in want and any(w != "-1" for w in want)


def test_set_attribute_raises_the_dynamic_limit_up_to_the_opt_in(run_program, built):
    r = run(run_program, built / "sm90", "setattr")
    assert r.returncode == 0, r.stderr
    v = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    assert v["set_100k"] == "0 cudaSuccess"
    assert v["maxdyn"] == str(100 * 1024)
    a, p = attributes(run_program, built), ptxas(built)
    described = f"{a['dynamic_kernel']['regs']} 0 {100 * 1024} {p['dynamic_kernel']['barriers']} 1024"
    assert v["occ_100k"] == oracle(built, [f"occ {described} 128 {100 * 1024}"])[0] == "2"
    assert v["set_too_much"] == v["set_carveout_bad"] == "1 cudaErrorInvalidValue"
    assert v["not_a_kernel"] == "98 cudaErrorInvalidDeviceFunction"
    assert (v["name"], v["mangled"]) == ("0 cudaSuccess", "_Z13shared_kernelPfi")


def test_occupancy_with_another_carveout_stops_the_run_naming_it(run_program, built):
    r = run(run_program, built / "sm90", "carveout")
    assert r.returncode == 3
    assert "not reached" not in r.stdout
    assert (
        "orrery: error: cudaOccupancyMaxActiveBlocksPerMultiprocessor: kernel 'shared_kernel(float*, int)' has a "
        "preferred shared memory carveout of 50 %, which Orrery's occupancy does not model"
    ) in r.stderr


def test_a_build_for_older_gpus_answers_from_its_ptx_compiled_for_the_gpu(run_program, built):
    """nvcc 13's default build carries sm_75 code and its PTX: an sm_90 GPU compiles the PTX as the
    program loads, and Orrery's ptxas does. Each kernel's resources are what ptxas said compiling
    that PTX for sm_90 by hand; its PTX version 7.5, its binary 9.0."""
    a, p = attributes(run_program, built, "default_arch"), ptxas(built, "default")
    for k in KERNELS:
        assert (a[k]["regs"], a[k]["shared"], a[k]["local"]) == (p[k]["regs"], p[k]["smem"], p[k]["stack"]), k
        assert (a[k]["ptx"], a[k]["binary"]) == (75, 90), k


def test_without_ptxas_a_build_for_older_gpus_stops_the_query_saying_why(run_program, built, monkeypatch):
    monkeypatch.setenv("ORRERY_PTXAS", "")  # none: its PTX is not compiled
    r = run(run_program, built / "default_arch", "attributes")
    assert r.returncode == 3
    assert (
        "orrery: error: cudaFuncGetAttributes: kernel 'empty_kernel()': the program has no code for the simulated "
        "GPU's sm_90 (only sm_75), which a real GPU compiles from PTX as the program loads, and Orrery found no "
        "ptxas to compile it (orrery run looks beside nvcc): build with -arch=sm_90"
    ) in r.stderr


def test_a_build_without_code_or_ptx_for_the_gpu_fails_as_on_a_gpu(run_program, built):
    """sm_80 code only: an sm_90 GPU has no image of the kernels to run, so their queries and
    launches fail with cudaErrorNoKernelImageForDevice (209), and nothing runs."""
    r = run(run_program, built / "sm80_only", "attributes")
    assert r.returncode == 0, r.stderr
    answers = [line for line in r.stdout.splitlines() if line.split()[0] in KERNELS]
    assert answers == [f"{k} 209 cudaErrorNoKernelImageForDevice" for k in KERNELS]
    r = run(run_program, built / "sm80_only", "launch")
    assert r.returncode == 0, r.stderr
    launches = [line.split(maxsplit=2)[2] for line in r.stdout.splitlines() if line.startswith("launch ")]
    assert len(launches) == 5 and set(launches) == {"209 cudaErrorNoKernelImageForDevice"}
    assert r.results["ranks"][0]["kernels"] == {}


def test_cub_reduces_and_sorts_unchanged(run_program, built):
    """CUB tunes its launches with the calls above (it stopped at cudaFuncGetAttributes before):
    a reduction is its two kernels; a radix sort of 32-bit keys a histogram, an exclusive sum of
    it, and one onesweep pass per 8-bit digit, 4."""
    r = run(run_program, built / "cub_sort")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:2] == ["reduce cudaSuccess", "sort cudaSuccess"]
    launched = {}
    for name, k in r.results["ranks"][0]["kernels"].items():
        short = re.search(r"::(Device\w+Kernel)<", name).group(1)
        launched[short] = launched.get(short, 0) + k["count"]
    assert launched == {
        "DeviceReduceKernel": 1,
        "DeviceReduceSingleTileKernel": 1,
        "DeviceRadixSortHistogramKernel": 1,
        "DeviceRadixSortExclusiveSumKernel": 1,
        "DeviceRadixSortOnesweepKernel": 32 // 8,
    }


def test_a_launch_beyond_the_kernel_s_limits_fails_as_on_a_gpu(run_program, built):
    """Dynamic shared memory beyond the kernel's limit fails with cudaErrorInvalidValue, threads
    beyond its launch bounds or what its registers allow with cudaErrorLaunchOutOfResources; a
    failed launch runs nothing."""
    r = run(run_program, built / "sm90", "launch")
    assert r.returncode == 0, r.stderr
    v = {line.split()[1]: " ".join(line.split()[2:]) for line in r.stdout.splitlines() if line.startswith("launch ")}
    assert v == {
        "dynamic_48k_plus_1": "1 cudaErrorInvalidValue",
        "dynamic_60000_after_set": "0 cudaSuccess",
        "shared_512": "701 cudaErrorLaunchOutOfResources",
        "register_512": "701 cudaErrorLaunchOutOfResources",
        "register_256": "0 cudaSuccess",
    }
    counts = {name.split("(")[0]: k["count"] for name, k in r.results["ranks"][0]["kernels"].items()}
    assert counts == {"dynamic_kernel": 1, "register_kernel": 1}
    # the default build (sm_75 and its PTX): checked against its PTX compiled for sm_90, the same
    r = run(run_program, built / "default_arch", "launch")
    assert r.returncode == 0, r.stderr
    assert {
        line.split()[1]: " ".join(line.split()[2:]) for line in r.stdout.splitlines() if line.startswith("launch ")
    } == v


def test_a_cooperative_launch_fails_beyond_the_blocks_the_gpu_holds_at_once(run_program, built):
    """All of a cooperative launch's blocks must be resident: the calculator's blocks per
    multiprocessor x the machine's multiprocessors fit, one more fails with
    cudaErrorCooperativeLaunchTooLarge (720) and runs nothing; cudaLaunchKernelEx's cooperative
    attribute alike."""
    a, p = attributes(run_program, built), ptxas(built)
    per_sm = int(oracle(built, [f"occ {_described('shared_kernel', a['shared_kernel'], p)} 256 0"])[0])
    fits = per_sm * machines.load(MACHINE).gpu.sm_count
    r = run(run_program, built / "sm90", "cooperative", str(fits), str(fits + 1))
    assert lines(r, "cooperative") == [[str(fits), "0"], [str(fits + 1), "720"]]
    # cudaLaunchKernelEx with cudaLaunchAttributeCooperative: the same limit
    assert lines(r, "cooperative_ex") == [[str(fits), "0"], [str(fits + 1), "720"]]
    counts = {name.split("(")[0]: k["count"] for name, k in r.results["ranks"][0]["kernels"].items()}
    assert counts == {"shared_kernel": 2}


def test_a_compressed_cubin_answers_as_the_uncompressed_one(run_program, built):
    """nvcc -Xfatbin -compress-all stores the cubin as a zstd frame, read as it is decompressed."""
    assert attributes(run_program, built, "compressed") == attributes(run_program, built)
