/* Orrery's SimGrid platform, loaded by `smpirun -platform liborrery_platform.so` (SimGrid calls
 * load_platform below) from the structured description that orrery/machines/platform.py writes
 * (platform.json, named by the environment's ORRERY_PLATFORM).
 *
 * The description holds one node's hosts, routers, links and routing graph (a template: node 0's,
 * every name beginning "n0-"), the fabric's switches, links and graph, and for every node the
 * fabric switch each of its NICs meets. The platform is these nodes and that fabric, in one zone,
 * an OrreryZone, which routes by their structure (routing.hpp): a route between two hosts is found
 * in their two nodes' graphs and the fabric's alone, never over the whole platform, and is kept
 * once found. Nothing grows with the square of the node count but the routes a run uses.
 *
 * The routes are the ones SimGrid's DijkstraCache zone finds on the flat platform (platform.xml,
 * the same graph as one zone, which `orrery machine export` prints), link for link and with the
 * same latency to the last bit. SimGrid's own hierarchy of zones cannot carry them: between two
 * zones it has one route, through one gateway, whereas each GPU of a node leaves it through its
 * own rail's NIC.
 */
#include "platform/routing.hpp"

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <xbt/config.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace sg4 = simgrid::s4u;
using simgrid::kernel::resource::StandardLinkImpl;
using simgrid::kernel::routing::NetPoint;
using simgrid::kernel::routing::NetZoneImpl;
using simgrid::kernel::routing::Route;

