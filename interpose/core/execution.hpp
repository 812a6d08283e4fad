/* Executing a stream's operation (execution.cpp), for the stream's actor (streams.cpp). */
#ifndef ORRERY_EXECUTION_HPP
#define ORRERY_EXECUTION_HPP

#include "core/runtime.hpp"

namespace orrery {

void execute(Stream* s, Op& op);  // in the stream's actor: returns when the operation is complete

}  // namespace orrery

#endif
