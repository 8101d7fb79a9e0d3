// The periodic engine's messages in flight (periodic_engine.hpp): by key in a hash table
// (MessageSlots), and by channel in rings with such a table for what collides (ChannelSlots).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bb {

// Messages by key: an open-addressing hash table (linear probing, deletion by backward shift)
// that holds only the messages produced and not yet used, where one slot per possible message
// (2·C·M of them, 200 MB of address space at P=512, v=2, M=8192) cost a cache miss and, for the
// first touch of a page, a page fault on every message the engine ran. ChannelSlots below keeps
// most messages in per-channel rings and only what collides there in one of these.
class MessageSlots {
 public:
  MessageSlots() { rehash(kMinCapacity); }
  std::size_t size() const { return size_; }
  static constexpr std::size_t kAbsent = ~std::size_t{0};
  const double* find(std::size_t k) const {
    const std::size_t i = locate(k);
    return i == kAbsent ? nullptr : &table_[i].time;
  }
  // Where k is (kAbsent: not there), its time, and erase it from there (no second probe).
  std::size_t locate(std::size_t k) const {
    for (std::size_t i = home(k);; i = (i + 1) & mask_) {
      const Entry& e = table_[i];
      if (e.key == k + 1) return i;
      if (e.key == 0) return kAbsent;
    }
  }
  double time_at(std::size_t i) const { return table_[i].time; }
  void put(std::size_t k, double t) {
    if (2 * (size_ + 1) > table_.size()) rehash(2 * table_.size());
    for (std::size_t i = home(k);; i = (i + 1) & mask_) {
      Entry& e = table_[i];
      if (e.key == k + 1) {
        e.time = t;
        return;
      }
      if (e.key == 0) {
        e = {k + 1, t};
        ++size_;
        return;
      }
    }
  }
  void erase(std::size_t k) {
    if (const std::size_t i = locate(k); i != kAbsent) erase_at(i);
  }
  void erase_at(std::size_t hole) {
    // Later entries of the probe run move into the hole where their home allows it.
    for (std::size_t j = (hole + 1) & mask_; table_[j].key != 0; j = (j + 1) & mask_) {
      const std::size_t h = home(table_[j].key - 1);
      if (((j - h) & mask_) >= ((j - hole) & mask_)) {
        table_[hole] = table_[j];
        hole = j;
      }
    }
    table_[hole].key = 0;
    --size_;
  }
  template <class F>
  void for_each(F&& f) const {
    for (const Entry& e : table_)
      if (e.key != 0) f(static_cast<std::size_t>(e.key - 1), e.time);
  }
  void clear() {
    for (Entry& e : table_) e.key = 0;
    size_ = 0;
  }

