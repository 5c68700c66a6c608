// Leaf certificates per server name, minted by the local CA on first use and
// kept in a bounded LRU: a cached leaf costs a map lookup, a new one a key
// generation and a signature (bench/tls_mint_bench.cpp measures both).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "userspace/proxy/tls_ca.h"

namespace faultline {

struct LeafCacheOptions {
  size_t capacity = 1024;  // leaves kept; the least recently used goes first
  // A cached leaf closer than this to its notAfter is minted again, so a
  // connection never gets a leaf that expires while it runs.
  std::chrono::seconds renew_before{std::chrono::hours(1)};
};

struct LeafCacheStats {
  uint64_t hits = 0;
  uint64_t mints = 0;
  uint64_t evictions = 0;
  size_t size = 0;
};

// Thread-safe: relay workers share one cache. Minting happens under the lock,
// so two connections to a new name mint once.
class LeafCache {
 public:
  LeafCache(std::shared_ptr<const CertificateAuthority> ca, LeafCacheOptions options = {});

  // The leaf for host (case-insensitive), minted if absent or near its end.
  [[nodiscard]] Result<std::shared_ptr<const LeafCertificate>> get(std::string_view host);
  [[nodiscard]] LeafCacheStats stats() const;
  [[nodiscard]] const CertificateAuthority& ca() const { return *ca_; }

 private:
  struct Entry {
    std::shared_ptr<const LeafCertificate> leaf;
    std::list<std::string>::iterator lru;  // position in lru_ (front: most recent)
  };

  std::shared_ptr<const CertificateAuthority> ca_;
  LeafCacheOptions options_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;
  std::unordered_map<std::string, Entry> entries_;
  LeafCacheStats stats_;
};

}  // namespace faultline
