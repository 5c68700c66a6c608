// --wasm-policy: a module checked, metered and run by wabt's interpreter.
#include "userspace/guard/wasm_policy.h"

#include <sys/stat.h>
#include <wabt/binary-reader-ir.h>
#include <wabt/binary-reader.h>
#include <wabt/binary-writer.h>
#include <wabt/cast.h>
#include <wabt/error-formatter.h>
#include <wabt/feature.h>
#include <wabt/interp/binary-reader-interp.h>
#include <wabt/interp/interp.h>
#include <wabt/ir.h>
#include <wabt/stream.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

namespace faultline {

namespace {

namespace interp = wabt::interp;

// What a plugin may use of WebAssembly: the MVP with the small arithmetic
// additions clang emits. Bulk memory is off (memory.fill and memory.copy cost
// up to the whole memory in one instruction, which the fuel would not see),
// and with it reference types (table.grow); SIMD, threads, 64-bit and
// multiple memories, exceptions and tail calls are off.
wabt::Features plugin_features() {
  wabt::Features f;
  f.disable_reference_types();
  f.disable_bulk_memory();
  f.disable_simd();
  f.disable_threads();
  f.disable_memory64();
  f.disable_multi_memory();
  f.disable_exceptions();
  f.disable_tail_call();
  return f;
}

std::string errors_text(const wabt::Errors& errors) {
  std::string s = wabt::FormatErrorsToString(errors, wabt::Location::Type::Binary);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s)
    if (c == '\n') c = ';';
  return s.empty() ? "not a valid WebAssembly module" : s;
}

const char* kind_name(wabt::ExternalKind kind) {
  switch (kind) {
    case wabt::ExternalKind::Func:
      return "a function";
    case wabt::ExternalKind::Table:
      return "a table";
    case wabt::ExternalKind::Memory:
      return "a memory";
    case wabt::ExternalKind::Global:
      return "a global";
    case wabt::ExternalKind::Tag:
      return "a tag";
  }
  return "something";
}

// The metering. Every instruction a function runs is either in no loop of
// it, and runs at most once a call, or in its innermost loop, and runs at most
// once an iteration: so a charge at the function's entry of what its body
// holds outside loops, and at each loop's head of what the loop holds outside
// its inner loops, is charged before the instructions it pays for run. A
// branch back to a loop goes to its head, through its charge. The fuel is a
// global of the module's own (none of its code names it): each charge takes
// from it, and when it goes below zero the charge traps.
constexpr uint64_t kChargeLength = 9;  // the instructions of one charge (below)

uint64_t charge_of(const wabt::ExprList& exprs) {
  uint64_t n = 0;
  for (const wabt::Expr& e : exprs) {
    ++n;
    if (auto* block = wabt::dyn_cast<wabt::BlockExpr>(&e)) {
      n += charge_of(block->block.exprs);
    } else if (auto* branch = wabt::dyn_cast<wabt::IfExpr>(&e)) {
      n += charge_of(branch->true_.exprs) + charge_of(branch->false_);
    }
    // A loop charges itself, at its head.
  }
  return n;
}

// fuel -= cost; if (fuel < 0) unreachable
wabt::ExprList charge(wabt::Index fuel, uint64_t cost) {
  const wabt::Location at;
  wabt::ExprList c;
  c.push_back(std::make_unique<wabt::GlobalGetExpr>(wabt::Var(fuel, at)));
  c.push_back(std::make_unique<wabt::ConstExpr>(wabt::Const::I64(cost + kChargeLength)));
  c.push_back(std::make_unique<wabt::BinaryExpr>(wabt::Opcode::I64Sub));
  c.push_back(std::make_unique<wabt::GlobalSetExpr>(wabt::Var(fuel, at)));
  c.push_back(std::make_unique<wabt::GlobalGetExpr>(wabt::Var(fuel, at)));
  c.push_back(std::make_unique<wabt::ConstExpr>(wabt::Const::I64(0)));
  c.push_back(std::make_unique<wabt::CompareExpr>(wabt::Opcode::I64LtS));
  auto out = std::make_unique<wabt::IfExpr>();
  out->true_.exprs.push_back(std::make_unique<wabt::UnreachableExpr>());
  c.push_back(std::move(out));
  return c;
}

void meter_loops(wabt::ExprList& exprs, wabt::Index fuel) {
  for (wabt::Expr& e : exprs) {
    if (auto* block = wabt::dyn_cast<wabt::BlockExpr>(&e)) {
      meter_loops(block->block.exprs, fuel);
    } else if (auto* branch = wabt::dyn_cast<wabt::IfExpr>(&e)) {
      meter_loops(branch->true_.exprs, fuel);
      meter_loops(branch->false_, fuel);
    } else if (auto* loop = wabt::dyn_cast<wabt::LoopExpr>(&e)) {
      meter_loops(loop->block.exprs, fuel);
      const uint64_t cost = charge_of(loop->block.exprs);
      loop->block.exprs.splice(loop->block.exprs.begin(), charge(fuel, cost));
    }
  }
}

Error bad(const std::string& name, const std::string& why) { return input_error(0, name + ": " + why); }

bool has_signature(const wabt::Func& f, const std::vector<wabt::Type>& params, const std::vector<wabt::Type>& results) {
  return f.decl.sig.param_types == params && f.decl.sig.result_types == results;
}

// The module's shape against the ABI and the limits; the memory's and the
// table's maximum lowered to the limits.
Status check_shape(wabt::Module& m, const std::string& name, const WasmLimits& limits) {
  if (!m.imports.empty()) {
    const wabt::Import& i = *m.imports.front();
    return bad(name, "imports " + i.module_name + "." + i.field_name + " (" + kind_name(i.kind()) +
                         "): a policy plugin runs with no imports at all (no filesystem, network, clock or "
                         "environment); build it with -nostdlib and without WASI");
  }
  if (m.memories.size() != 1) return bad(name, "declares no memory; a policy plugin exports one, named memory");
  wabt::Limits& mem = m.memories.front()->page_limits;
  if (mem.initial > limits.memory_pages)
    return bad(name, "its memory starts at " + std::to_string(mem.initial) + " pages of 64 KiB, over the limit of " +
                         std::to_string(limits.memory_pages));
  if (!mem.has_max || mem.max > limits.memory_pages) {
    mem.has_max = true;
    mem.max = limits.memory_pages;
  }
  for (wabt::Table* t : m.tables) {
    if (t->elem_limits.initial > limits.table_elements)
      return bad(name, "its table holds " + std::to_string(t->elem_limits.initial) + " elements, over the limit of " +
                           std::to_string(limits.table_elements));
    if (!t->elem_limits.has_max || t->elem_limits.max > limits.table_elements) {
      t->elem_limits.has_max = true;
      t->elem_limits.max = limits.table_elements;
    }
  }
  auto exported = [&](std::string_view export_name, wabt::ExternalKind kind) -> const wabt::Export* {
    const wabt::Export* e = m.GetExport(export_name);
    return e && e->kind == kind ? e : nullptr;
  };
  if (!exported("memory", wabt::ExternalKind::Memory))
    return bad(name, "exports no memory named memory (the ABI: memory, alloc, decide)");
  const wabt::Export* alloc = exported("alloc", wabt::ExternalKind::Func);
  if (!alloc || !has_signature(*m.GetFunc(alloc->var), {wabt::Type::I32}, {wabt::Type::I32}))
    return bad(name, "exports no function alloc(i32) -> i32 (the ABI: memory, alloc, decide)");
  const wabt::Export* decide = exported("decide", wabt::ExternalKind::Func);
  if (!decide || !has_signature(*m.GetFunc(decide->var), {wabt::Type::I32, wabt::Type::I32}, {wabt::Type::I64}))
    return bad(name, "exports no function decide(i32, i32) -> i64 (the ABI: memory, alloc, decide)");
  return {};
}

// The fuel global added (initialised to the whole budget, so a fresh
// instance starts full) and every function metered; its index.
wabt::Index meter(wabt::Module& m, uint64_t fuel) {
  auto field = std::make_unique<wabt::GlobalModuleField>();
  field->global.type = wabt::Type::I64;
  field->global.mutable_ = true;
  field->global.init_expr.push_back(std::make_unique<wabt::ConstExpr>(wabt::Const::I64(fuel)));
  m.AppendField(std::move(field));
  const auto index = static_cast<wabt::Index>(m.globals.size() - 1);
  for (wabt::Func* f : m.funcs) {
    meter_loops(f->exprs, index);
    const uint64_t cost = charge_of(f->exprs);
    f->exprs.splice(f->exprs.begin(), charge(index, cost));
  }
  return index;
}

Result<interp::ModuleDesc> read_interp(std::string_view bytes, const std::string& name) {
  wabt::Errors errors;
  interp::ModuleDesc desc;
  const wabt::ReadBinaryOptions options(plugin_features(), nullptr, false, true, false);
  if (wabt::Failed(interp::ReadBinaryInterp(name, bytes.data(), bytes.size(), options, &errors, &desc)))
    return bad(name, "not a valid WebAssembly module: " + errors_text(errors));
  return desc;
}

std::string cut_utf8(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s;
}

}  // namespace

