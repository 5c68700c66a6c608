// The leaf LRU: an unordered_map for the lookup, a list for the order.
#include "userspace/proxy/tls_leaf_cache.h"

namespace faultline {

LeafCache::LeafCache(std::shared_ptr<const CertificateAuthority> ca, LeafCacheOptions options)
    : ca_(std::move(ca)), options_(options) {
  if (options_.capacity == 0) options_.capacity = 1;
}

Result<std::shared_ptr<const LeafCertificate>> LeafCache::get(std::string_view host_in) {
  std::string host(host_in);
  for (char& c : host) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  std::lock_guard lock(mu_);
  const auto now = std::chrono::system_clock::now();
  if (auto it = entries_.find(host); it != entries_.end()) {
    if (it->second.leaf->not_after() - options_.renew_before > now) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      ++stats_.hits;
      return it->second.leaf;
    }
    lru_.erase(it->second.lru);
    entries_.erase(it);
  }
  auto leaf = ca_->mint_leaf(host);
  if (!leaf) return leaf.error();
  ++stats_.mints;
  while (entries_.size() >= options_.capacity) {
    entries_.erase(lru_.back());
    lru_.pop_back();
    ++stats_.evictions;
  }
  lru_.push_front(host);
  entries_.emplace(host, Entry{*leaf, lru_.begin()});
  return leaf;
}

LeafCacheStats LeafCache::stats() const {
  std::lock_guard lock(mu_);
  LeafCacheStats s = stats_;
  s.size = entries_.size();
  return s;
}

}  // namespace faultline
