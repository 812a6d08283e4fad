import json
import re
from pathlib import Path

import pytest

from orrery.calibration import calibrate, derive, fit, merge
from orrery.errors import InputError

pytestmark = pytest.mark.unit


def test_one_segment_recovers_latency_and_bandwidth():
    sizes = [2**k for k in range(4, 24)]
    times = [2e-6 + s / 25e9 for s in sizes]
    (seg,) = fit.fit_piecewise(sizes, times)
    assert seg.latency_s == pytest.approx(2e-6, rel=1e-9)
    assert seg.bandwidth_Bps == pytest.approx(25e9, rel=1e-9)


def test_breakpoint_between_two_regimes_is_found():
    sizes = [2**k for k in range(4, 24)]
    # eager up to 64 KiB (cheap start, slower copy), rendezvous above (handshake, full rate)
    times = [1e-6 + s / 10e9 if s <= 65536 else 6e-6 + s / 25e9 for s in sizes]
    first, second = fit.fit_piecewise(sizes, times)
    assert (first.size_to, second.size_from) == (65536, 131072)
    assert (first.latency_s, first.bandwidth_Bps) == (pytest.approx(1e-6, rel=1e-9), pytest.approx(10e9, rel=1e-9))
    assert (second.latency_s, second.bandwidth_Bps) == (pytest.approx(6e-6, rel=1e-9), pytest.approx(25e9, rel=1e-9))
    assert fit.predict([first, second], 1 << 20) == pytest.approx(6e-6 + (1 << 20) / 25e9, rel=1e-9)


def test_a_segment_whose_time_grows_faster_than_its_size_keeps_its_negative_latency():
    sizes = [2**k for k in range(4, 24)]
    # in cache up to 256 KiB at 80 GB/s; above it each further byte comes at 20 GB/s, the
    # in-cache part a head start: a latency of 0.5 us + 256 KiB / 80 GB/s - 256 KiB / 20 GB/s
    times = [0.5e-6 + s / 80e9 if s <= 262144 else 0.5e-6 + 262144 / 80e9 + (s - 262144) / 20e9 for s in sizes]
    first, second = fit.fit_piecewise(sizes, times)
    assert (first.size_to, second.size_from) == (262144, 524288)
    assert second.bandwidth_Bps == pytest.approx(20e9, rel=1e-9)
    assert second.latency_s == pytest.approx(0.5e-6 + 262144 / 80e9 - 262144 / 20e9, rel=1e-9)
    assert second.latency_s == pytest.approx(-9.3304e-6, rel=1e-9)


def test_a_negative_latency_never_gives_a_negative_time_where_its_segment_starts():
    # the least-squares line through the last three would be below zero at 64 KiB, where their
    # segment starts (it covers every size above the first segment's last): held to 0 there
    sizes = [1024, 4096, 16384, 65536, 131072, 262144, 1048576]
    times = [1e-6, 1e-6, 1e-6, 1e-6, 0.2e-6, 10e-6, 1000e-6]
    first, second = fit.fit_piecewise(sizes, times, max_segments=2)
    assert (first.size_to, second.size_from) == (65536, 131072)
    assert first.latency_s == pytest.approx(1e-6, rel=1e-9)
    assert second.latency_s < 0
    assert second.latency_s + 65536 / second.bandwidth_Bps == pytest.approx(0.0, abs=1e-18)
    # the first segment covers sizes from 0: whatever is taken off its latency, never below 0
    (only,) = fit.fit_piecewise(sizes[4:], times[4:], max_segments=1)
    assert only.latency_s == 0.0
    # less a host time, each segment's latency goes no lower than a time of 0 where it starts
    model = derive.piecewise_model([first, second], host_time=1e-3)
    assert model[0]["latency"] == 0.0
    assert model[1]["latency"] == -65536 / second.bandwidth_Bps


