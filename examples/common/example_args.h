#pragma once
// The flags every example takes: --epochs N --steps N --batch N --device cpu|cuda[:i] --large,
// plus the example's own switches. --large picks sizes meant for a GPU; 0 means "the size's
// default" for --batch.
#include <c10/core/Device.h>
#include <torch/cuda.h>

#include <algorithm>
#include <initializer_list>
#include <set>
#include <stdexcept>
#include <string>

namespace examples {

struct Args {
  int epochs = 2;
  int steps = 40;
  int batch = 0;
  std::string device;  // empty: cuda when available
  bool large = false;
  std::set<std::string> switches;

  bool has(const std::string& s) const { return switches.count(s) > 0; }
  c10::Device pick_device() const {
    if (!device.empty()) return c10::Device(device);
    return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  }
};

inline Args parse_args(int argc, char** argv, Args a,
                       std::initializer_list<const char*> own_switches = {}) {
  auto usage = [&] {
    std::string u = "--epochs N, --steps N, --batch N, --device cpu|cuda, --large";
    for (const char* s : own_switches) u += std::string(", ") + s;
    return u;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value (" + usage() + ")");
      return argv[++i];
    };
    auto positive = [&]() {
      const std::string v = value();
      const int n = std::stoi(v);
      if (n <= 0) throw std::invalid_argument(k + " " + v + ": give a number above 0");
      return n;
    };
    if (k == "--epochs")
      a.epochs = positive();
    else if (k == "--steps")
      a.steps = positive();
    else if (k == "--batch")
      a.batch = positive();
    else if (k == "--device")
      a.device = value();
    else if (k == "--large")
      a.large = true;
    else if (std::find_if(own_switches.begin(), own_switches.end(),
                          [&](const char* s) { return k == s; }) != own_switches.end())
      a.switches.insert(k);
    else
      throw std::invalid_argument("unknown argument " + k + " (try " + usage() + ")");
  }
  return a;
}

}  // namespace examples
