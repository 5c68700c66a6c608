// `faultctl guard --wasm-policy FILE.wasm`: an operator's policy plugin, a
// WebAssembly module run by wabt's interpreter with no imports at all, its
// memory and its instructions bounded. Each request the rules allowed is
// handed to it as JSON; it answers {"allow":bool,"reason":string} and can add
// a denial, never lift one. The ABI and the limits: docs/detectors.md,
// "WebAssembly policy plugins".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "userspace/guard/guard_policy.h"

namespace faultline {

// What one plugin may use. The fuel counts the instructions a decision may
// run (alloc, decide and a start function together): every function entry
// and every loop iteration is charged the instructions it can run before the
// next charge, so a decision stops within about `fuel` instructions.
struct WasmLimits {
  uint64_t fuel = 1'000'000;
  uint32_t memory_pages = 256;                      // 64 KiB pages: 16 MiB
  size_t module_bytes = 8u << 20;                   // the .wasm file
  uint32_t table_elements = 65'536;                 // the function table's size
  static constexpr uint32_t kOutputBytes = 65'536;  // decide's answer
  static constexpr size_t kReasonBytes = 512;       // kept of its reason
};

// The plugin's answer.
struct WasmVerdict {
  bool allow = true;
  std::string reason;  // at most WasmLimits::kReasonBytes, cut at a UTF-8 boundary
};

// decide's answer bytes read: a JSON object whose "allow" is a boolean and
// whose "reason", when present, is a string; other members are ignored.
[[nodiscard]] Result<WasmVerdict> parse_wasm_verdict(std::string_view bytes);

// How a decision ended.
enum class WasmEnd : uint8_t {
  answered,  // the verdict is the plugin's
  trapped,   // a trap (unreachable, a bad memory access, the call stack's end)
  out_of_fuel,
  bad_output,  // an answer out of its memory, too long, or not the JSON above
};
[[nodiscard]] const char* wasm_end_name(WasmEnd end);

struct WasmDecision {
  WasmEnd end = WasmEnd::answered;
  WasmVerdict verdict;  // when answered
  std::string why;      // otherwise: what went wrong
  uint64_t fuel_used = 0;
};

// The facts a plugin sees, as JSON (docs/detectors.md lists the members):
// the rules' facts, the identity, and the decision the rules made.
[[nodiscard]] std::string wasm_facts_json(const RequestFacts& facts, std::string_view identity,
                                          const GuardDecision& decision, bool enforce);

class WasmPolicy {
 public:
  // A module read, checked (no imports; exports memory, alloc and decide with
  // their types; memory and table within the limits; wabt's validation) and
  // metered. An error names the file and why, judged as bad input.
  [[nodiscard]] static Result<std::shared_ptr<const WasmPolicy>> load(const std::string& path, WasmLimits limits = {});
  [[nodiscard]] static Result<std::shared_ptr<const WasmPolicy>> from_bytes(std::string_view bytes,
                                                                            const std::string& name,
                                                                            WasmLimits limits = {});
  ~WasmPolicy();
  WasmPolicy(const WasmPolicy&) = delete;
  WasmPolicy& operator=(const WasmPolicy&) = delete;

  // One decision in a fresh instance (nothing is kept from one request to
  // the next): alloc(len), the facts copied in, decide(ptr, len). Safe to
  // call from several threads at once.
  [[nodiscard]] WasmDecision decide(std::string_view facts_json) const;

  // The file's name without its folder: the activity log's rule "wasm:NAME".
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const WasmLimits& limits() const { return limits_; }

 private:
  struct Compiled;
  WasmPolicy(std::string name, WasmLimits limits, std::unique_ptr<Compiled> compiled);
  std::string name_;
  WasmLimits limits_;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace faultline
