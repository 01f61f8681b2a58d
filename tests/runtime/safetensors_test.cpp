// .safetensors files: valid files written here (every dtype qkv holds, conversions,
// metadata, empty and scalar tensors) and every way a file can be broken, each with the
// error it must give. The real model's file (and a truncated copy) is tested in
// tests/models.
#include <qkv/runtime/safetensors.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include <qkv_test/errors.hpp>

namespace qkv {
namespace {

using test::ErrorSays;
namespace fs = std::filesystem;

/// A fresh path in the temp dir, removed when the test ends.
class TempFile {
public:
  TempFile()
      : path_((fs::temp_directory_path() /
               ("qkv_st_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".safetensors"))
                  .string()) {}
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

void write_bytes(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s;
}

/// A file: the header's length, the header, the data.
std::string file_of(const std::string &header, const std::string &data) {
  return le64(header.size()) + header + data;
}

template <class T> std::string bytes_of(const std::vector<T> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T));
}

/// Opens a file made of `header` and `data`.
SafeTensors open_file(const TempFile &f, const std::string &header, const std::string &data) {
  write_bytes(f.path(), file_of(header, data));
  return SafeTensors::open(f.path());
}

TEST(SafeTensors, ReadsEveryDtypeQkvHolds) {
  TempFile f;
  std::string data = bytes_of(std::vector<float>{1.5f, -2.0f, 0.25f, 3.0f, 4.0f, -5.0f}) +
                     bytes_of(std::vector<std::uint16_t>{0x3c00, 0xc000}) + // f16 1, -2
                     bytes_of(std::vector<std::uint16_t>{0x3f80, 0x4040}) + // bf16 1, 3
                     bytes_of(std::vector<std::int64_t>{7, -1, 1LL << 40}) +
                     bytes_of(std::vector<std::int32_t>{-3}) + bytes_of(std::vector<double>{0.1});
  std::string header = R"({"__metadata__": {"format": "pt", "note": "test"},
    "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    "h": {"dtype": "F16", "shape": [2], "data_offsets": [24, 28]},
    "b": {"dtype": "BF16", "shape": [2], "data_offsets": [28, 32]},
    "i": {"dtype": "I64", "shape": [3], "data_offsets": [32, 56]},
    "s": {"dtype": "I32", "shape": [], "data_offsets": [56, 60]},
    "d": {"dtype": "F64", "shape": [1, 1], "data_offsets": [60, 68]},
    "e": {"dtype": "F32", "shape": [0, 4], "data_offsets": [68, 68]}}   )"; // padded
  SafeTensors st = open_file(f, header, data);

  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.metadata().at("note"), "test");
  ASSERT_EQ(st.tensors().size(), 7u);
  EXPECT_EQ(st.tensors()[0].name, "w"); // ordered by offset
  EXPECT_EQ(st.tensors()[3].name, "i");
  EXPECT_EQ(st.info("i").shape, (Shape{3}));
  EXPECT_EQ(st.info("i").begin, 32u);
  EXPECT_EQ(st.bytes("i").size(), 24u);

  Tensor w = st.load("w");
  EXPECT_EQ(w.dtype(), DType::F32);
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(w.values(), (std::vector<double>{1.5, -2, 0.25, 3, 4, -5}));
  EXPECT_EQ(st.load("h").dtype(), DType::F16);
  EXPECT_EQ(st.load("h", DType::F32).values(), (std::vector<double>{1, -2}));
  EXPECT_EQ(st.load("b", DType::F32).values(), (std::vector<double>{1, 3}));
  Tensor i = st.load("i");
  EXPECT_EQ(i.dtype(), DType::I64);
  EXPECT_EQ(i.data_as<std::int64_t>()[2], 1LL << 40);
  Tensor s = st.load("s");
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.get(0), -3);
  EXPECT_EQ(st.load("d").get(0), 0.1);
  EXPECT_EQ(st.load("e").numel(), 0);
  EXPECT_EQ(st.load("w", DType::F32, {2, 3}).numel(), 6);
}

TEST(SafeTensors, TensorsOutlastTheFileObject) {
  TempFile f;
  Tensor t;
  {
    SafeTensors st =
        open_file(f, R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                  bytes_of(std::vector<float>{1, 2}));
    t = st.load("x");
  }
  EXPECT_EQ(t.values(), (std::vector<double>{1, 2}));
}

TEST(SafeTensors, DtypesQkvDoesNotHoldAreListedButNotLoaded) {
  TempFile f;
  SafeTensors st =
      open_file(f, R"({"m": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}})", "abc");
  EXPECT_EQ(st.info("m").dtype, "U8");
  EXPECT_EQ(st.bytes("m").size(), 3u);
  EXPECT_TRUE(ErrorSays([&] { st.load("m"); }, {f.path(), "'m'", "U8"}));
}

TEST(SafeTensors, MissingTensorsAndWrongShapesNameFileAndTensor) {
  TempFile f;
  SafeTensors st =
      open_file(f, R"({"x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}})",
                std::string(24, '\0'));
  EXPECT_FALSE(st.contains("y"));
  EXPECT_TRUE(ErrorSays([&] { st.info("y"); }, {f.path(), "no tensor 'y'"}));
  EXPECT_TRUE(ErrorSays(
      [&] {
        st.load("x", DType::F32, {3, 2});
      },
      {f.path(), "'x' has shape [2, 3], expected [3, 2]"}));
}

