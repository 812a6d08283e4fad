"""Programs built with nvcc's --default-stream per-thread (programs/per_thread/per_thread.cu): their
stream 0 is the per-thread default stream, which CUDA's _ptsz and _ptds entry points carry. It is a
blocking stream of its own: beside other blocking streams, unlike the legacy stream, and ordered
with the legacy stream both ways. Times derived by hand as in test_timing.py, on h100-ib200 with
one GPU: L and S the launch and synchronisation overheads, busy 100 us and brief 20 us; two
kernels at once share the GPU, each at half speed."""

from __future__ import annotations

import pytest
from conftest import HERE, built_once, orrery, session_dir
from derivations import BRIEF, BUSY, REL, cost_options

pytestmark = pytest.mark.native


@pytest.fixture(scope="session")
def per_thread(tmp_path_factory):
    src = HERE / "native" / "programs" / "per_thread" / "per_thread.cu"

    def make(d):
        d.mkdir()
        orrery("nvcc", "--default-stream", "per-thread", str(src), "-o", str(d / "per_thread"), check=True)

    return built_once(session_dir(tmp_path_factory, "built") / "per_thread", make) / "per_thread"


@pytest.fixture
def run(run_program, per_thread, tmp_path):
    costs = cost_options(tmp_path)

    def _run(*args: str) -> dict[str, float]:
        r = run_program(per_thread, *args, options=("--gpus-per-node", "1", *costs))
        assert r.returncode == 0, r.stderr
        return r.values()

    return _run


def test_stream_0_runs_beside_a_blocking_stream(run, h100):
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run("beside-blocking")
    # brief starts at 2L beside busy, both at half speed; the legacy stream would have waited
    assert v["brief_done"] == pytest.approx(2 * L + 2 * BRIEF + S, rel=REL)
    assert v["all_done"] == pytest.approx(L + BUSY + BRIEF + S, rel=REL)


def test_the_legacy_stream_waits_for_stream_0(run, h100):
    L, S = h100.overheads.launch, h100.overheads.sync
    assert run("with-legacy")["elapsed"] == pytest.approx(L + BUSY + BRIEF + S, rel=REL)


def test_a_synchronous_copy_goes_on_the_per_thread_stream(run, h100):
    n = 4_000_000
    o, p = h100.overheads, h100.pcie
    expected = o.memcpy + 2 * p.latency + n / p.bandwidth + o.sync
    assert run("h2d", str(n))["elapsed"] == pytest.approx(expected, rel=REL)


def test_stream_0_can_be_captured_and_its_graph_launched(run, h100):
    L, S = h100.overheads.launch, h100.overheads.sync
    assert run("graph")["elapsed"] == pytest.approx(L + 2 * BUSY + S, rel=REL)
