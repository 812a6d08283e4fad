"""The program's own memory pinned (cudaHostRegister), and peer access, with CUDA's errors.

An asynchronous copy from pageable memory returns to the host only when it is done; from pinned
memory, after issuing it (overheads.memcpy, M). So the host time of the same copy tells whether
the buffer is registered: M + the copy's time (its segment's, with the copy model set below) + the
return from the wait (overheads.sync) before the registration and after it ends, M while it holds."""

from __future__ import annotations

import pytest
from derivations import REL

pytestmark = pytest.mark.native

H2D = "copies.H2D=[{latency = '3us', bandwidth = '50GB/s'}]"


def test_a_registered_buffer_is_copied_as_pinned_memory_until_it_is_unregistered(run_program, programs, h100):
    n = 64 << 20
    r = run_program(programs["host_memory"], "register", str(n), options=("--gpus-per-node", "1", "--set", H2D))
    assert r.returncode == 0, r.stderr
    v = r.values()
    M, S = h100.overheads.memcpy, h100.overheads.sync
    assert v["pageable"] == pytest.approx(M + 3e-6 + n / 50e9 + S, rel=REL)
    assert v["registered"] == pytest.approx(M, rel=REL)
    assert v["unregistered"] == pytest.approx(M + 3e-6 + n / 50e9 + S, rel=REL)


def test_registration_errors_are_cudas(run_program, programs):
    r = run_program(programs["host_memory"], "register", "4096")
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert lines["register"] == "0 no error"
    assert lines["again"] == lines["overlap"] == "712 part or all of the requested memory range is already mapped"
    assert lines["devptr"] == "0 no error"
    assert lines["devptr_offset"] == "10"  # the host address itself, 10 bytes in
    assert (lines["getflags"], lines["flags"]) == ("0 no error", "1")  # cudaHostRegisterPortable
    assert lines["freehost"] == "1 invalid argument"  # the program's memory is not cudaFreeHost's
    assert lines["unregister"] == "0 no error"
    assert lines["unregister_again"] == "713 pointer does not correspond to a registered memory region"
    assert lines["devptr_pageable"] == "1 invalid argument"
    assert lines["hostalloc_badflags"] == "1 invalid argument"
    assert (lines["hostalloc_mapped"], lines["hostalloc_flags"]) == ("0 no error", "2")  # cudaHostAllocMapped


def test_registering_io_memory_stops_the_run_naming_the_flag(run_program, programs):
    r = run_program(programs["host_memory"], "iomemory")
    assert r.returncode == 3, r.stderr
    assert "not reached" not in r.stdout
    assert (
        "orrery: error: cudaHostRegister with cudaHostRegisterIoMemory (a device's I/O memory), which Orrery "
        "does not simulate"
    ) in r.stderr


def test_peer_access_is_enabled_once_per_direction_and_disabled_once(run_program, programs):
    r = run_program(programs["host_memory"], "peer", options=("--ranks-per-node", "1"))
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert lines["enable"] == lines["disable"] == "0 no error"
    assert lines["enable_again"] == "704 peer access is already enabled"
    assert lines["enable_flags"] == "1 invalid argument"
    assert lines["enable_self"] == "101 invalid device ordinal"
    assert lines["disable_again"] == lines["disable_other_direction"] == "705 peer access has not been enabled"
