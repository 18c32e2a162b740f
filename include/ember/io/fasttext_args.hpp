/// The training arguments a fastText model stores (FastTextArgs), with the kinds of model and loss
/// they name: what load_fasttext reads from a .bin/.ftz header and FastTextModel::args() returns.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::io {

/// The kind of a fastText model (its -model: `fasttext cbow`, `skipgram` or `supervised`).
enum class FastTextModelType : std::int32_t { cbow = 1, skipgram = 2, supervised = 3 };

/// The loss a fastText model was trained with (-loss).
enum class FastTextLoss : std::int32_t { hs = 1, ns = 2, softmax = 3, ova = 4 };

/// The name fastText prints for a model type ("cbow", "sg", "sup").
[[nodiscard]] constexpr const char* to_string(FastTextModelType t) noexcept {
  return t == FastTextModelType::cbow ? "cbow" : t == FastTextModelType::skipgram ? "sg" : "sup";
}
/// The name fastText prints for a loss ("hs", "ns", "softmax", "one-vs-all").
[[nodiscard]] constexpr const char* to_string(FastTextLoss l) noexcept {
  return l == FastTextLoss::hs        ? "hs"
         : l == FastTextLoss::ns      ? "ns"
         : l == FastTextLoss::softmax ? "softmax"
                                      : "one-vs-all";
}

/// The training arguments a fastText model stores (fastText's Args::save, in its order). Only
/// dim, word_ngrams, loss, model, bucket, minn and maxn change the answers; the others are kept
/// as read.
struct FastTextArgs {
  std::int32_t dim = 0;
  std::int32_t ws = 0;
  std::int32_t epoch = 0;
  std::int32_t min_count = 0;
  std::int32_t neg = 0;
  std::int32_t word_ngrams = 0;
  FastTextLoss loss = FastTextLoss::ns;
  FastTextModelType model = FastTextModelType::skipgram;
  std::int32_t bucket = 0;
  std::int32_t minn = 0;
  std::int32_t maxn = 0;
  std::int32_t lr_update_rate = 0;
  double t = 0;
};

}  // namespace ember::inline EMBER_ISA::io
