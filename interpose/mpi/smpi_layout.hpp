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

/* Room for count x type, zeroed */
inline Laid laid_room(int count, MPI_Datatype type) {
  MPI_Aint true_lb, true_extent;
  PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  Laid l;
  l.room.resize(count > 0 ? (size_t)((count - 1) * extent_of(type) + true_extent) : 0);
  l.at = l.room.data() - true_lb;
  return l;
}

/* from_count x from_type from `from`, as count x type (the same type signature) */
inline Laid laid_out(const void* from, int from_count, MPI_Datatype from_type, int count, MPI_Datatype type) {
  static const DatatypeCopy copy = next<DatatypeCopy>(DATATYPE_COPY);
  Laid l = laid_room(count, type);
  if (count > 0)
    copy(from, from_count, from_type, l.at, count, type);
  return l;
}

/* A rank's data packed: its bytes in the order a message carries them, whatever the layout of the
 * datatype (a broadcast's ranks may each use their own, of the same signature), with SMPI's copy;
 * and back into a buffer of another layout of the same signature. */
inline std::vector<unsigned char> packed(const void* buf, int count, MPI_Datatype type) {
  static const DatatypeCopy copy = next<DatatypeCopy>(DATATYPE_COPY);
  int size = 0;
  PMPI_Type_size(type, &size);
  std::vector<unsigned char> data((size_t)size * (count > 0 ? count : 0));
  if (!data.empty())
    copy(buf, count, type, data.data(), (int)data.size(), MPI_BYTE);
  return data;
}
inline void unpack(const std::vector<unsigned char>& data, void* buf, int count, MPI_Datatype type) {
  static const DatatypeCopy copy = next<DatatypeCopy>(DATATYPE_COPY);
  if (!data.empty())
    copy(data.data(), (int)data.size(), MPI_BYTE, buf, count, type);
}

}  // namespace orrery_smpi
