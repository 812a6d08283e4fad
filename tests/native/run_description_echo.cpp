/* Reads a run description with the shim's generated parser and writes it back as JSON (the
 * generated writer): tests/native/test_run_description.py compares it with what Python wrote. */
#include "run_description.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace orrery {
std::string write_run_description(const RunDescription& d);

// The shim's fatal() ends the run; here the message is all the test needs.
void fatal(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(3);
}
}  // namespace orrery

int main(int argc, char** argv) {
  std::ifstream in(argv[1]);
  std::stringstream text;
  text << in.rdbuf();
  printf("%s\n", orrery::write_run_description(orrery::parse_run_description(text.str(), argv[1])).c_str());
}