def test_a_lone_point_far_off_the_fit_is_left_out_and_the_rest_refitted():
    sizes = [2**k for k in range(23)]
    times = [2e-6 + s / 25e9 for s in sizes]
    times[13] *= 4.5  # 8 KiB, as Sigma2 Olivia's Cray MPICH 8 osu_bibw
    segments, outliers = fit.fit_sweep(sizes, times)
    assert outliers == [8192]
    (seg,) = segments
    assert (seg.size_from, seg.size_to) == (1, 1 << 22)
    assert (seg.latency_s, seg.bandwidth_Bps) == (pytest.approx(2e-6, rel=1e-9), pytest.approx(25e9, rel=1e-9))
    clean = [2e-6 + s / 25e9 for s in sizes]
    assert fit.fit_sweep(sizes, clean)[1] == []


def test_a_sweep_mostly_off_its_fit_keeps_every_point():
    """Not lone points: a sweep whose many points are far off one line (noise, or a gap held to
    its floor at most sizes) is fitted on all of them, not cut down to too few for a fit."""
    sizes = [4 << k for k in range(9)]
    times = [1e-6 if k % 2 else 1e-5 for k in range(9)]
    segments, outliers = fit.fit_sweep(sizes, times)
    assert outliers == []
    assert (segments[0].size_from, segments[-1].size_to) == (4, 1024)
    # one point off, nine sizes: left out (a quarter of the sweep is the most)
    line = [2e-6 + s / 25e9 for s in sizes]
    line[4] *= 4
    assert fit.fit_sweep(sizes, line)[1] == [64]


def test_osu_latency_and_osu_bibw_without_osu_bw_give_the_per_message_overhead():
    """A window of osu_bibw takes 2 W o + L per side and a lone message 2 o + L: from the two
    fits' small-message times the overhead o is recovered, and the NIC's rate from osu_bibw."""
    from orrery import machines

    W, o, L, rate = derive.WINDOW, 0.9e-6, 1.0e-6, 23e9
    lone = fit.Fit("osu_latency", [fit.Segment(1, 4096, 2 * o + L, 1e30)], 0, 0, [])
    window = fit.Fit(
        "osu_bibw", [fit.Segment(1, 4096, (2 * W * o + L) / W, 1e30), fit.Segment(8192, 1 << 22, 1e-6, rate)], 0, 0, []
    )
    m = machines.load("gh200-slingshot", measured_models=False)
    out = derive.overrides(m, [(("latency", "inter-node", "D D"), lone), (("bibw", "inter-node", "D D"), window)])
    assert out["mpi.send_overhead_device"] == pytest.approx(o, rel=1e-12)
    assert out["mpi.recv_overhead_device"] == pytest.approx(o, rel=1e-12)
    assert out["nic.bandwidth"] == rate
    assert out["messages.device_inter"] == [{"latency": 2 * o + L, "bandwidth": 1e30}]


def test_shared_memory_windows_set_the_copy_rate_and_a_lone_message_takes_their_rate_for_its_size():
    """Within a node over shared memory (mpi.intra_node = "direct"), osu_bw H H without osu_latency:
    the node's copy rate is the fastest bandwidth of the window's segments (the route must not
    be slower than any of them), and a lone message takes 2 o + L (+ 2 L of handshake from the eager
    threshold on) at the rate of the windows' segment for its size (in cache or not)."""
    from orrery import machines
    from orrery.machines import platform

    W, o = derive.WINDOW, 0.5e-6
    m = machines.load("gh200-slingshot", {"mpi.intra_node": "direct"}, measured_models=False)
    L = 2 * platform.SHM_LATENCY
    g = ((W + 2) * o + 2 * L) / W  # osu_bw's time per small message with overhead o
    window = fit.Fit(
        "osu_bw",
        [fit.Segment(1, 128, g, 1e30), fit.Segment(256, 262144, 0.4e-6, 70e9), fit.Segment(524288, 1 << 22, 0.0, 25e9)],
        0,
        0,
        [],
    )
    out = derive.overrides(m, [(("bandwidth", "intra-node", "H H"), window)])
    assert out["mpi.send_overhead_host_intra"] == pytest.approx(o, rel=1e-12)
    # the fastest segment whose size term counts: 70 GB/s (not the first segment's 1e30, whose
    # 128 B take no time at that rate against its latency)
    assert out["node.host_memcpy_bandwidth"] == 70e9
    eager = m.mpi.eager_threshold_host
    assert 128 < eager - 1 < 262144  # the threshold splits the middle segment
    lone, handshake = 2 * o + L, 2 * o + 3 * L
    assert out["messages.host_intra"] == [
        {"up_to": 128.0, "latency": pytest.approx(lone), "bandwidth": 1e30},
        {"up_to": eager - 1.0, "latency": pytest.approx(lone), "bandwidth": 70e9},
        {"up_to": 262144.0, "latency": pytest.approx(handshake), "bandwidth": 70e9},
        {"latency": pytest.approx(handshake), "bandwidth": 25e9},
    ]
    # through the NIC within a node, the copy rate is not what the windows measured
    nic = machines.load("gh200-slingshot", measured_models=False)
    assert "node.host_memcpy_bandwidth" not in derive.overrides(nic, [(("bandwidth", "intra-node", "H H"), window)])


