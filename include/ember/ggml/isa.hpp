/// The instruction sets of ggml's kernels that this build has, as macros that select each
/// operation's kernel at namespace scope (ggml/lookup.hpp, ggml/exact_dot.hpp, ggml/quant_dot.hpp):
/// AVX2 (with F16C), AVX-512 (F, on top of AVX2) and AVX-512 VNNI (with BW, VL, VBMI and
/// BITALG). The portable kernels are in every build, and the others are tested against them.
// SPDX-License-Identifier: MIT
#pragma once

#if (defined(__GNUC__) || defined(__clang__)) && defined(__AVX2__) && defined(__F16C__)
#define EMBER_DETAIL_GGML_AVX2 1
#else
#define EMBER_DETAIL_GGML_AVX2 0
#endif

#if EMBER_DETAIL_GGML_AVX2 && defined(__AVX512F__)
#define EMBER_DETAIL_GGML_AVX512 1
#else
#define EMBER_DETAIL_GGML_AVX512 0
#endif

#if EMBER_DETAIL_GGML_AVX512 && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__AVX512VBMI__) && defined(__AVX512BITALG__)
#define EMBER_DETAIL_GGML_AVX512VNNI 1
#else
#define EMBER_DETAIL_GGML_AVX512VNNI 0
#endif
