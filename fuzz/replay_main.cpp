// The fuzz targets without libFuzzer: each input named on the command line (a file, or every
// file of a folder) is run through LLVMFuzzerTestOneInput once. The plain test suite builds every
// target this way (ctest fuzz.<name>.seeds), so a target that no longer compiles, or a seed that
// now crashes or throws what is not a fathom::Error, fails every build, not only the sanitizer
// pass that fuzzes them (scripts/fuzz).
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

bool is_folder(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// path itself, or the files of the folder path (not recursively, as libFuzzer reads a corpus).
std::vector<std::string> inputs_of(const std::string& path) {
  if (!is_folder(path)) return {path};
  std::vector<std::string> files;
  if (DIR* dir = ::opendir(path.c_str())) {
    while (const dirent* e = ::readdir(dir)) {
      const std::string file = path + "/" + e->d_name;
      struct stat st;
      if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) files.push_back(file);
    }
    ::closedir(dir);
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  int ran = 0;
  for (int i = 1; i < argc; ++i) {
    for (const std::string& file : inputs_of(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read seed %s\n", file.c_str());
        return 2;
      }
      const std::string bytes((std::istreambuf_iterator<char>(in)), {});
      std::fprintf(stderr, "%s (%zu bytes)\n", file.c_str(), bytes.size());
      (void)LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                   bytes.size());
      ++ran;
    }
  }
  std::fprintf(stderr, "%d input(s) ran\n", ran);
  return ran > 0 ? 0 : 2;  // no seed at all: the target's seed list is wrong
}
