// The userspace twin of the kernel's DNS learning (bpf/lib/dns_learn.bpf.h,
// fl_dns_ingress): the same parser core (bpf/lib/dns_parse.h) compiled for
// userspace, driven the way the program drives it. The libFuzzer target
// dns_answer runs it; the bpf tier checks that the kernel learns exactly what
// it returns. Header-only, so the fuzz build compiles it with its sanitizers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "bpf/lib/dns_parse.h"

namespace faultline {

struct DnsAnswerOutcome {
  bool question = false;                            // a response the parser takes, with its question read
  bool matched = false;                             // a watched name matches the question
  bool malformed = false;                           // matched, and the answer section was refused
  uint64_t qhash = 0;                               // the question name's hash (fl_dns_hash_text of it)
  std::vector<std::pair<uint64_t, uint8_t>> names;  // the watched names matched (hash, wild), at most 4
  std::vector<std::pair<fl_addr, uint32_t>> addrs;  // what would be learned, with the record's TTL
};

// msg: the UDP payload of a response from port 53. watched(hash, wild): whether
// the live generation watches that name.
inline DnsAnswerOutcome parse_dns_answer(const uint8_t* msg, size_t size,
                                         const std::function<bool(uint64_t, uint8_t)>& watched) {
  DnsAnswerOutcome out;
  auto s = std::make_unique<fl_dns_scratch>();
  std::memset(s.get(), 0, sizeof(*s));
  const size_t len = size > FL_DNS_BUF ? FL_DNS_BUF : size;
  if (len < 12) return out;
  std::memcpy(s->msg, msg, len);
  s->len = static_cast<__u32>(len);
  __u32 ancount = 0;
  const __u32 q = fl_dns_question(s.get(), &ancount);
  if (!q) return out;
  out.question = true;
  out.qhash = s->suffix[0];
  for (__u32 i = 0; i < s->qlabels && out.names.size() < FL_DNS_LEARN_SLOTS; ++i) {
    const uint8_t wild = i > 0 ? 1 : 0;
    if (watched(s->suffix[i], wild)) out.names.emplace_back(s->suffix[i], wild);
  }
  if (out.names.empty()) return out;
  out.matched = true;
  if (fl_dns_answers(s.get(), q, ancount) != 0) {
    out.malformed = true;
    return out;
  }
  for (__u32 i = 0; i < s->naddrs; ++i) out.addrs.emplace_back(s->addr[i], s->ttl[i]);
  return out;
}

}  // namespace faultline
