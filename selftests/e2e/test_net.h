// Two test hosts: network namespaces joined by a veth pair, addresses from the
// benchmarking range 198.18.0.0/15 that exist only inside them.
#pragma once

#include <cstdint>
#include <string>

namespace fle2e {

class TestNet {
 public:
  // Host a (the client, where faults are applied) and host b (the servers).
  static constexpr const char* kAddrA = "198.18.0.1";
  static constexpr const char* kAddrB = "198.18.0.2";
  static constexpr const char* kAddrB2 = "198.18.0.3";  // b's neighbour address, never targeted
  static constexpr const char* kDevA = "fla";
  static constexpr const char* kDevB = "flb";

  // Creates "<prefix>-a" and "<prefix>-b". Throws std::runtime_error naming the
  // command that failed (after undoing what it made).
  explicit TestNet(const std::string& prefix);
  ~TestNet();
  TestNet(const TestNet&) = delete;
  TestNet& operator=(const TestNet&) = delete;

  [[nodiscard]] const std::string& a() const { return a_; }
  [[nodiscard]] const std::string& b() const { return b_; }
  // The nsfs inode of a namespace: what Faultline keys its programs and faults by.
  [[nodiscard]] static uint32_t inode(const std::string& netns);

 private:
  void destroy();
  std::string a_;
  std::string b_;
};

}  // namespace fle2e
