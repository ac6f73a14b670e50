//===- CommGroups.h - a rank's communicators for a plan's collectives -*- C++ -*-===//
//
// A plan's collectives span every rank, or with a device mesh
// (Plan.group_size: hpZ, MiCS / HSDP) the ranks of this rank's group, or this
// rank's place in every group. The world's communicator is given; the
// other two are split from it when a collective first needs them. Every rank
// runs the same collectives in the same order, so every member of a group asks
// for it at the same point (NCCL's split is collective over the world).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_EXEC_COMMGROUPS_H
#define ZRT_EXEC_COMMGROUPS_H

#include "comm/Communicator.h"
#include "plan/PlanLoader.h"

#include <memory>

namespace zrt {

class CommGroups {
public:
  CommGroups(const plan::Plan &plan, int rank, Communicator *world)
      : plan_(plan), rank_(rank), world_(world) {}

  /// The communicator of |g| for this rank (made on first use), or an error
  /// when the plan needs one that is missing.
  Status get(plan::Collective::Group g, Communicator *&out) {
    if (g == plan::Collective::WORLD || plan_.group_size() == 0) {
      if (!world_ || world_->size() != plan_.world_size())
        return errorf("the plan is for ", plan_.world_size(),
                      " ranks, but no communicator of that size is set");
      out = world_;
      return Status::ok();
    }
    std::unique_ptr<Communicator> &sub = g == plan::Collective::GROUP ? group_ : across_;
    if (!sub) {
      Communicator *world;
      ZRT_RETURN_IF_ERROR(get(plan::Collective::WORLD, world));
      Status s = world->subgroup(groupRanks(plan_.world_size(), plan_.group_size(), g, rank_), sub);
      if (!s)
        return errorf("rank ", rank_, ": the plan's mesh (groups of ", plan_.group_size(),
                      " ranks) needs a ", plan::Collective::Group_Name(g),
                      " communicator: ", s.message());
    }
    out = sub.get();
    return Status::ok();
  }

  /// Ranks spanned by |g|, and this rank's index among them.
  int size(plan::Collective::Group g) const {
    return g == plan::Collective::WORLD || plan_.group_size() == 0 ? plan_.world_size()
           : g == plan::Collective::GROUP                          ? plan_.group_size()
                                          : plan_.world_size() / plan_.group_size();
  }
  int rank(plan::Collective::Group g) const {
    return g == plan::Collective::WORLD || plan_.group_size() == 0 ? rank_
           : g == plan::Collective::GROUP                          ? rank_ % plan_.group_size()
                                                                   : rank_ / plan_.group_size();
  }

private:
  const plan::Plan &plan_;
  int rank_;
  Communicator *world_;
  std::unique_ptr<Communicator> group_, across_;
};

} // namespace zrt

#endif // ZRT_EXEC_COMMGROUPS_H
