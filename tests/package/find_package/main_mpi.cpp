// Consumer of the installed ember::mpi component: a sharded lookup on MPI_COMM_WORLD.
// SPDX-License-Identifier: MIT
#include <mpi.h>

#include <vector>

#include <ember/distributed/sharded_embedding.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int ok = 0;
  {
    ember::distributed::ShardedEmbedding<float> emb(MPI_COMM_WORLD, 10, 4);
    const ember::RowMatrix<float> x = emb.forward(std::vector<ember::TokenId>{1, 9});
    ok = x.rows() == 2 && x.cols() == 4 ? 0 : 1;
  }
  MPI_Finalize();
  return ok;
}
