// The guard's activity reaching faultcp: batches of its hash-chained lines,
// stored once per (workspace, identity, seq) so a retried batch changes
// nothing, each entry's chain checked against the stored entry before it;
// blocks mirrored into the workspace's audit log; lists, totals and usage.
#include <algorithm>
#include <map>
#include <set>

#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/api/rfc3339.h"

namespace faultline::cp {
namespace guard_activity_detail {

// 200 minimal entries fit the default 64 KiB body; a guard splits by both.
constexpr size_t kMaxActivityBatch = 200;
constexpr size_t kMaxActivityText = 4096;

const std::vector<FieldRule> kBatchFields = {{"entries", JsonType::Array, true}};
const std::vector<FieldRule> kEntryFields = {
    {"seq", JsonType::Integer, true}, {"ts", JsonType::String, true},      {"identity", JsonType::String, true},
    {"kind", JsonType::String, true}, {"method", JsonType::String, true},  {"host", JsonType::String, true},
    {"path", JsonType::String, true}, {"verdict", JsonType::String, true}, {"rule", JsonType::String, true},
    {"llm", JsonType::Object},        {"prev", JsonType::String, true},    {"hash", JsonType::String, true},
    {"reason", JsonType::String},
};
const std::vector<FieldRule> kLlmFields = {
    {"model", JsonType::String, true},  {"in", JsonType::Integer, true},        {"out", JsonType::Integer, true},
    {"cache", JsonType::Integer, true}, {"reasoning", JsonType::Integer, true},
};

bool is_hex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// One entry of the batch, read as strictly as `faultctl activity verify`
// reads a line (the same fields, "llm" an object or null), or why not.
std::variant<GuardActivityRow, ApiError> read_entry(const nlohmann::json& raw, const std::string& at) {
  if (!raw.is_object()) return ApiError{400, at, "must be an activity entry (a JSON object)"};
  nlohmann::json j = raw;
  const bool llm_null = j.contains("llm") && j["llm"].is_null();
  if (llm_null) j.erase("llm");
  if (auto e = check_fields(j, kEntryFields, at + ".")) return *e;
  if (!llm_null && !j.contains("llm")) return ApiError{400, at + ".llm", "is required (null when no LLM call)"};
  GuardActivityRow row;
  ActivityEntry& e = row.entry;
  if (!j["seq"].is_number_unsigned() || j["seq"].get<uint64_t>() == 0 ||
      j["seq"].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return ApiError{400, at + ".seq", "must be a number from 1"};
  e.seq = j["seq"].get<uint64_t>();
  for (auto [name, into] : {std::pair{"ts", &e.ts}, std::pair{"identity", &e.identity}, std::pair{"kind", &e.kind},
                            std::pair{"method", &e.method}, std::pair{"host", &e.host}, std::pair{"path", &e.path},
                            std::pair{"verdict", &e.verdict}, std::pair{"rule", &e.rule}, std::pair{"prev", &e.prev},
                            std::pair{"hash", &e.hash}}) {
    *into = j[name].get<std::string>();
    if (into->size() > kMaxActivityText) return ApiError{400, at + "." + name, "is over 4096 characters"};
  }
  if (j.contains("reason")) {
    // Optional; the guard leaves an empty one out (it would not hash as written).
    e.reason = j["reason"].get<std::string>();
    if (e.reason.empty()) return ApiError{400, at + ".reason", "is empty (an entry without a reason leaves it out)"};
    if (e.reason.size() > kMaxActivityText) return ApiError{400, at + ".reason", "is over 4096 characters"};
  }
  if (e.identity.empty()) return ApiError{400, at + ".identity", "is empty"};
  if (e.kind.empty()) return ApiError{400, at + ".kind", "is empty"};
  if (e.verdict != "allow" && e.verdict != "deny" && e.verdict != "approve")
    return ApiError{400, at + ".verdict", "must be allow, deny or approve"};
  if (!is_hex64(e.hash)) return ApiError{400, at + ".hash", "must be 64 lowercase hex digits (SHA-256)"};
  if (!e.prev.empty() && !is_hex64(e.prev))
    return ApiError{400, at + ".prev", "must be empty (the first entry) or 64 lowercase hex digits"};
  auto ts = parse_rfc3339_ms(e.ts);
  if (!ts) return ApiError{400, at + ".ts", "must be an RFC 3339 UTC time (2025-06-01T12:00:00.123Z)"};
  row.at_ms = *ts;
  if (!llm_null) {
    const auto& l = j["llm"];
    if (auto le = check_fields(l, kLlmFields, at + ".llm.")) return *le;
    ActivityLlm llm;
    llm.model = l["model"].get<std::string>();
    for (auto [name, into] : {std::pair{"in", &llm.in}, std::pair{"out", &llm.out}, std::pair{"cache", &llm.cache},
                              std::pair{"reasoning", &llm.reasoning}}) {
      if (!l[name].is_number_unsigned()) return ApiError{400, at + ".llm." + name, "must be a token count (0 or more)"};
      *into = l[name].get<uint64_t>();
    }
    e.llm = std::move(llm);
  }
  return row;
}

// The entries of a body: {"entries": [...]} as JSON, or the log's own lines
// (Content-Type application/x-ndjson), so a guard may send its file as is.
std::variant<nlohmann::json, ApiError> batch_entries(const HttpRequest& req) {
  auto type = req.header("content-type");
  if (type && type->substr(0, type->find(';')) == "application/x-ndjson") {
    nlohmann::json list = nlohmann::json::array();
    size_t line = 0;
    for (size_t start = 0; start < req.body.size();) {
      size_t nl = req.body.find('\n', start);
      if (nl == std::string::npos) nl = req.body.size();
      ++line;
      const std::string_view text(req.body.data() + start, nl - start);
      start = nl + 1;
      if (text.empty()) continue;
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded()) return ApiError{400, "line " + std::to_string(line), "not JSON"};
      list.push_back(std::move(j));
    }
    if (list.empty()) return ApiError{400, "body", "no entries"};
    return list;
  }
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return *e;
  auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kBatchFields)) return *e;
  return std::move(j["entries"]);
}

