#include "nvtx_tree.h"

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "nvtx_recorder.h"

namespace fathom::test {
namespace {

void* recorder_handle() {
  const char* path = std::getenv("NVTX_INJECTION64_PATH");
  if (!path) return nullptr;
  // NVTX loaded it already; RTLD_NOLOAD finds that copy instead of loading a second one.
  return ::dlopen(path, RTLD_NOW | RTLD_NOLOAD);
}

template <typename F>
F recorder_fn(const char* name) {
  void* h = recorder_handle();
  return h ? reinterpret_cast<F>(::dlsym(h, name)) : nullptr;
}

}  // namespace

std::vector<NvtxEvent> recorded_events() {
  std::vector<NvtxEvent> out;
  auto count = recorder_fn<std::size_t (*)()>("fathom_nvtx_recorder_count");
  auto get = recorder_fn<bool (*)(std::size_t, FathomNvtxEvent*)>("fathom_nvtx_recorder_event");
  if (!count || !get) return out;
  const std::size_t n = count();
  for (std::size_t i = 0; i < n; ++i) {
    FathomNvtxEvent e{};
    if (!get(i, &e)) break;
    NvtxEvent ev{e.kind, e.thread, e.domain, e.category, e.color, e.id, e.message, e.registered};
    if (e.has_payload) ev.payload = e.payload;
    out.push_back(std::move(ev));
  }
  return out;
}

void clear_recorded_events() {
  if (auto clear = recorder_fn<void (*)()>("fathom_nvtx_recorder_clear")) clear();
}

std::vector<NvtxEvent> read_event_dump(const std::string& path) {
  std::vector<NvtxEvent> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    NvtxEvent e;
    std::string kind, thread, category, id;
    std::getline(s, kind, '\t');
    std::getline(s, thread, '\t');
    std::getline(s, e.domain, '\t');
    std::getline(s, category, '\t');
    std::getline(s, id, '\t');
    std::getline(s, e.message);
    if (kind.size() != 1) continue;
    e.kind = kind[0];
    e.thread = std::stoull(thread);
    e.category = static_cast<std::uint32_t>(std::stoul(category));
    e.id = std::stoull(id);
    out.push_back(std::move(e));
  }
  return out;
}

NvtxTree build_tree(const std::vector<NvtxEvent>& events, const std::string& domain) {
  NvtxTree tree;
  std::map<std::uint64_t, std::vector<NvtxEvent>> stacks;  // by thread
  struct OpenRange {
    NvtxEvent event;
    std::vector<std::string> parents;
  };
  std::map<std::uint64_t, OpenRange> open;  // start/end ranges by id
  for (const NvtxEvent& e : events) {
    if (e.domain != domain) continue;
    auto& stack = stacks[e.thread];
    auto names = [&stack] {
      std::vector<std::string> v;
      for (const auto& s : stack) v.push_back(s.message);
      return v;
    };
    switch (e.kind) {
      case 'P':
        stack.push_back(e);
        break;
      case 'p':
        if (stack.empty()) {
          tree.errors.push_back("pop without push on thread " + std::to_string(e.thread));
          break;
        }
        {
          NvtxEvent top = stack.back();
          stack.pop_back();
          tree.ranges.push_back(NvtxRange{top.message, top.category, top.thread, false, names(),
                                          top.registered, top.payload});
        }
        break;
      case 'S':
        // A process range's parents are the push ranges open on its thread where it started.
        open[e.id] = OpenRange{e, names()};
        break;
      case 'E': {
        auto it = open.find(e.id);
        if (it == open.end()) {
          tree.errors.push_back("end of unknown range id " + std::to_string(e.id));
          break;
        }
        const NvtxEvent& s = it->second.event;
        tree.ranges.push_back(NvtxRange{s.message, s.category, s.thread, true, it->second.parents,
                                        s.registered, s.payload});
        open.erase(it);
        break;
      }
      default:
        break;
    }
  }
  for (const auto& [thread, stack] : stacks) {
    for (const auto& e : stack)
      tree.errors.push_back("range '" + e.message + "' never popped on thread " +
                            std::to_string(thread));
  }
  for (const auto& [id, r] : open)
    tree.errors.push_back("range '" + r.event.message + "' never ended");
  return tree;
}

}  // namespace fathom::test
