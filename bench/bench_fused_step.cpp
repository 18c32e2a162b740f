// The fused backward + step against the unfused path, LibTorch's sparse path and the memory
// floor, at GPT-2 small's table (V = 50257, d = 768) with 4096 Zipf ids per step.
//
// One benchmark per optimizer runs every path once per iteration, each on its own table and
// state (so all see the same cache conditions), and reports the time of each:
//   fused    ember: opt.backward_step(emb, ids, grad_out)
//   unfused  ember: emb.backward(ids, grad_out, g); opt.step(emb, g)
//   torch    LibTorch: sparse embedding_backward, coalesce, then the update
//            torch.optim.SparseAdam / Adagrad / SGD apply to a sparse gradient (their
//            _functional code, written with the same tensor ops)
//   floor    a plain loop over the same grouped positions that reads the same gradient rows
//            and reads and writes the same table and state rows, with no optimizer arithmetic
//            (the ids' grouping is done beforehand, untimed)
// The iteration time is the fused step's; counters x_unfused = unfused / fused,
// x_torch = torch / fused and floor_ratio = floor / fused (1 = at the memory floor).
// SPDX-License-Identifier: MIT
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <ember/embedding.hpp>
#include <ember/optim.hpp>

#include "support/bench_support.hpp"

namespace {

using ember_bench::Dist;
using ember_bench::Index;
using ember_bench::RowMatrix;
using ember_bench::TokenId;
using clock_type = std::chrono::steady_clock;

constexpr Index kVocab = 50257, kDim = 768, kIds = 4096;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Which optimizer a benchmark runs, on every path.
enum class Rule { sgd, adam, adagrad };
const char* name_of(Rule r) {
  return r == Rule::sgd ? "SGD" : r == Rule::adam ? "Adam" : "RowwiseAdagrad";
}

/// The memory floor of an update: positions grouped by row beforehand; per row, its gradient
/// rows are summed (read) and the table row and `planes` state rows of d values (Adagrad: one
/// value) read and written.
struct Floor {
  std::vector<TokenId> rows;  // distinct ids, ascending
  std::vector<Index> starts;  // rows[k]'s positions are order[starts[k] .. starts[k+1])
  std::vector<Index> order;   // positions grouped by row
  RowMatrix<float> table;     // V x d
  RowMatrix<float> state;     // V x (planes · d), or V x 1
  int planes = 0;
  bool scalar_state = false;

  Floor(const std::vector<TokenId>& ids, int state_planes, bool scalar)
      : table(ember_bench::fast_table(kVocab, kDim)), planes(state_planes), scalar_state(scalar) {
    std::vector<std::vector<Index>> at(static_cast<std::size_t>(kVocab));
    for (std::size_t p = 0; p < ids.size(); ++p)
      at[static_cast<std::size_t>(ids[p])].push_back(static_cast<Index>(p));
    for (Index r = 0; r < kVocab; ++r) {
      const auto& ps = at[static_cast<std::size_t>(r)];
      if (ps.empty()) continue;
      rows.push_back(r);
      starts.push_back(static_cast<Index>(order.size()));
      order.insert(order.end(), ps.begin(), ps.end());
    }
    starts.push_back(static_cast<Index>(order.size()));
    state = RowMatrix<float>::Zero(kVocab, scalar ? 1 : std::max(planes, 1) * kDim);
  }

  void run(const RowMatrix<float>& grad_out, Eigen::Ref<Eigen::RowVectorXf> sum) {
    for (std::size_t k = 0; k < rows.size(); ++k) {
      sum = grad_out.row(order[static_cast<std::size_t>(starts[k])]);
      for (Index p = starts[k] + 1; p < starts[k + 1]; ++p)
        sum += grad_out.row(order[static_cast<std::size_t>(p)]);
      const Index r = rows[k];
      table.row(r) -= 1e-3F * sum;
      if (scalar_state) {
        state(r, 0) += sum.squaredNorm();
      } else {
        for (int q = 0; q < planes; ++q) state.row(r).segment(q * kDim, kDim) += sum;
      }
    }
  }
};

#if defined(EMBER_BENCH_HAVE_TORCH)
/// LibTorch's path for one optimizer: the sparse gradient of the embedding, then the update
/// torch.optim applies to it.
struct TorchPath {
  Rule rule;
  at::Tensor weight, exp_avg, exp_avg_sq, state_sum;
  std::int64_t step = 0;

  explicit TorchPath(Rule r) : rule(r) {
    const RowMatrix<float> w = ember_bench::fast_table(kVocab, kDim);
    weight = ember_bench::torch_view(w.data(), kVocab, kDim).clone();
    if (rule == Rule::adam) {
      exp_avg = at::zeros_like(weight);
      exp_avg_sq = at::zeros_like(weight);
    } else if (rule == Rule::adagrad) {
      state_sum = at::zeros_like(weight);
    }
  }

