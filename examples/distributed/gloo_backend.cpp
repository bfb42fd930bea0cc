// The Gloo backend. The torch wheel ships ProcessGroupGloo.hpp and Gloo's compiled code (inside
// libtorch_cpu.so) but not the gloo headers ProcessGroupGloo.hpp includes; this file compiles
// against Debian's libgloo-dev headers (a 2022 gloo snapshot) instead. That is safe only for
// what this file relies on, and the checks below keep it honest (docs/distributed.md):
//  - it allocates a ProcessGroupGloo (make_intrusive) and its Options: their sizes must equal
//    what libtorch's own code allocates (operator new(0x1e8) in ProcessGroupGloo::split, new(0xb0)
//    in Options::create_default, torch 2.11); both hold gloo objects only behind shared_ptr /
//    unique_ptr, so gloo's own layouts do not enter them;
//  - everything else it calls (the constructor, createDeviceForHostname, the Backend virtuals) is
//    compiled in libtorch;
//  - it must not emit any gloo:: code of its own, or libtorch's calls could bind to it: the test
//    example.distributed_no_gloo_code checks the binary with nm.
#include <torch/version.h>

#include <cstdlib>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "process_group.h"

#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 11
static_assert(
    sizeof(c10d::ProcessGroupGloo) == 0x1e8,
    "ProcessGroupGloo's size differs from libtorch 2.11's: the gloo headers do not match");
static_assert(sizeof(c10d::ProcessGroupGloo::Options) == 0xb0,
              "ProcessGroupGloo::Options' size differs from libtorch 2.11's");
#else
#warning \
    "ProcessGroupGloo's size is checked for torch 2.11 only: re-derive it (docs/distributed.md)"
#endif

namespace examples {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int world_size,
                                                    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // GLOO_SOCKET_IFNAME names the interface, as in PyTorch; otherwise the address the ranks
  // meet at (loopback for a single-host job).
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else {
    const char* addr = std::getenv("MASTER_ADDR");
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(addr ? addr : "127.0.0.1"));
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
}

}  // namespace examples
