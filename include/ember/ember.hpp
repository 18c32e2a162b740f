/// Umbrella header: every public header of ember's core, which is every header at the top of
/// include/ember/ and those under keys/, keyed/ and optim/ (the codecs of codec/ and the ggml
/// types of ggml/ come with the tables that use them). Not the optional components io/ (ember::io,
/// which needs nlohmann_json) and distributed/ (ember::mpi, which needs MPI), nor query/, the
/// layer of queries above the core: include those by name.
/// Include the specific headers in production code; this one is for exploration.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/bag.hpp"
#include "ember/check.hpp"
#include "ember/clip.hpp"
#include "ember/config.hpp"
#include "ember/embedding.hpp"
#include "ember/embedding_view.hpp"
#include "ember/errors.hpp"
#include "ember/fused_step.hpp"
#include "ember/ggml_embedding.hpp"
#include "ember/init.hpp"
#include "ember/input_embedding.hpp"
#include "ember/input_stem.hpp"
#include "ember/keyed/keyed_bags.hpp"
#include "ember/keyed/keyed_embedding.hpp"
#include "ember/keys/key_index.hpp"
#include "ember/keys/subwords.hpp"
#include "ember/keys/vocabulary.hpp"
#include "ember/logits_mode.hpp"
#include "ember/optim.hpp"
#include "ember/positional.hpp"
#include "ember/quantized.hpp"
#include "ember/random.hpp"
#include "ember/reduced.hpp"
#include "ember/reduced_view.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/table.hpp"
#include "ember/table_batched_bags.hpp"
#include "ember/tied_logits.hpp"
#include "ember/top_k.hpp"
#include "ember/types.hpp"
