#include <fathom/error.h>
#include <fathom/memory_budget.h>
#include <fathom/options.h>
#include <gtest/gtest.h>

#include "scoped_env.h"

namespace fathom {
namespace {

TEST(MemoryBudget, ReadsBytesWithUnits) {
  EXPECT_EQ(parse_memory_budget("12GiB", "x"), MemoryBudget::bytes(12LL << 30));
  EXPECT_EQ(parse_memory_budget("512 MiB", "x"), MemoryBudget::bytes(512LL << 20));
  EXPECT_EQ(parse_memory_budget("8GB", "x"), MemoryBudget::bytes(8'000'000'000LL));
  EXPECT_EQ(parse_memory_budget("1.5G", "x"), MemoryBudget::bytes(3LL << 29));
  EXPECT_EQ(parse_memory_budget("1000000", "x"), MemoryBudget::bytes(1'000'000));
}

TEST(MemoryBudget, ReadsFractions) {
  EXPECT_EQ(parse_memory_budget("80%", "x"), MemoryBudget::fraction(0.8));
  EXPECT_EQ(parse_memory_budget("0.5", "x"), MemoryBudget::fraction(0.5));
  EXPECT_EQ(MemoryBudget::fraction(0.25).resolve(1000), 250);
  EXPECT_EQ(MemoryBudget::bytes(77).resolve(1000), 77);
}

TEST(MemoryBudget, BadTextNamesTheSettingAndTheForms) {
  for (const char* bad : {"", "lots", "12 parsecs", "-1GiB", "150%", "2.5", "0"}) {
    try {
      (void)parse_memory_budget(bad, "FATHOM_CHECKPOINT_BUDGET");
      FAIL() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("FATHOM_CHECKPOINT_BUDGET='") + bad + "'"), std::string::npos)
          << msg;
      EXPECT_NE(msg.find("12GiB"), std::string::npos) << msg;
    }
  }
}

TEST(MemoryBudget, EnvironmentSetsTheCheckpointBudget) {
  EXPECT_FALSE(Options().with_env().checkpoint_budget().has_value());
  {
    test::ScopedEnv budget("FATHOM_CHECKPOINT_BUDGET", "20GiB");
    Options o = Options().checkpoint_budget(MemoryBudget::fraction(0.5)).with_env();
    ASSERT_TRUE(o.checkpoint_budget().has_value());
    EXPECT_EQ(*o.checkpoint_budget(), MemoryBudget::bytes(20LL << 30));
  }
  test::ScopedEnv bad("FATHOM_CHECKPOINT_BUDGET", "much");
  EXPECT_THROW((void)Options().with_env(), Error);
}

TEST(MemoryBudget, Text) {
  EXPECT_EQ(memory_budget_text(MemoryBudget::fraction(0.8)), "80 % of device memory");
  EXPECT_EQ(memory_budget_text(MemoryBudget::bytes(3LL << 30)), "3.00 GiB");
}

}  // namespace
}  // namespace fathom
