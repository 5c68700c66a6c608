// The agent routes' protobuf-lite wire format (cp/proto/agent.proto) and the
// JSON objects faultcp's routes and faultd's agent already work on: a decode
// gives the JSON object the JSON wire would have carried (so one set of field
// checks serves both), an encode takes it.
//
// Its own small library (faultline_cp_proto), under both faultcp (cp/) and
// faultd's agent (userspace/daemon): it includes base and itself only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

namespace faultline::cp::wire {

inline constexpr std::string_view kProtobufType = "application/x-protobuf";

// Why bytes are not the message: the field at fault ("hostname",
// "experiment.spec_json"; "body" when the bytes as a whole are wrong).
struct WireError {
  std::string field;
  std::string message;
};
using Decoded = std::variant<nlohmann::json, WireError>;

// Strict: a truncated message, a field of the wrong wire type, an unknown field
// number, invalid UTF-8 in a string or a *_json field that is not a JSON object
// is a WireError. Fields left at their default are left out of the object.
[[nodiscard]] Decoded decode_register(std::string_view bytes);        // -> {hostname, ..., features}
[[nodiscard]] Decoded decode_register_reply(std::string_view bytes);  // -> {agent_id, token}
[[nodiscard]] Decoded decode_next_reply(std::string_view bytes);      // -> {experiment | null, stop, kill}
[[nodiscard]] Decoded decode_event(std::string_view bytes);           // -> {experiment_id, type, detail, record}
[[nodiscard]] Decoded decode_event_reply(std::string_view bytes);     // -> {id, status, detail}
[[nodiscard]] Decoded decode_policy_report(std::string_view bytes);   // -> {version, status, running_version, detail}

// Members of the wrong JSON type are left out (the decoder's checks, or the
// route's, then name them).
[[nodiscard]] std::string encode_register(const nlohmann::json& j);
[[nodiscard]] std::string encode_register_reply(const nlohmann::json& j);
[[nodiscard]] std::string encode_next_reply(const nlohmann::json& j);
[[nodiscard]] std::string encode_event(const nlohmann::json& j);
[[nodiscard]] std::string encode_event_reply(const nlohmann::json& j);
[[nodiscard]] std::string encode_policy_report(const nlohmann::json& j);

// Content-Type names protobuf (parameters ignored); Accept lists it.
[[nodiscard]] bool is_protobuf_type(std::string_view content_type);
[[nodiscard]] bool accepts_protobuf(std::string_view accept);

}  // namespace faultline::cp::wire
