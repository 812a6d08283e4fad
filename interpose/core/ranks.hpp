/* The ranks (ranks.cpp): the table of them, and the mutex the streams' condition variables need. */
#ifndef ORRERY_RANKS_HPP
#define ORRERY_RANKS_HPP

#include "core/runtime.hpp"

#include <map>
#include <memory>

#pragma GCC visibility push(default)
namespace orrery {

std::map<long, std::unique_ptr<Rank>>& ranks();  // by actor pid
sg4::MutexPtr& sim_mutex();                       // created with the first rank
/* The rank whose code is running: the calling rank, or the rank whose stream runs (a host
 * function); -1 outside any (SimGrid itself). */
int current_rank_id();

}  // namespace orrery
#pragma GCC visibility pop

#endif
