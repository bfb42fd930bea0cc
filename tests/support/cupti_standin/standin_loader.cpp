#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "standin.h"

namespace fathom::standin {

Control& load() {
  static Control* control = [] {
    auto* c = new Control();
    c->path = FATHOM_CUPTI_STANDIN_PATH;
    // RTLD_LOCAL: the stand-in's cupti* symbols stay out of the global scope, where they could
    // interpose on the libcupti torch links.
    void* handle = dlopen(c->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      std::fprintf(stderr, "cannot load the CUPTI stand-in %s: %s\n", c->path.c_str(), dlerror());
      std::abort();
    }
    auto fill = reinterpret_cast<void (*)(Control*)>(dlsym(handle, "fathom_standin_control"));
    if (!fill) {
      std::fprintf(stderr, "%s has no fathom_standin_control\n", c->path.c_str());
      std::abort();
    }
    fill(c);
    cupti::Loaded loaded = cupti::load_cupti_from(c->path);
    if (!loaded.ok) {
      std::fprintf(stderr, "fathom cannot bind the stand-in: %s\n", loaded.why.c_str());
      std::abort();
    }
    c->api = loaded.api;
    return c;
  }();
  control->reset();
  return *control;
}

}  // namespace fathom::standin
