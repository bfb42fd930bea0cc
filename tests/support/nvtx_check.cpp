// Checks an NVTX_RECORDER_OUT dump: every fathom range balanced, and each phase range nested in
// a step range nested in an epoch range. Prints what it found; exits 1 on a violation.
#include <cstdio>
#include <map>
#include <string>

#include "nvtx_tree.h"

namespace {
bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: nvtx_check DUMP\n");
    return 2;
  }
  auto events = fathom::test::read_event_dump(argv[1]);
  auto tree = fathom::test::build_tree(events, "fathom");
  int bad = 0;
  for (const auto& e : tree.errors) {
    std::printf("unbalanced: %s\n", e.c_str());
    ++bad;
  }
  std::map<std::string, int> counts;
  for (const auto& r : tree.ranges) {
    std::string kind = starts_with(r.message, "epoch")  ? "epoch"
                       : starts_with(r.message, "step") ? "step"
                                                        : r.message;
    ++counts[kind];
    if (r.message == "forward" || r.message == "backward" || r.message == "optimizer" ||
        r.message == "copy") {
      const auto& a = r.ancestors;
      bool nested = a.size() >= 2 && starts_with(a[0], "epoch") && starts_with(a[1], "step");
      if (!nested) {
        std::printf("not nested in epoch > step: %s\n", r.message.c_str());
        ++bad;
      }
    }
  }
  for (const char* need : {"epoch", "step", "forward", "backward", "optimizer"}) {
    if (!counts[need]) {
      std::printf("missing: no '%s' range\n", need);
      ++bad;
    }
  }
  std::printf("nvtx_check: %zu events, %zu ranges in domain fathom:", events.size(),
              tree.ranges.size());
  for (const auto& [k, n] : counts)
    if (n > 0) std::printf(" %s=%d", k.c_str(), n);
  std::printf("\nnvtx_check: %s\n", bad ? "FAILED" : "balanced, epoch > step > phase");
  return bad ? 1 : 0;
}
