#include "lib/service/flags.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace farm::service {
namespace {

TEST(ParseDurationFlagTest, UnitsAndPlainSeconds) {
  EXPECT_EQ(*ParseDurationFlag("30s"), absl::Seconds(30));
  EXPECT_EQ(*ParseDurationFlag("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDurationFlag("2m"), absl::Minutes(2));
  EXPECT_EQ(*ParseDurationFlag("1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParseDurationFlag("30"), absl::Seconds(30));
  EXPECT_EQ(*ParseDurationFlag("0.5"), absl::Milliseconds(500));
}

TEST(ParseDurationFlagTest, RangeDecidesAboutZero) {
  EXPECT_FALSE(ParseDurationFlag("0s").ok());
  EXPECT_FALSE(ParseDurationFlag("0").ok());
  EXPECT_EQ(*ParseDurationFlag("0s", DurationRange::kNonNegative), absl::ZeroDuration());
  EXPECT_EQ(*ParseDurationFlag("0", DurationRange::kNonNegative), absl::ZeroDuration());
}

TEST(ParseDurationFlagTest, ErrorsQuoteTheTextAndShowTheForm) {
  for (const char* bad : {"", "abc", "30 s", "-1s", "-2", "10parsecs", "inf", "nan"}) {
    absl::StatusOr<absl::Duration> d = ParseDurationFlag(bad, DurationRange::kNonNegative);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << d.status().message();
    EXPECT_NE(d.status().message().find("like 30s"), std::string::npos) << d.status().message();
  }
  EXPECT_NE(ParseDurationFlag("0").status().message().find("positive"), std::string::npos);
}

// argv as CLI11 takes it.
std::optional<int> Parse(CLI::App& app, std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return ParseCommandLine(app, static_cast<int>(argv.size()), argv.data());
}

TEST(AddDurationOptionTest, DefaultThenFlag) {
  CLI::App app;
  absl::Duration ttl;
  AddDurationOption(app, "--ttl", &ttl, "30s", "lifetime");
  EXPECT_EQ(ttl, absl::Seconds(30));
  EXPECT_NE(app.help().find("TEXT=30s"), std::string::npos) << app.help();
  EXPECT_EQ(Parse(app, {}), std::nullopt);
  EXPECT_EQ(ttl, absl::Seconds(30));
  EXPECT_EQ(Parse(app, {"--ttl", "250ms"}), std::nullopt);
  EXPECT_EQ(ttl, absl::Milliseconds(250));
}

TEST(AddDurationOptionTest, BadValueIsUsageError) {
  CLI::App app;
  absl::Duration ttl;
  AddDurationOption(app, "--ttl", &ttl, "30s", "lifetime");
  testing::internal::CaptureStderr();
  EXPECT_EQ(Parse(app, {"--ttl", "soon"}), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--ttl"), std::string::npos) << err;
  EXPECT_NE(err.find("\"soon\""), std::string::npos) << err;
  EXPECT_EQ(ttl, absl::Seconds(30));
}

TEST(ParseCommandLineTest, HelpIsZeroAndUnknownFlagIsTwo) {
  CLI::App app;
  testing::internal::CaptureStdout();
  EXPECT_EQ(Parse(app, {"--help"}), 0);
  EXPECT_NE(testing::internal::GetCapturedStdout().find("--help"), std::string::npos);
  CLI::App other;
  testing::internal::CaptureStderr();
  EXPECT_EQ(Parse(other, {"--no-such-flag"}), 2);
  testing::internal::GetCapturedStderr();
}

// flag > environment > default, for plain and duration options alike; an
// empty variable counts as unset.
TEST(EnvFallbackTest, FlagBeatsEnvironmentBeatsDefault) {
  auto make = [](std::string* token, absl::Duration* poll) {
    auto app = std::make_unique<CLI::App>();
    app->add_option("--token", *token, "token")->envname("FARM_TEST_TOKEN");
    AddDurationOption(*app, "--poll", poll, "2s", "poll")->envname("FARM_TEST_POLL");
    return app;
  };
  std::string token = "default";
  absl::Duration poll;
  ::unsetenv("FARM_TEST_TOKEN");
  ::unsetenv("FARM_TEST_POLL");
  auto app = make(&token, &poll);
  ASSERT_EQ(Parse(*app, {}), std::nullopt);
  EXPECT_EQ(token, "default");
  EXPECT_EQ(poll, absl::Seconds(2));

  ::setenv("FARM_TEST_TOKEN", "from-env", 1);
  ::setenv("FARM_TEST_POLL", "5s", 1);
  app = make(&token, &poll);
  ASSERT_EQ(Parse(*app, {}), std::nullopt);
  EXPECT_EQ(token, "from-env");
  EXPECT_EQ(poll, absl::Seconds(5));
  EXPECT_NE(app->help().find("FARM_TEST_TOKEN"), std::string::npos) << app->help();

  app = make(&token, &poll);
  ASSERT_EQ(Parse(*app, {"--token", "from-flag", "--poll", "7s"}), std::nullopt);
  EXPECT_EQ(token, "from-flag");
  EXPECT_EQ(poll, absl::Seconds(7));

  token = "default";
  ::setenv("FARM_TEST_TOKEN", "", 1);
  app = make(&token, &poll);
  ASSERT_EQ(Parse(*app, {}), std::nullopt);
  EXPECT_EQ(token, "default");

  ::setenv("FARM_TEST_POLL", "never", 1);
  app = make(&token, &poll);
  testing::internal::CaptureStderr();
  EXPECT_EQ(Parse(*app, {}), 2);
  testing::internal::GetCapturedStderr();
  ::unsetenv("FARM_TEST_TOKEN");
  ::unsetenv("FARM_TEST_POLL");
}

}  // namespace
}  // namespace farm::service
