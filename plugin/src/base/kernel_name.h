#pragma once
// The one normalizer every source's kernel names go through before they are classified and
// interned (the aggregator calls it once per distinct name). CUPTI hands out mangled names
// (_ZN2at6native...), as an Nsight export's mangledName does; Kineto's traces carry them
// demangled. The classifier's rows (at::native::, cub::, cudnn::) read demangled text, so a
// mangled name is demangled here, with the C++ ABI's demangler, as Kineto does.
//
// Names are cut to kKernelNameBytes first: real kernel names are shorter, and a hostile 30 MB
// name must cost what a real one does, in the classifier and in the name tables.
#include <cstddef>
#include <string>
#include <string_view>

namespace fathom {

inline constexpr std::size_t kKernelNameBytes = 4096;

// The first kKernelNameBytes of a name: what is classified and interned.
std::string_view kernel_name_prefix(std::string_view name) noexcept;

// The name as reports show it and the classifier reads it: demangled when its prefix is an
// Itanium C++ mangled name ("_Z..."), else the prefix itself; cut to kKernelNameBytes.
std::string normalize_kernel_name(std::string_view name);

// The part of a demangled name that says its types: the name without its trailing parameter
// list, when it has template arguments ("void k<float, 4>(int, double)" -> "void k<float, 4>").
// The parameters repeat the template arguments or are scalars passed by value (an optimizer's
// double learning rate), which say nothing about the arithmetic. A name without template
// arguments is returned whole: its parameters are all it says.
std::string_view without_parameters(std::string_view name) noexcept;

}  // namespace fathom
