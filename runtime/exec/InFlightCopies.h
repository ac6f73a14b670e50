//===- InFlightCopies.h - copies in flight, by byte range -------*- C++ -*-===//
//
// The CUDA executor's copy stream runs host<->device copies while the
// compute stream goes on; an instruction that touches a copy's bytes must
// wait for it first. This is the bookkeeping, without CUDA (Event is the
// executor's cudaEvent_t), so that it is tested on any machine.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_EXEC_INFLIGHTCOPIES_H
#define ZRT_EXEC_INFLIGHTCOPIES_H

#include <cstddef>
#include <vector>

namespace zrt {

/// Bytes an instruction reads or writes.
struct ByteRange {
  const char *data;
  size_t bytes;
  bool written;
};

template <typename Event> class InFlightCopies {
public:
  struct Copy {
    const char *src, *dst;
    size_t bytes;
    Event done;
  };

  void add(const char *src, const char *dst, size_t bytes, Event done) {
    copies_.push_back({src, dst, bytes, done});
  }
  bool empty() const { return copies_.empty(); }
  size_t size() const { return copies_.size(); }

  /// Removes and returns, in issue order, the completion events of the
  /// copies an access to |ranges| must wait for: a read or write of a
  /// copy's target (its bytes are not there yet), or a write of its source
  /// (the copy may still be reading them). Reading a source is fine.
  std::vector<Event> takeConflicts(const std::vector<ByteRange> &ranges) {
    std::vector<Event> waits;
    std::vector<Copy> kept;
    for (const Copy &c : copies_) {
      bool conflict = false;
      for (const ByteRange &r : ranges)
        conflict |= overlaps(r.data, r.bytes, c.dst, c.bytes) ||
                    (r.written && overlaps(r.data, r.bytes, c.src, c.bytes));
      if (conflict)
        waits.push_back(c.done);
      else
        kept.push_back(c);
    }
    copies_.swap(kept);
    return waits;
  }

  /// Removes and returns every copy's event (a program's end).
  std::vector<Event> takeAll() {
    std::vector<Event> waits;
    for (const Copy &c : copies_)
      waits.push_back(c.done);
    copies_.clear();
    return waits;
  }

private:
  static bool overlaps(const char *a, size_t an, const char *b, size_t bn) {
    return an > 0 && bn > 0 && a < b + bn && b < a + an;
  }
  std::vector<Copy> copies_; // in issue order
};

} // namespace zrt

#endif // ZRT_EXEC_INFLIGHTCOPIES_H