nlohmann::json activity_row_json(const GuardActivityRow& r) {
  const ActivityEntry& e = r.entry;
  nlohmann::json llm = nullptr;
  if (e.llm)
    llm = {{"model", e.llm->model},
           {"in", e.llm->in},
           {"out", e.llm->out},
           {"cache", e.llm->cache},
           {"reasoning", e.llm->reasoning}};
  return {{"id", r.id},
          {"seq", e.seq},
          {"ts", e.ts},
          {"identity", e.identity},
          {"kind", e.kind},
          {"method", e.method},
          {"host", e.host},
          {"path", e.path},
          {"verdict", e.verdict},
          {"rule", e.rule},
          {"reason", e.reason},
          {"llm", llm},
          {"prev", e.prev},
          {"hash", e.hash},
          {"finding", guard_alert_trigger(e) ? nlohmann::json(*guard_alert_trigger(e)) : nlohmann::json(nullptr)},
          {"chain", r.chain},
          {"chain_detail", r.chain_detail},
          {"received_ms", r.received_ms},
          {"reporter", r.reporter}};
}

// The ?window= of the guardrails' reports: its name and length, or the 400.
struct ReportWindow {
  std::string name;
  int64_t ms = 0;
};
std::variant<ReportWindow, ApiError> report_window(const HttpRequest& req) {
  static constexpr std::pair<const char*, int64_t> kWindows[] = {
      {"1h", 3600}, {"24h", 24 * 3600}, {"7d", 7 * 24 * 3600}, {"30d", 30 * 24 * 3600}, {"90d", 90 * 24 * 3600}};
  const std::string window = req.query_param("window").value_or("7d");
  for (const auto& [name, seconds] : kWindows)
    if (window == name) return ReportWindow{window, seconds * 1000};
  return ApiError{400, "window", "'" + window + "' is not one of 1h, 24h, 7d, 30d, 90d"};
}

// An MCP chain's identity without its server ("alice@laptop/mcp:fs" ->
// "alice@laptop", mcp_chain_identity()): who used the server.
std::string mcp_user_of(const std::string& chain) {
  const size_t at = chain.rfind("/mcp:");
  return at == std::string::npos ? chain : chain.substr(0, at);
}

