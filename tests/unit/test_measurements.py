"""Reading measured sweeps. The inputs below are format samples written for these
tests (layouts of the tools' outputs, made-up numbers), not measurements."""

import re

import pytest

from orrery.calibration import measurements
from orrery.errors import InputError

pytestmark = pytest.mark.unit

OSU_BW = """# OSU MPI-CUDA Bandwidth Test v7.5
# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)
# Size      Bandwidth (MB/s)
1                       1.50
2                       3.00
4                       6.00
"""

BANDWIDTH_TEST = """[CUDA Bandwidth Test] - Starting...
 Host to Device Bandwidth, 1 Device(s)
 PINNED Memory Transfers
   Transfer Size (Bytes)\tBandwidth(GB/s)
   1000\t\t\t0.5
   2000\t\t\t1.0

 Device to Host Bandwidth, 1 Device(s)
 PINNED Memory Transfers
   Transfer Size (Bytes)\tBandwidth(GB/s)
   1000\t\t\t0.4
"""

NCCL = """# nccl-tests: all_reduce_perf
# Collective test starting: all_reduce_perf
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    20.00    0.00    0.00      0    19.00    0.00    0.00      0
          16             4     float     sum      -1    21.00    0.00    0.00      0    20.00    0.00    0.00      0
"""

BABEL = """BabelStream
Version: 4.0
Array size: 268.4 MB (=0.3 GB)
Function    MBytes/sec  Min (sec)   Max         Average
Copy        2000000.000 0.00027     0.00028     0.00027
Triad       2100000.000 0.00038     0.00039     0.00038
"""

NVBANDWIDTH = """nvbandwidth Version: v0.5
Built from Git version: v0.5

NOTE: This tool reports current measured bandwidth on your system.
Additional system-specific tuning may be required to achieve maximal peak bandwidth.

CUDA Runtime Version: 12060
Device 0: NVIDIA H100 80GB HBM3
Device 1: NVIDIA H100 80GB HBM3

Running host_to_device_memcpy_ce.
memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
           0         1
 0     55.00     54.00
SUM host_to_device_memcpy_ce 109.00

Running device_to_device_memcpy_read_ce.
memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
           0         1
 0       N/A    390.00
 1    392.00       N/A
SUM device_to_device_memcpy_read_ce 782.00

Running host_device_latency_sm.
memory latency SM CPU(row) <-> GPU(column) (ns)
           0         1
 0    780.00    781.00
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_osu_output(tmp_path):
    (s,) = measurements.load(write(tmp_path, "bw.txt", OSU_BW))
    assert (s.metric, s.buffers, s.unit) == ("bandwidth", "D D", "MB/s")
    assert s.sizes == [1, 2, 4] and s.values == [1.5e6, 3e6, 6e6] and s.lines == [4, 5, 6]


def test_osu_output_says_which_side_has_which_buffer(tmp_path):
    (dh,) = measurements.load(
        write(tmp_path, "dh.txt", OSU_BW.replace("Receive Buffer on DEVICE (D)", "Receive Buffer on HOST (H)"))
    )
    assert dh.buffers == "D H"
    (hd,) = measurements.load(
        write(tmp_path, "hd.txt", OSU_BW.replace("Send Buffer on DEVICE (D)", "Send Buffer on HOST (H)"))
    )
    assert hd.buffers == "H D"
    (hh,) = measurements.load(write(tmp_path, "hh.txt", "# OSU MPI Bandwidth Test v7.5\n" + OSU_BW.split("\n", 2)[2]))
    assert hh.buffers == "H H"


def test_osu_output_of_an_unsupported_benchmark_names_its_header_line(tmp_path):
    p = write(
        tmp_path,
        "mbw.txt",
        "# OSU MPI Multiple Bandwidth / Message Rate Test v7.5\n"
        "# [ pairs: 1 ] [ window size: 64 ]\n# Size                  MB/s        Messages/s\n"
        "1                       1.70        1700000.00\n",
    )
    with pytest.raises(
        InputError,
        match=rf"{p}:3: key 'columns': got '# Size +MB/s +Messages/s', expected Latency, "
        r"Avg Latency, Bandwidth or Bi-Bandwidth after Size",
    ):
        measurements.load(p)


OSU_ALLTOALL_CUDA = """# OSU MPI-CUDA All-to-All Personalized Exchange Latency Test v7.5
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)
1                      22.07
2                      21.89
"""


def test_osu_collective_output_says_which_collective_and_which_buffers(tmp_path):
    """OSU's collectives name the collective and, with -d cuda, MPI-CUDA in their title; coll_sweep's
    title also gives the rank count. nccl-tests' are not MPI collectives."""
    (s,) = measurements.load(write(tmp_path, "a2a.txt", OSU_ALLTOALL_CUDA))
    assert (s.metric, s.buffers, s.ranks, s.path) == ("collective_latency", "D", None, "")
    assert measurements.collective_of(s.benchmark) == "alltoall"
    assert s.sizes == [1, 2] and s.values == pytest.approx([22.07e-6, 21.89e-6])
    host = OSU_ALLTOALL_CUDA.replace("MPI-CUDA All-to-All Personalized Exchange", "Allreduce")
    (s,) = measurements.load(write(tmp_path, "ar.txt", host))
    assert (s.buffers, measurements.collective_of(s.benchmark)) == ("H", "allreduce")
    ours = (
        "# OSU MPI reduce_scatter Latency Test (Orrery calibration/bench/coll_sweep), 8 ranks\n"
        "# Size       Avg Latency(us)\n4   9.5\n"
    )
    (s,) = measurements.load(write(tmp_path, "rs.txt", ours))
    assert (s.buffers, s.ranks, s.path, measurements.collective_of(s.benchmark)) == (
        "H",
        8,
        "8 ranks",
        "reduce_scatter",
    )
    assert measurements.collective_of("OSU MPI Broadcast Latency Test v7.5") == "bcast"
    assert measurements.collective_of("OSU MPI Reduce-Scatter Latency Test") == "reduce_scatter"
    for other in (
        "nccl-tests all_reduce_perf",
        "OSU MPI All-to-Allv Personalized Exchange Latency Test v7.5",
        "OSU MPI Allgatherv Latency Test",
        "OSU MPI Non-blocking Allreduce Latency Test",
        "OSU MPI Reduce_scatter_block Latency Test",
        "OSU MPI Gather Latency Test",
    ):
        assert measurements.collective_of(other) is None, other


