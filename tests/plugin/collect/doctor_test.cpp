#include "collect/doctor.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const DoctorCheck* check(const DoctorReport& r, const std::string& name) {
  for (const DoctorCheck& c : r.checks)
    if (c.name == name) return &c;
  return nullptr;
}

// A machine with everything: driver, runtime, cuDNN, CUPTI, NVML and an H100.
SystemFacts healthy() {
  SystemFacts f;
  f.driver = {"libcuda.so.1", true, "", 13000};
  f.driver_device_count = 1;
  f.driver_version = "580.65.06";
  f.runtime = {"libcudart.so.13", true, "", 13000};
  f.runtime_device_count = 1;
  f.cudnn = {"libcudnn.so.9", true, "", 91000};
  f.cupti = {"libcupti.so.13", true, "", 130001};
  f.profiling_admin_only = false;
  f.nvml = {"libnvidia-ml.so.1", true, "", 13000};
  GpuFacts g;
  g.name = "NVIDIA H100 80GB HBM3";
  g.compute_major = 9;
  g.memory_bytes = 80LL << 30;
  g.pcie_gen = g.pcie_max_gen = 5;
  g.pcie_width = g.pcie_max_width = 16;
  f.gpus.push_back(g);
  return f;
}

TEST(Doctor, HealthyMachineExitsZero) {
  const DoctorReport r = diagnose(healthy());
  EXPECT_EQ(r.exit_status(), 0);
  for (const DoctorCheck& c : r.checks)
    EXPECT_EQ(c.status, CheckStatus::Ok) << c.name << ": " << c.detail;
  const DoctorCheck* gpu = check(r, "GPU 0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_TRUE(has(gpu->detail,
                  "compute capability 9.0, 80.00 GiB, bf16 yes, TF32 yes, FP8 yes, PCIe gen 5 x16"))
      << gpu->detail;
  EXPECT_TRUE(has(format_doctor(r), "ready: fathom can measure everything"));
}

TEST(Doctor, NoDriverIsAProblemWithItsFix) {
  SystemFacts f = healthy();
  f.driver = {"libcuda.so.1", false, "libcuda.so.1: cannot open shared object file", std::nullopt};
  f.nvml = {"libnvidia-ml.so.1", false, "libnvidia-ml.so.1 could not be loaded", std::nullopt};
  f.gpus.clear();
  f.driver_device_count.reset();
  f.runtime_device_count.reset();
  const DoctorReport r = diagnose(f);
  EXPECT_EQ(r.exit_status(), 1);
  EXPECT_EQ(check(r, "NVIDIA driver")->status, CheckStatus::Problem);
  EXPECT_TRUE(has(check(r, "NVIDIA driver")->fix, "nvidia-smi"));
  EXPECT_EQ(check(r, "NVML")->status, CheckStatus::Problem);
  EXPECT_EQ(check(r, "GPUs")->status, CheckStatus::Problem);
  EXPECT_EQ(check(r, "CUPTI permission")->status, CheckStatus::Warning);
  // Issue 24: the runtime was "[ ok ]" beside the driver's failure; it reaches no GPU.
  EXPECT_EQ(check(r, "CUDA runtime")->status, CheckStatus::Warning);
  EXPECT_TRUE(has(check(r, "CUDA runtime")->detail, "reaches no GPU"))
      << check(r, "CUDA runtime")->detail;
  const std::string text = format_doctor(r);
  EXPECT_TRUE(has(text, "[FAIL] NVIDIA driver")) << text;
  EXPECT_FALSE(has(text, "[ ok ] CUDA runtime")) << text;
  EXPECT_TRUE(has(text, "3 problem(s), 2 warning(s)")) << text;
}

// The runtime loads, the driver too, but asking for devices fails (a driver and kernel module of
// different versions): the runtime's line says so and points at the driver.
TEST(Doctor, ARuntimeThatReachesNoGpuIsNotOk) {
  SystemFacts f = healthy();
  f.runtime_device_count.reset();
  f.runtime_device_error = "cudaGetDeviceCount: CUDA driver version is insufficient";
  const DoctorReport r = diagnose(f);
  const DoctorCheck* c = check(r, "CUDA runtime");
  EXPECT_EQ(c->status, CheckStatus::Warning);
  EXPECT_TRUE(has(c->detail, "driver version is insufficient")) << c->detail;
  EXPECT_TRUE(has(c->fix, "NVIDIA driver")) << c->fix;
}

