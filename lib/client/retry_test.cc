#include "lib/client/retry.h"

#include <gtest/gtest.h>

namespace farm::client {
namespace {

TEST(BackoffTest, DoublesFromOneTenthOfASecondUpToFiveSeconds) {
  Backoff b;
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(200));
  EXPECT_EQ(b.Next(), absl::Milliseconds(400));
  for (int i = 0; i < 10; ++i) b.Next();
  EXPECT_EQ(b.Peek(), absl::Seconds(5));
  EXPECT_EQ(b.Next(), absl::Seconds(5));
  b.Reset();
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
}

TEST(RetryPolicyTest, UnavailableAndDeadlineExceededAreRetried) {
  for (grpc::StatusCode code : {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::DEADLINE_EXCEEDED,
                                grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::ABORTED}) {
    EXPECT_TRUE(IsTransient(code)) << code;
    EXPECT_TRUE(IsRetryable(code)) << code;
    EXPECT_FALSE(IsServerFault(code)) << code;
    EXPECT_FALSE(IsStaleLease(code)) << code;
  }
}

TEST(RetryPolicyTest, ServerFaultsAreRetriedButNotTransient) {
  for (grpc::StatusCode code : {grpc::StatusCode::INTERNAL, grpc::StatusCode::UNKNOWN}) {
    EXPECT_FALSE(IsTransient(code)) << code;
    EXPECT_TRUE(IsServerFault(code)) << code;
    EXPECT_TRUE(IsRetryable(code)) << code;
  }
  EXPECT_GT(kMaxServerFaultRetries, 0);
}

TEST(RetryPolicyTest, FailedPreconditionIsAStaleLeaseNeverRetried) {
  EXPECT_TRUE(IsStaleLease(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_FALSE(IsRetryable(grpc::StatusCode::FAILED_PRECONDITION));
}

TEST(RetryPolicyTest, RequestErrorsArePermanent) {
  for (grpc::StatusCode code :
       {grpc::StatusCode::OK, grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::NOT_FOUND,
        grpc::StatusCode::PERMISSION_DENIED, grpc::StatusCode::UNAUTHENTICATED,
        grpc::StatusCode::UNIMPLEMENTED, grpc::StatusCode::CANCELLED}) {
    EXPECT_FALSE(IsRetryable(code)) << code;
    EXPECT_FALSE(IsStaleLease(code)) << code;
  }
}

TEST(RetryPolicyTest, DescribeNamesTheCodeAndMessage) {
  EXPECT_EQ(Describe(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused")),
            "UNAVAILABLE: connection refused");
}

}  // namespace
}  // namespace farm::client
