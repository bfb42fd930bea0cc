// load_trace (<fathom/trace_files.h>): any of the three formats, told apart by content.
#include <fathom/trace_files.h>

namespace fathom {

GpuActivity load_trace(const std::string& path) {
  if (is_sqlite_file(path)) return load_nsight_export(path);
  return is_activity_file(path) ? load_activity(path) : read_kineto_trace(path);
}

}  // namespace fathom
