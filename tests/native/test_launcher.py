"""What SMPI's launcher runs with (orrery/run/launch.py), none of which changes a result:

- mimalloc, where it is installed (ALLOCATOR; scripts/setup.sh installs Debian's libmimalloc2.0):
  every allocation of the process comes from it, the program's and glibc's own (SMPI loads the
  program's copies with RTLD_DEEPBIND, under which a half-interposed allocator would free one
  heap's memory into the other), code SMPI's compilers did not build included (the wrappers link
  liborrery_alloc.so first, interpose/mpi/smpi_alloc.cpp; a program linked without it runs with
  glibc's), and the run is the one glibc's allocator gives, bit for bit. ORRERY_MALLOC=system
  keeps glibc's;
- SMPI's copies of the program, one per rank, in a folder of the run's own on /dev/shm, removed
  after it, unless the user's TMPDIR says where; the program sees the user's TMPDIR."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import HERE, REPO, assert_same_run, orrery

from orrery import _paths

pytestmark = pytest.mark.native


def run(
    program: Path, *args: str, out: Path, malloc: str | None, options: tuple[str, ...] = (), tmpdir: str | None = None
):
    env = {"ORRERY_MALLOC": malloc, "LD_PRELOAD": None, "TMPDIR": tmpdir}
    return orrery("run", "--out", str(out), *options, "--", str(program), *args, env=env)


def test_every_allocation_of_a_run_comes_from_mimalloc_unless_told_otherwise(mpi_only, tmp_path):
    ours = run(mpi_only, "allocator", out=tmp_path / "a", malloc=None, options=("--gpus-per-node", "2"))
    glibc = run(mpi_only, "allocator", out=tmp_path / "b", malloc="system", options=("--gpus-per-node", "2"))
    assert ours.returncode == glibc.returncode == 0, ours.stderr + glibc.stderr
    lines = lambda p: [line for line in p.stdout.splitlines() if line.startswith("malloc from")]  # noqa: E731
    assert lines(ours) == ["malloc from mimalloc, strdup from mimalloc"] * 2  # both ranks
    assert lines(glibc) == ["malloc from glibc, strdup from glibc"] * 2


@pytest.fixture(scope="module")
def plain_alloc(tmp_path_factory) -> dict[str, Path]:
    """programs/plain_alloc: main.c built with `orrery mpicc`, plain.c with plain cc (as nccl-tests'
    timer.cc and os/linux.cc are), linked by the wrapper ("wrapped") and, as a program built before
    the wrappers linked liborrery_alloc.so, by SMPI's smpicc against Orrery's runtime alone ("old")."""
    d = tmp_path_factory.mktemp("plain_alloc")
    src = HERE / "native" / "programs" / "plain_alloc"
    orrery("mpicc", "-c", str(src / "main.c"), "-o", str(d / "main.o"), check=True)
    subprocess.run(["cc", "-fPIC", "-c", str(src / "plain.c"), "-o", str(d / "plain.o")], check=True)
    objects = [str(d / "main.o"), str(d / "plain.o")]
    orrery("mpicc", *objects, "-o", str(d / "wrapped"), check=True)
    lib = _paths.lib_dir()
    old = ["smpicc", *objects, "-o", str(d / "old"), f"-L{lib}", "-Wl,--no-as-needed", "-lcudart"]
    subprocess.run(old, check=True, capture_output=True)
    return {"wrapped": d / "wrapped", "old": d / "old"}


@pytest.mark.parametrize(
    ("program", "malloc", "heap"),
    [("wrapped", None, "mimalloc"), ("wrapped", "system", "glibc"), ("old", None, "glibc")],
)
def test_code_smpi_s_compilers_did_not_build_shares_the_process_s_allocator(
    plain_alloc, tmp_path, program, malloc, heap
):
    """Plain code frees what the program's wrapped code and glibc allocated (strdup, getline,
    fscanf's %ms) and allocates what the wrapped code frees: one heap for all, mimalloc's where
    orrery run preloads it; a program without liborrery_alloc.so gets glibc's and runs as well."""
    proc = run(plain_alloc[program], out=tmp_path / "out", malloc=malloc, options=("--gpus-per-node", "2"))
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("wrapped ", "plain ", "crossings "))]
    ranks = [f"wrapped malloc from {heap}", f"plain malloc from {heap}, realloc from {heap}", "crossings survived"]
    assert sorted(lines) == sorted(ranks * 2)


def test_a_run_with_mimalloc_is_the_one_glibc_s_allocator_gives_bit_for_bit(jacobi, tmp_path):
    opts = ("--nodes", "2", "--gpus-per-node", "4", "--costs", str(REPO / "examples/jacobi/costs.toml"))
    args = ("-nx", "256", "-ny", "2048", "-niter", "3")
    ours = run(jacobi, *args, out=tmp_path / "ours", malloc=None, options=opts)
    glibc = run(jacobi, *args, out=tmp_path / "glibc", malloc="system", options=opts)
    assert_same_run(ours, tmp_path / "ours", glibc, tmp_path / "glibc")


def test_a_wrong_orrery_malloc_stops_the_run_in_one_line(mpi_only, tmp_path):
    out = tmp_path / "out"
    proc = run(mpi_only, "allocator", out=out, malloc="jemalloc")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "orrery: error: environment variable ORRERY_MALLOC: got 'jemalloc', expected 'system', or unset"
    ]
    assert not out.exists()


def test_smpi_s_copies_of_the_program_are_made_in_a_folder_of_the_run_s_own_on_dev_shm(mpi_only, tmp_path):
    proc = run(mpi_only, "copies", out=tmp_path / "a", malloc=None, options=("--gpus-per-node", "2"))
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("copy in ")]
    assert len(lines) == 2 and lines[0] == lines[1], proc.stdout
    folder = lines[0].removeprefix("copy in ").removesuffix(", TMPDIR unset")
    assert Path(folder).parent == Path("/dev/shm") and Path(folder).name.startswith("orrery-smpi-"), lines
    assert not Path(folder).exists()  # removed with the run


def test_a_tmpdir_of_the_user_s_is_where_smpi_copies_the_program_and_what_it_sees(mpi_only, tmp_path):
    mine = tmp_path / "scratch"
    mine.mkdir()
    proc = run(mpi_only, "copies", out=tmp_path / "a", malloc=None, options=("--gpus-per-node", "2"), tmpdir=str(mine))
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("copy in ")]
    assert lines == [f"copy in {mine}, TMPDIR {mine}"] * 2
