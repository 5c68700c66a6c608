#include "loader/signals_object.h"

#include "loader/map_ops.h"
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
  auto sum = sum_percpu<fl_sig_counts>(bpf_map__fd(skel_->maps.fl_sig_ns), netns_ino,
                                       [](fl_sig_counts& t, const fl_sig_counts& c) {
                                         t.retransmits += c.retransmits;
                                         t.resets_sent += c.resets_sent;
                                         t.resets_received += c.resets_received;
                                       });
  return sum.value_or(fl_sig_counts{});  // no entry before the namespace's first event
}

}  // namespace faultline
