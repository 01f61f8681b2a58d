// Checking qkv::Error messages in tests, shared by every test directory.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include <qkv/dsl/error.hpp>

namespace qkv::test {

/// The message of the qkv::Error `f` throws; a test failure (and "") if it throws none.
template <class F> std::string error_of(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "no qkv::Error";
  return "";
}

/// Passes when `f` throws a qkv::Error whose message contains every part.
template <class F>
testing::AssertionResult ErrorSays(F &&f, std::initializer_list<std::string_view> parts) {
  try {
    f();
  } catch (const Error &e) {
    std::string msg = e.what();
    for (std::string_view p : parts)
      if (msg.find(p) == std::string::npos)
        return testing::AssertionFailure() << "the message\n  " << msg << "\nlacks\n  " << p;
    return testing::AssertionSuccess();
  } catch (const std::exception &e) {
    return testing::AssertionFailure() << "threw a non-qkv exception: " << e.what();
  }
  return testing::AssertionFailure() << "no qkv::Error was thrown";
}

} // namespace qkv::test
