// footprint.cpp -- the bytes a traced launch must move across HBM whatever its schedule (the
// timing model's memory bound, docs/timing_model.md "Memory bound").
//
// Compulsory HBM bytes = (distinct GM bytes the launch reads and never writes)
//                      + max(0, distinct GM bytes it writes - the chip's L2 capacity).
// The first term is the launch's input: the model starts every launch with a cold L2, so each
// such byte is filled from HBM at least once. Bytes the launch also writes (workspace, in-place
// updates) are left out, since a read after the launch's own write can hit the L2; a byte read
// before being overwritten is thereby not counted either, which keeps the figure a lower bound.
// The second term: a write-back L2 can still hold at most its capacity of dirty bytes when the
// launch ends, so every written byte beyond that went to HBM during the launch.
#include <algorithm>
#include <cstdint>
#include <map>

#include "timing.h"

namespace acl_fa_sim {
namespace kernel {
namespace {

// A union of half-open byte intervals [lo, hi), kept merged. Kernels touch a few large tensors
// row after row, so the union stays a handful of intervals and most rows extend the last one.
class IntervalUnion {
public:
    void Add(uint64_t lo, uint64_t hi) {
        if (lo >= hi) return;
        if (last_ != spans_.end() && last_->first <= lo && lo <= last_->second) {
            if (hi <= last_->second) return;
            auto next = std::next(last_);
            if (next == spans_.end() || hi < next->first) {
                last_->second = hi;
                return;
            }
        }
        // The first interval that could touch [lo, hi): the last one starting at or before lo.
        auto it = spans_.upper_bound(lo);
        if (it != spans_.begin() && std::prev(it)->second >= lo) --it;
        uint64_t newLo = lo, newHi = hi;
        while (it != spans_.end() && it->first <= newHi) {
            newLo = std::min(newLo, it->first);
            newHi = std::max(newHi, it->second);
            it = spans_.erase(it);
        }
        last_ = spans_.emplace(newLo, newHi).first;
    }

    uint64_t Bytes() const {
        uint64_t n = 0;
        for (const auto &s : spans_) n += s.second - s.first;
        return n;
    }

    // Bytes of this union that `other` does not cover.
    uint64_t BytesOutside(const IntervalUnion &other) const {
        uint64_t n = 0;
        auto o = other.spans_.begin();
        for (const auto &s : spans_) {
            uint64_t at = s.first;
            while (o != other.spans_.end() && o->second <= at) ++o;
            for (auto p = o; p != other.spans_.end() && p->first < s.second; ++p) {
                if (p->first > at) n += p->first - at;
                at = std::max(at, p->second);
                if (at >= s.second) break;
            }
            if (at < s.second) n += s.second - at;
        }
        return n;
    }

private:
    std::map<uint64_t, uint64_t> spans_;  // lo -> hi, disjoint and not adjacent
    std::map<uint64_t, uint64_t>::iterator last_ = spans_.end();
};

}  // namespace

double CompulsoryHbmBytes(const LaunchTrace &trace, uint64_t l2Bytes) {
    IntervalUnion reads, writes;
    for (const OpTrace &t : trace.traces) {
        for (const MemRange &r : t.ranges) {
            if (r.space != Space::GM) continue;
            IntervalUnion &u = r.isWrite ? writes : reads;
            for (uint32_t i = 0; i < r.count; ++i) {
                const uint64_t lo = r.addr + uint64_t(i) * r.stride;
                u.Add(lo, lo + r.bytes);
            }
        }
    }
    const uint64_t input = reads.BytesOutside(writes);
    const uint64_t written = writes.Bytes();
    return static_cast<double>(input) + static_cast<double>(written > l2Bytes ? written - l2Bytes : 0);
}

}  // namespace kernel
}  // namespace acl_fa_sim
