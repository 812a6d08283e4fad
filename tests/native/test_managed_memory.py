"""Managed memory (cudaMallocManaged) and `orrery run --managed` (programs/managed_memory.cu).

By default the first allocation stops the run naming the call and the option. Under
`--managed resident` an allocation is memory of the device current when it was made and stays
there: copies from and to it take device memory's times (M + the segment's latency + n / its
bandwidth + S, with set copy models; M, S: h100-ib200's copy and synchronisation overheads), an
MPI message from it takes a device buffer's path (the same time as from cudaMalloc's memory, and
the data the host's code wrote), cudaMemGetInfo counts it, the host's code reads and writes it,
and prefetches, advice and attachments move nothing (no time) but get CUDA's errors. The report
counts the calls."""

from __future__ import annotations

import pytest
from derivations import REL

pytestmark = pytest.mark.native

RESIDENT = ("--managed", "resident")
MODELS = (
    "--set",
    "copies.H2D=[{latency = '3us', bandwidth = '50GB/s'}]",
    "--set",
    "copies.D2H=[{latency = '2us', bandwidth = '40GB/s'}]",
)


def run(run_program, programs, *args, gpus=1, options=RESIDENT, nodes=1):
    options = ("--gpus-per-node", str(gpus), "--ranks-per-node", "1", *options)
    return run_program(programs["managed_memory"], *args, options=options, nodes=nodes)


def answers(r) -> dict[str, str]:
    """The program's "name value..." lines (not the run's summary)."""
    return {k: v for k, _, v in (line.partition(" ") for line in r.stdout.splitlines()) if not k.startswith("orrery")}


def test_managed_memory_is_refused_unless_the_run_says_how_to_take_it(run_program, programs):
    r = run(run_program, programs, "answers", gpus=2, options=())
    assert r.returncode == 3, r.stderr
    assert r.stderr.splitlines()[-1].startswith(
        "orrery: error: the program called cudaMallocManaged on rank 0: managed memory moves between host and "
        "device as either side touches it, which skeleton mode cannot see; `orrery run --managed resident`"
    )
    assert "used" not in answers(r)
    assert r.results["failure"]["ranks"] == [0]


def test_resident_managed_memory_is_its_device_s_and_the_host_s(run_program, programs):
    r = run(run_program, programs, "answers", gpus=2)
    assert r.returncode == 0, r.stderr
    out = answers(r)
    n = 1 << 20
    # in use on device 0 from the allocation on, type cudaMemoryTypeManaged (3), one address
    assert (out["used"], out["type"], out["device"], out["host_pointer_is_it"]) == (str(n), "3", "0", "1")
    # sum of i % 7 over 2^20 bytes: 149 796 full cycles of 21, then 0 + 1 + 2 + 3
    assert out["host_sum"] == str(149_796 * 21 + 6)
    # the memset's 3s, then byte 4096's own i % 7 = 1
    assert out["memset_read"] == "3 4"
    assert out["captured_memset"] == "2"  # byte 8192's own i % 7, not the captured memset's 7
    # zeros from byte 100 to 100 before the end of 64 MiB of 1s; its whole pages (all but the two
    # partial ones, 64 MiB less at most 8 KiB) leave the process's memory
    assert out["zeroed"] == "1 0 0 0 1"
    assert int(out["zeroed_mib_given_back"]) >= 63
    errors = {
        "size_zero": "cudaErrorInvalidValue",
        "flags_single": "cudaErrorInvalidValue",
        "attach_host": "cudaSuccess",
        "prefetch_device": "cudaSuccess",
        "prefetch_host": "cudaSuccess",
        "prefetch_not_managed": "cudaErrorInvalidValue",
        "prefetch_beyond": "cudaErrorInvalidValue",
        "prefetch_flags": "cudaErrorInvalidValue",
        "prefetch_no_device": "cudaErrorInvalidDevice",
        "prefetch_bad_type": "cudaErrorInvalidValue",
        "advise_read_mostly": "cudaSuccess",
        "advise_preferred": "cudaSuccess",
        "advise_preferred_no_device": "cudaErrorInvalidDevice",
        "advise_bad": "cudaErrorInvalidValue",
        "advise_not_managed": "cudaErrorInvalidValue",
        "attach_whole": "cudaSuccess",
        "attach_size": "cudaSuccess",
        "attach_part": "cudaErrorInvalidValue",
        "attach_flags": "cudaErrorInvalidValue",
        "copy_as_host": "cudaSuccess",
        "copy_default": "cudaSuccess",
        "ipc_handle": "cudaErrorInvalidValue",
    }
    assert {k: out[k] for k in errors} == errors
    assert out["copied_as_host"] == "6"  # two of the memset's 3s, moved by a host-to-host copy
    # device 1's allocation is device 1's memory (3 pages), and goes with cudaFree
    assert (out["device_1"], out["freed_1"], out["freed"]) == (f"1 {3 * 4096}", "0", "0")
    managed = r.results["ranks"][0]["managed"]
    # what succeeded: 4 allocations (1 MiB, 64 MiB, 64 B, 12 KiB); the two prefetches; the two advices;
    # two attachments of the whole allocation
    assert managed == {
        "cudaMallocManaged": {"count": 4, "bytes": n + (64 << 20) + 64 + 3 * 4096, "time_s": 0.0},
        "cudaMemPrefetchAsync": {"count": 2, "bytes": n + 4096, "time_s": 0.0},
        "cudaMemAdvise": {"count": 2, "bytes": 2 * n, "time_s": 0.0},
        "cudaStreamAttachMemAsync": {"count": 2, "bytes": 2 * n, "time_s": 0.0},
    }
    assert r.results["run"]["managed"] == "resident"
    assert (
        "managed memory: 68.170 MB in 4 allocations on 1 rank, taken as resident on their devices "
        "(--managed resident): its migrations between host and device are not in these times"
    ) in r.stdout


