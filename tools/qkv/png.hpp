// A minimal RGB image and its PNG writer (libpng), for `qkv show --png`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qkv::tool {

struct Rgb {
  std::uint8_t r = 255, g = 255, b = 255;
};

struct Image {
  int width = 0, height = 0;
  std::vector<Rgb> pixels; ///< row-major

  Image(int w, int h, Rgb fill = {}) : width(w), height(h), pixels(std::size_t(w) * h, fill) {}
  Rgb &at(int x, int y) { return pixels[std::size_t(y) * width + x]; }
  /// Fills the rectangle [x0, x1) x [y0, y1), clipped to the image.
  void fill(int x0, int y0, int x1, int y1, Rgb c);
};

/// Writes `img` as an 8-bit RGB PNG, every row unfiltered (filter type 0), so that the
/// file's pixels can be read back with zlib alone; throws qkv::Error naming the file.
void write_png(const Image &img, const std::string &path);

} // namespace qkv::tool
