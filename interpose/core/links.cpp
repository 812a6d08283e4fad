/* Link utilisation: for each direction of each platform link, the bytes it carried and the time it
 * carried anything (busy), for the report; with the run description's link_series, every change
 * of its rate too (link_series.tsv beside the report: the trace's counter tracks).
 *
 * SimGrid's network model (CM02) gives every transfer a rate from its bandwidth-sharing solver:
 * constant between two of the simulation's steps, none while the transfer's latency runs, and
 * changed only where a transfer ends or finishes its latency (a new one runs its latency first).
 * So rates are read (the public Action::get_rate of each transfer, after the step it held over)
 * only at steps after one of those; any other step (one that a kernel, a sleep or a transfer's
 * start ended) costs a look at the transfers still in their latency. A link's rate is the sum of its transfers' rates; its
 * busy time the time that sum was above zero, integrated at each change. Its bytes are what its
 * transfers moved by SimGrid's own count (cost - remains, brought up to date): exactly a transfer's size once it
 * ended. Not counted: SimGrid's loopback, which carries messages between ranks that share a GPU
 * through that GPU's memory (one link for every GPU), not a link of the platform. */
#include "core/links.hpp"

#include <simgrid/kernel/resource/Action.hpp>
#include <simgrid/kernel/resource/Model.hpp>
#include <simgrid/kernel/resource/NetworkModelIntf.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace orrery {

