// A fathom activity file (.jsonl), read and analyzed: a result or a fathom::Error, nothing else.
#include <fathom/error.h>
#include <fathom/replay.h>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const fathom::GpuActivity a = fathom::load_activity(fathom::fuzz::as_file(data, size));
    (void)fathom::analyze_activity(a);
  } catch (const fathom::Error&) {
    // The one way a reader may refuse its input.
  }
  return 0;
}
