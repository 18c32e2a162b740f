// Tests for ember/errors.hpp: the exception hierarchy, fields and messages.
// SPDX-License-Identifier: MIT
#include "ember/errors.hpp"

#include <cstdint>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/embedding.hpp"
#include "ember/optim/adam.hpp"
#include "ember/optim/sgd.hpp"
#include "ember/reduced.hpp"
#include "support/error_checks.hpp"

using Catch::Matchers::Contains;

// ---- hierarchy, checked at compile time ------------------------------------------------------

static_assert(std::is_base_of_v<std::out_of_range, ember::IndexError>);
static_assert(std::is_base_of_v<ember::Error, ember::IndexError>);
static_assert(!std::is_base_of_v<std::invalid_argument, ember::IndexError>);

static_assert(std::is_base_of_v<std::invalid_argument, ember::ShapeError>);
static_assert(std::is_base_of_v<ember::Error, ember::ShapeError>);

static_assert(std::is_base_of_v<std::invalid_argument, ember::ValueError>);
static_assert(std::is_base_of_v<ember::Error, ember::ValueError>);
static_assert(!std::is_same_v<ember::ShapeError, ember::ValueError>);
static_assert(!std::is_base_of_v<ember::ShapeError, ember::ValueError>);

static_assert(std::is_base_of_v<std::invalid_argument, ember::OverlapError>);
static_assert(std::is_base_of_v<ember::Error, ember::OverlapError>);
static_assert(std::is_copy_constructible_v<ember::OverlapError>);

static_assert(std::is_base_of_v<std::runtime_error, ember::FormatError>);
static_assert(std::is_base_of_v<ember::Error, ember::FormatError>);
// A file that cannot be opened is a FormatError too, so code catching FormatError still works.
static_assert(std::is_base_of_v<ember::FormatError, ember::FileError>);

// ember::Error is an abstract mix-in with a virtual destructor; only the concrete types exist.
static_assert(std::is_abstract_v<ember::Error>);
static_assert(std::has_virtual_destructor_v<ember::Error>);
static_assert(!std::is_base_of_v<std::exception, ember::Error>);

// Exceptions are copied when thrown and caught by value; the small ones copy without throwing,
// like the standard exceptions they derive from.
static_assert(std::is_nothrow_copy_constructible_v<ember::IndexError>);
static_assert(std::is_nothrow_copy_constructible_v<ember::ShapeError>);
static_assert(std::is_nothrow_copy_constructible_v<ember::ValueError>);
static_assert(std::is_copy_constructible_v<ember::FormatError>);

