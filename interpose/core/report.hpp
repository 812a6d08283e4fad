/* The report (report.cpp), written once, at the simulation's end or when the run ends early. */
#ifndef ORRERY_REPORT_HPP
#define ORRERY_REPORT_HPP

namespace orrery {

void write_report();

}  // namespace orrery

#endif
