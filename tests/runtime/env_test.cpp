// env_switch: one spelling for every on/off switch in the environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <qkv/dsl/error.hpp>
#include <qkv/runtime/env.hpp>

namespace qkv {
namespace {

constexpr const char *kVar = "QKV_TEST_SWITCH";

std::optional<bool> with(const char *value) {
  ::setenv(kVar, value, 1);
  std::optional<bool> got = env_switch(kVar);
  ::unsetenv(kVar);
  return got;
}

TEST(EnvSwitch, OnOffInAnyCaseAndUnsetOrEmptyForTheDefault) {
  ::unsetenv(kVar);
  EXPECT_EQ(env_switch(kVar), std::nullopt);
  EXPECT_EQ(with(""), std::nullopt);
  for (const char *on : {"1", "on", "ON", "true", "True", "yes"})
    EXPECT_EQ(with(on), true) << on;
  for (const char *off : {"0", "off", "Off", "false", "FALSE", "no"})
    EXPECT_EQ(with(off), false) << off;
}

// A switch spelled otherwise ("2", "enable", " 1") is an error, not a guess: QKV_PERF_MAP=off
// once turned the map on (anything but "0" was on).
TEST(EnvSwitch, AnyOtherValueIsAnErrorNamingTheVariable) {
  for (const char *bad : {"2", "enable", " 1", "o"}) {
    ::setenv(kVar, bad, 1);
    try {
      env_switch(kVar);
      ADD_FAILURE() << "'" << bad << "' should be refused";
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()),
                std::string(kVar) + " is '" + bad +
                    "'; it takes 1, on, true or yes, or 0, off, false or no");
    }
    ::unsetenv(kVar);
  }
}

} // namespace
} // namespace qkv
