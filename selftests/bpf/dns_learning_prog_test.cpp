// Host rules learned from DNS answers (bpf/lib/dns_learn.bpf.h): the applied
// instance's fl_dns_ingress run with BPF_PROG_TEST_RUN on crafted responses.
// What it learns (A, AAAA, a CNAME chain, compression, a wildcard, the TTL
// clamp), what it must not (a question no rule watches, malformed answers),
// and the seed corpus of the dns_answer fuzz target run through both the
// kernel program and the userspace twin, which must agree on every message.
#include <arpa/inet.h>
#include <bpf/bpf.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "loader/applied_policy.h"
#include "loader/sockaddr_object.h"
#include "selftests/bpf/packet_builder.h"
#include "selftests/lib/require_root.h"
#include "userspace/policy/dns_answer_twin.h"

namespace faultline::bpftest {
namespace {

// A small DNS response writer: names in full or as pointers.
struct DnsMsg {
  std::vector<uint8_t> b;
  explicit DnsMsg(uint16_t ancount, uint16_t flags = 0x8180) {
    put16(0x4242);
    put16(flags);
    put16(1);
    put16(ancount);
    put16(0);
    put16(0);
  }
  void put16(uint32_t v) {
    b.push_back(static_cast<uint8_t>(v >> 8));
    b.push_back(static_cast<uint8_t>(v));
  }
  void put32(uint32_t v) {
    put16(v >> 16);
    put16(v & 0xffff);
  }
  size_t name(const std::string& n) {
    const size_t at = b.size();
    auto w = dns_wire_name(n);
    b.insert(b.end(), w.begin(), w.end());
    return at;
  }
  void ptr(size_t off) { put16(0xC000 | static_cast<uint32_t>(off)); }
  DnsMsg& question(const std::string& n, uint16_t type = 1) {
    name(n);
    put16(type);
    put16(1);
    return *this;
  }
  // A record whose owner is a pointer to off.
  void rr_at(size_t owner, uint16_t type, uint32_t ttl, const std::vector<uint8_t>& rdata) {
    ptr(owner);
    put16(type);
    put16(1);
    put32(ttl);
    put16(static_cast<uint32_t>(rdata.size()));
    b.insert(b.end(), rdata.begin(), rdata.end());
  }
};

std::vector<uint8_t> v4(const char* a) {
  in_addr x{};
  ::inet_pton(AF_INET, a, &x);
  const auto* p = reinterpret_cast<const uint8_t*>(&x);
  return {p, p + 4};
}

std::vector<uint8_t> v6(const char* a) {
  in6_addr x{};
  ::inet_pton(AF_INET6, a, &x);
  return {x.s6_addr, x.s6_addr + 16};
}

std::string text_of(const fl_addr& a) {
  char buf[INET6_ADDRSTRLEN];
  bool mapped = std::all_of(a.b, a.b + 10, [](uint8_t c) { return c == 0; }) && a.b[10] == 0xff && a.b[11] == 0xff;
  if (mapped) return ::inet_ntop(AF_INET, &a.b[12], buf, sizeof(buf));
  return ::inet_ntop(AF_INET6, a.b, buf, sizeof(buf));
}

class DnsLearningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FL_REQUIRE_ROOT("loads the sockaddr programs");
    LIBBPF_OPTS(bpf_map_create_opts, o);
    gen_.reset(bpf_map_create(BPF_MAP_TYPE_ARRAY, "fl_sa_gen", 4, 4, 1, &o));
    ASSERT_TRUE(gen_) << std::strerror(errno);
    auto obj = SockaddrObject::load_applied(gen_.get());
    ASSERT_TRUE(obj) << obj.error().message;
    obj_.emplace(std::move(*obj));
    fl_sa_policy p{};
    p.armed = 1;
    p.expires_ns = FL_SA_NO_EXPIRY;
    p.flags = FL_SA_POLICY | FL_SA_HAS_HOSTS;
    uint32_t g = 0;
    ASSERT_EQ(bpf_map_update_elem(obj_->gpolicy_fd(), &g, &p, BPF_ANY), 0) << std::strerror(errno);
  }

  void watch(const std::string& host, uint32_t ttl_min = 30, uint32_t ttl_max = 3600, uint32_t gen = 0) {
    const bool wild = host.starts_with("*.");
    const std::string bare = wild ? host.substr(2) : host;
    fl_dns_watch_key k{};
    k.hash = fl_dns_hash_text(bare.data(), bare.size());
    k.gen = gen;
    k.wild = wild;
    fl_dns_watch w{};
    w.allow.n = 1;
    w.allow.r[0].id = 7;
    w.ttl_min = ttl_min;
    w.ttl_max = ttl_max;
    ASSERT_EQ(bpf_map_update_elem(obj_->dns_watch_fd(), &k, &w, BPF_ANY), 0) << std::strerror(errno);
    watched_.insert({k.hash, k.wild});
  }

