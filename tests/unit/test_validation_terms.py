"""Validations of several machines side by side (orrery.calibration.report): every measured size
with its term, the figures per term, a figure per sweep; from results written by hand."""

from __future__ import annotations

import pytest

from orrery.calibration import report, sweeps
from orrery.calibration.validate import SweepResult
from orrery.errors import InputError

pytestmark = pytest.mark.unit


def catalogued(machine: str, kind: tuple[str, str, str]) -> str:
    return next(s.name for s in sweeps.sweeps_for(machine) if s.kind == kind)


def result(name: str, sizes: list[int], measured: list[float], errors: list[float]) -> SweepResult:
    simulated = [m * (1 + e) for m, e in zip(measured, errors)]
    return SweepResult(name, "us", "", sizes, measured, simulated, errors, 0.0, 0.0, 0.0)  # summaries unused


LATENCY = catalogued("gh200-slingshot", ("latency", "inter-node", "H H"))
BW = catalogued("gh200-slingshot", ("bandwidth", "inter-node", "D D"))
BIBW = catalogued("gh200-slingshot", ("bibw", "inter-node", "D D"))
D_H = catalogued("h100-pcie", ("bibw", "intra-node", "D H"))


def validations() -> dict:
    gh200 = [
        result(LATENCY, [1, 2, 4], [2.0, 2.0, 2.1], [0.1, -0.3, 0.2]),
        result(BW, [1, 2], [1.0, 2.0], [0.05, -0.01]),
        result(BIBW, [64], [3.0], [0.5]),
    ]
    pcie = [result(D_H, [8, 16], [1.0, 2.0], [-0.25, 0.125])]
    return {"built-in": {"gh200-slingshot": gh200, "h100-pcie": pcie}, "other": {"h100-pcie": pcie}}


def test_every_measured_size_is_a_row_with_the_term_its_sweep_judges():
    points = report.error_points(validations())
    assert list(points.columns) == list(report.POINT_COLUMNS)
    assert len(points) == 3 + 2 + 1 + 2 + 2
    first = points.iloc[0]
    assert (first["variant"], first["machine"], first["term"], first["sweep"], first["size"]) == (
        "built-in",
        "gh200-slingshot",
        "point-to-point latency",
        LATENCY,
        1,
    )
    assert first["simulated"] == pytest.approx(2.2) and first["error"] == 0.1
    # osu_bw and osu_bibw both judge the bandwidth; the D H sweep is compared, not fitted
    assert points[points["sweep"] == BIBW]["term"].tolist() == ["point-to-point bandwidth"]
    assert points[points["sweep"] == BW]["fit_input"].tolist() == [True, True]
    assert points[points["sweep"] == D_H]["fit_input"].tolist() == [False] * 4
    assert points["variant"].tolist()[-2:] == ["other", "other"]


def test_a_sweep_outside_the_machine_s_catalogue_is_refused():
    with pytest.raises(InputError) as e:
        report.error_points({"built-in": {"h100-ib200": [result(LATENCY, [1], [1.0], [0.0])]}})
    assert str(e.value) == (
        f"error_points: key 'sweep': got {LATENCY!r}, expected a sweep of h100-ib200's default set (orrery validate's)"
    )


def test_whether_a_sweep_is_fitted_is_its_set_s_word():
    """clariden's osu_latency D D between nodes is only compared in gh200-slingshot's default set
    (santis's windows contradict it) and fitted in the clariden set."""
    name = "osu_latency D D inter-node (Alps clariden GH200, Open MPI 5)"
    runs = {"built-in": {"gh200-slingshot": [result(name, [1], [20.0], [-0.7])]}}
    assert report.error_points(runs)["fit_input"].tolist() == [False]
    assert report.error_points(runs, sweep_sets={"gh200-slingshot": "clariden"})["fit_input"].tolist() == [True]
    with pytest.raises(InputError) as e:
        report.error_points(
            {"x": {"gh200-slingshot": [result(BW, [1], [1.0], [0.0])]}}, {"gh200-slingshot": "clariden"}
        )
    assert "expected a sweep of gh200-slingshot's clariden set" in str(e.value)