struct WasmPolicy::Compiled {
  interp::ModuleDesc desc;
  wabt::Index alloc = 0, decide = 0;  // export indices
  wabt::Index fuel = 0;               // the fuel global's index
};

const char* wasm_end_name(WasmEnd end) {
  switch (end) {
    case WasmEnd::answered:
      return "answered";
    case WasmEnd::trapped:
      return "trapped";
    case WasmEnd::out_of_fuel:
      return "out of fuel";
    case WasmEnd::bad_output:
      return "bad output";
  }
  return "?";
}

Result<WasmVerdict> parse_wasm_verdict(std::string_view bytes) {
  if (bytes.size() > WasmLimits::kOutputBytes)
    return make_error(0, "the answer is " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                             std::to_string(WasmLimits::kOutputBytes));
  const nlohmann::json j = nlohmann::json::parse(bytes, nullptr, false);
  if (j.is_discarded()) return make_error(0, "the answer is not JSON");
  if (!j.is_object()) return make_error(0, "the answer is not a JSON object");
  auto allow = j.find("allow");
  if (allow == j.end() || !allow->is_boolean()) return make_error(0, "the answer has no boolean \"allow\"");
  WasmVerdict v;
  v.allow = allow->get<bool>();
  if (auto reason = j.find("reason"); reason != j.end()) {
    if (!reason->is_string()) return make_error(0, "the answer's \"reason\" is not a string");
    v.reason = cut_utf8(reason->get<std::string>(), WasmLimits::kReasonBytes);
  }
  return v;
}

