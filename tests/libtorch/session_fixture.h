#pragma once
// A temporary report folder and a tiny model for the session tests.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <string>

#include "records/file_system.h"

namespace fathom::test {

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory() + "/fathom-" + info->test_suite_name() + "-" + info->name() + "-" +
           std::to_string(::getpid());
    fs::remove_tree(dir_);
  }
  void TearDown() override { fs::remove_tree(dir_); }

  const std::string& dir() const { return dir_; }

  static torch::nn::Sequential tiny_model() {
    return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(),
                                 torch::nn::Linear(16, 4));
  }

 private:
  std::string dir_;
};

}  // namespace fathom::test