@pytest.mark.parametrize("given", [("g", "b", "T"), ("g", "b"), ("g", "T"), ("g", "L"), ("b", "T"), ("b", "L")])
def test_every_combination_of_osu_windows_recovers_the_per_message_overhead(given):
    """From the window model's own figures (o = 0.9 us, L = 1.5 us), whichever of osu_bw (g),
    osu_bibw (b), osu_latency (T) and the route's latency (L) a path has give o back."""
    W, o, L = derive.WINDOW, 0.9e-6, 1.5e-6
    figures = {"g": ((W + 2) * o + 2 * L) / W, "b": (2 * W * o + L) / W, "T": 2 * o + L}
    g, b, T = (figures[k] if k in given else None for k in "gbT")
    assert derive.window_overhead(g, b, T, L if "L" in given else float("nan")) == pytest.approx(o, rel=1e-12)


@pytest.mark.parametrize("zero", ["g", "b", "both"])
def test_a_window_fitted_to_no_time_per_message_is_left_out(zero):
    """A noisy osu_bibw on a fast path once fitted 0 s per message (its first segment's latency
    clamped), and `orrery calibrate` stopped on a division by zero. That window is now left out:
    o comes from the other window and osu_latency, as if it had not been measured; with neither
    window, from osu_latency alone, T = 2 o + L (o = 0.9 us, L = 1.5 us, as above)."""
    W, o, L = derive.WINDOW, 0.9e-6, 1.5e-6
    g, b, T = ((W + 2) * o + 2 * L) / W, (2 * W * o + L) / W, 2 * o + L
    g, b = (0.0 if zero in (k, "both") else v for k, v in (("g", g), ("b", b)))
    assert derive.window_overhead(g, b, T, L) == pytest.approx(o, rel=1e-12)
    assert derive.window_overhead(0.0, 0.0, None, L) == 0.0  # nothing measures o


def test_a_sweep_over_a_device_and_a_host_buffer_is_compared_not_fitted(tmp_path):
    from test_measurements import OSU_BW

    f = tmp_path / "dh.txt"
    f.write_text(OSU_BW.replace("Receive Buffer on DEVICE (D)", "Receive Buffer on HOST (H)"))
    ((sweep, points),), _, skipped = calibrate.series("h100-ib200", None, [f], "intra-node")
    assert not sweep.fit and skipped == []
    assert sweep.kind == ("bandwidth", "intra-node", "D H") and points == [(1, 1.5), (2, 3.0), (4, 6.0)]
    assert sweep.program[:6] == ("osu_p2p", "bw", "-d", "cuda", "D", "H")
    assert sweep.note.startswith("compared, not fitted: a device buffer on one side and a host buffer on the other")


def test_babelstream_loads_but_is_not_fitted_and_says_why(tmp_path):
    from test_measurements import BABEL

    f = tmp_path / "babelstream.txt"
    f.write_text(BABEL)
    pairs, _, skipped = calibrate.series("h100-ib200", None, [f], None)
    assert pairs == [] and skipped
    assert all(
        s.startswith("BabelStream ")
        and "a streaming kernel's memory bandwidth; kernel times come from "
        "cost files (--kernels timing tables, orrery fit): not fitted"
        in s
        for s in skipped
    )