std::string wasm_facts_json(const RequestFacts& facts, std::string_view identity, const GuardDecision& decision,
                            bool enforce) {
  nlohmann::json j;
  j["method"] = facts.method;
  j["host"] = facts.host;
  j["port"] = facts.port;
  j["path"] = facts.path;
  j["tls_terminated"] = facts.tls_terminated;
  j["identity"] = std::string(identity);
  j["dlp_findings"] = facts.dlp_findings;
  j["llm_model"] = facts.llm_model ? nlohmann::json(*facts.llm_model) : nlohmann::json(nullptr);
  j["llm_max_tokens"] = facts.llm_max_tokens ? nlohmann::json(*facts.llm_max_tokens) : nlohmann::json(nullptr);
  j["llm_facts_unknown"] = facts.llm_facts_unparseable;
  j["mode"] = enforce ? "enforce" : "monitor";
  j["rules"] = {{"verdict", std::string(guard_verdict_name(decision.verdict))}, {"rule", decision.rule}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

WasmPolicy::WasmPolicy(std::string name, WasmLimits limits, std::unique_ptr<Compiled> compiled)
    : name_(std::move(name)), limits_(limits), compiled_(std::move(compiled)) {}

WasmPolicy::~WasmPolicy() = default;

Result<std::shared_ptr<const WasmPolicy>> WasmPolicy::load(const std::string& path, WasmLimits limits) {
  struct stat st {};
  // The system's reason in the message itself: faultctl prints messages.
  if (::stat(path.c_str(), &st) != 0) return bad("--wasm-policy " + path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return bad("--wasm-policy " + path, "not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limits.module_bytes)
    return bad("--wasm-policy " + path,
               std::to_string(st.st_size) + " bytes, over the limit of " + std::to_string(limits.module_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad("--wasm-policy " + path, std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::string name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  auto p = from_bytes(bytes.str(), name, limits);
  if (!p) {
    Error e = p.error();
    // Named by the path the operator gave, not its file name alone.
    if (e.message.rfind(name + ": ", 0) == 0) e.message = "--wasm-policy " + path + e.message.substr(name.size());
    return e;
  }
  return p;
}

Result<std::shared_ptr<const WasmPolicy>> WasmPolicy::from_bytes(std::string_view bytes, const std::string& name,
                                                                 WasmLimits limits) {
  if (bytes.size() > limits.module_bytes)
    return bad(name, std::to_string(bytes.size()) + " bytes, over the limit of " + std::to_string(limits.module_bytes));
  // wabt's full validation of the module as written, so its errors point at
  // the operator's bytes, not at the metered copy.
  if (auto checked = read_interp(bytes, name); !checked) return checked.error();
  wabt::Module module;
  wabt::Errors errors;
  const wabt::ReadBinaryOptions options(plugin_features(), nullptr, false, true, false);
  if (wabt::Failed(wabt::ReadBinaryIr(name.c_str(), bytes.data(), bytes.size(), options, &errors, &module)))
    return bad(name, "not a valid WebAssembly module: " + errors_text(errors));
  FL_TRY(check_shape(module, name, limits));
  auto compiled = std::make_unique<Compiled>();
  compiled->fuel = meter(module, limits.fuel);
  wabt::MemoryStream stream;
  const wabt::WriteBinaryOptions write(plugin_features(), true, false, false);
  if (wabt::Failed(wabt::WriteBinaryModule(&stream, &module, write)))
    return make_error(0, name + ": the metered module could not be written");
  const std::vector<uint8_t>& metered = stream.output_buffer().data;
  auto desc = read_interp(std::string_view(reinterpret_cast<const char*>(metered.data()), metered.size()), name);
  if (!desc) return make_error(0, name + ": the metered module does not validate: " + desc.error().message);
  compiled->desc = std::move(*desc);
  for (wabt::Index i = 0; i < compiled->desc.exports.size(); ++i) {
    const std::string& n = compiled->desc.exports[i].type.name;
    if (n == "alloc") compiled->alloc = i;
    if (n == "decide") compiled->decide = i;
  }
  std::shared_ptr<const WasmPolicy> policy(new WasmPolicy(name, limits, std::move(compiled)));
  // A module that cannot be instantiated (a data segment out of its memory,
  // a start function that traps) would fail every request: refused now.
  {
    interp::Store store(plugin_features());
    interp::Module::Ptr m = interp::Module::New(store, policy->compiled_->desc);
    interp::Trap::Ptr trap;
    interp::Instance::Ptr instance = interp::Instance::Instantiate(store, m.ref(), {}, &trap);
    if (!instance) return bad(name, "instantiating it trapped: " + (trap ? trap->message() : std::string("?")));
  }
  return policy;
}

WasmDecision WasmPolicy::decide(std::string_view facts_json) const {
  WasmDecision d;
  interp::Store store(plugin_features());
  interp::Module::Ptr module = interp::Module::New(store, compiled_->desc);
  interp::Trap::Ptr trap;
  interp::Instance::Ptr instance = interp::Instance::Instantiate(store, module.ref(), {}, &trap);
  auto fuel_left = [&]() -> int64_t {
    if (!instance) return 0;
    return store.UnsafeGet<interp::Global>(instance->globals()[compiled_->fuel])->UnsafeGet<int64_t>();
  };
  auto failed = [&](const std::string& during) {
    const int64_t left = fuel_left();
    d.fuel_used = limits_.fuel - static_cast<uint64_t>(std::max<int64_t>(left, 0));
    if (instance && left < 0) {
      d.end = WasmEnd::out_of_fuel;
      d.why = "out of fuel in " + during + " (" + std::to_string(limits_.fuel) + " instructions)";
    } else {
      d.end = WasmEnd::trapped;
      d.why = "a trap in " + during + ": " + (trap ? trap->message() : std::string("?"));
    }
    return d;
  };
  if (!instance) return failed("its start");
  interp::Thread thread(store);
  interp::Values results;
  auto alloc = store.UnsafeGet<interp::Func>(instance->exports()[compiled_->alloc]);
  const auto len = static_cast<uint32_t>(facts_json.size());
  if (wabt::Failed(alloc->Call(thread, {interp::Value::Make(len)}, results, &trap))) return failed("alloc");
  const uint32_t at = results.at(0).Get<uint32_t>();
  interp::Memory::Ptr memory = store.UnsafeGet<interp::Memory>(instance->memories()[0]);
  if (static_cast<uint64_t>(at) + len > memory->ByteSize()) {
    d.end = WasmEnd::bad_output;
    d.why = "alloc(" + std::to_string(len) + ") returned " + std::to_string(at) + ", out of its memory";
    return d;
  }
  std::copy(facts_json.begin(), facts_json.end(), memory->UnsafeData() + at);
  results.clear();
  auto decide = store.UnsafeGet<interp::Func>(instance->exports()[compiled_->decide]);
  if (wabt::Failed(decide->Call(thread, {interp::Value::Make(at), interp::Value::Make(len)}, results, &trap)))
    return failed("decide");
  d.fuel_used = limits_.fuel - static_cast<uint64_t>(std::max<int64_t>(fuel_left(), 0));
  const uint64_t packed = results.at(0).Get<uint64_t>();
  const uint64_t out = packed >> 32, out_len = packed & 0xFFFFFFFFu;
  if (out_len > WasmLimits::kOutputBytes || out + out_len > memory->ByteSize()) {
    d.end = WasmEnd::bad_output;
    d.why = "decide returned " + std::to_string(out_len) + " bytes at " + std::to_string(out) +
            (out_len > WasmLimits::kOutputBytes ? ", over the limit of " + std::to_string(WasmLimits::kOutputBytes)
                                                : ", out of its memory");
    return d;
  }
  auto verdict = parse_wasm_verdict(
      std::string_view(reinterpret_cast<const char*>(memory->UnsafeData() + out), static_cast<size_t>(out_len)));
  if (!verdict) {
    d.end = WasmEnd::bad_output;
    d.why = verdict.error().message;
    return d;
  }
  d.verdict = std::move(*verdict);
  return d;
}

}  // namespace faultline
