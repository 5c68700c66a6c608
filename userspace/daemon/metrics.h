// faultd's /metrics: what the pinned state says right now (packet fault
// counters, drops by reason, map fill, syscall faults and guards), read at
// every scrape. faultd keeps no counters of its own.
#pragma once

#include <string>

namespace faultline {

class ProxyFaults;

// The whole exposition text (Prometheus text format 0.0.4); with proxies, their
// families too (faultline_proxy_...).
[[nodiscard]] std::string collect_metrics(const ProxyFaults* proxies = nullptr);

}  // namespace faultline
