/* liborrery_smpi.so: a datatype's data in a buffer of its own, laid out as MPI addresses it, and
 * the SMPI members that move and combine such data (smpi_colls.cpp, smpi_reductions.cpp). */
#pragma once

#include "mpi/smpi_next.hpp"

#include <smpi/smpi.h>

#include <cstddef>
#include <vector>

namespace orrery_smpi {

// simgrid::smpi::Datatype::copy (static): count x type from one buffer into another's layout
using DatatypeCopy = int (*)(const void* src, int scount, MPI_Datatype stype, void* dst, int rcount, MPI_Datatype rtype);
#define DATATYPE_COPY "_ZN7simgrid4smpi8Datatype4copyEPKviPS1_PviS4_"
// simgrid::smpi::Op::apply(const void* in, void* inout, const int* len, Datatype*) const: the object first
using OpApply = void (*)(const void* op, const void* in, void* inout, const int* len, const void* type);
#define OP_APPLY "_ZNK7simgrid4smpi2Op5applyEPKvPvPKiPNS0_8DatatypeE"

inline MPI_Aint extent_of(MPI_Datatype type) {
  MPI_Aint lb, extent;
  PMPI_Type_get_extent(type, &lb, &extent);
  return extent;
}

/* count x type's bytes, laid out in memory (from the first byte its true lower bound reaches). */
struct Laid {
  std::vector<unsigned char> room;
  unsigned char* at = nullptr;  // where the data starts, as MPI addresses it
};

/* from_count x from_type from `from`, as count x type (the same type signature) */
inline Laid laid_out(const void* from, int from_count, MPI_Datatype from_type, int count, MPI_Datatype type) {
  static const DatatypeCopy copy = next<DatatypeCopy>(DATATYPE_COPY);
  MPI_Aint true_lb, true_extent;
  PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  Laid l;
  l.room.resize(count > 0 ? (size_t)((count - 1) * extent_of(type) + true_extent) : 0);
  l.at = l.room.data() - true_lb;
  if (count > 0)
    copy(from, from_count, from_type, l.at, count, type);
  return l;
}

}  // namespace orrery_smpi