namespace {

template <class Base, class E>
bool caught_as(const E& error) {
  try {
    throw error;
  } catch (const Base&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

TEST_CASE("each error is caught by its std base, std::exception and ember::Error", "[errors]") {
  const ember::IndexError index("bad id", 3, 50257, 50257);
  const ember::ShapeError shape("bad shape", 1, 512, 768);
  const ember::ValueError value("bad value", -1.0);
  const ember::FormatError format("bad file", "model.npy", 128);

  CHECK(caught_as<std::out_of_range>(index));
  CHECK(caught_as<std::logic_error>(index));
  CHECK(caught_as<std::exception>(index));
  CHECK(caught_as<ember::Error>(index));
  CHECK_FALSE(caught_as<std::invalid_argument>(index));

  CHECK(caught_as<std::invalid_argument>(shape));
  CHECK(caught_as<std::logic_error>(shape));
  CHECK(caught_as<ember::Error>(shape));
  CHECK_FALSE(caught_as<ember::ValueError>(shape));

  CHECK(caught_as<std::invalid_argument>(value));
  CHECK(caught_as<ember::Error>(value));
  CHECK_FALSE(caught_as<ember::ShapeError>(value));

  CHECK(caught_as<std::runtime_error>(format));
  CHECK(caught_as<std::exception>(format));
  CHECK(caught_as<ember::Error>(format));
  CHECK_FALSE(caught_as<std::logic_error>(format));
}

TEST_CASE("IndexError keeps position, value and bound", "[errors]") {
  const ember::IndexError e("Embedding::forward: id 50257 at position 3 is outside [0, 50257)", 3,
                            50257, 50257);
  CHECK(e.position() == 3);
  CHECK(e.value() == 50257);
  CHECK(e.bound() == 50257);
  CHECK(std::string(e.what()) ==
        "Embedding::forward: id 50257 at position 3 is outside [0, 50257)");
  CHECK(std::string(e.message()) == e.what());

  // Extreme values survive unchanged; -1 is the documented "single argument" position.
  const ember::IndexError extreme("x", -1, std::numeric_limits<std::int64_t>::min(),
                                  std::numeric_limits<std::int64_t>::max());
  CHECK(extreme.position() == -1);
  CHECK(extreme.value() == std::numeric_limits<std::int64_t>::min());
  CHECK(extreme.bound() == std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("ShapeError keeps dimension, expected and actual", "[errors]") {
  const ember::ShapeError e("Embedding::backward: grad_out has 768 columns, expected d_model = 512",
                            1, 512, 768);
  CHECK(e.dimension() == 1);
  CHECK(e.expected() == 512);
  CHECK(e.actual() == 768);
  CHECK(std::string(e.message()) == e.what());
  CHECK_THAT(std::string(e.what()), Contains("768 columns"));
}

TEST_CASE("ValueError keeps the offending value", "[errors]") {
  const ember::ValueError e("ember::Init: normal std must be >= 0, got -1.000000", -1.0);
  CHECK(e.value() == -1.0);
  CHECK(std::string(e.message()) == e.what());
  const ember::ValueError nan("nan", std::numeric_limits<double>::quiet_NaN());
  CHECK(nan.value() != nan.value());
}

TEST_CASE("FormatError keeps path, offset and whether the offset is a line", "[errors]") {
  const ember::FormatError bytes("bad header", "weights.npy", 10);
  CHECK(bytes.path() == "weights.npy");
  CHECK(bytes.offset() == 10);
  CHECK_FALSE(bytes.is_line());
  CHECK(std::string(bytes.message()) == "bad header");

  const ember::FormatError line("bad row", "vectors.txt", 42, true);
  CHECK(line.is_line());
  CHECK(line.offset() == 42);
}

TEST_CASE("message() through ember::Error is the same text as what()", "[errors]") {
  std::vector<std::string> messages;
  const auto record = [&](auto&& thrower) {
    try {
      thrower();
    } catch (const ember::Error& e) {
      const auto* std_error = dynamic_cast<const std::exception*>(&e);
      REQUIRE(std_error != nullptr);
      CHECK(std::string(e.message()) == std_error->what());
      messages.emplace_back(e.message());
    }
  };
  record([] { throw ember::IndexError("index", 0, 1, 1); });
  record([] { throw ember::ShapeError("shape", 0, 1, 2); });
  record([] { throw ember::ValueError("value", 0.0); });
  record([] { throw ember::FormatError("format", "f", 0); });
  CHECK(messages == std::vector<std::string>{"index", "shape", "value", "format"});
}

TEST_CASE("a real out-of-range id produces the documented message and fields", "[errors]") {
  const ember::Embedding<float> emb(10, 4);
  const std::vector<ember::TokenId> ids{1, 2, 3, 10};
  try {
    (void)emb.forward(ids);
    FAIL("no throw");
  } catch (const ember::Error& base) {
    const auto* e = dynamic_cast<const ember::IndexError*>(&base);
    REQUIRE(e != nullptr);
    CHECK(std::string(e->what()) == "Embedding::forward: id 10 at position 3 is outside [0, 10)");
    CHECK(e->position() == 3);
    CHECK(e->value() == 10);
    CHECK(e->bound() == 10);
  }
}

TEST_CASE("FileError keeps path, offset and the system's error code", "[errors]") {
  const ember::FileError e("m.gguf: cannot open file (No such file or directory)", "m.gguf", 0,
                           std::make_error_code(std::errc::no_such_file_or_directory));
  CHECK(e.path() == "m.gguf");
  CHECK(e.offset() == 0);
  CHECK_FALSE(e.is_line());
  CHECK(e.code() == std::errc::no_such_file_or_directory);
  CHECK(std::string(e.message()) == e.what());
  const ember::FormatError& as_format = e;
  CHECK(as_format.path() == "m.gguf");
}

TEST_CASE("numbers in messages are printed in the shortest form that reads back", "[errors]") {
  // std::to_string's "%f" printed -1e-7 as -0.000000.
  const auto lr = ember_test::catch_as<ember::ValueError>(
      [] { static_cast<void>(ember::optim::Adam<float>({.lr = -1e-7})); });
  REQUIRE(lr);
  CHECK(std::string(lr->what()) == "Adam: lr must be finite and positive, got -1e-07");
  CHECK(lr->value() == -1e-7);
  // and every digit a value needs to read back: "%f" printed 1.000000.
  const auto momentum = ember_test::catch_as<ember::ValueError>(
      [] { static_cast<void>(ember::optim::SGD<float>({.momentum = 1.000000000001})); });
  REQUIRE(momentum);
  CHECK(std::string(momentum->what()) == "SGD: momentum must be in [0, 1), got 1.000000000001");
  const auto nan = ember_test::catch_as<ember::ValueError>([] {
    static_cast<void>(ember::LookupScale::constant(std::numeric_limits<double>::quiet_NaN()));
  });
  REQUIRE(nan);
  CHECK(std::string(nan->what()) == "LookupScale::constant: value must be finite, got nan");
  // half's overflow: the value and half's largest, as they are.
  ember::RowMatrix<float> big = ember::RowMatrix<float>::Zero(2, 3);
  big(1, 2) = 70000.5f;
  const auto half = ember_test::catch_as<ember::ValueError>(
      [&] { static_cast<void>(ember::HalfEmbedding::from_float(big)); });
  REQUIRE(half);
  CHECK(std::string(half->what()) ==
        "ReducedEmbedding::from_float: value 70000.5 at row 1, column 2 overflows half (largest "
        "65504)");
  CHECK(half->value() == 70000.5);
}
