// .npy files: round trips for every dtype, files written by NumPy, and the errors.
#include <qkv/runtime/tensor.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_error;
namespace fs = std::filesystem;

std::string fixture(const std::string &name) { return std::string(QKV_TEST_DATA_DIR) + "/" + name; }

/// A fresh path in the temp dir, removed when the test ends.
class TempFile {
public:
  explicit TempFile(const std::string &name)
      : path_((fs::temp_directory_path() /
               (std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + name))
                  .string()) {}
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

std::string read_bytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A version 1.0 file with this header dict and data, padded as NumPy does.
std::string npy_v1(std::string dict, const std::string &data) {
  std::size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::string s = "\x93NUMPY";
  s += '\x01';
  s += '\x00';
  s += static_cast<char>(dict.size() & 0xff);
  s += static_cast<char>(dict.size() >> 8);
  return s + dict + data;
}

TEST(Npy, RoundTripsEveryDtype) {
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    DType dtype;
    Shape shape;
    std::vector<double> values;
  };
  std::vector<Case> cases = {
      {DType::F32, {2, 3}, {1.5, -2.25, 0, 0.1, 3e38, -inf}},
      {DType::F64, {4}, {0.1, -1e-300, 1e300, inf}},
      {DType::F16, {2, 2}, {1.0 / 3, 65504, 0x1p-24, -0.5}},
      {DType::I32, {1, 3}, {2147483647, -2147483648.0, 0}},
      {DType::I64, {3}, {0x1p62, -0x1p62, 7}},
      {DType::F32, {}, {42}},   // a scalar: shape ()
      {DType::F64, {0, 3}, {}}, // no elements
      {DType::I64, {2, 1, 2}, {1, 2, 3, 4}},
  };
  for (const Case &c : cases) {
    Tensor t = Tensor::from_values(c.dtype, c.shape, c.values);
    TempFile f("rt.npy");
    save_npy(f.path(), t);
    Tensor u = load_npy(f.path());
    EXPECT_EQ(u.dtype(), c.dtype) << t.type_str();
    EXPECT_EQ(u.shape(), c.shape) << t.type_str();
    EXPECT_EQ(u.values(), t.values()) << t.type_str();
    // NumPy starts the data on a 64-byte boundary.
    EXPECT_EQ((read_bytes(f.path()).size() - t.nbytes()) % 64, 0u) << t.type_str();
  }
}

TEST(Npy, Bf16IsSavedAsFloat32) {
  Tensor t = Tensor::from_values(DType::BF16, {3}, {1.0 + 0x1p-7, -3, 0.5});
  TempFile f("bf16.npy");
  save_npy(f.path(), t);
  Tensor u = load_npy(f.path());
  EXPECT_EQ(u.dtype(), DType::F32);
  EXPECT_EQ(u.values(), (std::vector<double>{1.0078125, -3, 0.5})); // exact: bf16 fits in f32
  EXPECT_NE(read_bytes(f.path()).find("'descr': '<f4'"), std::string::npos);
}

// ---- files written by NumPy (tests/runtime/data/make_fixtures.py) ----------------------------

TEST(Npy, LoadsNumpyFloat32) {
  Tensor t = load_npy(fixture("f32_2x3.npy"));
  EXPECT_EQ(t.type_str(), "f32[2, 3]");
  // 0.1 is stored as the nearest float, 0.100000001490116119384765625.
  EXPECT_EQ(t.values(), (std::vector<double>{1.5, -2.25, 0, static_cast<double>(0.1f), 65504, -1}));
}

TEST(Npy, LoadsNumpyInt64) {
  Tensor t = load_npy(fixture("i64_4.npy"));
  EXPECT_EQ(t.type_str(), "i64[4]");
  const std::int64_t *p = t.data_as<std::int64_t>();
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[1], -1);
  EXPECT_EQ(p[2], std::int64_t{1} << 40);
  EXPECT_EQ(p[3], 7);
}