  void run(const std::vector<uint8_t>& msg, bool v6src = false, uint16_t sport = 53) {
    Packet pkt = PacketBuilder(v6src ? "fd00::53" : "10.0.0.53", v6src ? "fd00::2" : "10.0.0.2")
                     .udp(sport, 40000)
                     .payload(msg)
                     .build();
    std::vector<uint8_t> out(pkt.bytes.size() + 256);
    LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt.bytes.data(), .data_out = out.data(),
                .data_size_in = static_cast<uint32_t>(pkt.bytes.size()),
                .data_size_out = static_cast<uint32_t>(out.size()), .repeat = 1);
    ASSERT_EQ(bpf_prog_test_run_opts(obj_->dns_ingress_fd(), &o), 0) << std::strerror(errno);
    EXPECT_EQ(o.retval, 1u) << "the learning program never drops";
  }

  // Learned address -> seconds left of its longest-lived name.
  std::map<std::string, double> learned() const {
    std::map<std::string, double> out;
    fl_addr key{}, next{};
    const void* prev = nullptr;
    const uint64_t now = boottime_ns();
    while (bpf_map_get_next_key(obj_->dns_learn_fd(), prev, &next) == 0) {
      fl_dns_learned l{};
      if (bpf_map_lookup_elem(obj_->dns_learn_fd(), &next, &l) == 0) {
        uint64_t exp = 0;
        for (const auto& s : l.n) exp = std::max<uint64_t>(exp, s.expires_ns);
        out[text_of(next)] = exp > now ? static_cast<double>(exp - now) / 1e9 : 0;
      }
      key = next;
      prev = &key;
    }
    return out;
  }

  void forget_learned() const {
    fl_addr k{};
    while (bpf_map_get_next_key(obj_->dns_learn_fd(), nullptr, &k) == 0)
      ASSERT_EQ(bpf_map_delete_elem(obj_->dns_learn_fd(), &k), 0);
  }

  void forget_watched() {
    fl_dns_watch_key k{};
    while (bpf_map_get_next_key(obj_->dns_watch_fd(), nullptr, &k) == 0)
      ASSERT_EQ(bpf_map_delete_elem(obj_->dns_watch_fd(), &k), 0);
    watched_.clear();
  }

  std::set<std::string> addrs() const {
    std::set<std::string> out;
    for (const auto& [a, t] : learned()) out.insert(a);
    return out;
  }

  UniqueFd gen_;
  std::optional<SockaddrObject> obj_;
  std::set<std::pair<uint64_t, uint8_t>> watched_;
};

TEST_F(DnsLearningTest, LearnsAandAAAAOfAWatchedName) {
  watch("ok.example.test");
  DnsMsg a(2);
  a.question("ok.example.test");
  a.rr_at(12, 1, 300, v4("192.0.2.10"));
  a.rr_at(12, 1, 300, v4("192.0.2.11"));
  run(a.b);
  DnsMsg aaaa(1);
  aaaa.question("ok.example.test", 28);
  aaaa.rr_at(12, 28, 300, v6("2001:db8::10"));
  run(aaaa.b, true);
  EXPECT_EQ(addrs(), (std::set<std::string>{"192.0.2.10", "192.0.2.11", "2001:db8::10"}));
}

TEST_F(DnsLearningTest, UppercaseQuestionMatchesAndOtherPortsAreIgnored) {
  watch("ok.example.test");
  DnsMsg a(1);
  a.question("OK.Example.TEST");
  a.rr_at(12, 1, 300, v4("192.0.2.12"));
  run(a.b, false, 5353);
  EXPECT_TRUE(addrs().empty()) << "a response from a port other than 53 is not DNS to us";
  run(a.b);
  EXPECT_EQ(addrs(), (std::set<std::string>{"192.0.2.12"}));
}

TEST_F(DnsLearningTest, FollowsACnameChainThroughCompressedNames) {
  watch("www.example.test");
  DnsMsg m(4);
  m.question("www.example.test");
  // www CNAME edge.cdn.test
  m.ptr(12);
  m.put16(5);
  m.put16(1);
  m.put32(300);
  auto edge = dns_wire_name("edge.cdn.test");
  m.put16(static_cast<uint32_t>(edge.size()));
  const size_t edge_at = m.name("edge.cdn.test");
  // edge.cdn.test CNAME e1.<cdn.test>, with the owner and the suffix compressed
  m.ptr(edge_at);
  m.put16(5);
  m.put16(1);
  m.put32(300);
  m.put16(5);
  const size_t e1_at = m.b.size();
  m.b.insert(m.b.end(), {2, 'e', '1'});
  m.ptr(edge_at + 5);
  // a record of a name outside the chain, then the chain's end
  m.rr_at(edge_at + 5, 1, 300, v4("192.0.2.99"));
  m.rr_at(e1_at, 1, 300, v4("192.0.2.20"));
  run(m.b);
  EXPECT_EQ(addrs(), (std::set<std::string>{"192.0.2.20"}));
}

