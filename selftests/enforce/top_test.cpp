// faultctl top --once --json: destinations with their connects and bytes, for the
// whole host and for one cgroup (where traffic from outside it must not show).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "enforce_env.h"

namespace flenf {
namespace {

class TopTest : public EnforceTest {};

void send_udp(uint16_t port, size_t size) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string p(size, 't');
  (void)::sendto(fd, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
  ::close(fd);
}

void tcp_exchange(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0) {
    const char req[] = "GET / HTTP/1.0\r\n\r\n";
    (void)::send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
    char buf[256];
    while (::recv(fd, buf, sizeof(buf), 0) > 0) {
    }
  }
  ::close(fd);
}

// Runs top while `traffic` runs every 50 ms; returns its parsed JSON.
template <typename Traffic>
nlohmann::json top_while(const std::vector<std::string>& extra, Traffic traffic) {
  std::vector<std::string> argv = {kFaultctl, "top", "--once", "--json", "--interval", "1s"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  ChildProcess top = spawn(argv);
  std::optional<ExitStatus> e;
  for (int i = 0; i < 400 && !e; ++i) {
    traffic();
    e = top.wait(50ms);
  }
  EXPECT_TRUE(e && e->is(0)) << top.describe();
  auto j = nlohmann::json::parse(top.out(), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << top.describe();
  return j.is_discarded() ? nlohmann::json::object() : j;
}

const nlohmann::json* flow(const nlohmann::json& top, const std::string& dest, const std::string& proto) {
  if (!top.contains("flows")) return nullptr;
  for (const auto& f : top["flows"])
    if (f.value("destination", "") == dest && f.value("proto", "") == proto) return &f;
  return nullptr;
}

TEST_F(TopTest, TopShowsHostDestinationsWithBytes) {
  TcpServer http(false, /*http=*/true);
  UdpReceiver udp;
  auto j = top_while({}, [&] {
    tcp_exchange(http.port());
    send_udp(udp.port(), 700);
  });
  EXPECT_EQ(j.value("scope", ""), "host");
  const auto* t = flow(j, "127.0.0.1:" + std::to_string(http.port()), "tcp");
  ASSERT_NE(t, nullptr) << j.dump(1);
  EXPECT_GT(t->value("connects", 0), 0) << t->dump();
  EXPECT_GT(t->value("bytes_out", 0), 0) << t->dump();
  EXPECT_GT(t->value("bytes_in", 0), 0) << "the reply must count as received: " << t->dump();
  const auto* u = flow(j, "127.0.0.1:" + std::to_string(udp.port()), "udp");
  ASSERT_NE(u, nullptr) << j.dump(1);
  EXPECT_GE(u->value("bytes_out", 0), 728) << u->dump();
  EXPECT_EQ(u->value("bytes_out", 0) % 728, 0) << "whole 700-byte datagrams (IP bytes): " << u->dump();
}

TEST_F(TopTest, TopForOneCgroupCountsOnlyItsMembers) {
  TestCgroup cg(unique_name("top"));
  UdpReceiver inside_dest, outside_dest;
  // A sender in the cgroup for the whole run; this process (outside) sends too.
  ChildProcess sender = spawn({kProbe, "udpflood", "127.0.0.1", std::to_string(inside_dest.port()), "300", "20000"},
                              {.cgroup = cg.path()});
  auto j = top_while({"--cgroup", cg.relative()}, [&] { send_udp(outside_dest.port(), 300); });
  sender.stop();
  EXPECT_EQ(j.value("scope", ""), cg.relative());
  const auto* in = flow(j, "127.0.0.1:" + std::to_string(inside_dest.port()), "udp");
  ASSERT_NE(in, nullptr) << j.dump(1);
  EXPECT_GT(in->value("bytes_out", 0), 0);
  EXPECT_GT(in->value("packets_out", 0), 0);
  EXPECT_EQ(flow(j, "127.0.0.1:" + std::to_string(outside_dest.port()), "udp"), nullptr)
      << "traffic from outside the cgroup was counted: " << j.dump(1);
  EXPECT_GT(outside_dest.datagrams(), 0);
}

}  // namespace
}  // namespace flenf
