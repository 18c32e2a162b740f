/// ReducedEmbeddingView<S>, HalfEmbeddingView, BFloat16EmbeddingView: the 16-bit tables over
/// memory ember does not own live with the owning ones (ember/reduced.hpp); this header keeps
/// `#include <ember/reduced_view.hpp>` working.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/reduced.hpp"