TEST(Npy, LoadsNumpyFloat16Version2) {
  Tensor t = load_npy(fixture("f16_2x2_v2.npy"));
  EXPECT_EQ(t.type_str(), "f16[2, 2]");
  // 1/3 rounds to 0x3555 = 0.333251953125; 6e-8 to the smallest subnormal, 2^-24.
  EXPECT_EQ(t.values(), (std::vector<double>{1.0, -0.5, 0.333251953125, 0x1p-24}));
}

TEST(Npy, LoadsNumpyInt32Version3) {
  Tensor t = load_npy(fixture("i4_2x2_v3.npy"));
  EXPECT_EQ(t.type_str(), "i32[2, 2]");
  EXPECT_EQ(t.values(), (std::vector<double>{1, -2, 2147483647, -2147483648.0}));
}

TEST(Npy, SavesTheSameBytesAsNumpy) {
  // NumPy and qkv write the same header dict, padding and data.
  for (const char *name : {"f32_2x3.npy", "i64_4.npy"}) {
    Tensor t = load_npy(fixture(name));
    TempFile f(name);
    save_npy(f.path(), t);
    EXPECT_EQ(read_bytes(f.path()), read_bytes(fixture(name))) << name;
  }
}

// ---- errors ------------------------------------------------------------------------------------

TEST(Npy, RejectsFortranOrder) {
  std::string path = fixture("f4_fortran.npy");
  expect_error([&] { load_npy(path); }, {path, "fortran_order is True"});
}

TEST(Npy, RejectsOtherDtypes) {
  std::string path = fixture("b1_3.npy");
  expect_error([&] { load_npy(path); }, {path, "'|b1'"});
  TempFile f("be.npy");
  write_bytes(f.path(),
              npy_v1("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "\0\0\0\0"));
  expect_error([&] { load_npy(f.path()); }, {f.path(), "'>f4'", "little-endian"});
  write_bytes(f.path(), npy_v1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                               "\0\0\0\0"));
  expect_error([&] { load_npy(f.path()); }, {f.path(), "structured"});
}

TEST(Npy, RejectsBrokenFiles) {
  TempFile f("bad.npy");
  expect_error([&] { load_npy(f.path()); }, {f.path(), "cannot open"});
  write_bytes(f.path(), "not numpy at all");
  expect_error([&] { load_npy(f.path()); }, {f.path(), "magic"});
  // Two f4 values promised, one given.
  write_bytes(f.path(), npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                               std::string("\0\0\x80\x3f", 4)));
  expect_error([&] { load_npy(f.path()); }, {f.path(), "truncated data", "needs 8 bytes", "has 4"});
  // A corrupt shape is rejected before anything that size is allocated.
  write_bytes(f.path(),
              npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (4503599627370496, "
                     "4503599627370496, 4503599627370496), }",
                     ""));
  expect_error([&] { load_npy(f.path()); }, {f.path(), "truncated data"});
  // ... unless it has no elements at all.
  write_bytes(f.path(), npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': "
                               "(4503599627370496, 0), }",
                               ""));
  EXPECT_EQ(load_npy(f.path()).shape(), (Shape{4503599627370496, 0}));
  write_bytes(f.path(), npy_v1("{'descr': '<f4', 'shape': (2,), }", ""));
  expect_error([&] { load_npy(f.path()); }, {f.path(), "lacks"});
  std::string v9 = npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "");
  v9[6] = 9;
  write_bytes(f.path(), v9);
  expect_error([&] { load_npy(f.path()); }, {f.path(), "version 9.0"});
  expect_error([] { save_npy("/nonexistent-dir/x.npy", Tensor(DType::F32, {1})); },
               {"/nonexistent-dir/x.npy", "cannot open"});
}

// A directory opens as a file on Linux, and libstdc++'s filebuf then throws
// std::ios_base::failure on the first read: a qkv::Error naming the path instead.
TEST(Npy, ADirectoryIsNotAFile) {
  std::string dir = fs::temp_directory_path().string();
  expect_error([&] { load_npy(dir); }, {"npy file '" + dir + "'", "is a directory"});
  expect_error([&] { save_npy(dir, Tensor(DType::F32, {1})); }, {dir, "cannot open"});
}

} // namespace
} // namespace qkv
