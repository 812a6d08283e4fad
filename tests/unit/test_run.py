"""How `orrery run` launches SMPI (orrery/run.py)."""

import os
from pathlib import Path

import pytest

from orrery.errors import SimulationError
from orrery.run import launch as running

pytestmark = pytest.mark.unit


def test_the_pinning_library_is_preloaded_into_smpi_s_launcher_only(monkeypatch, tmp_path):
    """orrery run hands smpirun a wrapper that preloads liborrery_smpi.so, then Orrery's runtime
    (before libsimgrid, so that SMPI's Fortran bindings call its MPI wrappers) and NCCL's stand-in
    (which must win over the program's own NCCL) into SMPI's launcher, ahead of any LD_PRELOAD of
    the user's; an install path with a space, which smpirun would split, stops the run with its
    reason before anything is written."""
    ours = (
        "/opt/orrery/lib/liborrery_smpi.so:/opt/orrery/lib/libcudart.so.13:/opt/orrery/lib/libnccl.so.2:"
        "/opt/orrery/lib/libnvidia-ml.so.1"
    )
    glibc = {"ORRERY_MALLOC": "system"}
    monkeypatch.setenv("LD_PRELOAD", "/opt/a.so /opt/b.so")
    monkeypatch.setenv("ORRERY_MALLOC", "system")
    assert running._preload(Path("/opt/orrery/lib")) == f"env LD_PRELOAD={ours}:/opt/a.so:/opt/b.so"
    assert running._preload(Path("/opt/orrery/lib"), glibc) == f"env LD_PRELOAD={ours}"
    with pytest.raises(SimulationError, match=r"installed under a path with a space \(/opt/my orrery/lib\)"):
        running._preload(Path("/opt/my orrery/lib"), glibc)


def test_smpi_s_launcher_runs_with_mimalloc_where_installed_after_the_user_s_preloads(monkeypatch):
    """The allocator comes last, so that one the user preloads wins; where the loader does not
    find mimalloc, or ORRERY_MALLOC=system, the launcher keeps glibc's."""
    ours = (
        "/opt/orrery/lib/liborrery_smpi.so:/opt/orrery/lib/libcudart.so.13:/opt/orrery/lib/libnccl.so.2:"
        "/opt/orrery/lib/libnvidia-ml.so.1"
    )
    found = {"mimalloc": "libmimalloc.so.2"}
    monkeypatch.setattr(running.ctypes.util, "find_library", lambda name: found.get(name))
    lib = Path("/opt/orrery/lib")
    assert running._preload(lib, {}) == f"env LD_PRELOAD={ours}:libmimalloc.so.2"
    assert running._preload(lib, {"LD_PRELOAD": "/opt/je.so"}) == f"env LD_PRELOAD={ours}:/opt/je.so:libmimalloc.so.2"
    assert running._preload(lib, {"ORRERY_MALLOC": "system"}) == f"env LD_PRELOAD={ours}"
    found.clear()
    assert running._preload(lib, {}) == f"env LD_PRELOAD={ours}"


def test_mimalloc_goes_only_into_a_program_that_links_orrery_s_allocator_entry_points(monkeypatch):
    """A program linked before the wrappers linked liborrery_alloc.so runs with glibc's allocator:
    its plain code's free would be glibc's while the rest allocated from mimalloc."""
    monkeypatch.setattr(running.ctypes.util, "find_library", lambda name: "libmimalloc.so.2")
    linked = running.links_alloc(b"\x7fELF...liborrery_alloc.so\0libcudart.so.13\0")
    old = running.links_alloc(b"\x7fELF...libcudart.so.13\0")
    assert (linked, old) == (True, False)
    assert running.allocator({}, linked) == "libmimalloc.so.2"
    assert running.allocator({}, old) is None
    assert running.allocator({"ORRERY_MALLOC": "system"}, linked) is None


