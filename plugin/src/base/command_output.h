#pragma once
// Files a command writes where its user says (`fathom analyze --json/--html/--chrome-trace`,
// `fathom report --html`). Such a path may name a terminal, /dev/null, a FIFO a reader waits on
// or /dev/stdout: none of them is a file to replace. Renaming a temporary over /dev/null (as root,
// in most ML containers) replaced the system's /dev/null with a regular file; and the path may be
// the command's own input (`fathom report a.json --html a.json`).
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

// Refuses, before the command does its work, an output it could not write as a file (a folder, a
// socket) and one that is one of inputs (the same file, by device and inode). Throws fathom::Error
// naming the option, the path and what to do.
void check_command_output(const std::string& path, std::string_view option,
                          const std::vector<std::string>& inputs);

// Writes content to path after check_command_output: a character or block device or a FIFO
// (through a link too) is written in place, as a shell's `>` would (a FIFO's open waits for its
// reader, as there); /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N are written to that
// descriptor. Anything else (a regular file, a new name, a link to either) is replaced atomically
// (write_file_atomically). Throws fathom::Error naming the path and the system's reason.
void write_command_output(const std::string& path, std::string_view option,
                          const std::string& content, const std::vector<std::string>& inputs);

}  // namespace fathom
