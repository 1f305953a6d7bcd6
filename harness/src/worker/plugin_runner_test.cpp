// What a plugin's child process sends back is decoded defensively (plugin_runner.h, decode_run):
// regression inputs found by fuzz/plugin_wire_fuzz.cpp. No LibTorch.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "kvconform/plugin_runner.h"

namespace kvc::plugin {
namespace {

std::string u64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof v); }
std::string str(const std::string& s) { return u64(s.size()) + s; }
const std::string kHello = "H" + str("ring_buffer") + str("a ring buffer") + u64(1) + u64(1);

TEST(DecodeTrace, WellFormedStream) {
  PluginRun t;
  decode_run(kHello + "R" + u64(0) + str("") + u64(4) + u64(0) + str("ab") + str("cd") + str("") + "Z", t);
  EXPECT_EQ(t.end, PluginRun::End::Completed);
  EXPECT_EQ(t.name, "ring_buffer");
  ASSERT_EQ(t.results.size(), 1u);
  EXPECT_EQ(t.results[0].a, 4);
  EXPECT_EQ(t.results[0].out1, std::vector<uint8_t>({'a', 'b'}));
}

// A plugin's optional layouts arrive in a record of their own after its hello; a stream without one
// (a plugin that declares none, or one built before the field) has none.
TEST(DecodeTrace, LayoutsRecordListsTheDeclaredLayouts) {
  PluginRun with, without;
  decode_run(kHello + "L" + str("sinks,,other") + "Z", with);
  EXPECT_EQ(with.end, PluginRun::End::Completed);
  EXPECT_EQ(with.layouts, std::vector<std::string>({"sinks", "other"}));
  decode_run(kHello + "Z", without);
  EXPECT_TRUE(without.layouts.empty());
}

// The fuzzer's first find (214 bytes): lengths of 2^64 - 1 wrapped `at + n`, each field rewound one
// byte and re-read the rest, and one result came back holding more bytes than the stream had.
TEST(DecodeTrace, LengthThatWrapsIsCorruptNotARewind) {
  const std::string data = kHello + "R" + u64(0) + str("") + u64(0x4800000000000001ULL) + u64(~0ULL) + std::string(120, '\xff') +
                           std::string("\x0b\0\0\0", 4);
  ASSERT_EQ(data.size(), 214u);
  PluginRun t;
  decode_run(data, t);
  EXPECT_EQ(t.end, PluginRun::End::Exited);
  EXPECT_TRUE(t.results.empty());
}

// A length that wraps onto the record's own tag made the decoder loop forever, appending results.
TEST(DecodeTrace, LengthThatWrapsOntoItsRecordEnds) {
  const std::string head = kHello + "R" + u64(0) + str("") + u64(0) + u64(0) + str("") + str("");
  const uint64_t record = kHello.size();          // where the 'R' is
  const uint64_t after_length = head.size() + 8;  // where the guard string would start
  const std::string data = head + u64(record - after_length) + "Z";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // a hang would be the test's: bound it
    alarm(10);
    PluginRun t;
    decode_run(data, t);
    _exit(t.results.empty() && t.end == PluginRun::End::Exited ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the decoder did not return (killed by signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace kvc::plugin
