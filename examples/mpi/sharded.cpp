// A row-sharded embedding table over MPI: each rank holds a slice of the rows, looks up its own
// batch, sends gradients back to the owners and steps its shard with SGD. Only rank 0 prints.
// Run: mpirun -np 2 ./sharded   (any number of ranks <= 12; the batches, hence the norms, depend
// on the number of ranks, the initial table does not)
// SPDX-License-Identifier: MIT
#include <mpi.h>

#include <cstdio>
#include <vector>

#include <ember/distributed/sharded_embedding.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    using ember::distributed::ShardedEmbedding;
    // 12 x 4 table; row r is drawn from its own seeded stream, so it is the same for any P.
    ShardedEmbedding<double> emb(MPI_COMM_WORLD, 12, 4, ember::Init::normal(), /*seed=*/42);
    const int rank = emb.rank();
    if (rank == 0) {
      std::printf("%d ranks, rank 0 owns rows [%lld, %lld)\n", emb.world_size(),
                  static_cast<long long>(emb.row_begin()), static_cast<long long>(emb.row_end()));
    }

    // Every rank looks up ids owned by the others too; id 7 is requested by all of them.
    const std::vector<ember::TokenId> ids{7, static_cast<ember::TokenId>(rank), 11, 7};
    const double before = emb.gather_table().squaredNorm();
    for (int step = 0; step < 3; ++step) {
      const ember::RowMatrix<double> x = emb.forward(ids);  // 4 x 4, scaled by sqrt(4) = 2
      // Loss = ||x||^2 / 2, so dL/dx = x; the owners receive one pre-summed row per id.
      ember::SparseRowGrad<double> grad;
      emb.backward(ids, x, grad);
      for (ember::Index k = 0; k < grad.size(); ++k) {  // plain SGD on this rank's shard
        emb.shard().weight().row(grad.rows()[static_cast<std::size_t>(k)]) -=
            0.05 * grad.values().row(k);
      }
    }
    const double after = emb.gather_table().squaredNorm();
    if (rank == 0) std::printf("squared norm of the table: %.6f -> %.6f\n", before, after);

    // A bad id on the last rank: every rank throws the same IndexError, nobody hangs.
    std::vector<ember::TokenId> bad{1, 2};
    if (rank == emb.world_size() - 1) bad[1] = 12;
    try {
      (void)emb.forward(bad);
    } catch (const ember::IndexError& e) {
      if (rank == 0) std::printf("every rank caught: %s\n", e.what());
    }
  }
  MPI_Finalize();
  return 0;
}
