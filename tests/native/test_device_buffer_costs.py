"""What CUDA-aware MPI libraries do for device buffers beyond a lone message's protocol
(docs/simulation.md, "Device buffers: costs a lone message does not show"): the CUDA IPC set-up
and its cache (mpi.ipc_setup), the stream synchronisation of a send (mpi.device_sync) and the
GPUDirect RDMA limit above which a message is staged through host memory
(gpudirect.rdma_limit). Each is off by default; the existing tests of the message paths
(test_paths.py, test_message_models.py, test_overlap.py) keep the default times.

Times are derived from h100-ib200's description, with the per-message software overheads of
device buffers set to zero here so that each derivation holds whatever the built-in carries."""

from __future__ import annotations

import pytest
from derivations import (
    BUSY,
    NO_DEVICE_OVERHEADS,
    REL,
    SMPI_ENVELOPE,
    US,
    cost_options,
    gpudirect_latency,
    run_ok,
    staged_message,
    wire,
)

pytestmark = pytest.mark.native

EAGER = 65536  # bytes: the device eager threshold set below; a message this large or larger is a rendezvous
PROTOCOL = ("--set", f"mpi.eager_threshold_device={EAGER}B", *NO_DEVICE_OVERHEADS)
ONE_NODE = ("--gpus-per-node", "2", "--ranks-per-node", "2", *PROTOCOL)
TWO_NODES = ("--gpus-per-node", "1", "--ranks-per-node", "1", *PROTOCOL)
IPC = 50 * US  # a set-up time for the test, not a measured one
WITH_IPC = ("--set", f"mpi.ipc_setup={IPC!r}s")


def nvlink_message(h100, n: int) -> float:
    """A lone n-byte device message between the two GPUs of a node (NVLink), rendezvous included."""
    return wire(h100.nvlink.latency, n, h100.nvlink_pair_bandwidth, EAGER)


# ---- CUDA IPC set-up and its cache ----


def test_ipc_setup_is_paid_by_the_first_rendezvous_from_each_allocation(run_program, programs, h100):
    n = 8_000_000
    v = run_ok(run_program, programs, "ipc-cache", str(n), options=(*ONE_NODE, *WITH_IPC)).values()
    base = nvlink_message(h100, n)  # a rendezvous: the sender waits until the receiver has the data
    # from d (a miss), d again (cached), a buffer allocated after d was freed (a miss, wherever it
    # lies), that one again (cached); the receiver waits for the sender's set-up too
    for rank in (0, 1):
        times = [v[f"rank {rank} message {i}"] for i in range(4)]
        assert times == pytest.approx([IPC + base, base, IPC + base, base], rel=REL)


def test_ipc_setup_does_not_apply_to_eager_messages(run_program, programs, h100):
    n = 32_768  # below the eager threshold: the library copies it, no CUDA IPC
    v = run_ok(run_program, programs, "ipc-cache", str(n), options=(*ONE_NODE, *WITH_IPC)).values()
    assert [v[f"rank 0 message {i}"] for i in range(4)] == [0, 0, 0, 0]  # eager: the send returns at once
    assert [v[f"rank 1 message {i}"] for i in range(4)] == pytest.approx([nvlink_message(h100, n)] * 4, rel=REL)


# ---- the stream synchronisation of a CUDA-aware send ----


