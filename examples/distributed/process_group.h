#pragma once
// The job's c10d process group, built the way a LibTorch program has to: a TCPStore that every
// rank reaches at MASTER_ADDR:MASTER_PORT (rank 0 hosts it), and one backend (Gloo on CPU, NCCL
// on GPUs). PyTorch's Python layer does this in init_process_group; C++ has no such helper.
#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace examples {

c10::intrusive_ptr<c10d::Store> make_store(const std::string& address, int port, int rank,
                                           int world_size, std::chrono::milliseconds timeout);

// backend: "gloo" or "nccl" (nccl only in a build with NCCL headers; see CMakeLists.txt).
c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    const std::string& backend, const c10::intrusive_ptr<c10d::Store>& store, int rank,
    int world_size, std::chrono::milliseconds timeout);

// Whether this build can make an NCCL process group.
bool nccl_built() noexcept;

// The backends, each in its own file: their headers are heavy and Gloo's are not in the torch
// wheel (gloo_backend.cpp says how that is handled).
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int world_size,
                                                    std::chrono::milliseconds timeout);
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int world_size,
                                                    std::chrono::milliseconds timeout);

}  // namespace examples
