/* liborrery_smpi.so: MPI_Dims_create as Open MPI computes it.
 *
 * A program that lays its ranks out with MPI_Dims_create (a 2-D or 3-D domain decomposition, then
 * MPI_Cart_create and MPI_Cart_shift for its halo neighbours) gets its grid, and so its halo sizes
 * and neighbours, from this one call. SMPI's (SimGrid 3.32, and its development head of 2026-08)
 * is Open MPI's algorithm, the number's prime factors dealt largest first to the smallest
 * dimension, with a factorization that stops early: its trial division ends when d * d < num
 * fails, so that where what is left of the number is the square of the next prime tried, the
 * square is dealt as one factor. 9 ranks in 2-D came out 9 x 1, 25 as 25 x 1, 36 as 9 x 4, 100 as
 * 25 x 4 and 144 as 16 x 9, where Open MPI gives 3 x 3, 5 x 5, 6 x 6, 10 x 10 and 12 x 12: the
 * simulated program decomposed its domain otherwise than the real one would, silently.
 *
 * Here the same algorithm runs on the whole prime factorization, as Open MPI's (ompi/mpi/c/
 * dims_create.c, since 2016) does. Invalid arguments, and calls with no dimension left to choose,
 * are SMPI's to answer. */
#include "mpi/smpi_next.hpp"

#include <smpi/smpi.h>

#include <algorithm>
#include <functional>
#include <vector>

#define EXPORTED __attribute__((visibility("default")))

namespace {

// num's prime factors, smallest first
std::vector<int> prime_factors(int num) {
  std::vector<int> factors;
  for (int d = 2; (long long)d * d <= num; d += d == 2 ? 1 : 2)
    while (num % d == 0) {
      factors.push_back(d);
      num /= d;
    }
  if (num > 1)
    factors.push_back(num);
  return factors;
}

}  // namespace

EXPORTED int PMPI_Dims_create(int nnodes, int ndims, int* dims);
int PMPI_Dims_create(int nnodes, int ndims, int* dims) {
  using Real = int (*)(int, int, int*);
  static const Real real = orrery_smpi::next<Real>("PMPI_Dims_create");
  if (!dims || ndims < 1 || nnodes < 1)
    return real(nnodes, ndims, dims);
  int free_procs = nnodes, free_dims = 0;
  for (int i = 0; i < ndims; i++) {
    if (dims[i] < 0 || (dims[i] > 0 && nnodes % dims[i] != 0))
      return real(nnodes, ndims, dims);  // SMPI's error
    if (dims[i] == 0)
      free_dims++;
    else
      free_procs /= dims[i];
  }
  if (free_dims == 0 || free_procs == 1)  // nothing to factor: SMPI's answer is Open MPI's
    return real(nnodes, ndims, dims);
  // Each prime factor, largest first, multiplies the smallest dimension so far (the first such)
  std::vector<int> bins(free_dims, 1);
  const std::vector<int> factors = prime_factors(free_procs);
  for (auto f = factors.rbegin(); f != factors.rend(); ++f)
    *std::min_element(bins.begin(), bins.end()) *= *f;
  std::sort(bins.begin(), bins.end(), std::greater<>());
  auto next_bin = bins.begin();
  for (int i = 0; i < ndims; i++)
    if (dims[i] == 0)
      dims[i] = *next_bin++;
  return MPI_SUCCESS;
}
