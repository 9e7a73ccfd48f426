// l2model.cpp -- aclfaSimModelL2: replays a GM access trace through a fully associative,
// write-back, write-allocate LRU cache of the chip's L2 size and line size, and counts the
// HBM bytes such a cache would move. Millions of records at S=4096: the line table is an
// open-addressing hash (linear probing, backward-shift deletion) and the LRU order an
// intrusive doubly linked list over a fixed slot array, so each line touch is O(1).
#include <cstdint>
#include <new>
#include <unordered_set>
#include <vector>

#include "acl_fa_sim_kernel.h"

namespace acl_fa_sim {
namespace kernel {
namespace {

constexpr uint64_t kEmpty = UINT64_MAX;   // no line number reaches it (addresses are < 2^64)
constexpr uint32_t kNone = UINT32_MAX;    // end of the LRU list

class LruLines {
public:
    explicit LruLines(uint64_t capacity) : capacity_(capacity) {
        uint64_t size = 1;
        while (size < 2 * capacity) size <<= 1;   // load factor <= 1/2 keeps probes short
        bits_ = 0;
        while ((uint64_t{1} << bits_) < size) ++bits_;
        mask_ = size - 1;
        keys_.assign(size, kEmpty);
        slotOf_.assign(size, 0);
        line_.resize(capacity);
        prev_.resize(capacity);
        next_.resize(capacity);
        dirty_.resize(capacity);
    }

    // Touches `line`; returns true on a hit. On a miss the line is inserted as the most
    // recent one, evicting the least recent when full (*evictedDirty tells whether it was dirty).
    bool Touch(uint64_t line, bool write, bool *evictedDirty) {
        *evictedDirty = false;
        uint64_t pos = Find(line);
        if (keys_[pos] == line) {
            const uint32_t slot = slotOf_[pos];
            MoveToFront(slot);
            dirty_[slot] |= write;
            return true;
        }
        uint32_t slot;
        if (used_ < capacity_) {
            slot = static_cast<uint32_t>(used_++);
        } else {
            slot = tail_;
            *evictedDirty = dirty_[slot] != 0;
            Unlink(slot);
            Erase(Find(line_[slot]));
            pos = Find(line);  // erasing may have shifted the probe sequence
        }
        keys_[pos] = line;
        slotOf_[pos] = slot;
        line_[slot] = line;
        dirty_[slot] = write;
        PushFront(slot);
        return false;
    }

    uint64_t DirtyLines() const {
        uint64_t n = 0;
        for (uint64_t s = 0; s < used_; ++s) n += dirty_[s];
        return n;
    }

private:
    uint64_t Home(uint64_t line) const { return (line * 0x9E3779B97F4A7C15ull) >> (64 - bits_) & mask_; }

    // Position of `line` in the table, or of the empty entry where it would go.
    uint64_t Find(uint64_t line) const {
        uint64_t pos = Home(line);
        while (keys_[pos] != kEmpty && keys_[pos] != line) pos = (pos + 1) & mask_;
        return pos;
    }

    // Removes the entry at `hole`, moving later entries of its cluster back so that every
    // key stays reachable from its home position.
    void Erase(uint64_t hole) {
        uint64_t j = hole;
        for (;;) {
            j = (j + 1) & mask_;
            if (keys_[j] == kEmpty) break;
            const uint64_t home = Home(keys_[j]);
            const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
            if (stays) continue;
            keys_[hole] = keys_[j];
            slotOf_[hole] = slotOf_[j];
            hole = j;
        }
        keys_[hole] = kEmpty;
    }

    void Unlink(uint32_t s) {
        (prev_[s] == kNone ? head_ : next_[prev_[s]]) = next_[s];
        (next_[s] == kNone ? tail_ : prev_[next_[s]]) = prev_[s];
    }
    void PushFront(uint32_t s) {
        prev_[s] = kNone;
        next_[s] = head_;
        (head_ == kNone ? tail_ : prev_[head_]) = s;
        head_ = s;
    }
    void MoveToFront(uint32_t s) {
        if (head_ == s) return;
        Unlink(s);
        PushFront(s);
    }

    uint64_t capacity_;
    uint64_t used_ = 0;
    unsigned bits_;
    uint64_t mask_;
    std::vector<uint64_t> keys_;    // hash table: line number or kEmpty
    std::vector<uint32_t> slotOf_;  // hash table: slot of that line
    std::vector<uint64_t> line_;    // per slot: its line number
    std::vector<uint32_t> prev_, next_;
    std::vector<uint8_t> dirty_;
    uint32_t head_ = kNone, tail_ = kNone;  // most / least recently used
};

}  // namespace
}  // namespace kernel
}  // namespace acl_fa_sim

extern "C" aclError aclfaSimModelL2(uint64_t l2Bytes, uint32_t lineBytes, const aclfaSimGmAccess *records,
                                    uint64_t count, aclfaSimL2Stats *stats) {
    if (stats == nullptr || (records == nullptr && count > 0) || lineBytes == 0 || l2Bytes < lineBytes) {
        return ACL_ERROR_INVALID_PARAM;
    }
    const uint64_t capacity = l2Bytes / lineBytes;
    if (capacity >= acl_fa_sim::kernel::kNone) return ACL_ERROR_INVALID_PARAM;  // slots are uint32
    aclfaSimL2Stats s{};
    try {
        acl_fa_sim::kernel::LruLines cache(capacity);
        std::unordered_set<uint64_t> distinct;  // lines missed at least once (every first touch misses)
        for (uint64_t r = 0; r < count; ++r) {
            const aclfaSimGmAccess &a = records[r];
            if (a.bytes == 0) continue;
            s.accessBytes += a.bytes;
            const uint64_t end = a.addr + a.bytes;
            for (uint64_t line = a.addr / lineBytes; line <= (end - 1) / lineBytes; ++line) {
                const bool whole = a.addr <= line * lineBytes && end >= (line + 1) * lineBytes;
                bool evictedDirty = false;
                ++s.lineAccesses;
                if (cache.Touch(line, a.isWrite != 0, &evictedDirty)) {
                    ++s.lineHits;
                } else {
                    ++s.lineMisses;
                    distinct.insert(line);
                    if (!(a.isWrite && whole)) s.hbmReadBytes += lineBytes;
                }
                if (evictedDirty) s.hbmWriteBytes += lineBytes;
            }
        }
        s.hbmFlushBytes = cache.DirtyLines() * lineBytes;
        s.hbmWriteBytes += s.hbmFlushBytes;
        s.distinctLines = distinct.size();
    } catch (const std::bad_alloc &) {
        return ACL_ERROR_BAD_ALLOC;
    }
    *stats = s;
    return ACL_SUCCESS;
}
