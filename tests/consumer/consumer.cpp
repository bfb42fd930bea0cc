// Built against an installed fathom: proves the package config, headers and targets work.
#include <fathom/fathom.h>
#include <torch/torch.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  fathom::Session session(
      fathom::Options().report_dir(argv[1]).run_name("consumer").print_report(false));
  auto model = torch::nn::Sequential(torch::nn::Linear(4, 2));
  session.watch(*model);
  {
    auto e = session.epoch();
    auto step = e.step(8);
    auto f = step.forward();
    (void)fathom::forward(model, torch::ones({8, 4}));
  }
  std::cout << "consumer: fathom " << fathom::kVersion << ", " << session.report().epochs.size()
            << " epoch, report " << session.report_path() << "\n";
  return session.report().epochs.size() == 1 ? 0 : 1;
}