def test_nccl_tests_and_non_blocking_osu_collectives_load_but_are_not_fitted(tmp_path):
    """Collectives coll_sweep cannot reproduce are listed as not fitted, saying why, not dropped
    silently nor taken for an MPI collective."""
    from test_measurements import NCCL, OSU_ALLTOALL_CUDA

    nccl = tmp_path / "nccl.txt"
    nccl.write_text(NCCL)
    nonblocking = tmp_path / "ia2a.txt"
    nonblocking.write_text(OSU_ALLTOALL_CUDA.replace("MPI-CUDA All-to-All", "MPI-CUDA Non-blocking All-to-All"))
    pairs, _, skipped = calibrate.series("h100-ib200", None, [nccl, nonblocking], None, None, (2, 4))
    assert pairs == [] and len(skipped) == 2
    assert all("not a blocking MPI collective calibration/bench/coll_sweep runs" in s for s in skipped)
    assert skipped[0].startswith("nccl-tests all_reduce_perf") and "Non-blocking" in skipped[1]


def test_fit_input_errors():
    with pytest.raises(InputError, match="at least 3 points"):
        fit.fit_piecewise([1, 2], [1e-6, 2e-6])
    with pytest.raises(InputError, match="strictly increasing message sizes"):
        fit.fit_piecewise([8, 4, 16], [1e-6, 1e-6, 2e-6])


def test_calibration_file_is_checked(tmp_path):
    good = {"orrery_calibration": 1, "machine": "h100-ib200", "overrides": {"pcie.bandwidth": 55e9}}
    p = tmp_path / "c.json"
    p.write_text(json.dumps(good))
    assert merge.read(p, "h100-ib200").overrides == {"pcie.bandwidth": 55e9}
    # SI numbers with their unit written out, as a description needs them (what results.json records)
    assert merge.read(p, "h100-ib200").as_set() == ['pcie.bandwidth="55000000000.0B/s"']
    with pytest.raises(InputError, match=r"key 'machine': got 'h100-ib200', expected a calibration of dgx-h100"):
        merge.read(p, "dgx-h100")
    p.write_text(json.dumps({**good, "orrery_calibration": 7}))
    with pytest.raises(InputError, match="key 'orrery_calibration': got 7, expected version 1"):
        merge.read(p, "h100-ib200")
    p.write_text("{")
    with pytest.raises(InputError, match="a calibration file written by orrery calibrate"):
        merge.read(p, "h100-ib200")


def test_a_calibration_is_a_layer_between_the_description_and_set(tmp_path):
    """merge.machine: the calibration's values replace the description's, --set's replace the
    calibration's, the description's measured models are left out under a calibration, and a
    bad value of the file is blamed on the file and its key."""
    from orrery import machines

    p = tmp_path / "c.json"
    p.write_text(
        json.dumps(
            {
                "orrery_calibration": 3,
                "machine": "gh200-slingshot",
                "overrides": {"pcie.bandwidth": 55e9, "nic.latency": 2e-6},
            }
        )
    )
    cal = merge.read(p, "gh200-slingshot")
    m = merge.machine("gh200-slingshot", cal, machines.parse_overrides(["nic.latency=3us"]))
    assert (m.pcie.bandwidth, m.nic.latency) == (55e9, 3e-6)
    assert m.messages.device_inter is None  # the built-in has one (its committed calibration's)
    assert machines.load("gh200-slingshot").messages.device_inter is not None
    p.write_text(
        json.dumps({"orrery_calibration": 3, "machine": "gh200-slingshot", "overrides": {"pcie.bandwidth": -1.0}})
    )
    with pytest.raises(InputError, match=rf"^{p}: key 'overrides.pcie.bandwidth': got '-1.0B/s'"):
        merge.machine("gh200-slingshot", merge.read(p, "gh200-slingshot"))


