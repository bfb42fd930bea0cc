#pragma once
#include <string>

namespace fathom {

// Writes content to path so that readers see the old file or the new one, never a torn one:
// a temporary file in the same folder, flushed to disk, then renamed over path.
// Throws fathom::Error naming the path and the system's reason on failure.
void write_file_atomically(const std::string& path, const std::string& content);

// Creates folder (and parents) and proves it writable by writing and removing a probe file.
// Throws fathom::Error naming the folder and the fix.
void ensure_writable_folder(const std::string& folder);

}  // namespace fathom
