// E2eTest: set-up, the helpers tests share, and the leftover check after every test.
#include "e2e_fixture.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <regex>
#include <thread>

#include "loader/bpffs.h"
#include "selftests/lib/require_root.h"

#ifndef FAULTCTL_PATH
#error "FAULTCTL_PATH must name the faultctl binary (set by CMake)"
#endif
#ifndef TESTHOST_PATH
#error "TESTHOST_PATH must name the fl-testhost binary (set by CMake)"
#endif

namespace fle2e {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "\n  ") + x;
  return s;
}

}  // namespace

std::string attach_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", v);
  return buf;
}

nlohmann::json last_json(const std::string& text) {
  nlohmann::json found = nlohmann::json::object();
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    auto j = nlohmann::json::parse(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start),
                                   nullptr, false);
    if (j.is_object()) found = j;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return found;
}

void E2eTest::SetUp() {
  FL_REQUIRE_ROOT("network namespaces, BPF programs and qdiscs");
  ASSERT_EQ(::access(FAULTCTL_PATH, X_OK), 0) << "faultctl not built at " << FAULTCTL_PATH;
  ASSERT_EQ(::access(TESTHOST_PATH, X_OK), 0) << "fl-testhost not built at " << TESTHOST_PATH;
  const std::string pid = std::to_string(::getpid());
  bpffs_root_ = "/sys/fs/bpf/fltest-e2e-" + pid;
  ASSERT_TRUE(files_under(bpffs_root_).empty()) << bpffs_root_ << " already has pins from someone else";
  try {
    // IPv6 off: no router solicitations or MLD reports mixed into what a test counts.
    net_ = std::make_unique<fltest::NetnsPair>(
        "fle2e-" + pid, fltest::VethEnd{kDevA, {std::string(kAddrA) + "/24"}},
        fltest::VethEnd{kDevB, {std::string(kAddrB) + "/24", std::string(kAddrB2) + "/24"}},
        fltest::NetnsOptions{.ipv6 = false});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
}

void E2eTest::TearDown() {
  if (!net_) return;
  servers_.clear();  // SIGKILL and reap every server
  if (!HasFailure()) expect_nothing_left("at the end of the test");
  // Whatever a failed test left: end it through the kill switch, then drop any pin.
  if (!files_under(bpffs_root_).empty()) {
    auto r = faultctl({"abort", "--all"});
    if (!r.status.is(0)) ADD_FAILURE() << "clean-up: " << r.describe();
    auto left = files_under(bpffs_root_);
    for (auto it = left.rbegin(); it != left.rend(); ++it) {
      if (::unlink(it->c_str()) != 0) ::rmdir(it->c_str());
    }
    ::rmdir(bpffs_root_.c_str());
  }
  net_.reset();  // deleting the namespaces takes the veth, its qdiscs and TCX links with it
  faultline::remove_layout_locks({bpffs_root_});
}

std::vector<NetfaultProg> E2eTest::our_programs() const {
  return netfault_programs_in({fltest::Netns::inode_of(net_->a()), fltest::Netns::inode_of(net_->b())});
}

void E2eTest::expect_nothing_left(const std::string& when) {
  const uint64_t deadline = monotonic_ns() + 3'000'000'000ULL;
  std::vector<std::string> pins;
  std::vector<NetfaultProg> progs;
  bool clsact_a = false, clsact_b = false;
  for (;;) {
    pins = files_under(bpffs_root_);
    progs = our_programs();
    clsact_a = has_clsact(net_->a(), kDevA);
    clsact_b = has_clsact(net_->b(), kDevB);
    if ((pins.empty() && progs.empty() && !clsact_a && !clsact_b) || monotonic_ns() > deadline) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(pins.empty()) << when << ": pins remain under " << bpffs_root_ << ":\n  " << join(pins);
  EXPECT_TRUE(progs.empty()) << when
                             << ": netfault programs of the test namespaces are still loaded: " << describe(progs);
  EXPECT_FALSE(clsact_a) << when << ": a clsact qdisc remains on " << kDevA << ":\n" << qdiscs(net_->a(), kDevA);
  EXPECT_FALSE(clsact_b) << when << ": a clsact qdisc remains on " << kDevB << ":\n" << qdiscs(net_->b(), kDevB);
}

CommandResult E2eTest::faultctl(const std::vector<std::string>& args, Millis timeout) const {
  std::vector<std::string> argv = {FAULTCTL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, {.env = faultctl_env()}, timeout);
}

ChildProcess E2eTest::start_run(const std::string& kind, const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {FAULTCTL_PATH, "run", kind, "--netns", net_->a(), "--attach", attach(), "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildProcess::spawn(argv, {.env = faultctl_env()});
}

std::optional<nlohmann::json> E2eTest::started_line(ChildProcess& run) {
  auto line = run.wait_line(
      [](const std::string& l) {
        auto j = nlohmann::json::parse(l, nullptr, false);
        return j.is_object() && j.value("event", "") == "started";
      },
      15s);
  if (!line) {
    ADD_FAILURE() << "faultctl run never reported \"started\": " << run.describe();
    return std::nullopt;
  }
  return nlohmann::json::parse(*line);
}

std::optional<nlohmann::json> E2eTest::wait_started(ChildProcess& run) {
  auto started = started_line(run);
  if (!started) return std::nullopt;
  started_at_ = monotonic_ns();
  const nlohmann::json& j = *started;
  EXPECT_EQ(j.value("attach", ""), attach()) << j.dump();
  EXPECT_TRUE(attached_via_path()) << "after \"started\", the kernel lists on " << kDevA << ": "
                                   << ::testing::PrintToString(attached_netfault(net_->a(), kDevA));
  if (attach() == "tcx") {
    EXPECT_FALSE(has_clsact(net_->a(), kDevA)) << "the TCX path must not need a clsact qdisc";
  }
  return j;
}

bool E2eTest::attached_via_path() const {
  auto attached = attached_netfault(net_->a(), kDevA);
  return !attached.empty() && std::all_of(attached.begin(), attached.end(),
                                          [&](const std::string& a) { return a.rfind(attach() + " ", 0) == 0; });
}

std::optional<nlohmann::json> E2eTest::ended_event(ChildProcess& run) {
  size_t start = 0;
  const std::string& out = run.out();
  while (start < out.size()) {
    size_t nl = out.find('\n', start);
    auto j = nlohmann::json::parse(out.substr(start, nl == std::string::npos ? std::string::npos : nl - start), nullptr,
                                   false);
    if (j.is_object() && j.value("event", "") == "ended") return j;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return std::nullopt;
}

void E2eTest::start_server(const std::vector<std::string>& args, bool on_b) {
  std::vector<std::string> argv = {TESTHOST_PATH, "--netns", on_b ? net_->b() : net_->a()};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess p = ChildProcess::spawn(argv);
  if (!p.wait_line_starting("ready", 5s)) {
    ADD_FAILURE() << "fl-testhost server did not become ready: " << p.describe();
    return;
  }
  servers_.push_back(std::move(p));
}

ChildProcess E2eTest::spawn_testhost_on_a(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {TESTHOST_PATH, "--netns", net_->a()};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildProcess::spawn(argv);
}

ChildProcess E2eTest::spawn_testhost_on_b(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {TESTHOST_PATH, "--netns", net_->b()};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildProcess::spawn(argv);
}

CommandResult E2eTest::testhost_on_a(const std::vector<std::string>& args, Millis timeout) const {
  std::vector<std::string> argv = {TESTHOST_PATH, "--netns", net_->a()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, {}, timeout);
}

double E2eTest::ping_loss(const std::string& addr, int count, const std::string& interval) const {
  auto r = run_command({"ip", "netns", "exec", net_->a(), "ping", "-n", "-q", "-c", std::to_string(count), "-i",
                        interval, "-W", "1", addr},
                       {}, 60s);
  std::smatch m;
  static const std::regex summary(R"((\d+) packets transmitted, (\d+) received)");
  if (!std::regex_search(r.out, m, summary)) return -1;
  double tx = std::stod(m[1]), rx = std::stod(m[2]);
  return tx > 0 ? 100.0 * (tx - rx) / tx : -1;
}

}  // namespace fle2e