def test_each_term_pools_its_sweeps_points_and_a_term_without_any_says_so():
    terms = report.term_table(report.error_points(validations()))
    assert terms["term"].tolist() == list(report.TERM_NAMES) * 3
    gh200 = terms[terms["machine"] == "gh200-slingshot"].set_index("term")
    lat, bw = gh200.loc["point-to-point latency"], gh200.loc["point-to-point bandwidth"]
    # |errors| 0.1, 0.3, 0.2: median 0.2; 95th percentile between the 2nd and 3rd of 3, 0.9 of the way
    assert (lat["sweeps"], lat["points"]) == (1, 3)
    assert lat["median_abs_error"] == pytest.approx(0.2)
    assert lat["p95_abs_error"] == pytest.approx(0.2 + 0.9 * 0.1)
    assert lat["max_abs_error"] == pytest.approx(0.3)
    assert (lat["worst_sweep"], lat["worst_size"], lat["worst_error"]) == (LATENCY, 2, -0.3)
    # osu_bw's 0.05 and 0.01 with osu_bibw's 0.5
    assert (bw["sweeps"], bw["points"]) == (2, 3)
    assert bw["median_abs_error"] == pytest.approx(0.05)
    assert bw["p95_abs_error"] == pytest.approx(0.05 + 0.9 * 0.45)
    assert (bw["worst_sweep"], bw["worst_size"], bw["worst_error"]) == (BIBW, 64, 0.5)
    for term in ("copies", "collectives", "API overheads"):
        row = gh200.loc[term]
        assert (row["sweeps"], row["points"]) == (0, 0)
        assert row[list(report.TERM_FIGURES)].isna().all()
    pcie = terms[(terms["machine"] == "h100-pcie") & (terms["variant"] == "other")].set_index("term")
    assert pcie.loc["point-to-point bandwidth", "median_abs_error"] == pytest.approx((0.25 + 0.125) / 2)
    assert pcie.loc["point-to-point bandwidth", "worst_error"] == -0.25


def test_a_figure_per_sweep_holds_the_measured_curve_and_each_variant_s_simulated_one():
    runs = validations()
    shifted = [result(D_H, [8, 16], [1.0, 2.0], [0.5, 0.5])]
    runs["other"] = {"h100-pcie": shifted}
    (fig,) = report.sweep_figures(runs, "h100-pcie")
    top, bottom = fig.axes
    assert [line.get_label() for line in top.get_lines()] == ["measured", "simulated, built-in", "simulated, other"]
    assert [list(line.get_ydata()) for line in top.get_lines()] == [[1.0, 2.0], [0.75, 2.25], [1.5, 3.0]]
    assert [list(line.get_ydata()) for line in bottom.get_lines()[:2]] == [[-25.0, 12.5], [50.0, 50.0]]
    assert len(report.sweep_figures(runs, "gh200-slingshot")) == 3  # only the variant that ran it


def test_figures_of_a_machine_no_variant_ran_or_of_unlike_sweeps_are_refused():
    runs = validations()
    with pytest.raises(InputError) as e:
        report.sweep_figures(runs, "h100-ib200")
    assert str(e.value) == (
        "sweep_figures: key 'machine': got 'h100-ib200', expected a machine of the validations: "
        "gh200-slingshot, h100-pcie"
    )
    runs["other"] = {"h100-pcie": [result(D_H, [8, 16], [1.0, 2.5], [0.0, 0.0])]}  # another measurement
    with pytest.raises(InputError) as e:
        report.sweep_figures(runs, "h100-pcie")
    assert str(e.value) == (
        "sweep_figures: key 'validations': got 'h100-pcie', expected the same sweeps of h100-pcie in every variant"
    )