  void run(const at::Tensor& grad_out, const at::Tensor& ids) {
    at::Tensor g = at::embedding_backward(grad_out, ids, kVocab, /*padding_idx=*/-1,
                                          /*scale_grad_by_freq=*/false, /*sparse=*/true);
    if (rule == Rule::sgd) {  // torch.optim.SGD: p.add_(grad, alpha=-lr), uncoalesced
      weight.add_(g, -0.1);
      return;
    }
    g = g.coalesce();
    const at::Tensor idx = g._indices();
    const at::Tensor values = g._values();
    const auto make_sparse = [&](const at::Tensor& v) {
      return at::sparse_coo_tensor(idx, v, g.sizes());
    };
    if (rule == Rule::adagrad) {  // torch.optim.Adagrad on a sparse gradient
      state_sum.add_(make_sparse(values.pow(2)));
      const at::Tensor std_values = state_sum.sparse_mask(g)._values().sqrt_().add_(1e-10);
      weight.add_(make_sparse(values / std_values), -0.01);
      return;
    }
    // torch.optim.SparseAdam
    ++step;
    const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, lr = 1e-3;
    const at::Tensor old_m = exp_avg.sparse_mask(g)._values();
    at::Tensor m_update = values.sub(old_m).mul_(1 - beta1);
    exp_avg.add_(make_sparse(m_update));
    const at::Tensor old_v = exp_avg_sq.sparse_mask(g)._values();
    at::Tensor v_update = values.pow(2).sub_(old_v).mul_(1 - beta2);
    exp_avg_sq.add_(make_sparse(v_update));
    const at::Tensor numer = m_update.add_(old_m);
    v_update.add_(old_v);
    const at::Tensor denom = v_update.sqrt_().add_(eps);
    const double bc1 = 1 - std::pow(beta1, static_cast<double>(step));
    const double bc2 = 1 - std::pow(beta2, static_cast<double>(step));
    const double step_size = lr * std::sqrt(bc2) / bc1;
    weight.add_(make_sparse(-step_size * numer.div_(denom)));
  }
};
#endif

template <class Opt>
void run_step(benchmark::State& state, Rule rule, Opt proto) {
  const auto ids = ember_bench::make_ids(kIds, kVocab, Dist::zipf);
  RowMatrix<float> grad_out = 1e-3F * ember_bench::fast_table(kIds, kDim);
  ember::Embedding<float> fused_emb(ember_bench::fast_table(kVocab, kDim));
  ember::Embedding<float> unfused_emb(ember_bench::fast_table(kVocab, kDim));
  Opt fused = proto;
  Opt unfused = proto;
  ember::SparseRowGrad<float> g;
  Floor floor(ids, rule == Rule::adam ? 2 : 0, rule == Rule::adagrad);
  Eigen::RowVectorXf sum(kDim);
#if defined(EMBER_BENCH_HAVE_TORCH)
  TorchPath torch(rule);
  const at::Tensor t_grad = ember_bench::torch_view(grad_out.data(), kIds, kDim);
  const at::Tensor t_ids = ember_bench::torch_ids(ids);
#endif
  // One untimed round: the first step sizes the slot maps, scratch and state.
  const auto round = [&](double* times) {
    auto t0 = clock_type::now();
    fused.backward_step(fused_emb, ids, grad_out);
    times[0] += seconds_since(t0);
    t0 = clock_type::now();
    g.clear();
    unfused_emb.backward(ids, grad_out, g);
    unfused.step(unfused_emb, g);
    times[1] += seconds_since(t0);
    t0 = clock_type::now();
    floor.run(grad_out, sum);
    times[2] += seconds_since(t0);
#if defined(EMBER_BENCH_HAVE_TORCH)
    t0 = clock_type::now();
    torch.run(t_grad, t_ids);
    times[3] += seconds_since(t0);
#endif
    benchmark::ClobberMemory();
  };
  double warm[4] = {0, 0, 0, 0};
  round(warm);
  double total[4] = {0, 0, 0, 0};
  for (auto _ : state) {
    double times[4] = {0, 0, 0, 0};
    round(times);
    state.SetIterationTime(times[0]);
    for (int k = 0; k < 4; ++k) total[k] += times[k];
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["fused_ms"] = 1e3 * total[0] / n;
  state.counters["unfused_ms"] = 1e3 * total[1] / n;
  state.counters["floor_ms"] = 1e3 * total[2] / n;
  state.counters["x_unfused"] = total[1] / total[0];
  state.counters["floor_ratio"] = total[2] / total[0];
#if defined(EMBER_BENCH_HAVE_TORCH)
  state.counters["torch_ms"] = 1e3 * total[3] / n;
  state.counters["x_torch"] = total[3] / total[0];
#endif
  state.counters["rows"] = static_cast<double>(floor.rows.size());
  state.SetLabel(name_of(rule));
}

void register_all() {
  const auto reg = [](const char* name, auto fn) {
    benchmark::RegisterBenchmark(name, fn)->UseManualTime()->Unit(benchmark::kMillisecond);
  };
  reg("fused_step/SGD/gpt2/zipf",
      [](benchmark::State& s) { run_step(s, Rule::sgd, ember::optim::SGD<float>({.lr = 0.1})); });
  reg("fused_step/Adam/gpt2/zipf", [](benchmark::State& s) {
    run_step(s, Rule::adam, ember::optim::Adam<float>({.lr = 1e-3}));
  });
  reg("fused_step/RowwiseAdagrad/gpt2/zipf", [](benchmark::State& s) {
    run_step(s, Rule::adagrad, ember::optim::RowwiseAdagrad<float>({.lr = 0.01}));
  });
}

}  // namespace

int main(int argc, char** argv) { return ember_bench::run_main(argc, argv, register_all); }
