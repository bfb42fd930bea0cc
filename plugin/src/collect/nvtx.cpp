#include "collect/nvtx.h"

#include <nvtx3/nvToolsExt.h>

#include <string>

namespace fathom::nvtx {
namespace {

constexpr Kind kKinds[] = {Kind::Epoch,  Kind::Step, Kind::Phase,
                           Kind::Module, Kind::Op,   Kind::Finding};

// Created on first use and never destroyed: ranges can still end during static destruction.
nvtxDomainHandle_t domain() noexcept {
  static nvtxDomainHandle_t d = [] {
    nvtxDomainHandle_t h = nvtxDomainCreateA(kDomainName);
    for (Kind k : kKinds)
      nvtxDomainNameCategoryA(h, static_cast<uint32_t>(k), std::string(kind_name(k)).c_str());
    return h;
  }();
  return d;
}

nvtxEventAttributes_t attributes(Kind kind, std::uint32_t argb) noexcept {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = static_cast<uint32_t>(kind);
  a.colorType = NVTX_COLOR_ARGB;
  a.color = argb ? argb : kind_color(kind);
  return a;
}

nvtxEventAttributes_t attributes(Kind kind, Name name, std::uint32_t argb) noexcept {
  nvtxEventAttributes_t a = attributes(kind, argb);
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = static_cast<nvtxStringHandle_t>(const_cast<void*>(name.handle));
  return a;
}

nvtxEventAttributes_t attributes(Kind kind, const char* message, std::uint32_t argb) noexcept {
  nvtxEventAttributes_t a = attributes(kind, argb);
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  return a;
}

template <typename Message>
nvtxEventAttributes_t attributes(Kind kind, Message message, Payload payload) noexcept {
  nvtxEventAttributes_t a = attributes(kind, message, 0);
  a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  a.payload.llValue = payload.value;
  return a;
}

}  // namespace

std::string_view kind_name(Kind k) noexcept {
  switch (k) {
    case Kind::Epoch:
      return "epoch";
    case Kind::Step:
      return "step";
    case Kind::Phase:
      return "phase";
    case Kind::Module:
      return "module";
    case Kind::Op:
      return "op";
    case Kind::Finding:
      return "finding";
  }
  return "?";
}

std::uint32_t kind_color(Kind k) noexcept {
  switch (k) {
    case Kind::Epoch:
      return 0xFF6A3D9A;  // purple
    case Kind::Step:
      return 0xFF1F78B4;  // blue
    case Kind::Phase:
      return 0xFF33A02C;  // green
    case Kind::Module:
      return 0xFFFF7F00;  // orange
    case Kind::Op:
      return 0xFFA6CEE3;  // light blue
    case Kind::Finding:
      return 0xFFE31A1C;  // red
  }
  return 0xFF888888;
}

Name register_name(std::string_view text) noexcept {
  std::string s(text);  // NVTX wants a NUL-terminated string; registration copies it
  return Name{nvtxDomainRegisterStringA(domain(), s.c_str())};
}

void push(Kind kind, Name name, std::uint32_t argb) noexcept {
  auto a = attributes(kind, name, argb);
  nvtxDomainRangePushEx(domain(), &a);
}

void push(Kind kind, const char* message, std::uint32_t argb) noexcept {
  auto a = attributes(kind, message, argb);
  nvtxDomainRangePushEx(domain(), &a);
}

void push(Kind kind, Name name, Payload payload) noexcept {
  auto a = attributes(kind, name, payload);
  nvtxDomainRangePushEx(domain(), &a);
}

void push(Kind kind, const char* message, Payload payload) noexcept {
  auto a = attributes(kind, message, payload);
  nvtxDomainRangePushEx(domain(), &a);
}

void pop() noexcept { nvtxDomainRangePop(domain()); }

RangeId start(Kind kind, Name name, std::uint32_t argb) noexcept {
  auto a = attributes(kind, name, argb);
  return nvtxDomainRangeStartEx(domain(), &a);
}

RangeId start(Kind kind, const char* message, std::uint32_t argb) noexcept {
  auto a = attributes(kind, message, argb);
  return nvtxDomainRangeStartEx(domain(), &a);
}

RangeId start(Kind kind, Name name, Payload payload) noexcept {
  auto a = attributes(kind, name, payload);
  return nvtxDomainRangeStartEx(domain(), &a);
}

RangeId start(Kind kind, const char* message, Payload payload) noexcept {
  auto a = attributes(kind, message, payload);
  return nvtxDomainRangeStartEx(domain(), &a);
}

void end(RangeId id) noexcept { nvtxDomainRangeEnd(domain(), id); }

void mark(Kind kind, const char* message) noexcept {
  auto a = attributes(kind, message, 0);
  nvtxDomainMarkEx(domain(), &a);
}

bool tool_attached() noexcept {
  (void)domain();  // the first NVTX call loads the tool, or sets every entry point to a no-op
  // The entry point fathom's ranges go through: null once NVTX found no tool that takes it.
  return NVTX_VERSIONED_IDENTIFIER(nvtxGlobals).nvtxDomainRangePushEx_impl_fnptr != nullptr;
}

}  // namespace fathom::nvtx