namespace {
using simgrid::kernel::resource::Action;
using simgrid::kernel::resource::Model;

struct Transfer;

struct LinkUse {  // one direction of a platform link (a SPLITDUPLEX link's NAME_UP or NAME_DOWN)
  std::string name;
  size_t order = 0;                  // when it was first crossed: the series' order within a step
  std::vector<Transfer*> transfers;  // those that may still carry on it, in creation order
  uint64_t count = 0;                // transfers that crossed it
  double rate = 0;                   // bytes/s since `since`
  double since = 0;
  double busy_s = 0;                 // up to `since`
  double bytes = 0;                  // moved by its transfers that ended
  bool dirty = false;                // one of its transfers' rates changed at this step
};

struct Transfer {
  Action* action = nullptr;  // nullptr once it ended (SimGrid frees it soon after)
  std::vector<LinkUse*> links;
  double rate = 0;           // over the last step read
  double final_rate = 0;     // over the step it ended in
  double ended_at = -1;
};

struct Accounting {
  Model* network = nullptr;
  const sg4::Link* loopback = nullptr;
  // each link's LinkUse hangs off the link itself (SimGrid's extensions), owned here
  simgrid::xbt::Extension<sg4::Link, LinkUse> use;
  std::vector<std::unique_ptr<LinkUse>> links;  // in the order they were first crossed
  std::vector<std::unique_ptr<Transfer>> live;  // not yet retired, in creation order
  std::vector<std::unique_ptr<Transfer>> spare;  // retired, for the next transfers (their lists' room kept)
  std::vector<Transfer*> waiting;  // not ended and still without a rate: in their latency
  std::vector<LinkUse*> dirty;     // at the step being read
  bool pending = false;  // a transfer ended: every rate may change at the next step
  double clock = 0;      // the end of the last step seen
  FILE* series = nullptr;
  std::string series_path;
  std::string row;  // the series row being written
};
Accounting g_links;

/* A transfer's accounting hangs off its SimGrid action, in the action's user data, which SimGrid
 * 3.32 leaves to its users (it marks the accessors deprecated for 3.34, and uses them nowhere). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
void* transfer_of(const Action& action) { return action.get_data(); }
void set_transfer_of(Action& action, Transfer* x) { action.set_data(x); }
#pragma GCC diagnostic pop

/* What a transfer has moved by now, by SimGrid's count (cost - remains). SimGrid's lazy update
 * (launch.py's network/optim:Lazy) brings a transfer's remains up to date only at its own events:
 * since the last (its last update), it moved at the rate it had then (its last value).
 * Action::get_remains would update it, and finish it if nothing remains, from within a callback. */
double moved_by_now(const Action& action) {
  double remains = action.get_remains_no_update();
  if (action.get_model()->is_update_lazy() && action.is_running() && remains > 0)
    remains = std::max(0.0, remains - action.get_last_value() * (now() - action.get_last_update()));
  return action.get_cost() - remains;
}

void settle(LinkUse& l, double t) {
  if (l.rate > 0)
    l.busy_s += t - l.since;
  l.since = t;
}

/* time_s, link, bytes_per_s: numbers in their shortest form that reads back to the same double
 * (std::to_chars), which keeps a long series cheap to write: printf's %.17g took several times
 * longer than the accounting itself. */
void series_row(double t, const LinkUse& l) {
  std::string& row = g_links.row;
  char number[32];
  row.assign(number, std::to_chars(number, number + sizeof number, t).ptr);
  row += '\t';
  row += l.name;
  row += '\t';
  row.append(number, std::to_chars(number, number + sizeof number, l.rate).ptr);
  row += '\n';
  fwrite_unlocked(row.data(), 1, row.size(), g_links.series);  // one thread runs the whole simulation
}

/* The links whose transfers' rates changed, from time t: their new rates, a series row for each
 * rate that changed (in the order the links were first crossed: the same run writes the same
 * file). */
void apply_changes(std::vector<LinkUse*>& dirty, double t) {
  if (g_links.series)  // the rest does not depend on the order
    std::sort(dirty.begin(), dirty.end(), [](const LinkUse* a, const LinkUse* b) { return a->order < b->order; });
  for (LinkUse* l : dirty) {
    l->dirty = false;
    double rate = 0;
    for (const Transfer* x : l->transfers)
      rate += x->rate;
    if (rate == l->rate)
      continue;
    settle(*l, t);
    l->rate = rate;
    if (g_links.series)
      series_row(t, *l);
  }
  dirty.clear();
}

void set_rate(Transfer& x, double rate, std::vector<LinkUse*>& dirty) {
  if (rate == x.rate)
    return;
  x.rate = rate;
  for (LinkUse* l : x.links)
    if (!l->dirty) {
      l->dirty = true;
      dirty.push_back(l);
    }
}

/* Transfers that ended and carry nothing any more leave their links and the live list. */
void retire() {
  auto& live = g_links.live;
  size_t kept = 0;
  for (auto& x : live) {
    if (x->action || x->rate != 0) {
      live[kept++] = std::move(x);
      continue;
    }
    for (LinkUse* l : x->links)
      l->transfers.erase(std::find(l->transfers.begin(), l->transfers.end(), x.get()));
    g_links.spare.push_back(std::move(x));
  }
  live.resize(kept);
}

/* After each step [clock, now]: the rates it held, where they may have changed. */
void on_step(double) {
  Accounting& a = g_links;
  const double t0 = a.clock, t1 = now();
  a.clock = t1;
  if (!(t1 > t0))
    return;  // nothing flowed
  bool read = a.pending;
  for (size_t i = 0; i < a.waiting.size() && !read; i++)
    read = a.waiting[i]->action->get_rate() > 0;  // a latency ended: its share is taken from others
  if (!read)
    return;
  a.pending = false;
  for (const auto& x : a.live) {
    double rate = x->action ? x->action->get_rate() : x->ended_at == t1 ? x->final_rate : 0;
    set_rate(*x, rate, a.dirty);
    if (!x->action && x->ended_at == t1)
      a.pending = true;  // its share is free at the next step
  }
  apply_changes(a.dirty, t0);
  a.waiting.erase(std::remove_if(a.waiting.begin(), a.waiting.end(),
                                 [](const Transfer* x) { return !x->action || x->rate > 0; }),
                  a.waiting.end());
  retire();
}

void on_transfer_state(simgrid::kernel::resource::NetworkAction& action, Action::State) {
  Accounting& a = g_links;
  // SimGrid's NetworkAction (declared only, here) derives from Action alone: it is that Action.
  Action& as_action = reinterpret_cast<Action&>(action);
  auto* found = static_cast<Transfer*>(transfer_of(as_action));
  if (!found)
    fatal("link accounting: SimGrid reported a transfer it never saw start (interpose/core/links.cpp)");
  Transfer& x = *found;
  if (x.action->get_state() == Action::State::STARTED || x.action->get_state() == Action::State::INITED)
    return;
  // finished, failed or cancelled: what it moved by SimGrid's count, its rate over its last step
  const double moved = moved_by_now(*x.action);
  for (LinkUse* l : x.links)
    l->bytes += moved;
  x.final_rate = x.action->get_rate();
  x.ended_at = now();
  x.action = nullptr;
  set_transfer_of(as_action, nullptr);
  a.pending = true;
}
}  // namespace