def test_osu_output_with_more_columns_takes_the_first_value(tmp_path):
    """osu_* -f adds Min, Max and Iterations columns, --validation a Pass/Fail one, osu_mbw_mr
    Messages/s: the figure is the first value column, as without them."""
    full = (
        "# OSU MPI All-to-All Personalized Exchange Latency Test v7.5\n"
        "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
        "1                      22.07             21.50             22.90        1000\n"
        "2                      21.89             21.40             22.60        1000\n"
    )
    (s,) = measurements.load(write(tmp_path, "full.txt", full))
    assert (s.metric, s.unit, s.sizes) == ("collective_latency", "us", [1, 2])
    assert s.values == pytest.approx([22.07e-6, 21.89e-6])
    checked = "# OSU MPI Latency Test v7.5\n# Size          Latency (us)        Validation\n1   1.50   Pass\n"
    (s,) = measurements.load(write(tmp_path, "checked.txt", checked))
    assert (s.metric, s.values) == ("latency", pytest.approx([1.5e-6]))


def test_measurement_csv_carries_a_collective_s_ranks_and_nodes(tmp_path):
    header = "benchmark,metric,path,buffers,size_bytes,value,unit,ranks,nodes,notes\n"
    rows = (
        "alltoall,collective_latency,8 ranks,D,4,20.5,us,8,2,\nalltoall,collective_latency,8 ranks,D,8,20.7,us,8,2,\n"
    )
    (s,) = measurements.load(write(tmp_path, "h.csv", header + rows))
    assert (s.ranks, s.nodes, s.buffers) == (8, 2, "D")
    p = write(tmp_path, "mixed.csv", header + rows + "alltoall,collective_latency,8 ranks,D,16,21,us,8,4,\n")
    with pytest.raises(InputError, match=rf"{p}:4: key 'nodes': got 4, expected 2, as in the series' earlier rows"):
        measurements.load(p)


def test_bandwidth_test_output(tmp_path):
    h2d, d2h = measurements.load(write(tmp_path, "bt.txt", BANDWIDTH_TEST))
    assert (h2d.path, h2d.sizes, h2d.values) == ("H2D", [1000, 2000], [0.5e9, 1.0e9])
    assert (d2h.path, d2h.values) == ("D2H", [0.4e9])


def test_bandwidth_test_s_device_to_device_figures_count_each_byte_once(tmp_path):
    """bandwidthTest reports a D2D copy of S bytes in t as 2 S / t (read and write); Orrery's
    copies.D2D and memcpy_sweep count S / t, as the built-in D2D sweep's measured_scale does."""
    text = (
        " Device to Device Bandwidth, 1 Device(s)\n PINNED Memory Transfers\n"
        "   Transfer Size (Bytes)\tBandwidth(GB/s)\n   1000000\t\t\t1000.0\n   2000000\t\t\t1500.0\n"
    )
    (d2d,) = measurements.load(write(tmp_path, "bt.txt", "[CUDA Bandwidth Test] - Starting...\n" + text))
    assert (d2d.path, d2d.sizes, d2d.values) == ("D2D", [1000000, 2000000], [500e9, 750e9])