// Per server: totals, the identities, and per tool; from the rows of one
// server, tool and identity each.
nlohmann::json mcp_inventory_json(const std::vector<McpToolUseRow>& rows) {
  struct Totals {
    int64_t calls = 0, denied = 0, held = 0, findings = 0, last_ms = 0;
    void add(const McpToolUseRow& r) {
      calls += r.calls;
      denied += r.denied;
      held += r.held;
      findings += r.findings;
      last_ms = std::max(last_ms, r.last_ms);
    }
    [[nodiscard]] nlohmann::json json() const {
      return {{"calls", calls}, {"denied", denied}, {"held", held}, {"findings", findings}, {"last_seen_ms", last_ms}};
    }
  };
  struct Server {
    Totals totals;
    std::set<std::string> identities;
    std::map<std::string, std::pair<Totals, std::set<std::string>>> tools;
  };
  std::map<std::string, Server> servers;
  for (const auto& r : rows) {
    Server& s = servers[r.server];
    s.totals.add(r);
    s.identities.insert(mcp_user_of(r.identity));
    auto& [tool, users] = s.tools[r.tool];
    tool.add(r);
    users.insert(mcp_user_of(r.identity));
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, s] : servers) {
    nlohmann::json tools = nlohmann::json::array();
    for (const auto& [tool, t] : s.tools) {
      nlohmann::json j = t.first.json();
      j["tool"] = tool;
      j["identities"] = t.second;
      tools.push_back(std::move(j));
    }
    nlohmann::json j = s.totals.json();
    j["server"] = name;
    j["identities"] = s.identities;
    j["tools"] = std::move(tools);
    out.push_back(std::move(j));
  }
  return out;
}

std::optional<std::string> nonempty_param(const HttpRequest& req, const char* name) {
  auto v = req.query_param(name);
  if (!v || v->empty()) return std::nullopt;
  return v;
}

}  // namespace guard_activity_detail

using namespace guard_activity_detail;