namespace orrery::platform {
namespace {

[[noreturn]] void fail(const std::string& what)
{
  std::fprintf(stderr, "orrery: platform: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(3);  // Orrery's own error (orrery/run/launch.py)
}

/* A node's own name for one of its netpoints or links: "n0-gpu1" of node 7 is "n7-gpu1". */
std::string of_node(const std::string& template_name, long node)
{
  return "n" + std::to_string(node) + template_name.substr(template_name.find('-'));
}

class OrreryZone : public NetZoneImpl {
public:
  OrreryZone(const std::string& name, Structure s) : NetZoneImpl(name), routes_(std::move(s)) {}

  /* The netpoint's place: (node, local vertex) or (-1, fabric vertex). */
  void place(const NetPoint* np, long node, int vertex)
  {
    if (np->id() >= where_.size())
      where_.resize(np->id() + 1, {-2, -1});
    where_[np->id()] = {node, vertex};
  }
  void set_links(std::vector<StandardLinkImpl*> node_links, std::vector<StandardLinkImpl*> fabric_links,
                 std::vector<double> node_latency, std::vector<double> fabric_latency, StandardLinkImpl* loopback,
                 double loopback_latency)
  {
    node_links_     = std::move(node_links);
    fabric_links_   = std::move(fabric_links);
    node_latency_   = std::move(node_latency);
    fabric_latency_ = std::move(fabric_latency);
    loopback_       = loopback;
    loopback_latency_ = loopback_latency;
  }

  void get_local_route(const NetPoint* src, const NetPoint* dst, Route* into, double* latency) override
  {
    const Resolved& r = resolved(src, dst);
    into->link_list_.insert(into->link_list_.end(), r.links.begin(), r.links.end());
    if (latency)
      for (double l : r.latencies)  // one by one, in SimGrid's order: the same sum to the last bit
        *latency += l;
  }

private:
  /* A route as SimGrid takes it: its links from the source, and their latencies in the order
   * SimGrid sums them (from the destination back, routing.hpp). Kept once found, per pair of
   * netpoints: SimGrid asks for a message's route each time it sends one. */
  struct Resolved {
    std::vector<StandardLinkImpl*> links;
    std::vector<double> latencies;
  };
  const Resolved& resolved(const NetPoint* src, const NetPoint* dst)
  {
    auto [it, fresh] = resolved_.try_emplace(static_cast<uint64_t>(src->id()) << 32 | dst->id());
    Resolved& r = it->second;
    if (!fresh)
      return r;
    if (src == dst) {  // SimGrid's loopback, as its own zones give a host to itself
      r.links.push_back(loopback_);
      r.latencies.push_back(loopback_latency_);
      return r;
    }
    auto [src_node, src_vertex] = where(src);
    auto [dst_node, dst_vertex] = where(dst);
    if (src_node < 0 || dst_node < 0)
      fail("a route from or to a fabric switch (" + src->get_name() + " -> " + dst->get_name() + ")");
    std::vector<Hop> hops;
    try {
      hops = routes_.route(src_node, src_vertex, dst_node, dst_vertex);
    } catch (const std::runtime_error& e) {
      fail(std::string(e.what()) + " from " + src->get_name() + " to " + dst->get_name());
    }
    for (auto h = hops.rbegin(); h != hops.rend(); ++h)
      r.links.push_back(link(*h));
    for (const Hop& h : hops)
      r.latencies.push_back(h.fabric ? fabric_latency_[h.link] : node_latency_[h.link]);
    return r;
  }

  StandardLinkImpl* link(const Hop& h) const
  {
    if (h.fabric)
      return fabric_links_[2 * h.link + h.down];
    return node_links_[2 * (static_cast<size_t>(h.node) * routes_.node_link_count() + h.link) + h.down];
  }
  std::pair<long, int> where(const NetPoint* np) const
  {
    if (np->id() >= where_.size() || where_[np->id()].first == -2)
      fail("no place for netpoint " + np->get_name());
    return where_[np->id()];
  }

  Routes routes_;
  std::unordered_map<uint64_t, Resolved> resolved_;  // (source id, destination id) -> route
  std::vector<std::pair<long, int>> where_;
  std::vector<StandardLinkImpl*> node_links_;    // (node * links of a node + link) * 2 + down
  std::vector<StandardLinkImpl*> fabric_links_;  // link * 2 + down
  std::vector<double> node_latency_;             // of a node's link (the same in every node)
  std::vector<double> fabric_latency_;
  StandardLinkImpl* loopback_ = nullptr;
  double loopback_latency_    = 0;
};

nlohmann::json read(const char* path)
{
  std::ifstream in(path);
  if (!in)
    fail(std::string("cannot read the platform description ") + path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(std::string(path) + ": " + e.what());
  }
}

/* The graph of one part (a node or the fabric): its vertices by name, in the description's order,
 * its links by name and its edges. */
struct Part {
  std::unordered_map<std::string, int> vertex;
  std::unordered_map<std::string, int> link;
};

std::vector<Hop> hops_of(const nlohmann::json& links, const Part& part, const Part* fabric, const std::string& edge)
{
  std::vector<Hop> hops;
  for (const auto& l : links) {
    const std::string name = l.at(0);
    Hop h;
    h.down = l.at(1) == "DOWN";
    if (auto it = part.link.find(name); it != part.link.end()) {
      h.link = it->second;
    } else if (fabric && fabric->link.count(name)) {
      fail("edge " + edge + " crosses fabric link " + name);
    } else {
      fail("edge " + edge + ": unknown link " + name);
    }
    hops.push_back(h);
  }
  return hops;
}

void load(const char* path)
{
  const nlohmann::json d = read(path);
  try {
    if (d.at("format") != "orrery-platform/1")
      fail(std::string(path) + ": format " + d.at("format").dump() + ", expected \"orrery-platform/1\"");
    const long nodes   = d.at("nodes");
    const double speed = d.at("host_speed");
    const auto& node   = d.at("node");
    const auto& fabric = d.at("fabric");

    Structure s;
    Part local, fab;
    for (const auto& v : node.at("netpoints"))
      local.vertex.emplace(v.at(1).get<std::string>(), static_cast<int>(local.vertex.size()));
    for (const auto& v : fabric.at("netpoints"))
      fab.vertex.emplace(v.at(1).get<std::string>(), static_cast<int>(fab.vertex.size()));
    for (const auto& l : node.at("links"))
      local.link.emplace(l.at(0).get<std::string>(), static_cast<int>(local.link.size()));
    for (const auto& l : fabric.at("links"))
      fab.link.emplace(l.at(0).get<std::string>(), static_cast<int>(fab.link.size()));

    // a part's edges, between its own vertices over its own links
    auto edges = [&](const nlohmann::json& list, const Part& part, bool is_fabric, Graph& graph) {
      graph.resize(part.vertex.size());
      for (const auto& e : list) {
        const std::string a = e.at(0), b = e.at(1);
        auto ia = part.vertex.find(a), ib = part.vertex.find(b);
        if (ia == part.vertex.end() || ib == part.vertex.end())
          fail(std::string(path) + ": " + (is_fabric ? "fabric" : "node") + " edge " + a + " - " + b +
               " names a netpoint of no " + (is_fabric ? "fabric" : "node"));
        auto hops = hops_of(e.at(2), part, is_fabric ? nullptr : &fab, a + " - " + b);
        for (Hop& h : hops)
          h.fabric = is_fabric;
        graph.add(ia->second, ib->second, std::move(hops));
      }
    };
    edges(node.at("edges"), local, false, s.node);
    edges(fabric.at("edges"), fab, true, s.fabric);
    for (const auto& nic : node.at("nics")) {  // [router, its link to the fabric]
      Exit x;
      x.vertex = local.vertex.at(nic.at(0).get<std::string>());
      x.link   = local.link.at(nic.at(1).get<std::string>());
      s.exits.push_back(x);
    }
    const auto& attach = d.at("attach");
    if (static_cast<long>(attach.size()) != nodes)
      fail(std::string(path) + ": attach has " + std::to_string(attach.size()) + " nodes, expected " +
           std::to_string(nodes));
    for (const auto& row : attach) {
      if (row.size() != s.exits.size())
        fail(std::string(path) + ": an attach row has " + std::to_string(row.size()) + " switches for " +
             std::to_string(s.exits.size()) + " NICs");
      for (const auto& sw : row)
        s.attach.push_back(sw.get<int>());
    }
    s.nodes = nodes;
    s.node_links = static_cast<int>(local.link.size());
    s.order_from(node.at("order"), fabric.at("order"));

    auto* zone = new OrreryZone(d.at("zone").get<std::string>(), std::move(s));
    // Every netpoint, node by node, then the fabric's switches, as the flat platform declares them
    std::vector<StandardLinkImpl*> node_links(2 * nodes * local.link.size());
    std::vector<double> node_latency(local.link.size());
    std::vector<std::string> local_names(local.vertex.size());
    for (const auto& [name, i] : local.vertex)
      local_names[i] = name;
    std::vector<bool> is_host(local.vertex.size());
    for (const auto& v : node.at("netpoints"))
      is_host[local.vertex.at(v.at(1).get<std::string>())] = v.at(0) == "host";
    for (long n = 0; n < nodes; n++) {
      for (size_t v = 0; v < local_names.size(); v++) {
        const std::string name = of_node(local_names[v], n);
        NetPoint* np = is_host[v] ? zone->get_iface()->create_host(name, {speed})->get_netpoint()
                                  : zone->create_router(name);
        zone->place(np, n, static_cast<int>(v));
      }
      for (const auto& l : node.at("links")) {
        const std::string name = l.at(0);
        const int i            = local.link.at(name);
        auto* link = zone->get_iface()->create_split_duplex_link(of_node(name, n), {l.at(1).get<double>()});
        link->set_latency(l.at(2).get<double>());
        node_links[2 * (n * local.link.size() + i)]     = link->get_link_up()->get_impl();
        node_links[2 * (n * local.link.size() + i) + 1] = link->get_link_down()->get_impl();
        node_latency[i]                                 = l.at(2).get<double>();
      }
    }
    std::vector<StandardLinkImpl*> fabric_links(2 * fab.link.size());
    std::vector<double> fabric_latency(fab.link.size());
    for (const auto& v : fabric.at("netpoints"))
      zone->place(zone->create_router(v.at(1).get<std::string>()), -1, fab.vertex.at(v.at(1).get<std::string>()));
    for (const auto& l : fabric.at("links")) {
      const std::string name = l.at(0);
      const int i            = fab.link.at(name);
      auto* link             = zone->get_iface()->create_split_duplex_link(name, {l.at(1).get<double>()});
      link->set_latency(l.at(2).get<double>());
      fabric_links[2 * i]     = link->get_link_up()->get_impl();
      fabric_links[2 * i + 1] = link->get_link_down()->get_impl();
      fabric_latency[i]       = l.at(2).get<double>();
    }
    // a host's route to itself: the network model's loopback, as SimGrid's own zones give it
    // (run.py configures it: network/loopback-bw and -lat)
    sg4::Link* loopback = sg4::Link::by_name_or_null("__loopback__");
    if (loopback == nullptr)
      fail("SimGrid's network model has no loopback link (__loopback__)");
    const double loopback_latency = loopback->get_latency();
    zone->set_links(std::move(node_links), std::move(fabric_links), std::move(node_latency), std::move(fabric_latency),
                    loopback->get_impl(), loopback_latency);
    zone->seal();
    // what SimGrid's XML parser signals at the platform's end (and a platform library must too):
    // the engine's presolve, tracing's and plugins' set-up
    sg4::Engine::on_platform_created();
  } catch (const std::exception& e) {  // a missing key or a wrong type (nlohmann), an order that lists too little
    fail(std::string(path) + ": " + e.what());
  }
}

}  // namespace
}  // namespace orrery::platform

extern "C" __attribute__((visibility("default"))) void load_platform(const sg4::Engine&)
{
  const char* path = std::getenv("ORRERY_PLATFORM");
  if (path == nullptr || *path == '\0')
    orrery::platform::fail("ORRERY_PLATFORM names no platform description (orrery run sets it)");
  orrery::platform::load(path);
}
