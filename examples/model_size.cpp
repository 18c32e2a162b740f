// model_size: the embedding's share of a transformer's parameters and its memory per precision.
//
// Parameters of a decoder/encoder stack with d_ff = 4d (or the model's own) and n layers:
//   embedding  V·d (input table; + V·d more for an untied output projection)
//   per layer  4·d² (attention Q, K, V, O) + 2·d·d_ff (feed-forward; 3·d·d_ff when gated, as
//   Llama/Gemma)
// Biases, norms and learned position tables are ignored (< 1 %). Memory = parameters × bytes
// per value (fp32 4, fp16 and bf16 2, int8 1).
#include <cstdio>
#include <string>
#include <vector>

struct Preset {
  const char* name;
  double vocab, d, layers, d_ff;
  bool tied, gated;
  double attn;   // parameters of one attention block (4·d² unless grouped-query attention)
  double cross;  // layers with a second (cross-)attention block: the decoder of an encoder-decoder
};

int main() {
  const std::vector<Preset> presets = {
      {"GPT-2 small", 50257, 768, 12, 3072, true, false, 4.0 * 768 * 768, 0},
      // Vaswani et al. 2017: 6 encoder + 6 decoder layers, shared 37k BPE vocabulary, tied.
      {"Transformer base", 37000, 512, 12, 2048, true, false, 4.0 * 512 * 512, 6},
      {"Transformer big", 37000, 1024, 12, 4096, true, false, 4.0 * 1024 * 1024, 6},
      // Llama-3-8B: grouped-query attention, 8 KV heads of 128: Q, O d x d; K, V d x 1024.
      {"Llama-3-8B", 128256, 4096, 32, 14336, false, true, 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024,
       0},
      // Gemma-2B: multi-query attention (1 KV head of 256), 8 heads of 256: Q, O d x 2048.
      {"Gemma-2B", 256000, 2048, 18, 16384, true, true, 2.0 * 2048 * 2048 + 2.0 * 2048 * 256, 0},
  };
  std::printf("%-17s %7s %5s %3s %4s %9s %9s %6s %9s %9s %9s %9s\n", "model", "V", "d", "L", "tie",
              "emb (M)", "total (M)", "share", "fp32 MiB", "fp16 MiB", "bf16 MiB", "int8 MiB");
  for (const auto& p : presets) {
    const double emb = p.vocab * p.d * (p.tied ? 1 : 2);
    const double ffn = (p.gated ? 3 : 2) * p.d * p.d_ff;
    const double total = emb + p.layers * (p.attn + ffn) + p.cross * p.attn;
    const double mib = emb / (1024.0 * 1024.0);
    std::printf("%-17s %7.0f %5.0f %3.0f %4s %9.1f %9.1f %5.1f%% %9.1f %9.1f %9.1f %9.1f\n", p.name,
                p.vocab, p.d, p.layers, p.tied ? "on" : "off", emb / 1e6, total / 1e6,
                100.0 * emb / total, mib * 4, mib * 2, mib * 2, mib * 1);
  }
  std::printf(
      "emb = embedding parameters (input table, plus the output projection when untied);\n"
      "memory columns are for the embedding parameters alone.\n");
  return 0;
}
