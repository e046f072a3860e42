// What a client sees of an error: every spec problem whole, bounded in
// total; never the text of an internal error.
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "scheduler/grpc_services.h"

namespace farm::scheduler {
namespace {

TEST(ToGrpcStatusTest, AMessageUpToTheBoundReachesTheClientWhole) {
  std::string msg;
  for (int i = 0; i < 50; ++i) {
    absl::StrAppend(&msg, i ? "\n" : "", "workloads[", i, "].params.x: ", std::string(300, 'y'));
  }
  const grpc::Status st = ToGrpcStatus(absl::InvalidArgumentError(msg));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), msg);
}

TEST(ToGrpcStatusTest, ALongerOneIsCutAtALineEndAndNamesItsLogId) {
  std::string msg;
  for (int i = 0; msg.size() <= 2 * kMaxClientMessageBytes; ++i) {
    absl::StrAppend(&msg, i ? "\n" : "", "set.key", i, ": ", std::string(1000, 'z'));
  }
  const grpc::Status st = ToGrpcStatus(absl::InvalidArgumentError(msg));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const std::string& got = st.error_message();
  EXPECT_LE(got.size(), kMaxClientMessageBytes);
  EXPECT_GT(got.size(), kMaxClientMessageBytes - 2000);
  const size_t note = got.rfind("\n... (");
  ASSERT_NE(note, std::string::npos) << got.substr(got.size() - 200);
  // What comes before the note is whole lines of the message.
  EXPECT_EQ(msg.compare(0, note, got, 0, note), 0);
  EXPECT_EQ(msg[note], '\n');
  EXPECT_NE(got.find(" more bytes under error id ", note), std::string::npos) << got.substr(note);
}

TEST(ToGrpcStatusTest, InternalErrorsShowOnlyAnId) {
  const grpc::Status st = ToGrpcStatus(absl::InternalError("SELECT secret FROM db"));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(st.error_message().find("secret"), std::string::npos);
  EXPECT_EQ(st.error_message().rfind("internal error (error id ", 0), 0u);
}

}  // namespace
}  // namespace farm::scheduler