@pytest.mark.parametrize("n", [8, 1 << 20])
def test_prefetches_take_no_time_and_copies_take_device_memory_s(run_program, programs, h100, n):
    M, S = h100.overheads.memcpy, h100.overheads.sync
    r = run(run_program, programs, "times", str(n), options=(*RESIDENT, *MODELS))
    assert r.returncode == 0, r.stderr
    v = r.values()
    for moved_nothing in ("prefetch_sync", "prefetch_host_sync", "attach_sync"):
        assert v[moved_nothing] == pytest.approx(v["sync"], rel=REL), moved_nothing
    assert v["to_host"] == pytest.approx(M + 2e-6 + n / 40e9 + S, rel=REL)
    assert v["to_managed"] == pytest.approx(M + 3e-6 + n / 50e9 + S, rel=REL)


@pytest.mark.parametrize("n", [64, 4 << 20])
def test_an_mpi_message_from_managed_memory_is_a_device_buffer_s(run_program, programs, n):
    r = run(run_program, programs, "mpi", str(n), nodes=2)
    assert r.returncode == 0, r.stderr
    v = r.values()
    assert v["received_wrong"] == 0  # the bytes rank 0's host code wrote
    assert v["send_managed"] == pytest.approx(v["send_device"], rel=REL)
    assert v["send_managed"] > 0


@pytest.mark.parametrize("mode", ["oversubscribe", "other_device"])
def test_what_resident_memory_cannot_be_stops_the_run_naming_it(run_program, programs, h100, mode):
    free = int(h100.gpu.memory)  # nothing allocated yet: all of an H100's 80 GiB
    says = {
        "oversubscribe": f"cudaMallocManaged({free + 1}) on rank 0: device 0 has {free} bytes free; CUDA would "
        "oversubscribe it, evicting managed pages to the host as others are touched, which --managed resident "
        "does not simulate",
        "other_device": "cudaMemPrefetchAsync on rank 0: a prefetch of managed memory of device 0 to device 1; "
        "under --managed resident it stays on the device it was allocated on",
    }[mode]
    r = run(run_program, programs, mode, gpus=2)
    assert r.returncode == 3, r.stderr
    assert r.stderr.splitlines()[-1].startswith(f"orrery: error: {says}")
    assert mode not in answers(r)


def test_the_option_takes_only_its_values(run_program, programs):
    r = run(run_program, programs, "answers", options=("--managed", "migrate"))
    assert r.returncode == 2
    assert "argument --managed: invalid choice: 'migrate' (choose from 'refuse', 'resident')" in r.stderr
    assert not r.out.exists()


