// A long run: many epochs of a tiny model on the CPU under fathom, printing at intervals the
// resident memory, the time an epoch end takes on the training thread (wall and that thread's
// CPU: the summary, the advisor and the epoch's one journal line serialized; the writes are the
// report writer's thread's) and the journal's size, to show what grows with the run's length and
// what stays flat. Then the second epoch's end against the last one's, and the session's end: its
// time, and its peak resident memory over what the run held before it (the transient of writing
// the whole run's JSON and HTML).
//   soak_bench [EPOCHS=500] [STEPS_PER_EPOCH=60]
// Instructions per epoch end, epoch 1 against epoch 500: bench/epoch_end_instructions.sh (this
// program under callgrind, one dump per epoch end).
#include <fathom/fathom.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>

namespace {

// VmRSS: resident now; VmHWM: the peak since the start or the last reset_peak_resident().
long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  long value = 0;
  while (in >> key) {
    if (key == field) {
      in >> value;
      return value;
    }
    in.ignore(4096, '\n');
  }
  return 0;
}

long resident_kib() { return status_kib("VmRSS:"); }

// Linux: "5" in clear_refs sets the peak resident size back to the resident size now.
bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

double thread_cpu_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

long file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return in ? static_cast<long>(in.tellg()) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 500;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 60;
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(16, 32), torch::nn::ReLU(),
                              torch::nn::Linear(32, 1));
  torch::optim::SGD opt(model->parameters(), 0.01);
  const std::string dir = "/tmp/fathom-soak-" + std::to_string(::getpid());
  auto session = std::make_unique<fathom::Session>(
      fathom::Options().report_dir(dir).run_name("soak").print_report(false).warnings(
          [](std::string_view m) {
            std::fprintf(stderr, "warning: %.*s\n", int(m.size()), m.data());
          }));
  session->watch(*model);
  session->watch(opt);
  const torch::Tensor x = torch::randn({8, 16}), y = torch::randn({8, 1});
  std::printf("%8s %8s %12s %14s %14s %14s\n", "epoch", "steps", "rss_MiB", "epoch_end_ms",
              "end_cpu_ms", "journal_KiB");
  double second_cpu_ms = 0, last_cpu_ms = 0;
  for (int e = 0; e < epochs; ++e) {
    std::chrono::steady_clock::time_point before_end;
    double before_cpu = 0;
    {
      auto epoch = session->epoch();
      for (int i = 0; i < steps; ++i) {
        auto step = epoch.step(8);
        torch::Tensor loss;
        {
          auto f = step.forward();
          loss = torch::mse_loss(fathom::forward(model, x), y);
        }
        {
          auto b = step.backward();
          opt.zero_grad();
          loss.backward();
        }
        {
          auto o = step.optimizer();
          opt.step();
        }
      }
      before_cpu = thread_cpu_ms();
      before_end = std::chrono::steady_clock::now();
    }  // the epoch ends here: summary, advisor, its journal line queued for the writer
    const double end_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - before_end)
            .count();
    const double end_cpu_ms = thread_cpu_ms() - before_cpu;
    if (e == 1) second_cpu_ms = end_cpu_ms;
    if (e == epochs - 1) last_cpu_ms = end_cpu_ms;
    if (e < 3 || (e + 1) % (epochs / 10 > 0 ? epochs / 10 : 1) == 0) {
      session->flush_report();  // the journal's size with this epoch in it (outside the timing)
      std::printf("%8d %8lld %12.1f %14.2f %14.3f %14.1f\n", e + 1,
                  static_cast<long long>(e + 1) * steps, resident_kib() / 1024.0, end_ms,
                  end_cpu_ms, file_bytes(dir + "/soak.jsonl") / 1024.0);
    }
    std::fflush(stdout);
  }
  if (epochs > 2 && second_cpu_ms > 0)
    std::printf("epoch end, training thread CPU: epoch 2 %.3f ms, epoch %d %.3f ms, ratio %.2f\n",
                second_cpu_ms, epochs, last_cpu_ms, last_cpu_ms / second_cpu_ms);
  session->flush_report();
  const long report_epochs = static_cast<long>(session->report().epochs.size());
  const long resident_before_close = resident_kib();
  const bool peak_reset = reset_peak_resident();
  const auto before_close = std::chrono::steady_clock::now();
  const double before_close_cpu = thread_cpu_ms();
  session.reset();  // the session's end: the whole run written once, as JSON and as HTML
  // What the end adds over what the run held: the transient of writing the whole run.
  if (peak_reset)
    std::printf(
        "session end: resident %.1f MiB before it, peak %.1f MiB during it (+%.1f MiB); %ld "
        "epochs in memory of %d\n",
        resident_before_close / 1024.0, status_kib("VmHWM:") / 1024.0,
        (status_kib("VmHWM:") - resident_before_close) / 1024.0, report_epochs, epochs);
  std::printf(
      "session end: %.1f ms wall, %.1f ms CPU on this thread; soak.json %.1f KiB, "
      "soak.html %.1f KiB\n",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - before_close)
          .count(),
      thread_cpu_ms() - before_close_cpu, file_bytes(dir + "/soak.json") / 1024.0,
      file_bytes(dir + "/soak.html") / 1024.0);
  std::remove((dir + "/soak.json").c_str());
  std::remove((dir + "/soak.html").c_str());
  ::rmdir(dir.c_str());
  return 0;
}
