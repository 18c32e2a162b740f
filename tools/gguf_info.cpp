// ember-gguf-info FILE: prints a GGUF file's metadata and tensors in the layout of gguf-py's
// gguf_dump.py (key, type, count, value with arrays cut after 6 items; tensor elements, shape
// ne[0..3], type, name), plus each tensor's byte size.
// SPDX-License-Identifier: MIT
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <ember/io/ggml_type.hpp>
#include <ember/io/gguf.hpp>

namespace {

using ember::io::GgufFile;
using ember::io::GgufKeyInfo;
using T = ember::io::GgufValueType;

// Python's repr of a double: shortest digits, fixed notation for exponents in [-4, 16).
std::string py_float(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  if (s == "inf" || s == "-inf") return s;
  if (s.find("nan") != std::string::npos) return "nan";
  const std::size_t e = s.find('e');
  const int exp = std::atoi(s.c_str() + e + 1);
  const bool neg = s[0] == '-';
  std::string digits;
  for (std::size_t i = neg ? 1 : 0; i < e; ++i)
    if (s[i] != '.') digits += s[i];
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
    } else if (digits.size() <= static_cast<std::size_t>(exp) + 1) {
      out += digits + std::string(static_cast<std::size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(exp) + 1) + "." +
             digits.substr(static_cast<std::size_t>(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + ebuf;
}

std::string py_str(std::string_view s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "'";
}

// The first `n` elements of key k as Python would print them.
std::vector<std::string> items(const GgufFile& f, const GgufKeyInfo& k, std::size_t n) {
  std::vector<std::string> out;
  auto take = [&](const auto& v, auto fmt) {
    for (std::size_t i = 0; i < v.size() && i < n; ++i) out.push_back(fmt(v[i]));
  };
  auto num = [](auto x) { return std::to_string(x); };
  auto flt = [](auto x) { return py_float(static_cast<double>(x)); };
  auto get = [&](auto tag) {
    using V = decltype(tag);
    if (k.is_array()) return f.get<std::vector<V>>(k.key);
    return std::vector<V>{f.get<V>(k.key)};
  };
  switch (k.element_type) {
    case T::UINT8:
      take(get(std::uint8_t{}), num);
      break;
    case T::INT8:
      take(get(std::int8_t{}), num);
      break;
    case T::UINT16:
      take(get(std::uint16_t{}), num);
      break;
    case T::INT16:
      take(get(std::int16_t{}), num);
      break;
    case T::UINT32:
      take(get(std::uint32_t{}), num);
      break;
    case T::INT32:
      take(get(std::int32_t{}), num);
      break;
    case T::UINT64:
      take(get(std::uint64_t{}), num);
      break;
    case T::INT64:
      take(get(std::int64_t{}), num);
      break;
    case T::FLOAT32:
      take(get(float{}), flt);
      break;
    case T::FLOAT64:
      take(get(double{}), flt);
      break;
    case T::BOOL:
      take(get(bool{}), [](bool b) { return std::string(b ? "True" : "False"); });
      break;
    default:
      take(get(std::string_view{}), [](std::string_view s) { return py_str(s); });
      break;
  }
  return out;
}

void line(int n, const std::string& type, std::uint64_t count, const std::string& key,
          const std::string& value) {
  std::printf("  %5d: %-10s | %8llu | %s = %s\n", n, type.c_str(),
              static_cast<unsigned long long>(count), key.c_str(), value.c_str());
}

constexpr const char* kUsage =
    "Prints a GGUF file's metadata and tensors, in the layout of gguf-py's gguf_dump.py.\n"
    "Usage: ember-gguf-info FILE\n"
    "\n"
    "  FILE        a GGUF file (v2 or v3)\n"
    "  -h,--help   print this help and exit\n"
    "\n"
    "Metadata: index, type, count, key = value (strings cut at 60 characters, arrays at 6\n"
    "items). Tensors: index, elements, ne[0..3], ggml type, bytes, name.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string_view(argv[1]) == "-h" || std::string_view(argv[1]) == "--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  try {
    const GgufFile f(argv[1]);
    std::printf("* GGUF version %u, alignment %llu, data section at byte %llu\n", f.version(),
                static_cast<unsigned long long>(f.alignment()),
                static_cast<unsigned long long>(f.data_offset()));
    std::printf("* Dumping %zu key/value pair(s)\n", f.key_infos().size() + 3);
    int n = 0;
    line(++n, "UINT32", 1, "GGUF.version", std::to_string(f.version()));
    line(++n, "UINT64", 1, "GGUF.tensor_count", std::to_string(f.tensors().size()));
    line(++n, "UINT64", 1, "GGUF.kv_count", std::to_string(f.key_infos().size()));
    for (const GgufKeyInfo& k : f.key_infos()) {
      std::string value;
      if (!k.is_array() && k.type == T::STRING) {
        std::string s = f.get<std::string>(k.key);
        if (s.size() > 60) s = s.substr(0, 57) + "...";
        value = py_str(s);
      } else if (!k.is_array()) {
        value = items(f, k, 1).front();
      } else {
        value = "[";
        const auto first = items(f, k, 6);
        for (std::size_t i = 0; i < first.size(); ++i) value += (i ? ", " : "") + first[i];
        value += k.count > 6 ? ", ...]" : "]";
      }
      line(++n, k.type_name(), k.count, k.key, value);
    }
    std::printf("* Dumping %zu tensor(s)\n", f.tensors().size());
    n = 0;
    for (const auto& t : f.tensors()) {
      std::string type(ember::io::to_string(t.type));
      for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      std::printf(
          "  %5d: %10llu | %5llu, %5llu, %5llu, %5llu | %-7s | %8llu bytes | %s\n", ++n,
          static_cast<unsigned long long>(t.elements()), static_cast<unsigned long long>(t.ne[0]),
          static_cast<unsigned long long>(t.ne[1]), static_cast<unsigned long long>(t.ne[2]),
          static_cast<unsigned long long>(t.ne[3]), type.c_str(),
          static_cast<unsigned long long>(t.bytes), t.name.c_str());
    }
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "ember-gguf-info: %s\n", e.message());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-gguf-info: %s: %s\n", argv[1], e.what());
    return 1;
  }
  return 0;
}