def test_a_candidate_takes_si_overrides_as_data_with_no_text_between():
    """merge.candidate loads SI values (a calibration's) without writing them as TOML text: a
    measured model's segments and a float whose text would round differently arrive exact."""
    x = 0.1 + 0.2  # 0.30000000000000004: its repr reads back, a %g-style text would not
    model = [{"up_to": 4096.0, "latency": x * 1e-5, "bandwidth": 7e9}, {"latency": 1e-6, "bandwidth": 2.5e10}]
    m = merge.candidate("h100-ib200", {"nic.latency": x * 1e-5, "messages.device_inter": model})
    assert m.nic.latency == x * 1e-5
    assert [(g.up_to, g.latency, g.bandwidth) for g in m.messages.device_inter] == [
        (4096.0, x * 1e-5, 7e9),
        (None, 1e-6, 2.5e10),
    ]


def test_route_latency_is_the_platform_s_route_a_message_crosses():
    """derive.route_latency, which the overhead fits subtract, by hand from the platform's links
    (tests/native/test_timing.py): where the calibration once derived it a second time, it
    missed the staging link's copy overhead without GPUDirect RDMA and the link between the
    sockets for host buffers of ranks on two sockets."""
    from orrery import machines as machine
    from orrery.machines import platform

    h = machine.load("h100-ib200")
    # GPU link + NIC link on each side, two NIC adapters, one leaf switch
    assert derive.route_latency(h, "inter-node", "device") == pytest.approx(
        4 * h.pcie.latency + 2 * h.nic.latency + h.fabric.switch_latency, rel=1e-12
    )
    assert derive.route_latency(h, "intra-node", "device") == h.nvlink.latency
    g = machine.load("gh200-slingshot")
    # NVLink-C2C to the superchip's PCIe, then the NIC link; mpi.intra_node = "nic": within a
    # node too, through the NICs and the leaf switch
    between = 2 * (g.host_link.latency + g.pcie.latency) + 2 * g.nic.latency + g.fabric.switch_latency
    assert derive.route_latency(g, "inter-node", "device") == pytest.approx(between, rel=1e-12)
    assert derive.route_latency(g, "intra-node", "device") == pytest.approx(between, rel=1e-12)
    staged = machine.load("h100-ib200", {"gpudirect.rdma": False})
    # each side: the GPU's PCIe link and its switch's uplink, the staging link (a chunk's copy,
    # its issue overhead included), the NIC's PCIe link
    side = 3 * staged.pcie.latency + platform.staging_stage(staged)
    assert derive.route_latency(staged, "inter-node", "device") == pytest.approx(
        2 * side + 2 * staged.nic.latency + staged.fabric.switch_latency, rel=1e-12
    )
    two = machine.load("h100-pcie")  # GPUs 0 and 1 on two sockets: the ranks' shared memory crosses their link
    assert derive.route_latency(two, "intra-node", "host") == pytest.approx(
        2 * platform.SHM_LATENCY + two.node.socket_link_latency, rel=1e-12
    )


def kernel_table(tmp_path, rows):
    p = tmp_path / "kernels.csv"
    p.write_text("kernel,grid_x,grid_y,grid_z,block_x,block_y,block_z,time,unit\n" + "".join(rows))
    return p


def test_kernel_fit_recovers_alpha_and_beta_and_writes_a_cost_file(tmp_path):
    from orrery.run import costs

    alpha, beta = 12e-6, 7e-12
    rows = []
    for gx in (64, 256, 1024, 4096):
        threads = gx * 16 * 32 * 32
        rows.append(f'"stencil<float>",{gx},16,1,32,32,1,{(alpha + beta * threads) * 1e6!r},us\n')
    rows.append("tiny,1,1,1,32,1,1,0.004,ms\ntiny,2,1,1,32,1,1,0.004,ms\n")
    text, fits = fit.fit_kernels(kernel_table(tmp_path, rows))
    assert fits["stencil<float>"][:2] == (pytest.approx(alpha, rel=1e-9), pytest.approx(beta, rel=1e-9))
    assert fits["tiny"][0] == pytest.approx(4e-6, rel=1e-9)
    out = tmp_path / "costs.toml"
    out.write_text(text)
    loaded = costs.load(out)  # the cost file orrery run --costs reads
    assert loaded.kernels["stencil<float>"].seconds(1000) == pytest.approx(alpha + beta * 1000, rel=1e-9)


