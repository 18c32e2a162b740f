/// Umbrella header: every public header of ember's core. Include the specific headers in
/// production code; this one is for exploration.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/bag.hpp"
#include "ember/check.hpp"
#include "ember/config.hpp"
#include "ember/embedding.hpp"
#include "ember/embedding_view.hpp"
#include "ember/errors.hpp"
#include "ember/init.hpp"
#include "ember/input_embedding.hpp"
#include "ember/input_stem.hpp"
#include "ember/keys/key_index.hpp"
#include "ember/keyed/keyed_bags.hpp"
#include "ember/keyed/keyed_embedding.hpp"
#include "ember/optim.hpp"
#include "ember/positional.hpp"
#include "ember/quantized.hpp"
#include "ember/random.hpp"
#include "ember/reduced.hpp"
#include "ember/reduced_view.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/table.hpp"
#include "ember/tied_logits.hpp"
#include "ember/types.hpp"
