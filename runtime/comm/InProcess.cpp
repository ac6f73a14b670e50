//===- InProcess.cpp - W ranks as threads of one process ------------------===//
//
// Every collective is: publish my buffer, barrier, compute my part reading
// everyone's buffers, barrier (so that no rank overwrites a buffer another is
// still reading). Reductions add the ranks in order 0..W-1 and divide by W
// for an average (as torch's all_reduce(AVG) and DeepSpeed's division).
// 16-bit buffers (zcc --comm-dtype bf16|fp16) are summed in float32 and
// rounded once, to nearest even: the bits the CUDA backend's device
// collectives of in-process ranks produce (cuda/Collectives.cu).
//
//===----------------------------------------------------------------------===//
#include "comm/Communicator.h"
#include "support/NarrowFloat.h"

#include <algorithm>
#include <cstring>

namespace zrt {

InProcessGroup::InProcessGroup(int size)
    : size_(size), inputs_(size, nullptr), posted_(size, nullptr), scratch_(size) {}

Status InProcessGroup::arrive() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_)
    return Status::error(why_);
  uint64_t generation = generation_;
  if (++waiting_ == size_) {
    waiting_ = 0;
    ++generation_;
    cv_.notify_all();
    return Status::ok();
  }
  cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
  if (generation_ == generation)
    return Status::error(why_);
  return Status::ok();
}

void InProcessGroup::abort(const std::string &why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted_) {
      aborted_ = true;
      why_ = why;
    }
    cv_.notify_all();
  }
  // Members waiting in a subgroup's collective wake too.
  std::lock_guard<std::mutex> lock(subgroupMutex_);
  for (auto &[ranks, group] : subgroups_)
    group->abort(why);
}

InProcessGroup &InProcessGroup::subgroup(const std::vector<int> &ranks) {
  std::lock_guard<std::mutex> lock(subgroupMutex_);
  std::unique_ptr<InProcessGroup> &group = subgroups_[ranks];
  if (!group) {
    group = std::make_unique<InProcessGroup>((int)ranks.size());
    std::lock_guard<std::mutex> state(mutex_);
    if (aborted_)
      group->abort(why_);
  }
  return *group;
}

class InProcessCommunicator : public Communicator {
public:
  InProcessCommunicator(InProcessGroup &group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size_; }

  Status allReduce(const void *in, void *out, int64_t n, CommType type, ReduceOp op) override {
    // Rank r reduces chunk r into its scratch; then everyone copies all
    // chunks. The chunks of an uneven split differ in length by at most 1.
    int w = size();
    auto chunk = [&](int r) {
      int64_t base = n / w, extra = n % w;
      int64_t begin = r * base + std::min<int64_t>(r, extra);
      return std::pair<int64_t, int64_t>{begin, base + (r < extra ? 1 : 0)};
    };
    ZRT_RETURN_IF_ERROR(publish(in));
    auto [begin, len] = chunk(rank_);
    std::vector<float> &mine = group_.scratch_[rank_];
    mine.assign(len, 0.0f);
    reduceInto(mine.data(), begin, len, type, op);
    ZRT_RETURN_IF_ERROR(group_.arrive()); // everyone has read the inputs
    for (int r = 0; r < w; ++r) {
      auto [b, l] = chunk(r);
      if (l > 0) // an empty chunk's scratch has no data pointer
        narrowComm(group_.scratch_[r].data(), out, b, l, type);
    }
    return group_.arrive(); // everyone has read the scratch
  }

  Status reduceScatter(const void *in, void *out, int64_t n, CommType type, ReduceOp op) override {
    int64_t len = n / size();
    ZRT_RETURN_IF_ERROR(publish(in));
    std::vector<float> &mine = group_.scratch_[rank_];
    mine.assign(len, 0.0f);
    reduceInto(mine.data(), rank_ * len, len, type, op);
    ZRT_RETURN_IF_ERROR(group_.arrive());
    if (len > 0)
      narrowComm(mine.data(), out, 0, len, type);
    return Status::ok();
  }