// The chain of each new entry is checked against the stored entry of seq - 1:
//  - the entry must hash to its own hash, else "bad-hash";
//  - seq 1 must have an empty prev; a later seq's prev must be the stored
//    hash of seq - 1, else "bad-prev";
//  - seq - 1 not stored (yet) is a "gap": the batch may be out of order, or an
//    entry was lost. When seq - 1 arrives later its successor is checked again
//    and the gap closes ("ok") or turns into "bad-prev".
// A flagged entry is stored as sent (the copy is evidence) with its verdict,
// listed in the answer, counted in the summary and written to the audit log:
// never silently accepted, never dropped. An entry whose (identity, seq) is
// stored already is a duplicate when its hash matches (a retried batch) and a
// conflict when not: the stored one stays, the conflict is answered and audited.
HttpReply ControlPlane::post_guard_activity(const HttpRequest& req, const Principal& p) {
  auto list = batch_entries(req);
  if (auto* e = std::get_if<ApiError>(&list)) return e->reply();
  const auto& entries = std::get<nlohmann::json>(list);
  if (entries.empty()) return ApiError{400, "entries", "is empty"}.reply();
  if (entries.size() > kMaxActivityBatch)
    return ApiError{400, "entries", "at most 200 per batch (got " + std::to_string(entries.size()) + "): split it"}
        .reply();
  std::vector<GuardActivityRow> rows, fresh;  // fresh: stored now, not before (the alerts' entries)
  for (size_t i = 0; i < entries.size(); ++i) {
    auto r = read_entry(entries[i], "entries[" + std::to_string(i) + "]");
    if (auto* e = std::get_if<ApiError>(&r)) return e->reply();
    rows.push_back(std::get<GuardActivityRow>(std::move(r)));
  }
  const int64_t now = now_ms();
  nlohmann::json flagged = nlohmann::json::array(), conflicts = nlohmann::json::array();
  std::map<std::string, int64_t> through;
  int64_t stored = 0, duplicates = 0, blocks = 0;

  // One transaction under the workspace's lock: two replicas never check one
  // identity's chain at once, and the entries and their audit entries land together.
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  for (auto& row : rows) {
    ActivityEntry& e = row.entry;
    const auto seq = static_cast<int64_t>(e.seq);
    auto old = store_.guard_activity_at(p.workspace_id, e.identity, seq);
    if (!old) return storage_error(old.error());
    if (old->has_value()) {
      if ((*old)->entry.hash == e.hash) {
        ++duplicates;
        through[e.identity] = std::max(through[e.identity], seq);
      } else {
        conflicts.push_back(
            {{"identity", e.identity}, {"seq", e.seq}, {"stored_hash", (*old)->entry.hash}, {"sent_hash", e.hash}});
      }
      continue;
    }
    row.received_ms = now;
    row.reporter = p.actor();
    if (activity_hash(e) != e.hash) {
      row.chain = "bad-hash";
      row.chain_detail = "the entry does not hash to its hash: it was changed after it was written";
    } else if (seq == 1) {
      if (!e.prev.empty()) {
        row.chain = "bad-prev";
        row.chain_detail = "prev is not empty on the identity's first entry";
      }
    } else {
      auto before = store_.guard_activity_at(p.workspace_id, e.identity, seq - 1);
      if (!before) return storage_error(before.error());
      if (!before->has_value()) {
        row.chain = "gap";
        row.chain_detail = "seq " + std::to_string(seq - 1) + " has not arrived";
      } else if ((*before)->entry.hash != e.prev) {
        row.chain = "bad-prev";
        row.chain_detail = "prev does not match the stored hash of seq " + std::to_string(seq - 1);
      }
    }
    auto id = store_.insert_guard_activity(p.workspace_id, row);
    if (!id) return storage_error(id.error());
    if (!id->has_value()) {  // a duplicate inside the batch itself
      ++duplicates;
      continue;
    }
    ++stored;
    fresh.push_back(row);
    through[e.identity] = std::max(through[e.identity], seq);
    if (row.chain != "ok")
      flagged.push_back({{"identity", e.identity}, {"seq", e.seq}, {"chain", row.chain}, {"detail", row.chain_detail}});
    // The successor that waited for this entry: its gap closes or turns bad.
    auto next = store_.guard_activity_at(p.workspace_id, e.identity, seq + 1);
    if (!next) return storage_error(next.error());
    if (next->has_value() && (*next)->chain == "gap") {
      const bool linked = (*next)->entry.prev == e.hash;
      if (auto s = store_.set_guard_activity_chain(
              p.workspace_id, (*next)->id, linked ? "ok" : "bad-prev",
              linked ? "" : "prev does not match the stored hash of seq " + std::to_string(seq));
          !s)
        return storage_error(s.error());
      if (!linked)
        flagged.push_back({{"identity", e.identity},
                           {"seq", seq + 1},
                           {"chain", "bad-prev"},
                           {"detail", "prev does not match the stored hash of seq " + std::to_string(seq)}});
    }
    if (e.verdict == "deny") {
      ++blocks;
      nlohmann::json detail = {{"seq", e.seq},   {"ts", e.ts},     {"kind", e.kind}, {"method", e.method},
                               {"host", e.host}, {"path", e.path}, {"rule", e.rule}, {"hash", e.hash}};
      if (!e.reason.empty()) detail["reason"] = e.reason;
      if (auto au = audit(p, "guardrail.block", "identity:" + e.identity, detail); !au)
        return storage_error(au.error());
    }
  }
  if (!flagged.empty() || !conflicts.empty()) {
    if (auto au = audit(p, "guardrail.activity.flagged", "activity", {{"flagged", flagged}, {"conflicts", conflicts}});
        !au)
      return storage_error(au.error());
  }
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  raise_guard_alerts(p.workspace_id, fresh);
  return api_json(200, {{"stored", stored},
                        {"duplicates", duplicates},
                        {"blocks", blocks},
                        {"flagged", flagged},
                        {"conflicts", conflicts},
                        {"stored_through", through}});
}

