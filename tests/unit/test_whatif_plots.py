"""A what-if study's figure (orrery.sweep.plots.variants) and its points' names (point_labels),
from a sweep table written by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from orrery.errors import InputError
from orrery.sweep import plots

pytestmark = pytest.mark.unit


def whatif_table() -> pd.DataFrame:
    """Four points of one run: as described, a slower fabric, GPUDirect off (failed), one NIC."""
    rows = [
        # set.nic.bandwidth, set.gpudirect.rdma, set.nic.per_node, status, makespan, kernel, mpi, exposed
        (None, None, None, "completed", 10e-3, 4e-3, 5e-3, 5e-3),
        ("100Gb/s", None, None, "completed", 12e-3, 4e-3, 7e-3, 6e-3),
        (None, False, None, "exited", None, None, None, None),
        (None, None, 1, "completed", 9.5e-3, 4e-3, 4.5e-3, 4e-3),
    ]
    table = pd.DataFrame(
        [
            {
                "point": f"p{i}",
                "machine": "h100-ib200",
                "set.nic.bandwidth": r[0],
                "set.gpudirect.rdma": r[1],
                "set.nic.per_node": r[2],
                "args": "-niter 3",
                "nodes": 4,
                "gpus_per_node": 4,
                "ranks_per_node": 4,
                "gpus": 16,
                "ranks": 16,
                "series": i + 1,
                "status": r[3],
                "makespan_s": r[4],
                "kernel_mean_s": r[5],
                "mpi_mean_s": r[6],
                "comm_exposed_mean_s": r[7],
                "idle_max_s": 0.0,
                "error": None,
            }
            for i, r in enumerate(rows)
        ]
    )
    return table.astype(
        {
            "set.gpudirect.rdma": "boolean",
            "set.nic.per_node": "Int64",
            "makespan_s": "Float64",
            "kernel_mean_s": "Float64",
            "mpi_mean_s": "Float64",
            "comm_exposed_mean_s": "Float64",
        }
    )


def test_points_are_named_by_the_overrides_they_give_and_the_first_by_none():
    # machine, args and the layout are alike at every point: they name none
    assert plots.point_labels(whatif_table()) == [
        "as described",
        "nic.bandwidth=100Gb/s",
        "gpudirect.rdma=False",
        "nic.per_node=1",
    ]
    assert plots.point_labels(whatif_table(), unset="baseline")[0] == "baseline"


def test_a_layout_that_varies_names_every_point():
    table = whatif_table()
    table["nodes"] = [4, 4, 4, 8]
    assert plots.point_labels(table) == [
        "nodes=4",
        "nic.bandwidth=100Gb/s, nodes=4",
        "gpudirect.rdma=False, nodes=4",
        "nic.per_node=1, nodes=8",
    ]


def test_the_figure_draws_each_completed_point_s_makespan_its_change_and_its_parts():
    fig = plots.variants(whatif_table())
    span, parts = fig.axes
    # the failed point is left out; the others in the table's order, top down
    assert [t.get_text() for t in span.get_yticklabels()] == ["as described", "nic.bandwidth=100Gb/s", "nic.per_node=1"]
    assert [b.get_width() for b in span.patches] == pytest.approx([10e-3, 12e-3, 9.5e-3])
    # the change from the reference: 12 / 10 - 1 and 9.5 / 10 - 1
    assert [t.get_text() for t in span.texts] == ["reference", "+20.0%", "-5.0%"]
    widths = [b.get_width() for b in parts.patches]
    assert widths == pytest.approx([4e-3, 4e-3, 4e-3, 5e-3, 7e-3, 4.5e-3, 5e-3, 6e-3, 4e-3])  # kernel, MPI, exposed
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["kernel", "MPI", "exposed communication"]


def test_the_reference_may_be_another_completed_point():
    fig = plots.variants(whatif_table(), labels=["a", "b", "c", "d"], reference=3)
    span = fig.axes[0]
    assert [t.get_text() for t in span.get_yticklabels()] == ["a", "b", "d"]
    assert [t.get_text() for t in span.texts] == [f"{10 / 9.5 - 1:+.1%}", f"{12 / 9.5 - 1:+.1%}", "reference"]


def test_a_reference_that_did_not_complete_or_labels_of_another_count_are_refused():
    with pytest.raises(InputError) as e:
        plots.variants(whatif_table(), reference=2)
    assert str(e.value) == "variants: key 'reference': got 2, expected the position of a completed point in the table"
    with pytest.raises(InputError) as e:
        plots.variants(whatif_table(), labels=["a", "b"])
    assert str(e.value) == "variants: key 'labels': got 2, expected a label per row of the table (4)"
