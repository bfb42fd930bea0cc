#include "collect/cupti/api_selection.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <deque>
#include <mutex>
#include <unordered_map>

#include "collect/cupti/activity_parser.h"

namespace fathom::cupti {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

struct NameCache {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, const std::string*> names;
  std::deque<std::string> storage;  // stable addresses
};

NameCache& cache() {
  static NameCache* c = new NameCache();  // never destroyed: names outlive every collector
  return *c;
}

}  // namespace

bool traced_runtime_api(std::string_view n) noexcept {
  return starts_with(n, "cudaLaunch") || starts_with(n, "cudaGraphLaunch") ||
         starts_with(n, "cudaMemcpy") || starts_with(n, "cudaMemset") ||
         contains(n, "Synchronize") || starts_with(n, "cudaStreamWaitEvent") ||
         starts_with(n, "cudaEventRecord");
}

bool traced_driver_api(std::string_view n) noexcept {
  // Kernels launched straight through the driver (Triton, cuBLASLt); the runtime's own driver
  // calls underneath a traced runtime call are not needed twice.
  return starts_with(n, "cuLaunch") || starts_with(n, "cuGraphLaunch");
}

const std::string& callback_name(const Api& api, CUpti_CallbackDomain domain, std::uint32_t cbid) {
  NameCache& c = cache();
  const std::uint64_t key = (static_cast<std::uint64_t>(domain) << 32) | cbid;
  {
    std::lock_guard lock(c.mutex);
    auto it = c.names.find(key);
    if (it != c.names.end()) return *it->second;
  }
  const char* raw = nullptr;
  std::string name;
  if (api.get_callback_name && api.get_callback_name(domain, cbid, &raw) == CUPTI_SUCCESS && raw) {
    name = api_display_name(raw);
  } else {
    name = (domain == CUPTI_CB_DOMAIN_DRIVER_API ? "driver api " : "runtime api ") +
           std::to_string(cbid);
  }
  std::lock_guard lock(c.mutex);
  auto it = c.names.find(key);
  if (it != c.names.end()) return *it->second;
  const std::string* stored = &c.storage.emplace_back(std::move(name));
  c.names.emplace(key, stored);
  return *stored;
}

std::vector<std::uint32_t> traced_cbids(const Api& api, CUpti_CallbackDomain domain) {
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const std::uint32_t end = runtime ? static_cast<std::uint32_t>(CUPTI_RUNTIME_TRACE_CBID_SIZE)
                                    : static_cast<std::uint32_t>(CUPTI_DRIVER_TRACE_CBID_SIZE);
  std::vector<std::uint32_t> out;
  for (std::uint32_t cbid = 1; cbid < end; ++cbid) {
    const std::string& name = callback_name(api, domain, cbid);
    if (runtime ? traced_runtime_api(name) : traced_driver_api(name)) out.push_back(cbid);
  }
  return out;
}

}  // namespace fathom::cupti