  Status allGather(const void *in, void *out, int64_t n, CommType type) override {
    ZRT_RETURN_IF_ERROR(publish(in));
    size_t bytes = (size_t)n * commTypeBytes(type);
    std::vector<char> all(bytes * size());
    if (n > 0)
      for (int r = 0; r < size(); ++r)
        std::memcpy(all.data() + r * bytes, group_.inputs_[r], bytes);
    ZRT_RETURN_IF_ERROR(group_.arrive());
    if (n > 0)
      std::memcpy(out, all.data(), all.size());
    return Status::ok();
  }

  Status allToAll(const void *in, void *out, int64_t n, CommType type) override {
    ZRT_RETURN_IF_ERROR(publish(in));
    size_t chunk = (size_t)(n / size()) * commTypeBytes(type);
    std::vector<char> mine(chunk * size());
    if (chunk > 0)
      for (int r = 0; r < size(); ++r)
        std::memcpy(mine.data() + r * chunk,
                    static_cast<const char *>(group_.inputs_[r]) + rank_ * chunk, chunk);
    ZRT_RETURN_IF_ERROR(group_.arrive()); // everyone has read the inputs
    if (chunk > 0)
      std::memcpy(out, mine.data(), mine.size());
    return Status::ok();
  }

  Status barrier() override { return group_.arrive(); }
  bool sharesAddressSpace() const override { return true; }
  Status exchange(const void *mine, size_t bytes, std::vector<char> &all) override {
    group_.posted_[rank_] = static_cast<const char *>(mine);
    ZRT_RETURN_IF_ERROR(group_.arrive());
    all.resize(bytes * size());
    for (int r = 0; r < size(); ++r)
      if (bytes)
        std::memcpy(all.data() + r * bytes, group_.posted_[r], bytes);
    return group_.arrive(); // everyone has copied every rank's bytes
  }
  void abort(const std::string &why) override { group_.abort(why); }
  Status subgroup(const std::vector<int> &ranks, std::unique_ptr<Communicator> &out) override {
    int index = -1;
    for (size_t k = 0; k < ranks.size(); ++k) {
      if (ranks[k] < 0 || ranks[k] >= size() || (k > 0 && ranks[k] <= ranks[k - 1]))
        return errorf("rank ", rank_, ": a subgroup's ranks must ascend within 0..", size() - 1);
      if (ranks[k] == rank_)
        index = (int)k;
    }
    if (index < 0)
      return errorf("rank ", rank_, " asked for a subgroup it is not in");
    out = group_.subgroup(ranks).communicator(index);
    return Status::ok();
  }

private:
  /// Shares |in| with the other ranks and waits until all have shared.
  Status publish(const void *in) {
    group_.inputs_[rank_] = in;
    return group_.arrive();
  }
  /// acc[k] = the reduction over ranks (in order) of element begin + k.
  void reduceInto(float *acc, int64_t begin, int64_t len, CommType type, ReduceOp op) {
    int w = size();
    for (int r = 0; r < w; ++r)
      switch (type) {
      case CommType::F32:
        addTo(acc, static_cast<const float *>(group_.inputs_[r]) + begin, len);
        break;
      case CommType::BF16:
        addTo(acc, static_cast<const BF16 *>(group_.inputs_[r]) + begin, len);
        break;
      case CommType::F16:
        addTo(acc, static_cast<const F16 *>(group_.inputs_[r]) + begin, len);
        break;
      case CommType::I8: // gathers only (the plan validator refuses reductions)
        break;
      }
    if (op == ReduceOp::Avg)
      for (int64_t k = 0; k < len; ++k)
        acc[k] /= (float)w;
  }
  template <typename T> static void addTo(float *acc, const T *src, int64_t len) {
    for (int64_t k = 0; k < len; ++k)
      acc[k] += (float)src[k];
  }

  InProcessGroup &group_;
  int rank_;
};

std::unique_ptr<Communicator> InProcessGroup::communicator(int rank) {
  return std::make_unique<InProcessCommunicator>(*this, rank);
}

} // namespace zrt
