/* A union of time intervals (IntervalSet, runtime.hpp): the report's busy and overlap times. */
#include "core/runtime.hpp"

#include <algorithm>

namespace orrery {

/* ---------------- interval sets ---------------- */

void IntervalSet::add(double begin, double end) {
  if (end <= begin)
    return;
  if (!spans_.empty() && begin >= spans_.back().first) {
    if (begin <= spans_.back().second) {
      spans_.back().second = std::max(spans_.back().second, end);
      return;
    }
  } else if (!spans_.empty()) {
    sorted_ = false;
  }
  spans_.emplace_back(begin, end);
}

void IntervalSet::normalize() const {
  if (sorted_)
    return;
  std::sort(spans_.begin(), spans_.end());
  std::vector<std::pair<double, double>> merged;
  for (auto& sp : spans_) {
    if (!merged.empty() && sp.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, sp.second);
    else
      merged.push_back(sp);
  }
  spans_.swap(merged);
  sorted_ = true;
}

double IntervalSet::measure() const {
  normalize();
  double total = 0;
  for (auto& sp : spans_)
    total += sp.second - sp.first;
  return total;
}

double IntervalSet::overlap(const IntervalSet& other) const {
  normalize();
  other.normalize();
  double total = 0;
  size_t i = 0, j = 0;
  while (i < spans_.size() && j < other.spans_.size()) {
    double lo = std::max(spans_[i].first, other.spans_[j].first);
    double hi = std::min(spans_[i].second, other.spans_[j].second);
    if (hi > lo)
      total += hi - lo;
    (spans_[i].second < other.spans_[j].second) ? i++ : j++;
  }
  return total;
}

IntervalSet IntervalSet::minus(const IntervalSet& other) const {
  normalize();
  other.normalize();
  IntervalSet out;
  size_t j = 0;
  for (auto [lo, hi] : spans_) {
    while (j < other.spans_.size() && other.spans_[j].second <= lo)
      j++;
    for (size_t k = j; k < other.spans_.size() && other.spans_[k].first < hi; k++) {
      out.add(lo, other.spans_[k].first);
      lo = std::max(lo, other.spans_[k].second);
    }
    out.add(lo, hi);
  }
  return out;
}

}  // namespace orrery