@pytest.mark.parametrize(
    ("sync", "waits_for"),
    [
        ("none", ()),  # the library reads the buffer at once
        ("legacy", ("blocking",)),  # as a copy on the legacy default stream: blocking streams only
        ("device", ("blocking", "nonblocking")),  # as cudaDeviceSynchronize
    ],
)
def test_a_send_waits_for_the_kernel_on_its_buffer_as_the_library_synchronises(
    run_program, programs, h100, tmp_path, sync, waits_for
):
    n = 32_768  # eager: without a wait the send returns at once
    L, S = h100.overheads.launch, h100.overheads.sync
    options = (*ONE_NODE, *cost_options(tmp_path), "--set", f'mpi.device_sync="{sync}"')
    v = run_ok(run_program, programs, "send-after-kernel", str(n), options=options).values()
    for stream in ("blocking", "nonblocking"):
        # busy (100 us) starts once its launch (L) returns; a synchronising send waits until it
        # ends if its stream is one the library's synchronisation covers, and pays the
        # synchronisation's overhead whether or not there was work to wait for
        wait = (BUSY if stream in waits_for else 0.0) + (S if sync != "none" else 0.0)
        assert v[f"rank 0 {stream}"] == pytest.approx(L + wait, rel=REL, abs=1e-15), stream
        assert v[f"rank 1 {stream}"] == pytest.approx(L + wait + nvlink_message(h100, n), rel=REL), stream


# ---- the GPUDirect RDMA limit: staging above it ----

LIMIT = 1_048_576


def test_messages_between_nodes_above_the_rdma_limit_are_staged(run_program, programs, h100):
    limit = ("--set", f"gpudirect.rdma_limit={LIMIT}B")
    above = run_ok(run_program, programs, "sendrecv", "8000000", nodes=2, options=(*TWO_NODES, *limit)).values()
    at = run_ok(run_program, programs, "sendrecv", str(LIMIT), nodes=2, options=(*TWO_NODES, *limit)).values()
    m = h100.model_copy(update={"mpi": h100.mpi.model_copy(update={"eager_threshold_device": EAGER})})
    # above the limit: the route and pipeline of a machine without GPUDirect RDMA (test_paths.py's
    # derivation): two more PCIe hops each side, one chunk's copy to fill the pipeline and one to
    # drain it, the rendezvous's control messages unstaged
    assert above["rank 0 elapsed"] == pytest.approx(staged_message(m, 8_000_000), rel=REL)
    # at the limit: GPUDirect RDMA (GPU -> switch -> NIC), the NIC the narrowest link
    direct = wire(gpudirect_latency(h100), LIMIT, min(h100.pcie.bandwidth, h100.nic.bandwidth), EAGER)
    assert at["rank 0 elapsed"] == pytest.approx(direct, rel=REL)


def test_the_staging_pipeline_above_the_rdma_limit_moves_a_chunk_per_copy(run_program, programs, h100):
    """With a copy overhead large enough the pipeline is the bottleneck. Its k = n / chunk chunks
    each go D2H, over the wire, H2D, a chunk per stage (a copy: o + chunk / PCIe) once it is full,
    so a message takes the route's latency, the first chunk's copy out and the last one's copy in
    (fill and drain), and n / (chunk / stage) for the data."""
    n, o = 8_000_000, 20 * US
    slow = ("--set", "overheads.memcpy=20us", "--set", f"gpudirect.rdma_limit={LIMIT}B")
    v = run_ok(run_program, programs, "sendrecv", str(n), nodes=2, options=(*TWO_NODES, *slow)).values()
    chunk, p = h100.gpudirect.staging_chunk, h100.pcie
    stage = o + chunk / p.bandwidth
    assert chunk / stage < min(p.bandwidth, h100.nic.bandwidth)  # the pipeline, not a link, is the bottleneck
    control = gpudirect_latency(h100) + 2 * p.latency  # the staged route, its staging links aside
    latency = control + 2 * stage + 2 * control  # fill and drain; the rendezvous handshake
    assert v["rank 0 elapsed"] == pytest.approx(latency + (n + SMPI_ENVELOPE) / (chunk / stage), rel=REL)


def test_messages_within_a_node_above_the_rdma_limit_keep_nvlink(run_program, programs, h100):
    n = 8_000_000
    options = (*ONE_NODE, "--set", f"gpudirect.rdma_limit={LIMIT}B")
    v = run_ok(run_program, programs, "sendrecv", str(n), options=options).values()
    assert v["rank 0 elapsed"] == pytest.approx(nvlink_message(h100, n), rel=REL)