def test_kernel_table_errors_name_file_and_line(tmp_path):
    p = kernel_table(tmp_path, ["k,1,1,1,32,1,1,5,us\n", "k,1,1,1,32,1,1,6,us\n"])
    with pytest.raises(InputError, match=rf"{p}:2: key 'kernel': got 'k', expected rows at two launch geometries"):
        fit.fit_kernels(p)
    p = kernel_table(tmp_path, ["k,1,1,1,32,1,1,5,GB/s\n"])
    with pytest.raises(InputError, match=rf"{p}:2: key 'unit': got 'GB/s', expected a time unit"):
        fit.fit_kernels(p)
    p.write_text("name,time\nk,5\n")
    with pytest.raises(InputError, match=rf"{p}:1: key 'header'"):
        fit.fit_kernels(p)


def test_gh200_built_in_carries_its_committed_calibration():
    """gh200-slingshot ships calibrated: its description is the raw one (without measured models)
    plus the overrides of calibration/gh200-slingshot/calibration.json, value for value."""
    from orrery import machines as machine

    committed = Path(__file__).resolve().parents[2] / "calibration" / "gh200-slingshot" / "calibration.json"
    shipped = machine.load("gh200-slingshot")
    rebuilt = merge.machine("gh200-slingshot", merge.read(committed, "gh200-slingshot"))
    assert shipped.parameters() == rebuilt.parameters()
    assert shipped.messages.device_inter is not None and shipped.collectives.alltoall_device is not None
    # a calibration starts from the description without its measured models
    raw = machine.load("gh200-slingshot", measured_models=False)
    assert raw.messages.device_inter is None and raw.collectives.alltoall_device is None


def sync_builtin_in(tmp_path: Path):
    """calibration/sync_builtin.py loaded as a module, with a copy of the built-in
    h100-ib200 description under `tmp_path` (a checkout's layout) for it to write into."""
    import importlib.util
    import shutil

    repo = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("sync_builtin", repo / "calibration" / "sync_builtin.py")
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    builtin = tmp_path / "orrery" / "machines" / "builtin"
    builtin.mkdir(parents=True)
    shutil.copy(repo / "orrery" / "machines" / "builtin" / "h100-ib200.toml", builtin)
    return sync


def test_sync_builtin_writes_a_calibration_into_the_description(tmp_path):
    """calibration/sync_builtin.py: scalar overrides replace values in their sections, measured
    models go between the markers, sources name the calibration; running it twice changes nothing."""
    from orrery import machines as machine

    sync = sync_builtin_in(tmp_path)
    (tmp_path / "calibration" / "h100-ib200").mkdir(parents=True)
    overrides = {
        "pcie.bandwidth": 50e9,
        "mpi.collective_selector": "ompi",
        "copies.D2H": [{"up_to": 2e6, "latency": 1e-6, "bandwidth": 45e9}, {"latency": 0.0, "bandwidth": 2e10}],
    }
    (tmp_path / "calibration" / "h100-ib200" / "calibration.json").write_text(json.dumps({"overrides": overrides}))
    toml = Path(sync.sync("h100-ib200", tmp_path))
    once = toml.read_text()
    sync.sync("h100-ib200", tmp_path)
    assert toml.read_text() == once
    m = machine.load(str(toml))
    assert m.pcie.bandwidth == 50e9 and m.mpi.collective_selector == "ompi"
    assert [s.bandwidth for s in m.copies.D2H] == [45e9, 2e10] and m.copies.D2H[0].up_to == 2e6
    assert m.sources["copies.D2H"].startswith("fitted: calibration/h100-ib200/calibration.json")
    assert m.sources["pcie.bandwidth"].startswith("fitted: calibration/h100-ib200/calibration.json")
    # a later calibration without that model: the model and its source go (every parameter keeps
    # exactly one source), the other values stay
    del overrides["copies.D2H"]
    overrides["copies.H2D"] = [{"latency": 2e-6, "bandwidth": 50e9}]
    (tmp_path / "calibration" / "h100-ib200" / "calibration.json").write_text(json.dumps({"overrides": overrides}))
    m = machine.load(sync.sync("h100-ib200", tmp_path))
    assert m.copies.D2H is None and "copies.D2H" not in m.sources and m.copies.H2D[0].bandwidth == 50e9
    assert set(m.parameters()) == set(m.sources)


