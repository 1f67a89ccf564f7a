#include "flotilla/common/status.h"

#include "flotilla/common/ids.h"
#include "gtest/gtest.h"

namespace flotilla {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x));
  return absl::OkStatus();
}

TEST(StatusTest, MacrosPropagateFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(2).ok());
  EXPECT_EQ(CheckEven(3).code(), absl::StatusCode::kInvalidArgument);
}

TEST(StatusTest, ErrnoMapsToCodes) {
  EXPECT_EQ(ErrnoStatus("open /x", ENOENT).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus("mount", EPERM).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus("write", ENOSPC).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoStatus("open /x", ENOENT).message(), "open /x: No such file or directory");
  EXPECT_EQ(Annotate(absl::NotFoundError("gone"), "loading").message(), "loading: gone");
}

TEST(IdsTest, IdsAreUniqueAndSafe) {
  std::string a = NewId("sbx"), b = NewId("sbx");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 20u);
  EXPECT_TRUE(IsSafeId(a));
  EXPECT_FALSE(IsSafeId("../etc"));
  EXPECT_FALSE(IsSafeId(".."));
  EXPECT_FALSE(IsSafeId("A"));
  EXPECT_FALSE(IsSafeId(""));
}

}  // namespace
}  // namespace flotilla
