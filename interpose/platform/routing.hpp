/* Routes of Orrery's structured platform (platform.cpp): a node's graph (the same for every node),
 * the fabric's graph, and which switch each node's NICs meet.
 *
 * A route is the one SimGrid's Dijkstra zone finds on the flat platform, the same graph in one
 * zone (DijkstraZone::get_local_route, SimGrid 3.32): fewest links, and among equal ones the path
 * its search settles first. That search pops vertices by (links so far, graph id) and keeps a
 * vertex's first predecessor at its final cost, so a route is fixed by the costs and by the order
 * of the graph ids, which SimGrid numbers as netpoints first appear in the platform's routes.
 *
 * The flat search from a host in node A to one in node B only ever settles its route inside A, B
 * and the fabric: a path through a third node's NICs is longer than the fabric's own. So the same
 * search over A, B and the fabric alone, with every vertex ordered by its flat graph id, gives the
 * flat route exactly, and it stops once the destination is settled. A node's vertices and a
 * switch's are ordered by (node, slot): a node's vertices and the switches its NICs introduce
 * appear in the same order in every node (the template's slots), and switches no node introduces
 * come after every node. The zone (platform.cpp) keeps each route it asked for.
 */
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace orrery::platform {

/* One link of a route, crossed UP (from the end it was declared with first) or DOWN. */
struct Hop {
  bool fabric = false;  // a fabric link (else a link of node `node`)
  bool down   = false;
  long node   = 0;
  int link    = 0;      // index among the node's links or the fabric's
};

/* A graph of one part of the platform: out-edges in declaration order, each with its links. */
struct Graph {
  struct Edge {
    int to;
    std::vector<Hop> hops;
  };
  std::vector<std::vector<Edge>> out;

  void resize(size_t vertices) { out.resize(vertices); }
  size_t size() const { return out.size(); }
  /* A symmetrical edge, as the flat platform's <route symmetrical="YES">: b to a crosses the same
   * links in reverse order and direction. */
  void add(int a, int b, std::vector<Hop> hops);
};

/* A node's NIC: the router through which its node meets the fabric, and the link to its switch. */
struct Exit {
  int vertex = 0;
  int link   = 0;
};

struct Structure {
  Graph node;                // the template: every node's graph
  Graph fabric;              // the switches
  std::vector<Exit> exits;   // the template's NICs
  std::vector<int> attach;   // node * exits + exit -> fabric vertex
  long nodes     = 0;
  int node_links = 0;
  std::vector<int> slot;            // a node's vertex -> its slot
  std::vector<int64_t> fabric_key;  // a switch's flat order
  int64_t slots = 0;

  /* The flat order: the node's "order" lists, slot by slot, its vertices (their indices) and, as
   * "@i", the slot where exit i's switch first appears; the fabric's gives each switch [node, slot]
   * (orrery/machines/platform.py, description). */
  void order_from(const nlohmann::json& node_order, const nlohmann::json& fabric_order);
};

class Routes {
public:
  explicit Routes(Structure s);
  int node_link_count() const { return s_.node_links; }

  /* The links from vertex `a` of node `na` to vertex `b` of node `nb`, in the order SimGrid sums
   * their latencies: from the destination's end back, each edge's links as SimGrid keeps them
   * (the route's links are these in reverse). */
  std::vector<Hop> route(long na, int a, long nb, int b);

private:
  /* A vertex of the search: part 0 = the source's node, 1 = the destination's, 2 = the fabric. */
  struct Vertex {
    int part;
    int index;
  };
  void search(long na, int a, long nb, int b, std::vector<Hop>& into);
  int64_t key(const Vertex& v, long na, long nb) const;

  Structure s_;
  // the search's scratch, reused: cost, predecessor and its hops, a stamp per search
  struct Mark {
    uint32_t stamp = 0;
    uint64_t cost  = 0;
    Vertex pred{-1, -1};
    const std::vector<Hop>* hops = nullptr;
    bool settled = false;
  };
  std::vector<Mark> mark_[3];
  uint32_t stamp_ = 0;
  std::vector<std::vector<Hop>> exit_up_, exit_down_;  // exit -> its link, UP or DOWN (node 0)
};

}  // namespace orrery::platform
