#include "nvtx_recorder.h"

#include <nvtx3/nvToolsExt.h>
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>

#include "nvtx_injection.h"

namespace {

struct Domain {
  std::string name;
};

struct Event {
  char kind;
  std::uint64_t thread;
  const Domain* domain;
  std::uint32_t category;
  std::uint32_t color;
  std::uint64_t id;
  std::string message;
  bool registered;
  bool has_payload;
  std::int64_t payload;
};

struct Recorder {
  std::mutex mu;
  std::deque<Event> events;
  std::deque<Domain> domains;
  std::deque<std::string> strings;  // registered strings: handles point into these
  std::uint64_t next_id = 1;
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed: NVTX calls can come during exit
  return *r;
}

Domain* as_domain(nvtxDomainHandle_t d) { return reinterpret_cast<Domain*>(d); }

std::string message_of(const nvtxEventAttributes_t* a) {
  if (!a) return "";
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return a->message.registered ? *reinterpret_cast<const std::string*>(a->message.registered)
                                   : "";
    default:
      return "<unsupported message type>";
  }
}

std::uint64_t this_thread() { return static_cast<std::uint64_t>(pthread_self()); }

std::uint64_t record(char kind, nvtxDomainHandle_t d, const nvtxEventAttributes_t* a,
                     std::uint64_t id = 0) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  if (kind == 'S') id = r.next_id++;
  const bool registered = a && a->messageType == NVTX_MESSAGE_TYPE_REGISTERED;
  const bool has_payload = a && a->payloadType == NVTX_PAYLOAD_TYPE_INT64;
  r.events.push_back(Event{kind, this_thread(), as_domain(d), a ? a->category : 0u,
                           a ? a->color : 0u, id, message_of(a), registered, has_payload,
                           has_payload ? a->payload.llValue : 0});
  return id;
}

nvtxDomainHandle_t domain_create(const char* name) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  r.domains.push_back(Domain{name ? name : ""});
  return reinterpret_cast<nvtxDomainHandle_t>(&r.domains.back());
}
void domain_destroy(nvtxDomainHandle_t) {}
void name_category(nvtxDomainHandle_t, std::uint32_t, const char*) {}
nvtxStringHandle_t register_string(nvtxDomainHandle_t, const char* s) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  r.strings.emplace_back(s ? s : "");
  return reinterpret_cast<nvtxStringHandle_t>(&r.strings.back());
}
int push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  record('P', d, a);
  return 0;
}
int pop(nvtxDomainHandle_t d) {
  record('p', d, nullptr);
  return 0;
}
nvtxRangeId_t start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return record('S', d, a);
}
void end(nvtxDomainHandle_t d, nvtxRangeId_t id) { record('E', d, nullptr, id); }
void mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { record('M', d, a); }

void dump_at_exit() {
  const char* path = std::getenv("NVTX_RECORDER_OUT");
  if (!path) return;
  std::FILE* f = std::fopen(path, "w");
  if (!f) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Event& e : r.events) {
    std::fprintf(f, "%c\t%llu\t%s\t%u\t%llu\t%s\n", e.kind,
                 static_cast<unsigned long long>(e.thread), e.domain ? e.domain->name.c_str() : "",
                 e.category, static_cast<unsigned long long>(e.id), e.message.c_str());
  }
  std::fclose(f);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  if (!fathom::test::install_nvtx_handlers(
          get, {&domain_create, &domain_destroy, &name_category, &register_string, &push_ex, &pop,
                &start_ex, &end, &mark_ex}))
    return 0;
  std::atexit(&dump_at_exit);
  return 1;
}

__attribute__((visibility("default"))) std::size_t fathom_nvtx_recorder_count() {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.events.size();
}

__attribute__((visibility("default"))) bool fathom_nvtx_recorder_event(std::size_t i,
                                                                       FathomNvtxEvent* out) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  if (i >= r.events.size() || !out) return false;
  const Event& e = r.events[i];
  *out = FathomNvtxEvent{e.kind,
                         e.thread,
                         e.domain ? e.domain->name.c_str() : "",
                         e.category,
                         e.color,
                         e.id,
                         e.message.c_str(),
                         e.registered,
                         e.has_payload,
                         e.payload};
  return true;
}

__attribute__((visibility("default"))) void fathom_nvtx_recorder_clear() {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  r.events.clear();
}
}
