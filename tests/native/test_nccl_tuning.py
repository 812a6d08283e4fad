"""NCCL's tuning model (interpose/nccl/tuning.cpp) through a small check program that links it
alone (tests/native/nccl_tuning_check.cpp): the algorithm, protocol, channels and model time
it picks, each derived here by hand from NCCL's formulas and constants (NVIDIA/nccl
src/graph/tuning.cc, src/enqueue.cc, src/graph/search.cc at commit 5067397c), and the errors
of bad NCCL_* values."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

from orrery import machines as machine
from orrery.run import run_description

pytestmark = pytest.mark.native

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


@pytest.fixture(scope="module")
def check(tmp_path_factory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    exe = tmp_path_factory.mktemp("tuning") / "check"
    subprocess.run(
        [
            "g++",
            "-std=c++17",
            "-I",
            str(REPO / "interpose"),
            str(REPO / "tests" / "native" / "nccl_tuning_check.cpp"),
            str(REPO / "interpose" / "nccl" / "tuning.cpp"),
            "-o",
            str(exe),
        ],
        check=True,
    )
    return exe


def shape_of(name: str, nranks: int, nnodes: int, local: int) -> list[str]:
    """The check program's shape arguments from a built-in machine's run description field."""
    n = run_description.nccl_model(machine.load(name))
    return [
        str(nranks),
        str(nnodes),
        str(local),
        str(n["sm"]),
        str(int(n["intra_nvlink"])),
        str(int(n["nvswitch"])),
        repr(n["intra_bandwidth"]),
        repr(n["inter_bandwidth"]),
    ]


DGX1 = ("dgx-h100", 8, 1, 8)  # one DGX H100: 8 GPUs on an NVSwitch


def run(check: Path, shape: tuple, func: str, sizes: list[int], env: dict[str, str] | None = None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    p = subprocess.run(
        [str(check), *shape_of(*shape), func, *map(str, sizes)],
        capture_output=True,
        text=True,
        check=False,
        env={**clean, **(env or {})},
    )
    return p


def choices(check: Path, shape: tuple, func: str, sizes: list[int], env: dict[str, str] | None = None):
    p = run(check, shape, func, sizes, env)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    channels = tuple(int(x) for x in lines[0].split()[1:])
    picked = {}
    for line in lines[1:]:
        _, size, algo, proto, nc, t = line.split()
        picked[int(size)] = (f"{algo}/{proto}", int(nc), float(t))
    return channels, picked


# --- One DGX H100, derived by hand -------------------------------------------------------------
# NCCL sees 18 NVLinks x 20.6 GB/s = 370.8 GB/s per GPU (topo.h SM90_NVLINK_BW). The ring search
# (sm90 intra speeds 60, 50, 40, 30, ...) finds 6 channels x 60 GB/s (360), duplicated to
# 12 x 30; the communicator runs 2 x 12 = 24 channels. The NVLS search: 8 heads, each GPU's link
# carries (8 + 1) x s, so s = 40 GB/s; bwInter raised to 60; NVLS runs 16 channels (sm90).
RING_BUS = 12 * 30.0  # GB/s
N = 8
NSTEPS = 2 * (N - 1)  # AllReduce
RING_LL_BW = min(141.0, RING_BUS * 0.5) * N / NSTEPS  # llMaxBw Hopper, 1 node
RING_LL128_BW = min(RING_BUS * 0.92, 12 * 36.7) * N / NSTEPS
RING_SIMPLE_BW = RING_BUS * N / NSTEPS
NVLS_BW = 8 * min(40 * 0.85 * 7 / 8 * 2, 60.0) * N / NSTEPS  # nvlsEfficiency 0.85, AllReduce x2
RING_LL_LAT = 6.6 + NSTEPS * 0.6  # us: baseLatency + steps x NVLink hwLatency
RING_LL128_LAT = 14.0 + NSTEPS * 1.9
RING_SIMPLE_LAT = 8.4 + NSTEPS * 3.4
NVLS_LAT = 25.0
TREE_SIMPLE_LAT = 8.4 + 2 * (N - 1) * 4.0
TREE_SIMPLE_BW = min(RING_BUS * 0.92, 12 * 38.7) * 0.5  # perChMaxTreeBw Hopper; Tree's algbw ratio 0.5


def us(lat: float, bw: float, size: int) -> float:
    return (lat + size / (1000 * bw)) * 1e-6


def crossing(lat_a: float, bw_a: float, lat_b: float, bw_b: float) -> float:
    """The size where b (higher latency, higher bandwidth) becomes faster than a."""
    return (lat_b - lat_a) * 1000 / (1 / bw_a - 1 / bw_b)


def test_allreduce_on_one_dgx_h100_follows_nccls_tables(check):
    channels, got = choices(check, DGX1, "AllReduce", [8, 64 * KIB, MIB, GIB])
    assert channels == (24, 24, 16)
    # Small: Ring/LL, its channels cut to bytes / (512 threads x 8 x nranks) (enqueue.cc).
    assert got[8] == ("Ring/LL", 1, pytest.approx(us(RING_LL_LAT, RING_LL_BW, 8), rel=1e-12))
    assert got[64 * KIB] == ("Ring/LL", 64 * KIB // (512 * 8 * N), pytest.approx(us(RING_LL_LAT, RING_LL_BW, 64 * KIB)))
    assert got[MIB] == ("Ring/LL", 24, pytest.approx(us(RING_LL_LAT, RING_LL_BW, MIB)))
    assert got[GIB] == ("NVLS/Simple", 16, pytest.approx(us(NVLS_LAT, NVLS_BW, GIB)))


def test_nvls_takes_over_from_ring_ll_where_its_time_is_lower(check):
    x = crossing(RING_LL_LAT, RING_LL_BW, NVLS_LAT, NVLS_BW)
    _, got = choices(check, DGX1, "AllReduce", [int(x * 0.99), int(x * 1.01)])
    assert got[int(x * 0.99)][0] == "Ring/LL"
    assert got[int(x * 1.01)][0] == "NVLS/Simple"


def test_nccl_algo_ring_switches_ll_to_ll128_to_simple_where_the_model_says(check):
    ll128 = crossing(RING_LL_LAT, RING_LL_BW, RING_LL128_LAT, RING_LL128_BW)
    simple = crossing(RING_LL128_LAT, RING_LL128_BW, RING_SIMPLE_LAT, RING_SIMPLE_BW)
    sizes = [int(ll128 * 0.99), int(ll128 * 1.01), int(simple * 0.99), int(simple * 1.01)]
    _, got = choices(check, DGX1, "AllReduce", sizes, {"NCCL_ALGO": "ring"})
    assert [got[s][0] for s in sizes] == ["Ring/LL", "Ring/LL128", "Ring/LL128", "Ring/Simple"]
    assert got[sizes[3]][2] == pytest.approx(us(RING_SIMPLE_LAT, RING_SIMPLE_BW, sizes[3]))


def test_nccl_algo_excluding_nvls_leaves_ring_simple_for_large_allreduce(check):
    # Tree/Simple at 1 GiB: no correction factor (log2(1 GiB / 64) = 24 is past the table).
    assert us(RING_SIMPLE_LAT, RING_SIMPLE_BW, GIB) < us(TREE_SIMPLE_LAT, TREE_SIMPLE_BW, GIB)
    _, got = choices(check, DGX1, "AllReduce", [GIB], {"NCCL_ALGO": "^NVLS"})
    assert got[GIB] == ("Ring/Simple", 24, pytest.approx(us(RING_SIMPLE_LAT, RING_SIMPLE_BW, GIB)))
    _, got = choices(check, DGX1, "AllReduce", [GIB], {"NCCL_ALGO": "allreduce:tree;broadcast:ring"})
    assert got[GIB] == ("Tree/Simple", 24, pytest.approx(us(TREE_SIMPLE_LAT, TREE_SIMPLE_BW, GIB)))


def test_nccl_proto_simple_makes_nvls_the_fastest_even_for_8_bytes(check):
    # Simple latencies: Ring 8.4 + 14 x 3.4 = 56 us, Tree 64.4 us, NVLS 25 us.
    _, got = choices(check, DGX1, "AllReduce", [8], {"NCCL_PROTO": "Simple"})
    assert got[8] == ("NVLS/Simple", 16, pytest.approx(us(NVLS_LAT, NVLS_BW, 8)))


def test_nccl_max_nchannels_caps_the_ring_channels(check):
    channels, got = choices(check, DGX1, "AllReduce", [MIB], {"NCCL_MAX_NCHANNELS": "4", "NCCL_ALGO": "ring"})
    assert channels == (4, 4, 16)  # NVLS channels are not NCCL_MAX_NCHANNELS' (nvls.cc)
    assert got[MIB][:2] == ("Ring/LL", 4)
    channels, _ = choices(check, DGX1, "AllReduce", [MIB], {"NCCL_MIN_NCHANNELS": "32"})
    assert channels[0] == 32


def test_pat_only_with_one_gpu_per_node(check):
    # 4 nodes of one H100 and its 400G NIC (48 GB/s through PCIe Gen5 x16, as NCCL counts it): the
    # ring search finds 1 x 48, duplicated to 2 x 24; the tree 2 x 24 (bwInter). PAT's bus bandwidth
    # is 2 x 24 x 0.75, its latency 8 + log2(4) x 14 / 3.5 + 4 x 2.8 us (tuning.cc).
    pat_bw, pat_lat = 2 * 24 * 0.75, 8 + 2 * 14 / 3.5 + 4 * 2.8
    _, got = choices(check, ("dgx-h100", 4, 4, 1), "AllGather", [MIB])
    assert got[MIB] == ("PAT/Simple", 4, pytest.approx(us(pat_lat, pat_bw, MIB)))
    _, got = choices(check, ("dgx-h100", 8, 2, 4), "AllGather", [MIB])
    assert not got[MIB][0].startswith("PAT")
    p = run(check, ("dgx-h100", 8, 2, 4), "AllGather", [MIB], {"NCCL_ALGO": "PAT"})
    assert p.returncode == 70
    assert p.stderr == (
        'orrery: error: NCCL: no algorithm/protocol is left for AllGather (NCCL_ALGO="PAT"); '
        "expected the variables to leave one that NCCL runs here\n"
    )


def test_a_bad_nccl_algo_stops_naming_the_variable_value_and_choices(check):
    p = run(check, DGX1, "AllReduce", [8], {"NCCL_ALGO": "ring,rings"})
    assert p.returncode == 70
    assert p.stderr == (
        'orrery: error: NCCL_ALGO="ring,rings": unknown algorithm "rings"; expected algorithms among Tree, Ring, '
        "CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT, optionally after '^' (all but those) and a function "
        'prefix among Broadcast, Reduce, AllGather, ReduceScatter, AllReduce (e.g. "allreduce:tree,ring;broadcast:ring")\n'
    )
    p = run(check, DGX1, "AllReduce", [8], {"NCCL_PROTO": "allgather:LL;Simple"})
    assert p.returncode == 70
    assert p.stderr.startswith(
        'orrery: error: NCCL_PROTO="allgather:LL;Simple": every entry but the first must start with a function '
        'prefix ("Simple"); expected protocols among LL, LL128, Simple,'
    )
    p = run(check, DGX1, "AllReduce", [8], {"NCCL_MAX_NCHANNELS": "four"})
    assert (p.returncode, p.stderr) == (
        70,
        'orrery: error: NCCL_MAX_NCHANNELS="four": expected an integer number of channels\n',
    )
