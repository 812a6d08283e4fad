"""Each rank's launcher environment (interpose/core/environment.cpp): the variables of Open MPI,
Hydra/PALS, MVAPICH, Slurm and torchrun answered per rank by getenv, before and after MPI_Init,
from the program, a library it links or opens with dlopen, a static constructor and a host
function; a device chosen from them is the rank's own (results.json's links); environ and child
processes hold only the values every rank shares. Programs: tests/native/programs/local_rank.cu and local_rank_lib/."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import ORRERY, needs_nvcc, orrery

pytestmark = [pytest.mark.native, needs_nvcc]

NODES, PER_NODE = 2, 3
RANKS = NODES * PER_NODE
LAYOUT = ("--nodes", str(NODES), "--gpus-per-node", str(PER_NODE), "--ranks-per-node", str(PER_NODE))
MIB = 1 << 20
HERE = Path(__file__).parent


def launcher_values(rank: int) -> dict[str, str]:
    """What mpirun, mpiexec (Hydra, PALS), mpirun_rsh, srun and torchrun set for `rank` of a job
    placed in blocks of PER_NODE ranks on NODES nodes."""
    node, local = divmod(rank, PER_NODE)
    r, size, lr, ls, n, nn = rank, RANKS, local, PER_NODE, node, NODES
    tasks = f"{PER_NODE}(x{NODES})"
    return {
        "OMPI_COMM_WORLD_RANK": r, "OMPI_COMM_WORLD_SIZE": size, "OMPI_COMM_WORLD_LOCAL_RANK": lr,
        "OMPI_COMM_WORLD_LOCAL_SIZE": ls, "OMPI_COMM_WORLD_NODE_RANK": lr, "OMPI_UNIVERSE_SIZE": size,
        "PMI_RANK": r, "PMI_SIZE": size, "MPI_LOCALRANKID": lr, "MPI_LOCALNRANKS": ls,
        "PMI_LOCAL_RANK": lr, "PMI_LOCAL_SIZE": ls, "PALS_RANKID": r, "PALS_LOCAL_RANKID": lr, "PALS_NODEID": n,
        "MV2_COMM_WORLD_RANK": r, "MV2_COMM_WORLD_SIZE": size, "MV2_COMM_WORLD_LOCAL_RANK": lr,
        "MV2_COMM_WORLD_LOCAL_SIZE": ls,
        "SLURM_PROCID": r, "SLURM_NTASKS": size, "SLURM_NPROCS": size, "SLURM_STEP_NUM_TASKS": size,
        "SLURM_LOCALID": lr, "SLURM_NODEID": n, "SLURM_NNODES": nn, "SLURM_JOB_NUM_NODES": nn,
        "SLURM_STEP_NUM_NODES": nn, "SLURM_TASKS_PER_NODE": tasks, "SLURM_STEP_TASKS_PER_NODE": tasks,
        "RANK": r, "WORLD_SIZE": size, "LOCAL_RANK": lr, "LOCAL_WORLD_SIZE": ls,
        "GROUP_RANK": n, "GROUP_WORLD_SIZE": nn, "ROLE_RANK": r, "ROLE_WORLD_SIZE": size,
    }  # fmt: skip


NAMES = sorted(launcher_values(0))
SHARED = sorted(n for n in NAMES if len({str(launcher_values(r)[n]) for r in range(RANKS)}) == 1)
# what the user's own environment says (a job Orrery itself runs in, or a stale export)
USER_ENV = {"OMPI_COMM_WORLD_LOCAL_RANK": "7", "SLURM_LOCALID": "5", "SLURM_NTASKS": "99", "RANK": "3"}


def run(program: Path, *args: str, out: Path, env: dict[str, str] | None = None) -> tuple[dict[tuple, str], Path]:
    """The program's `WHAT RANK REST...` lines, by (WHAT, RANK[, NAME]), and its --out folder."""
    cmd = [ORRERY, "run", *LAYOUT, "--out", str(out), "--", str(program), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    lines: dict[tuple, str] = {}
    for line in proc.stdout.splitlines():
        what, _, rest = line.partition(" ")
        if what in ("ctor", "before", "after", "hostfn", "lib", "plugin", "device"):
            rank, _, rest = rest.partition(" ")
            if what == "device":
                lines[(what, int(rank))] = rest
            else:
                name, _, value = rest.partition(" ")
                lines[(what, int(rank), name)] = value
        elif what in ("environ", "child"):
            rank, name_value = rest.split(" ", 1) if what == "environ" else ("0", rest)
            lines[(what, int(rank), name_value.split("=", 1)[0])] = name_value.split("=", 1)[1]
    return lines, out


def test_every_rank_reads_its_own_placement_before_and_after_mpi_init(programs, tmp_path):
    names = [*NAMES, "ORRERY_TEST_UNRELATED", "ORRERY_TEST_UNSET"]
    env = {**USER_ENV, "ORRERY_TEST_UNRELATED": "from the shell"}
    lines, _ = run(programs["local_rank"], "print", *names, out=tmp_path / "out", env=env)
    for rank in range(RANKS):
        expected = {n: str(v) for n, v in launcher_values(rank).items()}
        expected |= {"ORRERY_TEST_UNRELATED": "from the shell", "ORRERY_TEST_UNSET": "(null)"}
        for when in ("before", "after", "hostfn"):  # std::getenv; secure_getenv; from its stream
            assert {n: lines[(when, rank, n)] for n in names} == expected, (when, rank)
        # nvcc's static constructors run when SMPI loads the rank's copy of the program
        for n in ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "WORLD_SIZE"):
            assert lines[("ctor", rank, n)] == expected[n]


