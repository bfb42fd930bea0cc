#include "base/warning_sink.h"

#include <fathom/error.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fathom::detail {
namespace {

struct Captured {
  std::vector<std::string> lines;
  WarningRedirect redirect{[this](std::string_view m) { lines.emplace_back(m); }};
};

TEST(WarningSink, SaysEachKindAFewTimesThenCountsAndSumsUp) {
  Captured c;
  const WarningCounts before = warning_counts();
  for (int i = 0; i < kWarningsPerKey + 4; ++i) warn_as("test: repeated", "attempt ", i, " failed");
  ASSERT_EQ(c.lines.size(), static_cast<std::size_t>(kWarningsPerKey));
  EXPECT_EQ(c.lines[0], "attempt 0 failed");
  EXPECT_EQ(warning_counts().held_back - before.held_back, 4);
  flush_held_back_warnings();
  ASSERT_EQ(c.lines.size(), static_cast<std::size_t>(kWarningsPerKey) + 1);
  EXPECT_EQ(c.lines.back(), "4 more warning(s) like 'test: repeated' were held back");
  // Another kind is not held back by the first.
  warn_as("test: another", "different");
  EXPECT_EQ(c.lines.back(), "different");
}

// A caught fathom::Error is often the warning itself; its what() starts with "fathom: ", and the
// line said twice it ("fathom: fathom: cannot create ..."), and a handler got the prefix its
// contract (options.h) says it never gets.
TEST(WarningSink, AnErrorsOwnPrefixIsNotSaidTwice) {
  Captured c;
  warn_as("test: error text", Error("cannot create x.json").what());
  ASSERT_EQ(c.lines.size(), 1u);
  EXPECT_EQ(c.lines[0], "cannot create x.json");
}

// Warnings name paths and run names fathom did not choose (issue 25: a report folder with an
// escape sequence was said raw): the sink escapes every line, for a handler and stderr alike.
TEST(WarningSink, LinesAreEscaped) {
  Captured c;
  warn_as("test: escaped", "removed 1 temporary file(s) in reports\x1b]0;owned\x07");
  ASSERT_EQ(c.lines.size(), 1u);
  EXPECT_EQ(c.lines[0], "removed 1 temporary file(s) in reports\\x1b]0;owned\\x07");
}

TEST(WarningSink, RedirectsNestAndRestore) {
  std::vector<std::string> outer, inner;
  {
    WarningRedirect o([&](std::string_view m) { outer.emplace_back(m); });
    {
      WarningRedirect i([&](std::string_view m) { inner.emplace_back(m); });
      warn_as("test: nest 1", "to the inner");
    }
    warn_as("test: nest 2", "to the outer again");
  }
  EXPECT_EQ(inner, std::vector<std::string>{"to the inner"});
  EXPECT_EQ(outer, std::vector<std::string>{"to the outer again"});
}

TEST(WarningSink, SwallowedFailuresAreCountedAndSaid) {
  Captured c;
  const std::int64_t before = warning_counts().swallowed;
  try {
    throw 42;
  } catch (...) {
    swallowed("test/where.cpp");
  }
  EXPECT_EQ(warning_counts().swallowed, before + 1);
  ASSERT_EQ(c.lines.size(), 1u);
  EXPECT_NE(c.lines[0].find("test/where.cpp"), std::string::npos);
}

TEST(WarningSink, AHandlerThatThrowsCostsACountNotTheCaller) {
  WarningRedirect r([](std::string_view) { throw std::runtime_error("logger down"); });
  const std::int64_t before = warning_counts().swallowed;
  EXPECT_NO_THROW(warn_as("test: throwing handler", "x"));
  EXPECT_EQ(warning_counts().swallowed, before + 1);
}

// A handler runs outside the sink's lock: one that warns again (a logger that reports its own
// trouble through fathom) does not deadlock.
TEST(WarningSink, AHandlerMayWarnItself) {
  std::vector<std::string> said;
  WarningRedirect r([&](std::string_view m) {
    said.emplace_back(m);
    if (said.size() == 1) warn_as("test: from the handler", "nested");
  });
  warn_as("test: reentrant", "outer");
  EXPECT_EQ(said, (std::vector<std::string>{"outer", "nested"}));
}

// Without a key, the place that warns is the kind: two messages with the same words from two
// places are two kinds, and the summary names a kind by its first words.
TEST(WarningSink, EachPlaceThatWarnsIsItsOwnKind) {
  Captured c;
  for (int i = 0; i < kWarningsPerKey + 2; ++i) warn("the same words: ", i);
  for (int i = 0; i < kWarningsPerKey; ++i) warn("the same words: ", i);
  EXPECT_EQ(c.lines.size(), static_cast<std::size_t>(2 * kWarningsPerKey));
  flush_held_back_warnings();
  EXPECT_EQ(c.lines.back(), "2 more warning(s) like 'the same words' were held back");
}

}  // namespace
}  // namespace fathom::detail
