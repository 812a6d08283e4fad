"""Device limits, PCI addresses, stream callbacks and event records with flags
(programs/device_limits.cu), on h100-ib200 with two GPUs a rank. Times derived by hand: L the
launch overhead, busy 100 us."""

from __future__ import annotations

import json

import pytest
from derivations import BUSY, REL, cost_options

pytestmark = pytest.mark.native


def _run(run_program, programs, tmp_path, mode):
    options = ("--gpus-per-node", "2", "--ranks-per-node", "1", *cost_options(tmp_path))
    return run_program(programs["device_limits"], mode, options=options)


def _values(r) -> dict[str, str]:
    assert r.returncode == 0, r.stderr
    return dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)


def test_limits_read_cudas_defaults_and_what_was_set_per_device(run_program, programs, tmp_path):
    v = _values(_run(run_program, programs, tmp_path, "limits"))
    assert (v["stack"], v["printf_fifo"], v["malloc_heap"]) == ("1024", str(1 << 20), str(8 << 20))
    assert (v["sync_depth"], v["pending_launches"], v["persisting_l2"]) == ("2", "2048", "0")
    assert (v["set_stack"], v["stack_after_set"], v["stack_other_device"]) == ("0", "4096", "1024")
    assert v["unknown_limit"] == "215"  # cudaErrorUnsupportedLimit


@pytest.mark.parametrize(
    "mode, message",
    [
        ("l2fetch", "cudaDeviceGetLimit(cudaLimitMaxL2FetchGranularity): its default is not described"),
        ("persisting", "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1048576): a persisting L2 cache"),
    ],
)
def test_limits_without_a_described_value_stop_the_run_naming_them(run_program, programs, tmp_path, mode, message):
    r = _run(run_program, programs, tmp_path, mode)
    assert r.returncode == 3 and "not reached" not in r.stdout
    assert f"orrery: error: {message}" in r.stderr


def test_pci_addresses_are_the_machine_s_and_name_their_device_back(run_program, programs, tmp_path):
    r = _run(run_program, programs, tmp_path, "pci")
    v = _values(r)
    placed = json.loads((r.out / "run.json").read_text())["gpus"]  # where the platform put each GPU
    for d in range(2):
        assert v[f"bus{d}"] == f"0000:{placed[d]['pci_bus_id']:02x}:00.0"
        assert v[f"back{d}"] == str(d)
    assert v["unknown_bus"] == "101" and v["malformed_bus"] == "1"  # invalid device, invalid value


def test_a_stream_callback_runs_when_the_stream_reaches_it_with_its_stream_and_status(
    run_program, programs, tmp_path, h100
):
    r = _run(run_program, programs, tmp_path, "callback")
    v = _values(r)
    assert v["stream_device"] == "1"
    assert (v["add"], v["add_flags"]) == ("0", "1")  # flags must be 0
    assert float(v["ran_after"]) == pytest.approx(h100.overheads.launch + BUSY, rel=REL)
    assert (v["its_stream"], v["its_status"]) == ("1", "0")


def test_an_event_record_with_no_flag_is_a_record(run_program, programs, tmp_path, h100):
    v = _values(_run(run_program, programs, tmp_path, "record"))
    assert (v["record_a"], v["record_b"], v["record_bad"]) == ("0", "0", "1")
    assert float(v["elapsed_ms"]) == pytest.approx((h100.overheads.launch + BUSY) * 1e3, rel=1e-6)