/// The error opening a file made of `header` and `data`.
testing::AssertionResult refused(const std::string &header, const std::string &data,
                                 std::initializer_list<std::string_view> parts) {
  TempFile f;
  write_bytes(f.path(), file_of(header, data));
  auto r = ErrorSays([&] { SafeTensors::open(f.path()); }, parts);
  if (r)
    r = ErrorSays([&] { SafeTensors::open(f.path()); }, {f.path()}); // names the file
  return r;
}

TEST(SafeTensors, RefusesBrokenHeaders) {
  std::string d16(16, '\0');
  EXPECT_TRUE(refused("{\"a\": ", d16, {"not valid JSON"}));
  // A number past double's range: nlohmann's out_of_range, not a parse_error (the
  // libFuzzer target found it; it used to escape as a non-qkv exception).
  EXPECT_TRUE(refused(R"({"s": 9e999999991553255926290448382})", d16,
                      {"not valid JSON", "number overflow"}));
  EXPECT_TRUE(refused("[1, 2]", "", {"must be a JSON object"}));
  EXPECT_TRUE(refused(R"({"a": 3})", d16, {"tensor 'a'", "must be an object"}));
  EXPECT_TRUE(refused(R"({"a": {"shape": [4], "data_offsets": [0, 16]}})", d16,
                      {"tensor 'a'", "field 'dtype' is missing"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "data_offsets": [0, 16]}})", d16,
                      {"tensor 'a'", "field 'shape' is missing"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [4]}})", d16,
                      {"tensor 'a'", "field 'data_offsets' is missing"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F17", "shape": [4], "data_offsets": [0, 16]}})", d16,
                      {"tensor 'a'", "unknown dtype 'F17'"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": 4, "shape": [4], "data_offsets": [0, 16]}})", d16,
                      {"tensor 'a'", "dtype must be a string"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})", d16,
                      {"tensor 'a'", "shape must be an array of non-negative integers"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 16]}})", d16,
                      {"tensor 'a'", "non-negative integers"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0]}})", d16,
                      {"tensor 'a'", "data_offsets must be two non-negative integers"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [-8, 8]}})", d16,
                      {"tensor 'a'", "data_offsets must be two non-negative integers"}));
  EXPECT_TRUE(refused(R"({"__metadata__": {"n": 1}})", "", {"__metadata__ 'n'", "a string"}));
}

TEST(SafeTensors, RefusesOffsetsPastTheEnd) {
  EXPECT_TRUE(refused(
      R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", std::string(12, '\0'),
      {"tensor 'a'", "[0, 16) run past the end of the data (12 bytes", "truncated"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})",
                      std::string(12, '\0'), {"tensor 'a'", "end before they begin"}));
  // Offsets near 2^64 must not wrap around.
  EXPECT_TRUE(refused(R"({"a": {"dtype": "U8", "shape": [1],
                       "data_offsets": [18446744073709551615, 0]}})",
                      std::string(12, '\0'), {"tensor 'a'", "end before they begin"}));
}

TEST(SafeTensors, RefusesByteCountsThatDisagreeWithTheShape) {
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})",
                      std::string(24, '\0'),
                      {"tensor 'a'", "shape [2,3] of F32 needs 24 bytes but data_offsets [0, 20) "
                                     "hold 20"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 12]}})",
                      std::string(12, '\0'), {"tensor 'a'", "needs 6 bytes", "hold 12"}));
  EXPECT_TRUE(refused(
      R"({"a": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
      std::string(8, '\0'), {"tensor 'a'", "too many elements"}));
  EXPECT_TRUE(refused(
      R"({"a": {"dtype": "F64", "shape": [1152921504606846977, 2], "data_offsets": [0, 8]}})",
      std::string(8, '\0'), {"tensor 'a'", "needs too many bytes"}));
}

TEST(SafeTensors, RefusesOverlappingTensorsAndDuplicateNames) {
  std::string d(24, '\0');
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                         "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                      d, {"tensors 'a' [0, 16) and 'b' [8, 24) overlap"}));
  // One tensor inside another, listed in the other order.
  EXPECT_TRUE(refused(R"({"inner": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]},
                         "outer": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}})",
                      d, {"'outer' [0, 24) and 'inner' [8, 12) overlap"}));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                         "a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                      d, {"tensor 'a' appears twice"}));
  // Adjacent and empty tensors do not overlap.
  TempFile f;
  EXPECT_NO_THROW(open_file(f, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                  "z": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
                                  "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                            d));
}

TEST(SafeTensors, RefusesBadHeaderLengths) {
  TempFile f;
  write_bytes(f.path(), "abc");
  EXPECT_TRUE(ErrorSays([&] { SafeTensors::open(f.path()); }, {f.path(), "too short"}));
  write_bytes(f.path(), le64(100'000'001) + "{}");
  EXPECT_TRUE(ErrorSays([&] { SafeTensors::open(f.path()); },
                        {f.path(), "header length 100000001 is over the 100000000-byte limit"}));
  write_bytes(f.path(), le64(64) + "{}");
  EXPECT_TRUE(ErrorSays([&] { SafeTensors::open(f.path()); },
                        {f.path(), "header length 64 runs past the end of the file (10 bytes"}));
  write_bytes(f.path(), le64(~0ULL) + "{}");
  EXPECT_TRUE(ErrorSays([&] { SafeTensors::open(f.path()); }, {f.path(), "over the"}));
  EXPECT_TRUE(ErrorSays([&] { SafeTensors::open(f.path() + ".absent"); },
                        {f.path() + ".absent", "cannot open"}));
}

} // namespace
} // namespace qkv
