#include "base/bytes_text.h"

#include <gtest/gtest.h>

namespace fathom::detail {
namespace {

TEST(BytesText, PowersOf1024WithOnePrecisionEach) {
  EXPECT_EQ(bytes_text(std::int64_t{512}), "512 B");
  EXPECT_EQ(bytes_text(std::int64_t{3584}), "3.5 KiB");
  EXPECT_EQ(bytes_text(std::int64_t{21810380}), "20.8 MiB");
  EXPECT_EQ(bytes_text(std::int64_t{1803886264}), "1.68 GiB");
}

TEST(BytesText, ADifferenceKeepsItsSign) {
  EXPECT_EQ(bytes_text(-3584.0), "-3.5 KiB");
  EXPECT_EQ(bytes_text(-2.0 * 1073741824.0), "-2.00 GiB");
}

TEST(BytesText, AnUnknownCountGivesTheReason) {
  EXPECT_EQ(bytes_text(std::optional<std::int64_t>{}, "not measured"), "not measured");
  EXPECT_EQ(bytes_text(std::optional<std::int64_t>{1024}, "not measured"), "1.0 KiB");
}

}  // namespace
}  // namespace fathom::detail