def test_nccl_tests_output_takes_out_of_place_time(tmp_path):
    (s,) = measurements.load(write(tmp_path, "nccl.txt", NCCL))
    assert s.benchmark == "nccl-tests all_reduce_perf"
    assert s.sizes == [8, 16] and s.values == pytest.approx([20e-6, 21e-6])


def test_babelstream_output(tmp_path):
    copy, triad = measurements.load(write(tmp_path, "babel.txt", BABEL))
    assert (copy.benchmark, copy.sizes, copy.values) == ("BabelStream Copy", [268400000], [2e12])
    assert triad.values == [2.1e12]


def test_nvbandwidth_output_one_point_per_testcase(tmp_path):
    h2d, peer = measurements.load(write(tmp_path, "nvb.txt", NVBANDWIDTH))  # the latency testcase is no copy
    assert (h2d.benchmark, h2d.metric, h2d.path) == ("nvbandwidth host_to_device_memcpy_ce", "copy_bandwidth", "H2D")
    # one point at nvbandwidth's default buffer (64 MiB), the median over the matrix (N/A left out)
    assert (h2d.sizes, h2d.values, h2d.lines) == ([64 * 1024 * 1024], [55e9], [14])
    assert (peer.path, peer.values) == ("peer", [392e9])
    sized = measurements.load(
        write(tmp_path, "nvb2.txt", NVBANDWIDTH.replace("CUDA Runtime", "Using buffer size 1048576\nCUDA Runtime"))
    )
    assert sized[0].sizes == [1048576]
    broken = NVBANDWIDTH.replace(" 0     55.00     54.00", " 0     55.00     fast")
    with pytest.raises(InputError, match=r"nvb3.txt:14.*bandwidth.*'fast'.*a number"):
        measurements.load(write(tmp_path, "nvb3.txt", broken))


CSV_HEAD = "benchmark,metric,path,buffers,size_bytes,value,unit,ranks,nodes,notes\n"
CSV_GOOD = CSV_HEAD + "pingpong,latency,inter-node,H H,1,2.5,us,2,2,\npingpong,latency,inter-node,H H,2,2.6,us,2,2,\n"


def test_measurement_csv(tmp_path):
    (s,) = measurements.load(write(tmp_path, "m.csv", CSV_GOOD))
    assert s.values == pytest.approx([2.5e-6, 2.6e-6])


@pytest.mark.parametrize(
    "name, text, error",
    [
        ("unitless.csv", CSV_HEAD + "pingpong,latency,inter-node,H H,1,2.5,,2,2,\n", r":2: key 'unit'.*without a unit"),
        (
            "mixed.csv",
            CSV_GOOD + "pingpong,latency,inter-node,H H,4,0.003,ms,2,2,\n",
            r":4: key 'unit': got 'ms', expected the unit of the series",
        ),
        (
            "order.csv",
            CSV_GOOD + "pingpong,latency,inter-node,H H,2,2.7,us,2,2,\n",
            r":4: key 'size': got 2, expected a size larger than the previous",
        ),
        (
            "nan.csv",
            CSV_HEAD + "pingpong,latency,inter-node,H H,1,fast,us,2,2,\n",
            r":2: key 'value': got 'fast', expected a number",
        ),
        (
            "parsecs.csv",
            CSV_HEAD + "pingpong,latency,inter-node,H H,1,2,parsecs,2,2,\n",
            r":2: key 'unit': got 'parsecs'",
        ),
    ],
)
def test_measurement_csv_errors_name_file_line_key_and_value(tmp_path, name, text, error):
    p = write(tmp_path, name, text)
    with pytest.raises(InputError, match=re.escape(str(p)) + error):
        measurements.load(p)


def test_osu_errors_name_the_line(tmp_path):
    p = write(tmp_path, "nounit.txt", "# OSU MPI Latency Test\n# Size      Latency\n1   2.0\n")
    with pytest.raises(InputError, match=rf"{p}:2: key 'unit'.*a unit in the column header"):
        measurements.load(p)
    p = write(tmp_path, "order.txt", OSU_BW + "2   4.0\n")
    with pytest.raises(InputError, match=rf"{p}:7: key 'size': got 2"):
        measurements.load(p)


def test_unknown_format(tmp_path):
    with pytest.raises(
        InputError, match="a measurement CSV or OSU, bandwidthTest, nvbandwidth, nccl-tests or BabelStream"
    ):
        measurements.load(write(tmp_path, "x.txt", "hello\n"))