HttpReply ControlPlane::list_guard_activity(const HttpRequest& req, const Principal& p) {
  GuardActivityFilter f;
  f.identity = nonempty_param(req, "identity");
  f.verdict = nonempty_param(req, "verdict");
  f.host = nonempty_param(req, "host");
  if (f.verdict && *f.verdict != "allow" && *f.verdict != "deny" && *f.verdict != "approve")
    return api_error(400, "verdict: must be allow, deny or approve", "verdict");
  for (auto [name, into] : {std::pair{"since", &f.since_ms}, std::pair{"until", &f.until_ms}}) {
    if (auto v = nonempty_param(req, name)) {
      *into = parse_api_time(*v);
      if (!*into) return api_error(400, std::string(name) + ": milliseconds since the epoch or an RFC 3339 time", name);
    }
  }
  if (auto l = nonempty_param(req, "limit")) {
    PathParams as_path{{"id", *l}};
    auto n = path_id(as_path);
    if (!n || *n < 1 || *n > 1000) return api_error(400, "limit: must be 1-1000", "limit");
    f.limit = *n;
  }
  if (auto c = nonempty_param(req, "cursor")) {
    PathParams as_path{{"id", *c}};
    f.before_id = path_id(as_path);
    if (!f.before_id) return api_error(400, "cursor: not a cursor this API gave", "cursor");
  }
  // One more than asked: whether a next page exists, without a count.
  const int64_t asked = f.limit;
  f.limit = asked + 1;
  auto rows = store_.guard_activity(p.workspace_id, f);
  if (!rows) return storage_error(rows.error());
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < rows->size() && static_cast<int64_t>(i) < asked; ++i)
    list.push_back(activity_row_json((*rows)[i]));
  nlohmann::json out{{"entries", list}, {"next_cursor", nullptr}};
  if (static_cast<int64_t>(rows->size()) > asked) out["next_cursor"] = std::to_string((*rows)[asked - 1].id);
  return api_json(200, out);
}

HttpReply ControlPlane::guard_activity_summary(const HttpRequest& req, const Principal& p) {
  std::optional<int64_t> since, until;
  for (auto [name, into] : {std::pair{"since", &since}, std::pair{"until", &until}}) {
    if (auto v = nonempty_param(req, name)) {
      *into = parse_api_time(*v);
      if (!*into) return api_error(400, std::string(name) + ": milliseconds since the epoch or an RFC 3339 time", name);
    }
  }
  auto rows = store_.guard_activity_summary(p.workspace_id, since, until);
  if (!rows) return storage_error(rows.error());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : *rows)
    list.push_back(
        {{"identity", s.identity},
         {"requests", s.requests},
         {"denied", s.denied},
         {"held", s.held},
         {"approved", s.approved},
         {"llm_calls", s.llm_calls},
         {"tokens",
          {{"in", s.tokens_in}, {"out", s.tokens_out}, {"cache", s.tokens_cache}, {"reasoning", s.tokens_reasoning}}},
         {"flagged", s.flagged},
         {"last_seq", s.last_seq},
         {"last_at_ms", s.last_at_ms}});
  return api_json(200, {{"identities", list}});
}

HttpReply ControlPlane::guard_usage(const HttpRequest& req, const Principal& p) {
  auto w = report_window(req);
  if (auto* e = std::get_if<ApiError>(&w)) return e->reply();
  const auto& [window, window_ms] = std::get<ReportWindow>(w);
  const int64_t since = now_ms() - window_ms;
  auto rows = store_.guard_usage(p.workspace_id, since);
  if (!rows) return storage_error(rows.error());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& u : *rows)
    list.push_back({{"identity", u.identity},
                    {"model", u.model},
                    {"calls", u.calls},
                    {"input_tokens", u.tokens_in},
                    {"output_tokens", u.tokens_out},
                    {"cache_tokens", u.tokens_cache},
                    {"reasoning_tokens", u.tokens_reasoning}});
  return api_json(200, {{"window", window}, {"since_ms", since}, {"usage", list}});
}

HttpReply ControlPlane::mcp_servers(const HttpRequest& req, const Principal& p) {
  auto w = report_window(req);
  if (auto* e = std::get_if<ApiError>(&w)) return e->reply();
  const auto& [window, window_ms] = std::get<ReportWindow>(w);
  const int64_t since = now_ms() - window_ms;
  auto rows = store_.mcp_tool_use(p.workspace_id, since);
  if (!rows) return storage_error(rows.error());
  return api_json(200, {{"window", window}, {"since_ms", since}, {"servers", mcp_inventory_json(*rows)}});
}

}  // namespace faultline::cp
