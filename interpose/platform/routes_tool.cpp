// orrery-routes: the routes of a SimGrid platform, as SimGrid computes them (s4u::Host::route_to).
//
//   orrery-routes PLATFORM [SimGrid flags]  <  pairs
//
// PLATFORM is a platform SimGrid loads: an .xml file, or a platform plugin (.so) with what it
// reads in its environment (liborrery_platform.so: ORRERY_PLATFORM=<platform.json>). Each line of
// stdin, "SRC DST" (two host names), gives one line on stdout:
//
//   SRC DST LATENCY LINK...
//
// LATENCY: the sum of the route's link latencies in seconds (%.17g, exactly as SimGrid holds
// it); LINK...: the links crossed, in order, by their SimGrid names (a full-duplex link's
// directions as NAME_UP and NAME_DOWN). The tests compare two platforms' routes with it
// (tests/integration/test_platform_routes.py). A bad line or an unknown host stops it with one
// line on stderr, exit 2.
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string& message)
{
  std::cout.flush();
  std::fprintf(stderr, "orrery-routes: %s\n", message.c_str());
  std::exit(2);
}

simgrid::s4u::Host* host(const std::string& name, const std::string& platform, int line)
{
  simgrid::s4u::Host* h = simgrid::s4u::Host::by_name_or_null(name);
  if (h == nullptr)
    fail("stdin line " + std::to_string(line) + ": host '" + name + "' is not in " + platform +
         " (expected a host name of the platform)");
  return h;
}

} // namespace

int main(int argc, char** argv)
{
  // SimGrid's own flags (its --log and --cfg) are passed through; it is kept quiet unless told otherwise
  std::vector<std::string> args{argc > 0 ? argv[0] : "orrery-routes", "--log=root.thres:warning",
                                "--log=root.fmt:%m%n"};
  args.insert(args.end(), argv + (argc > 0 ? 1 : 0), argv + argc);
  std::vector<char*> engine_argv;
  for (auto& a : args)
    engine_argv.push_back(a.data());
  engine_argv.push_back(nullptr);
  int engine_argc = static_cast<int>(args.size());
  simgrid::s4u::Engine engine(&engine_argc, engine_argv.data());  // removes the flags it reads

  if (engine_argc != 2)
    fail("usage: orrery-routes PLATFORM [SimGrid flags] < pairs (a platform file, .xml or .so, then "
         "lines \"SRC DST\" on stdin)");
  const std::string platform = engine_argv[1];
  if (not std::ifstream(platform).good())
    fail("platform '" + platform + "': no such file (expected a SimGrid platform, .xml or .so)");
  engine.load_platform(platform);
  engine.seal_platform();

  std::string text;
  int line = 0;
  while (std::getline(std::cin, text)) {
    line++;
    std::istringstream fields(text);
    std::string src;
    std::string dst;
    std::string extra;
    if (not(fields >> src >> dst) or (fields >> extra))
      fail("stdin line " + std::to_string(line) + ": '" + text + "' (expected \"SRC DST\", two host names)");
    std::vector<simgrid::s4u::Link*> links;
    double latency = 0.0;
    try {
      const simgrid::s4u::Host* from = host(src, platform, line);
      from->route_to(host(dst, platform, line), links, &latency);
    } catch (const std::invalid_argument& e) {
      fail("stdin line " + std::to_string(line) + ": no route from " + src + " to " + dst + " in " + platform +
           " (" + e.what() + ")");
    }
    char value[32];
    std::snprintf(value, sizeof value, "%.17g", latency);
    std::cout << src << ' ' << dst << ' ' << value;
    for (const auto* link : links)
      std::cout << ' ' << link->get_name();
    std::cout << '\n';
  }
  return 0;
}