def test_device_chosen_from_the_local_rank_is_each_ranks_own_gpu(programs, tmp_path):
    lines, out = run(programs["local_rank"], "select", out=tmp_path / "out")
    links = {link["name"]: link["bytes"] for link in json.loads((out / "results.json").read_text())["links"]}
    for rank in range(RANKS):
        node, local = divmod(rank, PER_NODE)
        # cudaGetDevice, then the device's memory in use: this rank's (rank + 1) MiB alone
        assert lines[("device", rank)] == f"{local} {(rank + 1) * MIB}"
        # its host-to-device copy crossed its own GPU's PCIe link, and only that rank's did
        assert links[f"n{node}-gpu{local}-pcie_UP"] == (rank + 1) * MIB


def test_a_ranks_setenv_unsetenv_and_putenv_change_only_its_own_view(programs, tmp_path):
    lines, _ = run(programs["local_rank"], "setenv", out=tmp_path / "out")
    changed = {(1, "LOCAL_RANK"): "42", (2, "SLURM_LOCALID"): "(null)", (2, "PMI_RANK"): "7"}
    for rank in range(RANKS):
        for name in ("LOCAL_RANK", "SLURM_LOCALID", "PMI_RANK", "RANK"):  # rank 0's RANK=9 did not overwrite
            assert lines[("after", rank, name)] == changed.get((rank, name), str(launcher_values(rank)[name]))


def test_environ_and_child_processes_hold_only_the_values_every_rank_shares(programs, tmp_path):
    names = [*NAMES, "ORRERY_TEST_UNRELATED"]
    env = {**USER_ENV, "ORRERY_TEST_UNRELATED": "kept"}
    lines, _ = run(programs["local_rank"], "environ", *names, out=tmp_path / "out", env=env)
    shared = {n: str(launcher_values(0)[n]) for n in SHARED} | {"ORRERY_TEST_UNRELATED": "kept"}
    assert "SLURM_NTASKS" in shared and "SLURM_LOCALID" not in shared
    for rank in range(RANKS):
        assert {n: v for (what, r, n), v in lines.items() if what == "environ" and r == rank} == shared
    # the user's SLURM_LOCALID=5 and friends are gone, the sizes are the simulated job's
    assert {n: v for (what, _, n), v in lines.items() if what == "child"} == shared


def test_a_c_program_its_constructor_and_libraries_it_links_or_opens_read_the_ranks_values(tmp_path):
    src = HERE / "programs" / "local_rank_lib"
    for lib in ("libenvlib.so", "libenvplugin.so"):  # the plugin: a second copy, opened with dlopen
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / lib), str(src / "envlib.c")], check=True)
    exe = tmp_path / "envprog"
    link = ["-L", str(tmp_path), "-lenvlib", f"-Wl,-rpath,{tmp_path}", "-ldl"]
    orrery("mpicc", str(src / "main.c"), *link, "-o", str(exe), check=True)
    plugin = str(tmp_path / "libenvplugin.so")
    lines, _ = run(exe, plugin, out=tmp_path / "out", env={"MV2_COMM_WORLD_LOCAL_RANK": "7"})
    name = "MV2_COMM_WORLD_LOCAL_RANK"
    for rank in range(RANKS):
        for when in ("ctor", "lib", "plugin", "after"):
            assert lines[(when, rank, name)] == str(rank % PER_NODE), (when, rank)
