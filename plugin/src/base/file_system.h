#pragma once
// The few file-system operations fathom needs, on POSIX calls.
//
// Why not std::filesystem: libtorch.so exports its own copies of std::filesystem functions, and
// in a process that links LibTorch the dynamic linker may bind fathom's calls to them; that
// copy of remove_all crashes (seen with torch 2.11.0). Nothing in fathom, nor in a test that
// links LibTorch, may call std::filesystem.
#include <string>

namespace fathom::fs {

bool exists(const std::string& path) noexcept;
bool is_directory(const std::string& path) noexcept;
// mkdir -p; returns an empty string on success, else the system's reason.
std::string make_directories(const std::string& path);
// rm -rf; best effort, never throws.
void remove_tree(const std::string& path) noexcept;
std::string temp_directory();  // $TMPDIR or /tmp
// Opens path for reading when it is a regular file, without ever waiting on the way: the open of
// a FIFO waits for a writer, forever (O_NONBLOCK, then fstat; the descriptor returned blocks
// again). Returns it, or -1 with why set to the whole message ("cannot open X: ..." or "cannot
// read X: it is not a regular file").
int open_regular_file(const std::string& path, std::string& why);

}  // namespace fathom::fs
