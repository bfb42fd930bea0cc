// The kernel classifier's cost per distinct name (issue 25 item 3): every distinct name of every
// source is classified once, so a file of 300k distinct names costs 300k of these. Prints CPU time
// per name for real-sized (210 B) and longest-classified (4 KiB prefix of a 1 MiB) names.
//   kernel_classifier_bench [NAMES]
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "aggregate/kernel_classifier.h"

namespace {

double cpu_seconds_per_name(const std::vector<std::string>& names) {
  const std::clock_t start = std::clock();
  int tensor_core = 0;
  for (const std::string& n : names) tensor_core += fathom::classify_kernel(n).tensor_core;
  const double cpu = double(std::clock() - start) / CLOCKS_PER_SEC;
  if (tensor_core < 0) std::puts("");  // keeps the loop's result alive
  return cpu / double(names.size());
}

std::vector<std::string> names_of(int count, std::size_t bytes) {
  std::vector<std::string> names;
  names.reserve(count);
  for (int i = 0; i < count; ++i) {
    std::string s =
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3>)_" +
        std::to_string(i);
    s.resize(bytes, 'x');
    names.push_back(std::move(s));
  }
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  const int count = argc > 1 ? std::atoi(argv[1]) : 20000;
  const double real = cpu_seconds_per_name(names_of(count, 210));
  const double huge = cpu_seconds_per_name(names_of(count / 100 + 1, 1 << 20));
  std::printf("distinct 210-byte names: %.2f us CPU each (300k names: %.1f s)\n", real * 1e6,
              real * 3e5);
  std::printf("1 MiB names (4 KiB classified): %.2f us CPU each, %.1fx a 210-byte name\n",
              huge * 1e6, huge / real);
}
