#include "loader/signals_object.h"

#include <bpf/bpf.h>

#include <vector>

#include "signals.skel.h"

namespace faultline {

SignalsObject::SignalsObject(BpfSkeleton<fl_signals> skel) : skel_(std::move(skel)) {}
SignalsObject::SignalsObject(SignalsObject&&) noexcept = default;
SignalsObject& SignalsObject::operator=(SignalsObject&&) noexcept = default;
SignalsObject::~SignalsObject() = default;

Result<SignalsObject> SignalsObject::start() {
  auto skel = BpfSkeleton<fl_signals>::open("signals.bpf.c");
  if (!skel) return skel.error();
  FL_TRY(skel->load());
  FL_TRY(skel->attach());
  return SignalsObject(std::move(*skel));
}

fl_sig_counts SignalsObject::counts(uint32_t netns_ino) const {
  std::vector<fl_sig_counts> per(static_cast<size_t>(libbpf_num_possible_cpus()));
  fl_sig_counts sum{};
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.fl_sig_ns), &netns_ino, per.data()) != 0) return sum;
  for (const auto& c : per) {
    sum.retransmits += c.retransmits;
    sum.resets_sent += c.resets_sent;
    sum.resets_received += c.resets_received;
  }
  return sum;
}

}  // namespace faultline