@pytest.mark.parametrize("managed", ["resident", None])
def test_a_sweep_takes_managed_memory_as_its_spec_says(programs, tmp_path, managed):
    import csv
    import json

    from conftest import orrery

    spec = tmp_path / "sweep.toml"
    line = f'managed = "{managed}"\n' if managed else ""
    spec.write_text(
        f'program = "{programs["managed_memory"]}"\nargs = ["times", "{{n}}"]\ngpus_per_node = 1\n{line}'
        "[grid]\nn = [8, 4096]\n"
    )
    p = orrery("sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "1")
    table = list(csv.DictReader((tmp_path / "out" / "sweep.csv").open()))
    assert [r["n"] for r in table] == ["8", "4096"]
    if managed:
        assert p.returncode == 0, p.stderr
        assert [r["status"] for r in table] == ["completed"] * 2
        for r in table:
            point = tmp_path / "out" / "points" / r["point"]
            assert json.loads((point / "point.json").read_text())["inputs"]["managed"] == "resident"
            assert json.loads((point / "results.json").read_text())["ranks"][0]["managed"]["cudaMallocManaged"][
                "bytes"
            ] == int(r["n"])
    else:  # the default refuses: each point stops at cudaMallocManaged
        assert p.returncode != 0
        assert [r["status"] for r in table] == ["orrery_error"] * 2
        assert all("the program called cudaMallocManaged on rank 0" in r["error"] for r in table)


def test_managed_variables_hold_their_initial_values_under_resident(run_program, programs):
    r = run_program(programs["managed"], options=("--gpus-per-node", "1", *RESIDENT))
    assert r.returncode == 0, r.stderr
    out = answers(r)
    # the initialisers (the device code's .nv.global.init), zeros for the one without
    assert out["initial"] == "3 1 2 3 4 0"
    assert out["written"] == "1"  # the host's write; the kernel did not run
    assert out["type"] == "3 device 0"  # cudaMemoryTypeManaged, on the current device
    # 4 + 16 + 8 bytes, each variable an allocation of its own
    assert out["used"] == "28"
    assert r.results["ranks"][0]["managed"] == {"__managed__": {"count": 3, "bytes": 28, "time_s": 0.0}}
    assert "managed memory: 28 B in 3 allocations on 1 rank, taken as resident on their devices" in r.stdout


def test_a_managed_variable_stops_the_run_by_default_where_the_host_first_reaches_it(run_program, programs):
    r = run_program(programs["managed"], options=("--gpus-per-node", "1"))
    assert r.returncode == 3, r.stderr
    last = r.stderr.splitlines()[-1]
    assert last.startswith("orrery: error: __managed__ variable counter on rank 0: managed memory moves between")
    assert "`orrery run --managed resident`" in last
    assert "initial" not in r.stdout


def test_the_python_api_takes_the_same_values(programs, tmp_path):
    import orrery
    from orrery.errors import InputError

    with pytest.raises(InputError, match=r"^--managed: got 'migrate', expected one of refuse, resident$"):
        orrery.simulate(programs["managed_memory"], ["times"], managed="migrate", out=tmp_path / "bad")
    assert not (tmp_path / "bad" / "results.json").exists()
    res = orrery.simulate(
        programs["managed_memory"], ["times", "4096"], gpus_per_node=1, managed="resident", out=tmp_path / "good"
    )
    assert res.run["managed"] == "resident"
    assert res.ranks[0].managed["cudaMallocManaged"].bytes == 4096


def test_a_sweep_spec_takes_the_run_description_s_values(tmp_path):
    import typing

    from conftest import orrery

    from orrery.run import run_description
    from orrery.sweep.spec import Spec

    # the spec's values are written out (a Literal, for its one-line error): they must be the schema's
    assert typing.get_args(Spec.model_fields["managed"].annotation) == run_description.choices("ManagedPolicy")
    spec = tmp_path / "sweep.toml"
    spec.write_text('program = "/bin/true"\nmanaged = "migrate"\n')
    p = orrery("sweep", str(spec), "--out", str(tmp_path / "out"))
    assert p.returncode == 2
    assert p.stderr == f"orrery: error: {spec}: key 'managed': got 'migrate', expected 'refuse' or 'resident'\n"
    assert not (tmp_path / "out").exists()
