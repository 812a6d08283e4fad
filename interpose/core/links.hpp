/* Link utilisation (links.cpp): what each direction of each platform link carried, and when. */
#ifndef ORRERY_LINKS_HPP
#define ORRERY_LINKS_HPP

#include "core/runtime.hpp"

#include <cstdio>
#include <vector>

namespace orrery {

// Once, with the first rank, before any transfer: the signals the accounting follows.
void install_link_accounting();
// Every transfer SimGrid creates (a copy, an MPI message), from the network-factor callback
// (messages.cpp), which SimGrid calls as it creates one, with the links of its route.
void note_transfer(double size, const std::vector<sg4::Link*>& links);
// The report's link rows (report.cpp), and link_series.tsv finished beside the report.
void write_link_rows(FILE* report);

}  // namespace orrery

#endif
