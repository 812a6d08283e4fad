/* Routes of Orrery's structured platform: see routing.hpp. */
#include "platform/routing.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>

namespace orrery::platform {

void Graph::add(int a, int b, std::vector<Hop> hops)
{
  // as SimGrid keeps a symmetrical route: the way back reversed (RoutedZone::new_extended_route)
  std::vector<Hop> back(hops.rbegin(), hops.rend());
  for (Hop& h : back)
    h.down = !h.down;
  out[a].push_back({b, std::move(hops)});
  out[b].push_back({a, std::move(back)});
}

void Structure::order_from(const nlohmann::json& node_order, const nlohmann::json& fabric_order)
{
  slots = static_cast<int64_t>(node_order.size());
  slot.assign(node.size(), -1);
  for (size_t i = 0; i < node_order.size(); i++) {
    const auto& entry = node_order[i];
    if (entry.is_number())
      slot.at(entry.get<int>()) = static_cast<int>(i);
  }
  for (int s : slot)
    if (s < 0)
      throw std::invalid_argument("a vertex of the node has no place in its order");
  fabric_key.resize(fabric.size());
  if (fabric_order.size() != fabric.size())
    throw std::invalid_argument("the fabric's order does not list every switch");
  for (size_t v = 0; v < fabric.size(); v++)
    fabric_key[v] = fabric_order[v].at(0).get<int64_t>() * slots + fabric_order[v].at(1).get<int64_t>();
}

Routes::Routes(Structure s) : s_(std::move(s))
{
  mark_[0].resize(s_.node.size());
  mark_[1].resize(s_.node.size());
  mark_[2].resize(s_.fabric.size());
  for (const Exit& x : s_.exits) {
    exit_up_.push_back({Hop{false, false, 0, x.link}});
    exit_down_.push_back({Hop{false, true, 0, x.link}});
  }
}

int64_t Routes::key(const Vertex& v, long na, long nb) const
{
  if (v.part == 2)
    return s_.fabric_key[v.index];
  return (v.part == 0 ? na : nb) * s_.slots + s_.slot[v.index];
}

std::vector<Hop> Routes::route(long na, int a, long nb, int b)
{
  std::vector<Hop> hops;
  search(na, a, nb, b, hops);
  return hops;
}

void Routes::search(long na, int a, long nb, int b, std::vector<Hop>& into)
{
  const bool same = na == nb;
  const int dst_part = same ? 0 : 1;
  const size_t nics  = s_.exits.size();
  if (++stamp_ == 0) {  // the stamps wrapped: forget every mark
    for (auto& marks : mark_)
      std::fill(marks.begin(), marks.end(), Mark{});
    stamp_ = 1;
  }
  auto mark = [&](const Vertex& v) -> Mark& {
    Mark& m = mark_[v.part][v.index];
    if (m.stamp != stamp_)
      m = Mark{stamp_, std::numeric_limits<uint64_t>::max(), {-1, -1}, nullptr, false};
    return m;
  };
  using Entry = std::tuple<uint64_t, int64_t, int, int>;  // cost, flat order, part, index
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  auto relax = [&](const Vertex& from, uint64_t cost, const Vertex& to, const std::vector<Hop>* hops) {
    Mark& m = mark(to);
    const uint64_t c = cost + hops->size();
    if (c < m.cost) {
      m.cost = c;
      m.pred = from;
      m.hops = hops;
      queue.emplace(c, key(to, na, nb), to.part, to.index);
    }
  };
  const Vertex src{0, a};
  mark(src).cost = 0;
  queue.emplace(0, key(src, na, nb), 0, a);
  const Vertex dst{dst_part, b};
  while (!queue.empty()) {
    auto [cost, order, part, index] = queue.top();
    queue.pop();
    const Vertex v{part, index};
    Mark& m = mark(v);
    if (m.settled || cost != m.cost)
      continue;
    m.settled = true;
    if (part == dst.part && index == dst.index)
      break;
    if (part == 2) {
      for (const auto& e : s_.fabric.out[index])
        relax(v, cost, {2, e.to}, &e.hops);
      // down to the NICs of the two nodes that meet here
      for (int p = 0; p < (same ? 1 : 2); p++) {
        const long node = p == 0 ? na : nb;
        for (size_t i = 0; i < nics; i++)
          if (s_.attach[node * nics + i] == index)
            relax(v, cost, {p, s_.exits[i].vertex}, &exit_down_[i]);
      }
    } else {
      for (const auto& e : s_.node.out[index])
        relax(v, cost, {part, e.to}, &e.hops);
      const long node = part == 0 ? na : nb;
      for (size_t i = 0; i < nics; i++)
        if (s_.exits[i].vertex == index)
          relax(v, cost, {2, s_.attach[node * nics + i]}, &exit_up_[i]);
    }
  }
  if (!mark(dst).settled)
    throw std::runtime_error("no route");
  // SimGrid's order (DijkstraZone::get_local_route): the edges from the destination back to the
  // source, each edge's links as it keeps them; the zone reverses it into the route
  for (Vertex v = dst; !(v.part == src.part && v.index == src.index);) {
    const Mark& m = mark(v);
    // a node's link belongs to the node of the edge's source, or, down from a switch, of its end
    const int part = m.pred.part == 2 ? v.part : m.pred.part;
    for (Hop h : *m.hops) {
      if (!h.fabric)
        h.node = part == 0 ? na : nb;
      into.push_back(h);
    }
    v = m.pred;
  }
}

}  // namespace orrery::platform
