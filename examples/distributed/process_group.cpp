#include "process_group.h"

#include <stdexcept>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace examples {

c10::intrusive_ptr<c10d::Store> make_store(const std::string& address, int port, int rank,
                                           int world_size, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(port);
  o.isServer = rank == 0;
  o.numWorkers = world_size;
  o.waitWorkers = true;
  o.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(address, o);
}

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    const std::string& backend, const c10::intrusive_ptr<c10d::Store>& store, int rank,
    int world_size, std::chrono::milliseconds timeout) {
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world_size);
  // The backend's own keys stay under their prefix, apart from the training loop's and fathom's.
  auto backend_store = c10::make_intrusive<c10d::PrefixStore>(backend + "/", store);
  if (backend == "gloo") {
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO,
                      make_gloo_backend(backend_store, rank, world_size, timeout));
  } else if (backend == "nccl") {
    if (!nccl_built())
      throw std::invalid_argument("this build has no NCCL (no nccl.h found at configure time)");
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL,
                      make_nccl_backend(backend_store, rank, world_size, timeout));
  } else {
    throw std::invalid_argument("--backend " + backend + ": give gloo or nccl");
  }
  return group;
}

}  // namespace examples
