#include "collect/cupti/cupti_api.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "fake_cupti.h"
#include "scoped_env.h"

namespace fathom::cupti {
namespace {

TEST(CuptiApi, FieldNamesBecomeCuptiFunctionNames) {
  EXPECT_EQ(cupti_function_name("activity_flush_all"), "cuptiActivityFlushAll");
  EXPECT_EQ(cupti_function_name("subscribe"), "cuptiSubscribe");
  EXPECT_EQ(cupti_function_name("activity_push_external_correlation_id"),
            "cuptiActivityPushExternalCorrelationId");
}

TEST(CuptiApi, TheCheckedPathLogsTheFailingCallAndItsErrorString) {
  Api api = testing::fake_api();
  testing::FakeCupti::get().reset();
  testing::FakeCupti::get().enable_results[CUPTI_ACTIVITY_KIND_MEMCPY] = CUPTI_ERROR_NOT_COMPATIBLE;
  ::testing::internal::CaptureStderr();
  const CUptiResult ok = FATHOM_CUPTI(api, activity_enable, CUPTI_ACTIVITY_KIND_MEMSET);
  const std::string quiet = ::testing::internal::GetCapturedStderr();
  ::testing::internal::CaptureStderr();
  const CUptiResult r = FATHOM_CUPTI(api, activity_enable, CUPTI_ACTIVITY_KIND_MEMCPY);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(ok, CUPTI_SUCCESS);
  EXPECT_EQ(quiet, "");
  EXPECT_EQ(r, CUPTI_ERROR_NOT_COMPATIBLE);
  EXPECT_EQ(log,
            "fathom: cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) failed: "
            "CUPTI_ERROR_NOT_COMPATIBLE\n");
}

TEST(CuptiApi, AMissingFunctionIsAnErrorNotACrash) {
  Api api;  // nothing resolved
  ::testing::internal::CaptureStderr();
  const CUptiResult r = FATHOM_CUPTI(api, activity_flush_all, 0u);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r, CUPTI_ERROR_API_NOT_IMPLEMENTED);
  EXPECT_NE(log.find("cuptiActivityFlushAll(0u) failed: CUPTI error 11"), std::string::npos) << log;
}

TEST(CuptiApi, ALibraryThatIsNotThereSaysWhere) {
  Loaded l = load_cupti_from("/nonexistent/libcupti.so.13");
  EXPECT_FALSE(l.ok);
  EXPECT_FALSE(l.found);
  EXPECT_NE(l.why.find("/nonexistent/libcupti.so.13"), std::string::npos) << l.why;
}

TEST(CuptiApi, ALibraryWithoutCuptiNamesTheMissingFunctions) {
  Loaded l = load_cupti_from("libm.so.6");
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(l.found);
  EXPECT_NE(l.why.find("lacks cuptiGetResultString"), std::string::npos) << l.why;
}

// Where CUPTI is looked for comes from the machine fathom runs on, not the one it was built on.
TEST(CuptiApi, SearchFoldersComeFromTheRunningMachine) {
  test::ScopedEnv home("CUDA_HOME", "/opt/cuda-elsewhere");
  const std::vector<std::string> dirs = cupti_search_dirs();
  auto has = [&](const std::string& d) {
    return std::find(dirs.begin(), dirs.end(), d) != dirs.end();
  };
  EXPECT_TRUE(has("/opt/cuda-elsewhere/lib64"));
  EXPECT_TRUE(has("/opt/cuda-elsewhere/extras/CUPTI/lib64"));
  EXPECT_TRUE(has("/usr/local/cuda/extras/CUPTI/lib64"));
  for (const std::string& d : dirs)
    EXPECT_EQ(d.find(FATHOM_SOURCE_DIR), std::string::npos) << d << " is the build machine's";
}

// Issue 23: CUDA 13 toolkits keep libcupti in lib or targets/<arch>-linux/lib, and a process
// without torch (the core's GPU tests) finds the wheel's copy through its Python environment.
TEST(CuptiApi, SearchFoldersCoverCuda13LayoutsAndTheEnvironmentsWheels) {
  const std::filesystem::path venv =
      std::filesystem::temp_directory_path() / ("fathom-venv-" + std::to_string(::getpid()));
  std::filesystem::create_directories(venv / "lib/python3.11/site-packages/nvidia");
  test::ScopedEnv home("CUDA_HOME", "/opt/cuda-13");
  test::ScopedEnv env("VIRTUAL_ENV", venv.c_str());
  const std::vector<std::string> dirs = cupti_search_dirs();
  auto has = [&](const std::string& d) {
    return std::find(dirs.begin(), dirs.end(), d) != dirs.end();
  };
  EXPECT_TRUE(has("/opt/cuda-13/lib"));
  EXPECT_TRUE(has("/opt/cuda-13/targets/x86_64-linux/lib") ||
              has("/opt/cuda-13/targets/sbsa-linux/lib"));
  EXPECT_TRUE(has("/usr/local/cuda/lib"));
  EXPECT_TRUE(has((venv / "lib/python3.11/site-packages/nvidia/cu").string() +
                  std::to_string(CUPTI_API_VERSION / 10000) + "/lib"))
      << "the environment's CUDA wheel";
  std::filesystem::remove_all(venv);
}

// The toolkit on the build machine ships libcupti: fathom must find and accept it.
TEST(CuptiApi, FindsTheToolkitsCupti) {
  const std::string soname = "libcupti.so." + std::to_string(CUPTI_API_VERSION / 10000);
  if (!std::filesystem::exists("/usr/local/cuda/lib64/" + soname))
    GTEST_SKIP() << "no CUDA toolkit here";
  Loaded l = load_cupti();
  ASSERT_TRUE(l.ok) << l.why;
  EXPECT_NE(l.api.library.find(soname), std::string::npos) << l.api.library;
  std::uint32_t version = 0;
  ASSERT_EQ(l.api.get_version(&version), CUPTI_SUCCESS);
  EXPECT_EQ(version / 10000, CUPTI_API_VERSION / 10000);
}

}  // namespace
}  // namespace fathom::cupti
