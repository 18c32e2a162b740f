// Benchmark of ShardedEmbedding over MPI: ids/s and bytes exchanged per id for forward (with and
// without de-duplication) and backward, on Zipf-distributed ids, plus the local lookup rate of one
// shard (the compute side of the capacity model in docs/distributed.md).
//
// A plain main timed with MPI_Wtime, not Google Benchmark: Google Benchmark decides iteration
// counts per process, and ranks that run different counts would deadlock in the collectives.
// Every rank runs the same fixed number of iterations; the time of an iteration is the slowest
// rank's (MPI_Allreduce MAX), and the best of 3 repetitions is kept.
//
// Run:  mpirun -np 4 ./bench_sharded [vocab=100000] [dim=128] [batch_per_rank=8192] [iters=20]
//                                     [zipf_s=1.05]
// SPDX-License-Identifier: MIT
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include <ember/distributed/sharded_embedding.hpp>
#include <ember/random.hpp>

namespace {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

// Zipf(s) ids over [0, vocab): the k-th most frequent id has weight 1 / (k+1)^s; ranks are mapped
// to ids by k -> (k * a + b) mod vocab (a coprime to vocab), so hot ids land on every shard.
std::vector<TokenId> zipf_ids(Index n, Index vocab, double s, std::uint64_t seed) {
  std::vector<double> cdf(static_cast<std::size_t>(vocab));
  double acc = 0.0;
  for (Index k = 0; k < vocab; ++k) {
    acc += 1.0 / std::pow(static_cast<double>(k + 1), s);
    cdf[static_cast<std::size_t>(k)] = acc;
  }
  Index a = 7919;
  while (std::gcd(a, vocab) != 1) ++a;
  ember::Random rng(seed);
  std::vector<TokenId> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) {
    const double u = rng.uniform() * acc;
    const auto k = static_cast<Index>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    id = static_cast<TokenId>((std::min(k, vocab - 1) * a + 12345) % vocab);
  }
  return ids;
}

double slowest(double seconds) {
  double worst = 0.0;
  MPI_Allreduce(&seconds, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

double sum_all(double v) {
  double total = 0.0;
  MPI_Allreduce(&v, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

struct Row {
  const char* what;
  double ids_per_s;
  double unique_fraction;
  double bytes_per_id;
  double ms;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    const Index vocab = argc > 1 ? std::atoll(argv[1]) : 100000;
    const Index dim = argc > 2 ? std::atoll(argv[2]) : 128;
    const Index batch = argc > 3 ? std::atoll(argv[3]) : 8192;
    const int iters = argc > 4 ? std::atoi(argv[4]) : 20;
    const double s = argc > 5 ? std::atof(argv[5]) : 1.05;

    ember::distributed::ShardedEmbedding<float> emb(MPI_COMM_WORLD, vocab, dim,
                                                    ember::Init::normal(), 1);
    const int rank = emb.rank();
    const int p = emb.world_size();
    const auto ids = zipf_ids(batch, vocab, s, 1000 + static_cast<std::uint64_t>(rank));
    RowMatrix<float> out(batch, dim);
    const RowMatrix<float> grad_out = RowMatrix<float>::Constant(batch, dim, 1e-3f);
    std::vector<Row> rows;

    auto run = [&](const char* what, auto&& call) {
      for (int i = 0; i < 2; ++i) call();  // warm-up
      double per_iter = 1e300;             // best of 3 repetitions: the host may be shared
      for (int rep = 0; rep < 3; ++rep) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < iters; ++i) call();
        per_iter = std::min(per_iter, slowest(MPI_Wtime() - t0) / iters);
      }
      const auto& st = emb.last_exchange();
      const double total_ids = sum_all(static_cast<double>(st.ids));
      const double unique = sum_all(static_cast<double>(st.unique_ids));
      const double bytes = sum_all(static_cast<double>(st.bytes_sent));
      rows.push_back(
          {what, total_ids / per_iter, unique / total_ids, bytes / total_ids, per_iter * 1e3});
    };

    emb.set_options({.deduplicate = true});
    run("forward, dedup", [&] { emb.forward(ids, out); });
    emb.set_options({.deduplicate = false});
    run("forward, no dedup", [&] { emb.forward(ids, out); });
    ember::SparseRowGrad<float> grad;
    run("backward (pre-reduced)", [&] {
      grad.clear();
      emb.backward(ids, grad_out, grad);
    });

    // Compute side: one rank's local lookup of the same batch in its own shard (no exchange).
    std::vector<TokenId> local(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) local[i] = ids[i] % emb.local_rows();
    double local_time = 1e300;
    for (int rep = 0; rep < 3; ++rep) {
      const double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) emb.shard().forward(local, out);
      local_time = std::min(local_time, slowest(MPI_Wtime() - t0));
    }
    const double local_rate = static_cast<double>(batch) * iters / local_time;

    if (rank == 0) {
      std::printf("ranks=%d vocab=%lld dim=%lld float batch/rank=%lld zipf_s=%.2f iters=%d\n", p,
                  static_cast<long long>(vocab), static_cast<long long>(dim),
                  static_cast<long long>(batch), s, iters);
      std::printf("%-24s %14s %12s %16s %10s\n", "call", "ids/s (all)", "unique/ids",
                  "bytes sent/id", "ms/call");
      for (const auto& r : rows) {
        std::printf("%-24s %14.4g %12.3f %16.1f %10.3f\n", r.what, r.ids_per_s, r.unique_fraction,
                    r.bytes_per_id, r.ms);
      }
      std::printf("%-24s %14.4g   (one rank, no exchange)\n", "local shard lookup", local_rate);
    }
  }
  MPI_Finalize();
  return 0;
}