TEST_F(DnsLearningTest, WildcardMatchesNamesBelowTheSuffixOnly) {
  watch("*.example.test");
  for (const auto& [q, addr] : std::vector<std::pair<std::string, const char*>>{{"api.example.test", "192.0.2.30"},
                                                                                {"a.b.example.test", "192.0.2.31"},
                                                                                {"example.test", "192.0.2.32"},
                                                                                {"badexample.test", "192.0.2.33"}}) {
    DnsMsg m(1);
    m.question(q);
    m.rr_at(12, 1, 300, v4(addr));
    run(m.b);
  }
  EXPECT_EQ(addrs(), (std::set<std::string>{"192.0.2.30", "192.0.2.31"}));
}

TEST_F(DnsLearningTest, QuestionNoRuleWatchesTeachesNothing) {
  watch("ok.example.test");
  watch("ok.example.test", 30, 3600, 1);  // the idle generation's name: not live
  forget_watched();
  watch("other.example.test", 30, 3600, 1);
  DnsMsg m(1);
  m.question("ok.example.test");
  m.rr_at(12, 1, 300, v4("192.0.2.40"));
  run(m.b);
  DnsMsg o(1);
  o.question("other.example.test");
  o.rr_at(12, 1, 300, v4("192.0.2.41"));
  run(o.b);
  EXPECT_TRUE(addrs().empty()) << "only the live generation's names are watched";
}

TEST_F(DnsLearningTest, TtlIsClampedToTheScopeBounds) {
  watch("ok.example.test", 60, 600);
  for (const auto& [addr, ttl] : std::vector<std::pair<const char*, uint32_t>>{
           {"192.0.2.50", 0}, {"192.0.2.51", 300}, {"192.0.2.52", 86400}, {"192.0.2.53", 0x80000000u}}) {
    DnsMsg m(1);
    m.question("ok.example.test");
    m.rr_at(12, 1, ttl, v4(addr));
    run(m.b);
  }
  auto l = learned();
  ASSERT_EQ(l.size(), 4u);
  EXPECT_NEAR(l["192.0.2.50"], 60, 2) << "TTL 0 is raised to dns_ttl_min";
  EXPECT_NEAR(l["192.0.2.51"], 300, 2);
  EXPECT_NEAR(l["192.0.2.52"], 600, 2) << "a day is cut to dns_ttl_max";
  EXPECT_NEAR(l["192.0.2.53"], 60, 2) << "a TTL with the top bit set counts as 0 (RFC 2181)";
}

// The seed corpus through the kernel program and the twin: the same
// addresses (with the same TTLs) or none, for every message; and the
// malformed ones ("bad-*") teach nothing.
TEST_F(DnsLearningTest, KernelAndTwinAgreeOnTheFuzzCorpus) {
  const std::filesystem::path dir = std::filesystem::path(FAULTLINE_SOURCE_DIR) / "selftests/fuzz/corpus/dns_answer";
  size_t files = 0, learning = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<uint8_t> msg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string name = e.path().filename();
    // Watch the question's name (as the twin reads it) and its wildcard
    // suffixes, so every message with a question is walked.
    auto all = parse_dns_answer(msg.data(), msg.size(), [](uint64_t, uint8_t) { return true; });
    forget_watched();
    forget_learned();
    for (const auto& [h, wild] : all.names) {
      fl_dns_watch_key k{};
      k.hash = h;
      k.wild = wild;
      fl_dns_watch w{};
      w.ttl_min = 1;
      w.ttl_max = 0x7fffffff;
      ASSERT_EQ(bpf_map_update_elem(obj_->dns_watch_fd(), &k, &w, BPF_ANY), 0);
    }
    run(msg);
    std::set<std::string> twin;
    for (const auto& [a, ttl] : all.addrs) twin.insert(text_of(a));
    EXPECT_EQ(addrs(), twin) << name << ": the kernel and the twin disagree";
    if (name.starts_with("bad-")) {
      EXPECT_TRUE(twin.empty()) << name << ": a malformed answer taught an address";
    }
    ++files;
    learning += !twin.empty();
  }
  EXPECT_GE(files, 30u);
  EXPECT_GE(learning, 10u);
}

}  // namespace
}  // namespace faultline::bpftest
