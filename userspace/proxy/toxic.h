// Toxics: TCP stream faults with Toxiproxy's names, attributes and units, and their
// JSON in Toxiproxy's shape ({"name","type","stream","toxicity","attributes":{...}}).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "base/result.h"

namespace faultline {

// upstream: client -> server; downstream: server -> client (Toxiproxy's words).
enum class Stream : uint8_t { upstream, downstream };

[[nodiscard]] std::string_view stream_name(Stream s);

// Each toxic's attributes under Toxiproxy's JSON names; the member names carry the
// unit. Integers, as Toxiproxy's (int64 attributes; a fraction is a 400 there too).
// Any int64 is accepted, as Toxiproxy does; the relay reads a negative value as
// 0 and caps durations (plan_direction), so no value can wrap a clock.
//
// Faultline's extensions (docs/proxy.md, "Extensions") are off unless asked:
// "first_n" on every type but noop, and the types limit_time and slow_open.
// They are shown in the JSON only when set, so a Toxiproxy client sees
// Toxiproxy's shapes; unlike Toxiproxy's attributes they are judged (a negative
// value is a 400 naming the attribute).
//
// first_n (0 = off): the toxic applies only to the first N connections
// accepted after it was added (its toxicity drawn first), then lets every
// later connection through; connections open when it was added are not
// counted and never meet it.
struct LatencyToxic {      // "latency": every chunk waits latency +- jitter from its arrival
  int64_t latency_ms = 0;  // "latency"
  int64_t jitter_ms = 0;   // "jitter"
  int64_t first_n = 0;     // "first_n" (extension)
};
struct BandwidthToxic {   // "bandwidth": at most rate KB/s (KB = 1000 bytes); 0 = no limit
  int64_t rate_kbps = 0;  // "rate"
  int64_t first_n = 0;
};
struct SlowCloseToxic {  // "slow_close": the close (EOF) reaches the other side delay later
  int64_t delay_ms = 0;  // "delay"
  int64_t first_n = 0;
};
struct TimeoutToxic {      // "timeout": nothing passes; the connection closes after timeout
  int64_t timeout_ms = 0;  // "timeout"; 0 = hold the data until the toxic is removed
  int64_t first_n = 0;
};
struct ResetPeerToxic {    // "reset_peer": both sides get an RST after timeout
  int64_t timeout_ms = 0;  // "timeout"; 0 = at once
  int64_t first_n = 0;
};
struct SlicerToxic {           // "slicer": chunks cut into average_size +- size_variation bytes
  int64_t average_size = 0;    // "average_size", bytes
  int64_t size_variation = 0;  // "size_variation", bytes (any: a chunk is only split past average + variation)
  int64_t delay_us = 0;        // "delay", microseconds between slices
  int64_t first_n = 0;
};
struct LimitDataToxic {  // "limit_data": the connection closes after bytes on this stream
  int64_t bytes = 0;     // "bytes"
  int64_t first_n = 0;
};
struct NoopToxic {};  // "noop": passes everything (it only counts activations)
// Extension "limit_time": data flows until time ms after the toxic first
// applied to the connection (its upstream connect, or the toxic's add for a
// connection already open), then the connection closes with a FIN to both
// sides, as limit_data's does; bytes the proxy holds unsent are dropped.
struct LimitTimeToxic {
  int64_t time_ms = 0;  // "time"; 0 = closes at once
  int64_t first_n = 0;
};
// Extension "slow_open": the upstream connect of a new connection waits delay
// ms from its accept. The client's connect() returns at once (the kernel
// completes the handshake); its bytes wait in the kernel, and the upstream
// sees no connection, until then. Connections open when it is added are past
// their open and unaffected.
struct SlowOpenToxic {
  int64_t delay_ms = 0;  // "delay"
  int64_t first_n = 0;
};

using ToxicAttributes = std::variant<LatencyToxic, BandwidthToxic, SlowCloseToxic, TimeoutToxic, ResetPeerToxic,
                                     SlicerToxic, LimitDataToxic, NoopToxic, LimitTimeToxic, SlowOpenToxic>;

// The toxic's first_n (0 for noop, and when unset).
[[nodiscard]] int64_t first_n_of(const ToxicAttributes& a);

struct Toxic {
  std::string name;                    // default "<type>_<stream>"
  Stream stream = Stream::downstream;  // default downstream
  double toxicity = 1.0;               // share of connections it applies to, [0, 1]
  ToxicAttributes attributes = NoopToxic{};

  // "latency", "bandwidth", ... (Toxiproxy's type names).
  [[nodiscard]] std::string_view type() const;
};

// The toxic as Toxiproxy shows it, every attribute of its type present.
[[nodiscard]] nlohmann::json toxic_to_json(const Toxic& t);

// A toxic from a Toxiproxy request body, accepted as Toxiproxy's decoder does:
// "type" is required; "name", "stream" (any case), "toxicity" and every
// attribute are optional (defaults above, attributes 0, null = absent); unknown
// members are ignored. Errors are bad input (Error::bad_input, err EINVAL) and
// name the field: "toxic: \"stream\": unknown stream \"sideways\" (upstream or
// downstream)".
[[nodiscard]] Result<Toxic> toxic_from_json(const nlohmann::json& body);

// Toxiproxy's update of an existing toxic: "toxicity" and "attributes" (member
// by member) replace the current ones; every other field (name, type, stream)
// is ignored, as Toxiproxy ignores it.
[[nodiscard]] Result<Toxic> toxic_merged(const Toxic& current, const nlohmann::json& patch);

// What a toxic must be to be kept: a name and a finite toxicity (what
// toxic_from_json and the registry apply; Toxiproxy judges no more), and the
// extensions' attributes not negative.
[[nodiscard]] Status validate_toxic(const Toxic& t);

// Faultline's own front ends (faultctl flags) ask more, since a negative or
// empty value there is a typo: nothing negative, toxicity in [0, 1], a slicer
// of at least 1 byte.
[[nodiscard]] Status validate_toxic_strict(const Toxic& t);

}  // namespace faultline
