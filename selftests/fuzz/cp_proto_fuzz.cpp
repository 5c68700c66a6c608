// libFuzzer target: the agent wire format (cp/proto/agent_wire), faultcp's and
// faultd's decoding of protobuf bodies they do not trust. Every outcome is a
// JSON object or an error naming a field; no exception escapes, and what a
// decode accepts encodes and decodes again to the same object.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cp/proto/agent_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace faultline::cp::wire;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  struct Pair {
    Decoded (*decode)(std::string_view);
    std::string (*encode)(const nlohmann::json&);
  };
  static const Pair kPairs[] = {
      {decode_register, encode_register},       {decode_register_reply, encode_register_reply},
      {decode_next_reply, encode_next_reply},   {decode_event, encode_event},
      {decode_event_reply, encode_event_reply}, {decode_policy_report, encode_policy_report}};
  for (const auto& p : kPairs) {
    auto d = p.decode(bytes);
    if (auto* e = std::get_if<WireError>(&d)) {
      if (e->field.empty() || e->message.empty()) std::abort();
      continue;
    }
    const auto& j = std::get<nlohmann::json>(d);
    if (!j.is_object()) std::abort();
    auto again = p.decode(p.encode(j));
    if (!std::holds_alternative<nlohmann::json>(again) || std::get<nlohmann::json>(again) != j) std::abort();
  }
  (void)is_protobuf_type(bytes);
  (void)accepts_protobuf(bytes);
  return 0;
}
