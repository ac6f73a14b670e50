//===- GradCheck.cpp - gradients against finite differences ---------------===//
#include "run/Run.h"

#include "exec/Executor.h"
#include "plan/PlanLoader.h"
#include "train/Data.h"

#include <algorithm>
#include <cmath>
#include <random>

using namespace zrt;

Status zrt::gradcheck(const RunOptions &options, const GradCheckOptions &check,
                      std::vector<GradCheckResult> &results) {
  results.clear();
  if (options.backend == "cuda")
    return errorf("--backend cuda: gradcheck runs on the CPU backend");
  plan::Plan plan;
  ZRT_RETURN_IF_ERROR(loadRunPlan(options, plan));
  if (plan.world_size() != 1)
    return errorf(options.plan, ": gradcheck runs world-size-1 plans (compile with "
                                "--world-size 1)");
  if (!plan.has_training())
    return errorf(options.plan, ": the plan does not train");
  std::unique_ptr<WeightFile> weights;
  ZRT_RETURN_IF_ERROR(openWeights(options, plan, /*resuming=*/false, weights));
  ZRT_RETURN_IF_ERROR(checkBlasMemory());
  Executor executor(plan);
  if (weights) {
    int loaded = 0;
    ZRT_RETURN_IF_ERROR(loadWeights(plan, *weights, 0, executor, loaded));
  }
  const plan::Program *micro = executor.program("micro_step");
  if (namedBuffer(micro, false, "lr") >= 0)
    return errorf(options.plan, ": the plan updates the parameters inside micro_step (zcc "
                                "--optimizer-in-backward, on by default with --target cuda): "
                                "compile it with --optimizer-in-backward=off to check gradients");
  DataFeeder microData;
  ZRT_RETURN_IF_ERROR(microData.load(options.data, plan, *micro));
  // The loss to differentiate is micro_step's: the one its gradients are
  // of. @eval differs where the model computes differently when it trains:
  // no dropout (micro_step's mask, "dropout_rng", is fixed here), BatchNorm's
  // running statistics instead of the batch's. Rerunning micro_step
  // accumulates more gradients (they are read before) and updates the running
  // statistics, which its loss does not read.
  const int rngBuffer = namedBuffer(micro, false, "dropout_rng");
  const plan::Program *lossProgram = micro;
  int lossBuffer = namedBuffer(lossProgram, true, "loss");
  if (lossBuffer < 0)
    return errorf(options.plan, ": the ", lossProgram->name(), " program has no 'loss' output");
  ZRT_RETURN_IF_ERROR(microData.feed(0, executor, *micro));
  for (const plan::NamedBuffer &in : micro->inputs())
    if (in.name() == "loss_scale") // fp16 plans: unscaled gradients
      *executor.buffer(in.buffer()).as<float>() = 1.0f;
  if (rngBuffer >= 0) {
    int64_t *rng = executor.buffer(rngBuffer).as<int64_t>();
    rng[0] = 42, rng[1] = 0;
  }
  ZRT_RETURN_IF_ERROR(executor.run(*micro));
  std::vector<std::vector<float>> gradients;
  for (const plan::ParamLayout &l : plan.params()) {
    const TensorRef &grads = executor.buffer(l.grad());
    if (grads.dtype != DType::F32)
      return errorf("--check-grads needs float32 gradients; '", l.name(),
                    "' has a 16-bit gradient bucket (a --precision bf16/fp16 plan)");
    const float *g = grads.as<float>() + l.offset();
    int64_t n = 1;
    for (int64_t d : l.shape())
      n *= d;
    gradients.emplace_back(g, g + n);
  }
  Status failed = Status::ok();
  auto lossAt = [&]() -> double {
    if (Status s = executor.run(*lossProgram); !s) {
      failed = s;
      return NAN;
    }
    return *executor.buffer(lossBuffer).as<float>();
  };
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal;
  const double h = check.epsilon;
  // Every parameter at its place in its flat bucket (world size 1: the
  // buckets are whole).
  for (int i = 0; i < plan.params_size(); ++i) {
    const plan::ParamLayout &l = plan.params(i);
    if (!check.param.empty() && l.name().find(check.param) == std::string::npos)
      continue;
    float *p = executor.buffer(l.bucket()).as<float>() + l.offset();
    const float *g = gradients[i].data();
    int64_t n = (int64_t)gradients[i].size();
    // The direction: the analytic gradient's plus a random one, each of
    // unit length. Along the gradient the derivative is as large as it can
    // be, so the float32 loss's rounding (its differences come in steps of
    // an ulp of the loss) matters least; the random half checks the
    // components a wrong gradient would miss.
    std::vector<double> d(n);
    double norm = 0, gnorm = 0, analytic = 0;
    for (double &x : d) {
      x = normal(rng);
      norm += x * x;
    }
    for (int64_t k = 0; k < n; ++k)
      gnorm += (double)g[k] * g[k];
    norm = std::sqrt(norm), gnorm = std::sqrt(gnorm);
    double total = 0;
    for (int64_t k = 0; k < n; ++k) {
      d[k] = d[k] / norm + (gnorm > 0 ? g[k] / gnorm : 0.0);
      total += d[k] * d[k];
    }
    total = std::sqrt(total);
    std::vector<float> saved(p, p + n);
    for (int64_t k = 0; k < n; ++k) {
      d[k] /= total;
      analytic += g[k] * d[k];
    }
    auto shift = [&](double t) {
      for (int64_t k = 0; k < n; ++k)
        p[k] = (float)(saved[k] + t * d[k]);
    };
    shift(h);
    double up = lossAt();
    shift(-h);
    double down = lossAt();
    std::copy(saved.begin(), saved.end(), p);
    ZRT_RETURN_IF_ERROR(failed);
    double numeric = (up - down) / (2 * h);
    // What the float32 loss can resolve: each value is rounded to its ulp
    // (and summed in float32: a few ulps), so the difference quotient is
    // only known to about 4 ulps / 2h. Disagreement within that is not an
    // error of the gradient; beyond it, relative to the derivative.
    double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(up), std::fabs(down))) - 23);
    double resolution = 4 * ulp / (2 * h);
    double err = std::max(0.0, std::fabs(analytic - numeric) - resolution) /
                 std::max({std::fabs(numeric), std::fabs(analytic), 1e-12});
    results.push_back({l.name(), analytic, numeric, err, resolution});
  }
  if (results.empty()) // a check of nothing must not pass
    return check.param.empty()
               ? errorf(options.plan, ": the plan lists no parameters to check")
               : errorf("--param ", check.param,
                        ": no trainable parameter's name contains it (zrun kernels or zcc "
                        "--emit=report list them)");
  return Status::ok();
}