def test_a_run_that_may_need_more_memory_maps_than_the_kernel_allows_says_what_to_raise(tmp_path):
    """At 10 maps a rank, 6553 ranks (65 530) fit Linux's default vm.max_map_count of 65 530 and
    6554 (65 540) do not; the advice is twice the need, rounded up to 65 536: 196 608."""
    limit = tmp_path / "max_map_count"
    limit.write_text("65530\n")
    assert running.map_count_warning(6553, limit) is None
    assert running.map_count_warning(6554, limit) == (
        "orrery: warning: 6554 ranks may need about 65540 memory maps (10 a rank for the Jacobi example: "
        "SimGrid's stacks, SMPI's copy of the program, folded device memory), more than vm.max_map_count "
        "(65530); should the run stop for want of them, raise it: sysctl -w vm.max_map_count=196608"
    )
    assert running.map_count_warning(16384, tmp_path / "absent") is None  # no such file: nothing to say


def test_without_the_platform_plugin_a_run_gives_simgrid_the_flat_platform(monkeypatch, tmp_path):
    """Where liborrery_platform.so is not built (SimGrid 4.x), the run folder gets platform.xml and
    smpirun its path, with no ORRERY_PLATFORM; with it, platform.json, and no earlier platform.xml."""
    from orrery import machines
    from orrery.machines import platform

    m = machines.load("h100-ib200")
    layout = platform.Layout.for_machine(m, 2)
    assert running.platform_library().exists()
    running.write_platform(m, layout, tmp_path)
    assert running.platform_args(tmp_path) == (
        ["-platform", str(running.platform_library())],
        {"ORRERY_PLATFORM": str(tmp_path / "platform.json")},
    )
    monkeypatch.setattr(running, "platform_library", lambda: tmp_path / "absent.so")
    links = running.write_platform(m, layout, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["platform.xml"]
    assert (tmp_path / "platform.xml").read_text() == platform.platform_xml(m, layout)
    assert links == platform.link_directions(m, layout)
    assert running.platform_args(tmp_path) == (["-platform", str(tmp_path / "platform.xml")], {})


def test_smpi_s_copies_of_the_program_go_to_a_private_folder_on_the_tmpfs_that_has_room(tmp_path):
    """A folder of the run's own under the tmpfs, gone after the run; none (smpirun's default)
    where the user chose one (TMPDIR) or the tmpfs lacks room for SHM_HEADROOM times the copies."""
    size = 1000  # a rank's copies: the program's and its private libraries'
    shm = tmp_path / "shm"
    shm.mkdir()
    with running.program_copies(8, size, {}, shm) as folder:
        assert folder is not None and Path(folder).parent == shm and Path(folder).is_dir()
    assert not Path(folder).exists()
    with running.program_copies(8, size, {"TMPDIR": "/scratch"}, shm) as folder:
        assert folder is None
    room = os.statvfs(shm)
    too_many = room.f_bavail * room.f_frsize // (running.SHM_HEADROOM * size) + 1
    with running.program_copies(too_many, size, {}, shm) as folder:
        assert folder is None
    with running.program_copies(too_many - 1, size, {}, shm) as folder:
        assert folder is not None
    with running.program_copies(8, size, {}, tmp_path / "absent") as folder:
        assert folder is None
    assert sorted(p.name for p in shm.iterdir()) == []


def test_smpirun_gets_the_folder_through_tmpdir_and_the_program_the_user_s_environment():
    """SimGrid 3.32's smpirun -tmpdir swallows the program's name: TMPDIR carries the folder to
    smpirun, and the wrapper unsets it for SMPI's launcher."""
    env, wrapper = running.smpirun_copies_to("/dev/shm/orrery-smpi-x", {"PATH": "/bin"}, "env LD_PRELOAD=/a.so")
    assert env == {"PATH": "/bin", "TMPDIR": "/dev/shm/orrery-smpi-x"}
    assert wrapper == "env -u TMPDIR LD_PRELOAD=/a.so"
    assert running.smpirun_copies_to(None, {"PATH": "/bin"}, "env LD_PRELOAD=/a.so") == (
        {"PATH": "/bin"},
        "env LD_PRELOAD=/a.so",
    )