void install_link_accounting() {
  Accounting& a = g_links;
  if (!run_description().link_accounting)
    return;
  auto* model = sg4::Engine::get_instance()->get_netzone_root()->get_network_model();
  a.network = dynamic_cast<Model*>(model);
  if (!a.network)
    fatal("link accounting: SimGrid's network model is not a resource model");
  a.use = sg4::Link::extension_create<LinkUse>([](void*) {});
  // The route from a host to itself is SimGrid's loopback alone.
  const RunDescription& d = run_description();
  if (!d.gpus.empty()) {
    sg4::Host* h = sg4::Host::by_name_or_null(d.gpus.front().host);
    std::vector<sg4::Link*> self;
    double latency = 0;
    if (h)
      h->route_to(h, self, &latency);
    if (self.size() == 1)
      a.loopback = self.front();
  }
  a.clock = now();
  if (d.link_series) {
    std::string dir = d.report.substr(0, d.report.find_last_of('/') + 1);
    a.series_path = dir + "link_series.tsv";
    a.series = fopen((a.series_path + ".part").c_str(), "w");
    if (!a.series)
      fatal("cannot write %s.part (run description key link_series)", a.series_path.c_str());
    setvbuf(a.series, nullptr, _IOFBF, 1 << 20);
    fputs("time_s\tlink\tbytes_per_s\n", a.series);
  }
  sg4::Link::on_communication_state_change_cb(on_transfer_state);
  sg4::Engine::on_time_advance_cb(on_step);
}

void note_transfer(double size, const std::vector<sg4::Link*>& links) {
  Accounting& a = g_links;
  if (!a.network)
    return;  // not counted (run description key link_accounting)
  // SimGrid calls the network factors as it creates a transfer's action, the last it started.
  Action* action = a.network->get_started_action_set()->empty() ? nullptr : &a.network->get_started_action_set()->back();
  if (!action || action->get_cost() != size || action->get_start_time() != now() || transfer_of(*action))
    fatal("link accounting: cannot find the action of a transfer of %.17g bytes (interpose/core/links.cpp)", size);
  std::unique_ptr<Transfer> x;
  if (a.spare.empty()) {
    x = std::make_unique<Transfer>();
  } else {
    x = std::move(a.spare.back());
    a.spare.pop_back();
    x->links.clear();
    x->rate = x->final_rate = 0;
    x->ended_at = -1;
  }
  x->action = action;
  for (sg4::Link* link : links) {
    if (link == a.loopback)
      continue;
    LinkUse* l = link->extension(a.use);
    if (!l) {
      a.links.push_back(std::make_unique<LinkUse>());
      l = a.links.back().get();
      l->name = link->get_name();
      l->order = a.links.size();
      l->since = now();
      link->extension_set(a.use, l, false);
    }
    l->count++;
    l->transfers.push_back(x.get());
    x->links.push_back(l);
  }
  set_transfer_of(*action, x.get());
  // Its latency runs first (no share yet, no rate changed) unless its route has none: either
  // way the next step's look at the waiting transfers sees when it takes its share.
  a.waiting.push_back(x.get());
  a.live.push_back(std::move(x));
}

void write_link_rows(FILE* f) {
  Accounting& a = g_links;
  const double t = now();
  // Transfers that ended at the last step carry nothing after it; those still running (a run
  // that ended early) keep their rates to the end and count what they moved so far.
  for (const auto& x : a.live)
    if (!x->action)
      set_rate(*x, 0, a.dirty);
  apply_changes(a.dirty, a.clock);
  std::vector<LinkUse*> used;
  for (auto& l : a.links) {
    settle(*l, std::max(t, l->since));
    for (const Transfer* x : l->transfers)
      if (x->action)
        l->bytes += moved_by_now(*x->action);
    if (l->bytes > 0)
      used.push_back(l.get());
  }
  std::sort(used.begin(), used.end(), [](const LinkUse* x, const LinkUse* y) {
    return x->bytes != y->bytes ? x->bytes > y->bytes : x->name < y->name;
  });
  // (rank, "link", its name, transfers that crossed it, bytes, busy seconds)
  for (const LinkUse* l : used)
    fprintf(f, "-1\tlink\t%s\t%llu\t%.17g\t%.17g\n", l->name.c_str(), (unsigned long long)l->count, l->bytes,
            l->busy_s);
  if (a.series) {
    fclose(a.series);
    a.series = nullptr;
    rename((a.series_path + ".part").c_str(), a.series_path.c_str());
  }
}

}  // namespace orrery
