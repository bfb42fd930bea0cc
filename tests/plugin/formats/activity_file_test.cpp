#include "formats/activity_file.h"

#include <fathom/error.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "aggregate/gpu_aggregator.h"
#include "analyze/activity_replay.h"
#include "base/file_system.h"
#include "synthetic_activity.h"

namespace fathom {
namespace {

class ActivityFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory() + "/fathom_activity_file_test_" + std::to_string(::getpid());
    ASSERT_EQ(fs::make_directories(dir_), "");
  }
  void TearDown() override { fs::remove_tree(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void spit(const std::string& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << text;
  }
  static std::string error_of(const std::string& p) {
    try {
      (void)load_activity(p);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }

  static GpuActivity rich() {
    GpuActivity a = test::one_step();
    a.kernels[0].phase = Phase::Forward;
    a.kernels[0].grid_x = 108;
    a.kernels[0].block_y = 4;
    a.syncs.push_back(
        SyncRecord{SyncKind::Stream, 7, test::us(780), test::us(810), 99, 5, Phase::Backward});
    MemsetRecord m;
    m.bytes = 512;
    m.start_ns = test::us(905);
    m.end_ns = test::us(906);
    a.memsets.push_back(m);
    a.ops[0].sequence_nr = 42;
    a.dropped_records = 5;
    return a;
  }

  std::string dir_;
};

void expect_same(const GpuActivity& a, const GpuActivity& b) {
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (std::size_t i = 0; i < a.kernels.size(); ++i) {
    EXPECT_EQ(a.kernels[i].name, b.kernels[i].name);
    EXPECT_EQ(a.kernels[i].start_ns, b.kernels[i].start_ns);
    EXPECT_EQ(a.kernels[i].end_ns, b.kernels[i].end_ns);
    EXPECT_EQ(a.kernels[i].correlation_id, b.kernels[i].correlation_id);
    EXPECT_EQ(a.kernels[i].external_id, b.kernels[i].external_id);
    EXPECT_EQ(a.kernels[i].phase, b.kernels[i].phase);
    EXPECT_EQ(a.kernels[i].stream, b.kernels[i].stream);
    EXPECT_EQ(a.kernels[i].grid_x, b.kernels[i].grid_x);
    EXPECT_EQ(a.kernels[i].block_y, b.kernels[i].block_y);
  }
  ASSERT_EQ(a.memcpys.size(), b.memcpys.size());
  EXPECT_EQ(a.memcpys[0].src, b.memcpys[0].src);
  EXPECT_EQ(a.memcpys[0].kind, b.memcpys[0].kind);
  EXPECT_EQ(a.memcpys[0].bytes, b.memcpys[0].bytes);
  EXPECT_EQ(a.memcpys[0].async, b.memcpys[0].async);
  ASSERT_EQ(a.syncs.size(), b.syncs.size());
  EXPECT_EQ(a.syncs[0].kind, b.syncs[0].kind);
  EXPECT_EQ(a.syncs[0].phase, b.syncs[0].phase);
  EXPECT_EQ(a.syncs[0].external_id, b.syncs[0].external_id);
  ASSERT_EQ(a.memsets.size(), b.memsets.size());
  EXPECT_EQ(a.memsets[0].bytes, b.memsets[0].bytes);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  EXPECT_EQ(a.ops[0].input_shapes, b.ops[0].input_shapes);
  EXPECT_EQ(a.ops[0].input_dtypes, b.ops[0].input_dtypes);
  EXPECT_EQ(a.ops[0].sequence_nr, b.ops[0].sequence_nr);
  ASSERT_EQ(a.runtime_calls.size(), b.runtime_calls.size());
  EXPECT_EQ(a.runtime_calls[6].name, b.runtime_calls[6].name);
  ASSERT_EQ(a.annotations.size(), b.annotations.size());
  EXPECT_EQ(a.annotations[1].name, b.annotations[1].name);
  ASSERT_EQ(a.devices.size(), b.devices.size());
  EXPECT_EQ(a.devices[0].name, b.devices[0].name);
  EXPECT_EQ(a.devices[0].total_memory_bytes, b.devices[0].total_memory_bytes);
  EXPECT_EQ(a.dropped_records, b.dropped_records);
}

TEST_F(ActivityFile, RoundTripsEveryRecordPlain) {
  save_activity(rich(), path("run.jsonl"));
  expect_same(rich(), load_activity(path("run.jsonl")));
  EXPECT_EQ(slurp(path("run.jsonl")).substr(0, 45),
            "{\"format\":\"fathom.gpu_activity\",\"version\":1}\n");
}

TEST_F(ActivityFile, RoundTripsEveryRecordGzip) {
  save_activity(rich(), path("run.jsonl.gz"));
  const std::string bytes = slurp(path("run.jsonl.gz"));
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
  expect_same(rich(), load_activity(path("run.jsonl.gz")));
}

TEST_F(ActivityFile, ReplayGivesTheSameAnalysis) {
  save_activity(test::one_step(), path("step.jsonl.gz"));
  GpuAggregator agg;
  replay_activity(path("step.jsonl.gz"), agg);
  const GpuAggregate replayed = agg.snapshot();
  const GpuAggregate direct = aggregate(test::one_step());
  EXPECT_EQ(replayed.records, direct.records);
  EXPECT_EQ(replayed.timelines.at(0).busy_ns, test::us(480));
  EXPECT_EQ(replayed.timelines.at(0).idle.sync_ns, direct.timelines.at(0).idle.sync_ns);
  EXPECT_EQ(replayed.timelines.at(0).idle.host_launch_ns,
            direct.timelines.at(0).idle.host_launch_ns);
  EXPECT_EQ(replayed.phases[2].tensor_core_ns, direct.phases[2].tensor_core_ns);
  EXPECT_EQ(replayed.eligible_ops.size(), direct.eligible_ops.size());
}

TEST_F(ActivityFile, StreamsInBoundedBatches) {
  save_activity(test::one_step(), path("s.jsonl"));
  std::size_t batches = 0, kernels = 0;
  read_activity(
      path("s.jsonl"),
      [&](GpuActivity&& b) {
        ++batches;
        EXPECT_LE(b.kernels.size() + b.runtime_calls.size() + b.ops.size() + b.annotations.size() +
                      b.memcpys.size() + b.devices.size(),
                  4u);
        kernels += b.kernels.size();
      },
      4);
  EXPECT_EQ(kernels, 6u);
  EXPECT_GE(batches, 6u);
}

TEST_F(ActivityFile, WriterCountsRecordsAcrossBatches) {
  ActivityFileWriter w(path("w.jsonl"));
  w.write(test::one_step());
  w.write(test::one_step());
  EXPECT_EQ(w.records(), 2 * 25);
  w.close();
  EXPECT_EQ(load_activity(path("w.jsonl")).kernels.size(), 12u);
}

TEST_F(ActivityFile, TruncatedFileIsNamed) {
  save_activity(test::one_step(), path("t.jsonl"));
  std::string text = slurp(path("t.jsonl"));
  spit(path("t.jsonl"), text.substr(0, text.rfind("{\"records\"")));  // cut the end line
  const std::string e = error_of(path("t.jsonl"));
  EXPECT_NE(e.find(path("t.jsonl")), std::string::npos) << e;
  EXPECT_NE(e.find("is truncated"), std::string::npos) << e;
}

TEST_F(ActivityFile, LineCutInTheMiddleIsNamed) {
  save_activity(test::one_step(), path("m.jsonl"));
  const std::string text = slurp(path("m.jsonl"));
  spit(path("m.jsonl"), text.substr(0, text.find("cudaStreamSynchronize") + 8));
  const std::string e = error_of(path("m.jsonl"));
  EXPECT_NE(e.find(path("m.jsonl") + " line "), std::string::npos) << e;
  EXPECT_NE(e.find("truncated or corrupted"), std::string::npos) << e;
}

TEST_F(ActivityFile, TruncatedGzipIsNamed) {
  save_activity(test::one_step(), path("t.jsonl.gz"));
  const std::string bytes = slurp(path("t.jsonl.gz"));
  spit(path("t.jsonl.gz"), bytes.substr(0, bytes.size() / 2));
  const std::string e = error_of(path("t.jsonl.gz"));
  EXPECT_NE(e.find(path("t.jsonl.gz")), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST_F(ActivityFile, CorruptedGzipIsNamed) {
  GpuActivity big;
  for (int i = 0; i < 2000; ++i)
    big.kernels.push_back(test::kernel(test::kSgemm, i * 10, i * 10 + 5, i));
  save_activity(big, path("c.jsonl.gz"));
  std::string bytes = slurp(path("c.jsonl.gz"));
  for (std::size_t i = bytes.size() / 3; i < bytes.size() / 3 + 64; ++i)
    bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  spit(path("c.jsonl.gz"), bytes);
  const std::string e = error_of(path("c.jsonl.gz"));
  EXPECT_NE(e.find(path("c.jsonl.gz")), std::string::npos) << e;
  EXPECT_EQ(e.find("no error"), std::string::npos);
}

TEST_F(ActivityFile, DeletedLineIsCaughtByTheEndCount) {
  save_activity(test::one_step(), path("d.jsonl"));
  std::string text = slurp(path("d.jsonl"));
  const std::size_t at = text.find("{\"block\"");  // the first kernel line
  text.erase(at, text.find('\n', at) - at + 1);
  spit(path("d.jsonl"), text);
  const std::string e = error_of(path("d.jsonl"));
  EXPECT_NE(e.find("the end line counts 25 records but the file holds 24"), std::string::npos) << e;
}

TEST_F(ActivityFile, ForeignFilesAreRejected) {
  spit(path("trace.json"), "{\"traceEvents\": []}\n");
  EXPECT_NE(error_of(path("trace.json")).find("is not a fathom activity file"), std::string::npos);
  EXPECT_FALSE(is_activity_file(path("trace.json")));
  spit(path("empty.jsonl"), "");
  EXPECT_NE(error_of(path("empty.jsonl")).find("is empty"), std::string::npos);
  EXPECT_NE(error_of(path("missing.jsonl")).find("cannot open " + path("missing.jsonl")),
            std::string::npos);
}

TEST_F(ActivityFile, OtherVersionIsNamed) {
  spit(path("v2.jsonl"),
       "{\"format\":\"fathom.gpu_activity\",\"version\":2}\n{\"type\":\"end\",\"records\":0}\n");
  EXPECT_TRUE(is_activity_file(path("v2.jsonl")));
  EXPECT_NE(
      error_of(path("v2.jsonl")).find("is activity file version 2; this fathom reads version 1"),
      std::string::npos);
}

TEST_F(ActivityFile, UnknownRecordTypeAndBadFieldsAreNamed) {
  spit(path("u.jsonl"),
       "{\"format\":\"fathom.gpu_activity\",\"version\":1}\n{\"type\":\"teapot\"}\n");
  EXPECT_NE(error_of(path("u.jsonl")).find("line 2: unknown record type 'teapot'"),
            std::string::npos)
      << error_of(path("u.jsonl"));
  spit(path("f.jsonl"),
       "{\"format\":\"fathom.gpu_activity\",\"version\":1}\n{\"type\":\"kernel\",\"name\":3}\n");
  EXPECT_NE(error_of(path("f.jsonl")).find("line 2: not a valid record"), std::string::npos)
      << error_of(path("f.jsonl"));
  spit(path("p.jsonl"),
       "{\"format\":\"fathom.gpu_activity\",\"version\":1}\n{\"type\":\"memset\",\"bytes\":1,"
       "\"device\":0,\"stream\":0,"
       "\"start_ns\":0,\"end_ns\":1,\"correlation_id\":0,\"external_id\":0,\"phase\":\"lunch\"}\n");
  EXPECT_NE(error_of(path("p.jsonl")).find("line 2: unknown phase 'lunch'"), std::string::npos)
      << error_of(path("p.jsonl"));
}

TEST_F(ActivityFile, IsActivityFile) {
  save_activity(test::one_step(), path("a.jsonl.gz"));
  EXPECT_TRUE(is_activity_file(path("a.jsonl.gz")));
  EXPECT_THROW((void)is_activity_file(path("nope")), Error);
}

}  // namespace
}  // namespace fathom
