// Records of packet faults: the same steady state, fingerprint and verdict around the
// BPF engine, with the service in one namespace and the fault in the other.
#include <unistd.h>

#include <functional>

#include "resource_env.h"
#include "selftests/lib/netns_pair.h"

namespace flres {
namespace {

class PacketRecord : public ResourceTest {
 protected:
  void SetUp() override {
    ResourceTest::SetUp();
    if (IsSkipped()) return;
    const std::string veth = std::to_string(::getpid() % 100000);
    net_.emplace(unique("rec"), fltest::VethEnd{"flra" + veth, {std::string(kAddrA) + "/24"}},
                 fltest::VethEnd{"flrb" + veth, {std::string(kAddrB) + "/24"}});
    svc_.emplace([] { return HttpServer::Reply{200, 2}; }, kAddrB, "/run/netns/" + net_->b());
    record_ = dir_ + "/record";
  }
  void TearDown() override {
    svc_.reset();
    net_.reset();
    if (!bpffs_root_.empty()) {
      EXPECT_FALSE(path_exists(bpffs_root_)) << "the packet fault left pins behind in " << bpffs_root_;
    }
    ResourceTest::TearDown();
  }
  std::vector<std::string> loss_to(const std::string& target) {
    return {"run",
            "loss",
            "--netns",
            net_->a(),
            "--target",
            target,
            "--percent",
            "100",
            "--duration",
            "3s",
            "--health-url",
            svc_->url(),
            "--interval",
            "500ms",
            "--health-max-latency",
            "500ms",
            "--hypothesis",
            "the service stays reachable",
            "--steady-state",
            "2s",
            "--record",
            record_,
            "--slo",
            "success>=99%",
            "--json"};
  }
  nlohmann::json verdict() const { return nlohmann::json::parse(read_file(record_ + "/verdict.json")); }
  std::optional<fltest::NetnsPair> net_;
  std::optional<HttpServer> svc_;
  std::string record_;
};

// A fault on an address nobody sends to matched nothing: the guardrail held, but
// the fault had no part in it, so the verdict is untested, not held.
TEST_F(PacketRecord, UntestedWhenTheFaultMissesTheService) {
  auto o = run(loss_to("198.19.213.99"));
  ASSERT_EQ(o.status.code, 0) << o.describe();
  auto v = verdict();
  EXPECT_EQ(v["verdict"], "untested") << v.dump(2);
  EXPECT_NE(v.value("untested", "").find("matched no packet"), std::string::npos) << v.dump(2);
  EXPECT_NE(o.err.find("WARNING: UNTESTED"), std::string::npos) << o.describe();
  EXPECT_GE(v["phases"]["fault"]["samples"].get<int>(), 4);
  EXPECT_DOUBLE_EQ(v["phases"]["fault"]["success_percent"].get<double>(), 100);
  auto h = nlohmann::json::parse(read_file(record_ + "/hypothesis.json"));
  EXPECT_EQ(h["fault"].value("kind", ""), "loss") << h.dump(2);
  EXPECT_FALSE(h["fault"].value("mechanism", "").empty()) << "the plan, as resolved, is part of the fingerprinted text";
  EXPECT_EQ(run({"report", "--verify", record_}).status.code, 0);
}

TEST_F(PacketRecord, GuardrailAbortWhenTheServiceIsCutOff) {
  auto o = run(loss_to(kAddrB));
  ASSERT_EQ(o.status.code, 7) << o.describe();
  auto v = verdict();
  EXPECT_EQ(v["verdict"], "aborted") << v.dump(2);
  EXPECT_EQ(v["outcome"], "guardrail");
  EXPECT_LT(v["phases"]["fault"]["success_percent"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(v["phases"]["steady"]["success_percent"].get<double>(), 100);
  EXPECT_TRUE(v["recovered"].get<bool>()) << "the service answers again once the fault is gone";
  auto rep = run({"report", record_});
  EXPECT_NE(rep.out.find("ABORTED"), std::string::npos) << rep.out;
}

}  // namespace
}  // namespace flres