#: The per-message costs the H100 built-ins carry from measured Open MPI + UCX stacks on other
#: machines (calibration/sync_builtin.py --into): calibration -> keys.
CARRIED = {
    "h100-pcie": ("mpi.send_overhead_device_intra", "mpi.recv_overhead_device_intra"),
    "gh200-olivia-ompi-5-ucx-mpirun": ("mpi.send_overhead_device", "mpi.recv_overhead_device"),
}


@pytest.mark.parametrize("name", ["h100-ib200", "dgx-h100"])
def test_h100_built_ins_carry_the_device_message_costs_of_open_mpi_ucx(name):
    """No public osu_* D D sweep of an H100 NVLink + InfiniBand node exists (calibration/data/
    h100-osu): h100-ib200 and dgx-h100 carry each side's software time per device-buffer message
    of the stack most H100 sites run from the calibrations that measured it, value for value,
    each with a source naming its calibration; none is left at zero."""
    from orrery import machines as machine

    repo = Path(__file__).resolve().parents[2]
    shipped = machine.load(name)
    for cal_name, keys in CARRIED.items():
        cal = json.loads((repo / "calibration" / cal_name / "calibration.json").read_text())
        for key in keys:
            assert shipped.parameters()[key] == cal["overrides"][key] > 0, (name, key)
            assert shipped.sources[key].startswith(f"carried: calibration/{cal_name}/calibration.json (fitted on ")


def test_sync_builtin_carries_another_machine_s_scalars_and_refuses_its_route_models(tmp_path):
    """calibration/sync_builtin.py NAME --into MACHINE: chosen scalar overrides of a calibration
    of another machine replace values in MACHINE's description, each source naming the
    calibration, the machine it was fitted on and why; running it twice changes nothing; a
    measured model (that machine's routes) or a key the calibration lacks is refused, naming it."""
    from orrery import machines as machine

    sync = sync_builtin_in(tmp_path)
    (tmp_path / "calibration" / "other").mkdir(parents=True)
    cal = tmp_path / "calibration" / "other" / "calibration.json"
    overrides = {"mpi.recv_overhead_host": 3e-6, "gaps.device_intra": [{"latency": 1e-6, "bandwidth": 1e9}]}
    cal.write_text(json.dumps({"machine": "h100-pcie", "overrides": overrides}))
    toml = Path(sync.carry("other", "h100-ib200", ["mpi.recv_overhead_host"], "the same stack", tmp_path))
    once = toml.read_text()
    sync.carry("other", "h100-ib200", ["mpi.recv_overhead_host"], "the same stack", tmp_path)
    assert toml.read_text() == once
    m = machine.load(str(toml))
    assert m.mpi.recv_overhead_host == 3e-6 and m.mpi.send_overhead_host == 0
    assert m.sources["mpi.recv_overhead_host"] == (
        "carried: calibration/other/calibration.json (fitted on h100-pcie by orrery calibrate): the same stack"
    )
    assert set(m.parameters()) == set(m.sources)
    for key, error in (
        ("gaps.device_intra", f"{cal}: 'gaps.device_intra' is a measured model of h100-pcie's routes"),
        ("mpi.send_overhead_host", f"{cal}: no override 'mpi.send_overhead_host' to carry into h100-ib200"),
    ):
        with pytest.raises(SystemExit, match=re.escape(error)):
            sync.carry("other", "h100-ib200", [key], "why", tmp_path)
    assert toml.read_text() == once


def test_a_repo_without_the_measurements_is_named(tmp_path):
    """--repo CHECKOUT takes a checkout's measurements and benchmarks instead of the installed
    ones: a folder without them stops the calibration before anything runs, naming it."""
    (tmp_path / "calibration" / "bench").mkdir(parents=True)
    with pytest.raises(
        InputError,
        match=rf"^--repo: got '{tmp_path}/calibration/data/measured', expected a folder "
        "with the shared measurements$",
    ):
        calibrate.calibrate("h100-ib200", tmp_path)
