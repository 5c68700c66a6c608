// An owned libbpf link: destroyed (detached) exactly once.
#pragma once

#include <bpf/libbpf.h>

#include <memory>

namespace faultline {

struct BpfLinkDestroy {
  void operator()(bpf_link* l) const { bpf_link__destroy(l); }
};
using BpfLink = std::unique_ptr<bpf_link, BpfLinkDestroy>;

}  // namespace faultline