 private:
  static constexpr std::size_t kMinCapacity = 1024;
  struct Entry {
    std::uint64_t key = 0;  // slot key + 1; 0: empty
    double time = 0;
  };
  std::size_t home(std::size_t k) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ull) >>
                                    shift_);
  }
  void rehash(std::size_t capacity) {
    std::vector<Entry> old;
    old.swap(table_);
    table_.assign(capacity, Entry{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (const Entry& e : old)
      if (e.key != 0) put(static_cast<std::size_t>(e.key - 1), e.time);
  }
  std::vector<Entry> table_;
  std::size_t mask_ = 0, size_ = 0;
  int shift_ = 64;
};

// Messages in flight by channel (a chunk's activation out, or its gradient in) and
// micro-batch: each channel a ring of its recent micro-batches, a message at slot mb mod the
// ring's size. A channel holds one or two messages almost always (a producer runs a message or
// two ahead of its consumer: 80-90 % of messages at P=512), so every channel starts with a ring
// of kLine slots in one cache line of a shared array, found with one load and no probing; a
// channel whose messages pile up (a warm-up's staircase) moves to a ring of its own, doubled
// up to kMaxRing, and what still collides goes to a MessageSlots. Keys: micro-batch in the
// high 32 bits, channel in the low.
class ChannelSlots {
 public:
  static constexpr std::size_t kLine = 4, kMaxRing = 512;
  struct Where {
    std::size_t i = MessageSlots::kAbsent;  // slot in the channel's ring, or in the overflow
    bool ring = true;
  };
  static std::uint64_t key(std::uint32_t channel, std::uint32_t mb) {
    return (static_cast<std::uint64_t>(mb) << 32) | channel;
  }
  static std::uint32_t mb_of(std::uint64_t k) { return static_cast<std::uint32_t>(k >> 32); }
  static std::uint32_t channel_of(std::uint64_t k) { return static_cast<std::uint32_t>(k); }

  void reset(std::size_t channels) {
    lines_.assign(channels, Line{});
    own_.assign(channels, {});
    overflow_.clear();
    size_ = 0;
  }
  std::size_t size() const { return size_; }

  Where locate(std::uint64_t k) {
    const std::uint32_t c = channel_of(k), mb = mb_of(k);
    const Ring r = ring(c);
    const std::size_t i = mb & (r.n - 1);
    if (r.e[i].used && r.e[i].mb == mb) return {i, true};
    if (overflow_.size() == 0) return {};
    return {overflow_.locate(k), false};
  }
  bool found(const Where& w) const { return w.i != MessageSlots::kAbsent; }
  // The time at w (found) of the message k.
  double time_at(std::uint64_t k, const Where& w) {
    return w.ring ? ring(channel_of(k)).e[w.i].time : overflow_.time_at(w.i);
  }
  const double* find(std::uint64_t k) {
    const Where w = locate(k);
    return !found(w) ? nullptr : w.ring ? &ring(channel_of(k)).e[w.i].time : overflow_.find(k);
  }
  void erase_at(std::uint64_t k, const Where& w) {
    if (w.ring)
      ring(channel_of(k)).e[w.i].used = 0;
    else
      overflow_.erase_at(w.i);
    --size_;
  }
  void erase(std::uint64_t k) {
    if (const Where w = locate(k); found(w)) erase_at(k, w);
  }
  void put(std::uint64_t k, double t) {
    const std::uint32_t c = channel_of(k), mb = mb_of(k);
    for (;;) {
      const Ring r = ring(c);
      Entry& e = r.e[mb & (r.n - 1)];
      if (e.used && e.mb == mb) {
        e.time = t;
        return;
      }
      if (!e.used) {
        // The key may sit in the overflow from when this slot was taken.
        if (overflow_.size() != 0 && overflow_.locate(k) != MessageSlots::kAbsent) {
          overflow_.put(k, t);
          return;
        }
        e = {mb, 1, t};
        ++size_;
        return;
      }
      if (r.n >= kMaxRing) break;
      grow(c);
    }
    if (overflow_.find(k) == nullptr) ++size_;
    overflow_.put(k, t);
  }
  template <class F>
  void for_each(F&& f) {
    for (std::size_t c = 0; c < lines_.size(); ++c) {
      const Ring r = ring(static_cast<std::uint32_t>(c));
      for (std::size_t i = 0; i < r.n; ++i)
        if (r.e[i].used) f(key(static_cast<std::uint32_t>(c), r.e[i].mb), r.e[i].time);
    }
    overflow_.for_each(f);
  }
  void clear() {
    for (Line& l : lines_)
      for (Entry& e : l.e) e.used = 0;
    for (auto& o : own_)
      for (Entry& e : o) e.used = 0;
    overflow_.clear();
    size_ = 0;
  }

 private:
  struct Entry {
    std::uint32_t mb = 0;
    std::uint32_t used = 0;
    double time = 0;
  };
  struct alignas(64) Line {
    Entry e[kLine];
  };
  struct Ring {
    Entry* e;
    std::size_t n;  // a power of two
  };
  Ring ring(std::uint32_t c) {
    std::vector<Entry>& o = own_[c];
    if (!o.empty()) return {o.data(), o.size()};
    return {lines_[c].e, kLine};
  }
  // Channel c's ring twice as large (its own), the entries placed again, until none collide or
  // kMaxRing (those that still collide go to the overflow).
  void grow(std::uint32_t c) {
    const Ring r = ring(c);
    const std::vector<Entry> old(r.e, r.e + r.n);
    for (Entry& e : lines_[c].e) e.used = 0;
    std::vector<Entry>& to = own_[c];
    for (std::size_t n = 2 * r.n;; n *= 2) {
      to.assign(n, Entry{});
      bool clash = false;
      for (const Entry& e : old) {
        if (!e.used) continue;
        Entry& slot = to[e.mb & (n - 1)];
        if (slot.used) {
          clash = true;
          break;
        }
        slot = e;
      }
      if (!clash) return;
      if (n >= kMaxRing) break;
    }
    // At kMaxRing with a clash: place what fits, the rest to the overflow.
    to.assign(kMaxRing, Entry{});
    for (const Entry& e : old) {
      if (!e.used) continue;
      Entry& slot = to[e.mb & (kMaxRing - 1)];
      if (!slot.used)
        slot = e;
      else
        overflow_.put(key(c, e.mb), e.time);
    }
  }
  std::vector<Line> lines_;              // per channel: its ring until it grows
  std::vector<std::vector<Entry>> own_;  // per channel: its grown ring (empty: none)
  MessageSlots overflow_;
  std::size_t size_ = 0;
};

}  // namespace bb
