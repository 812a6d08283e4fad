"""MPI_Dims_create answers as Open MPI does (interpose/mpi/smpi_dims.cpp): the number's prime
factors, largest first, each multiplying the smallest dimension so far (the first of equals), the
dimensions then in decreasing order. SMPI 3.32's factorization stopped early and dealt the square of
a prime as one factor: a 2-D grid of 36 ranks came out 9 x 4 instead of 6 x 6, of 9 ranks 9 x 1,
of 100 ranks 25 x 4.

Derived by hand: 36 = 2 2 3 3 into two dimensions: (3, 1), (3, 3), (6, 3), (6, 6): 6 x 6.
72 = 2 2 2 3 3: (3, 1), (3, 3), (6, 3), (6, 6), (12, 6): 12 x 6, where the most even grid would be
9 x 8 (MPICH's): Open MPI's dealing, not the best one. 36 into three: (3, 1, 1), (3, 3, 1),
(3, 3, 2), (3, 3, 4): 4 x 3 x 3. 75 = 3 5 5: (5, 1), (5, 5), (15, 5). 30 = 2 3 5 into three:
(5, 1, 1), (5, 3, 1), (5, 3, 2). With dimensions fixed: 36 as (0, 2, 0) leaves 18 = 2 3 3 to two
dimensions, (3, 1), (3, 3), (6, 3): (6, 2, 3); 24 as (0, 0, 3) leaves 8: (2, 1), (2, 2), (4, 2):
(4, 2, 3)."""

from __future__ import annotations

import math
import re

import pytest
from conftest import mpicc_program, orrery

pytestmark = pytest.mark.native

MAX_N, MAX_NDIMS = 600, 4


@pytest.fixture(scope="session")
def dims_answers(tmp_path_factory) -> dict[tuple[str, int, int], tuple[int, ...]]:
    program = mpicc_program(tmp_path_factory, "dims")
    out = tmp_path_factory.mktemp("dims-run")
    proc = orrery("run", "--gpus-per-node", "1", "--out", str(out), "--", str(program), str(MAX_N), str(MAX_NDIMS))
    assert proc.returncode == 0, proc.stderr
    return {
        (what, int(n), int(k)): tuple(int(x) for x in rest.split())
        for what, n, k, rest in re.findall(r"^(dims|fixed) (\d+) (\d+):([ \d]*)$", proc.stdout, re.M)
    }


@pytest.mark.parametrize(
    "n, ndims, expected",
    [
        (9, 2, (3, 3)),
        (25, 2, (5, 5)),
        (36, 2, (6, 6)),
        (49, 2, (7, 7)),
        (100, 2, (10, 10)),
        (144, 2, (12, 12)),
        (72, 2, (12, 6)),
        (75, 2, (15, 5)),
        (36, 3, (4, 3, 3)),
        (27, 3, (3, 3, 3)),
        (64, 3, (4, 4, 4)),
        (30, 3, (5, 3, 2)),
        (12, 4, (3, 2, 2, 1)),
        (7, 2, (7, 1)),
    ],
)
def test_the_grid_is_open_mpi_s(dims_answers, n, ndims, expected):
    assert dims_answers[("dims", n, ndims)] == expected


def test_dimensions_the_caller_fixed_are_kept_and_the_rest_dealt(dims_answers):
    assert dims_answers[("fixed", 36, 3)] == (6, 2, 3)
    assert dims_answers[("fixed", 24, 3)] == (4, 2, 3)


def open_mpi_grid(n: int, ndims: int) -> tuple[int, ...]:
    """Open MPI's dealing, written from its description: the prime factors, largest first, each to
    the smallest dimension (the first of equals), then decreasing order."""
    factors, m, d = [], n, 2
    while d * d <= m:
        while m % d == 0:
            factors.append(d)
            m //= d
        d += 1
    if m > 1:
        factors.append(m)
    bins = [1] * ndims
    for f in sorted(factors, reverse=True):
        bins[bins.index(min(bins))] *= f
    return tuple(sorted(bins, reverse=True))


def test_every_grid_up_to_600_ranks_covers_them_in_decreasing_dimensions_as_open_mpi_deals_them(dims_answers):
    for n in range(1, MAX_N + 1):
        for ndims in range(1, MAX_NDIMS + 1):
            got = dims_answers[("dims", n, ndims)]
            assert math.prod(got) == n and list(got) == sorted(got, reverse=True), (n, ndims, got)
            assert got == open_mpi_grid(n, ndims), (n, ndims)