TEST(Doctor, DriverOlderThanTheRuntime) {
  SystemFacts f = healthy();
  f.driver.version = 12040;
  const DoctorReport r = diagnose(f);
  EXPECT_EQ(r.exit_status(), 1);
  const DoctorCheck* c = check(r, "CUDA runtime");
  EXPECT_EQ(c->status, CheckStatus::Problem);
  EXPECT_TRUE(has(c->detail, "the driver supports only CUDA 12.4")) << c->detail;
  EXPECT_TRUE(has(c->fix, "supports CUDA 13.0")) << c->fix;
}

TEST(Doctor, CountersForAdminsOnlyIsAWarning) {
  SystemFacts f = healthy();
  f.profiling_admin_only = true;
  DoctorReport r = diagnose(f);
  EXPECT_EQ(r.exit_status(), 0);
  EXPECT_EQ(check(r, "CUPTI permission")->status, CheckStatus::Warning);
  EXPECT_TRUE(has(check(r, "CUPTI permission")->fix, "NVreg_RestrictProfilingToAdminUsers=0"));
  f.is_root = true;
  r = diagnose(f);
  EXPECT_EQ(check(r, "CUPTI permission")->status, CheckStatus::Ok);
}

TEST(Doctor, MissingCuptiIsAProblemMissingCudnnAWarning) {
  SystemFacts f = healthy();
  f.cupti = {"libcupti.so.13, libcupti.so", false, "not found", std::nullopt};
  f.cudnn = {"libcudnn.so.9", false, "not found", std::nullopt};
  const DoctorReport r = diagnose(f);
  EXPECT_EQ(r.exit_status(), 1);
  EXPECT_EQ(check(r, "CUPTI")->status, CheckStatus::Problem);
  EXPECT_EQ(check(r, "cuDNN")->status, CheckStatus::Warning);
}

TEST(Doctor, OldGpuAndNarrowLinkAreWarnings) {
  SystemFacts f = healthy();
  f.gpus[0].compute_major = 6;
  f.gpus[0].compute_minor = 1;
  DoctorReport r = diagnose(f);
  EXPECT_TRUE(has(check(r, "GPU 0")->detail, "bf16 no, TF32 no, FP8 no"))
      << check(r, "GPU 0")->detail;
  EXPECT_EQ(check(r, "GPU 0")->status, CheckStatus::Warning);
  f = healthy();
  f.gpus[0].pcie_width = 8;
  r = diagnose(f);
  EXPECT_EQ(check(r, "GPU 0")->status, CheckStatus::Warning);
  EXPECT_TRUE(has(check(r, "GPU 0")->fix, "x16 slot"));
}

TEST(Doctor, VersionTexts) {
  EXPECT_EQ(cuda_version_text(13000), "13.0");
  EXPECT_EQ(cuda_version_text(12040), "12.4");
  EXPECT_EQ(cudnn_version_text(91000), "9.10.0");
  EXPECT_EQ(cudnn_version_text(8907), "8.9.7");
}

TEST(Doctor, ProbesTheFakeNvmlAndAMissingDriver) {
  ProbeOptions o;
  o.driver_library = "libfathom-no-such-cuda.so.1";
  o.nvml_library = FATHOM_FAKE_NVML_PATH;
  o.driver_params = "/nonexistent/params";
  const SystemFacts f = probe_system(o);
  EXPECT_FALSE(f.driver.loaded);
  EXPECT_TRUE(has(f.driver.error, "libfathom-no-such-cuda.so.1")) << f.driver.error;
  EXPECT_TRUE(f.nvml.loaded);
  EXPECT_EQ(f.driver_version, "580.65.06");
  ASSERT_EQ(f.gpus.size(), 1u);
  EXPECT_EQ(f.gpus[0].name, "Fake H100 80GB HBM3");
  EXPECT_EQ(f.gpus[0].compute_major, 9);
  EXPECT_EQ(*f.gpus[0].memory_bytes, 80LL << 30);
  EXPECT_EQ(f.gpus[0].pcie_max_gen, 5);
  EXPECT_FALSE(f.profiling_admin_only.has_value());
  const DoctorReport r = diagnose(f);
  EXPECT_EQ(r.exit_status(), 1);  // no driver
  EXPECT_EQ(check(r, "GPU 0")->status, CheckStatus::Ok);
  EXPECT_TRUE(has(format_doctor_json(r), "\"exit_status\": 1"));
}

}  // namespace
}  // namespace fathom
