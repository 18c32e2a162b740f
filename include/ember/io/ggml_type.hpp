/// io::GgmlType and its traits under the names of the file formats: the one ggml type enum of
/// ember/ggml/type.hpp, spelled as GGUF code has spelled it.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/config.hpp"
#include "ember/ggml/type.hpp"

namespace ember::inline EMBER_ISA::io {

/// ember::GgmlType (ember/ggml/type.hpp): ggml's tensor element types with ggml's ids.
using GgmlType = ember::GgmlType;
using ember::ggml_block_size;
using ember::ggml_row_size;
using ember::ggml_type_decodes;
using ember::ggml_type_known;
using ember::ggml_type_size;
using ember::to_string;

}  // namespace ember::inline EMBER_ISA::io
