// Schedules on faultcp: a cron expression in an IANA zone that starts a
// scenario run, or one step's experiment, on one agent. The worker claims each
// due firing by moving the schedule's next firing on (a compare-and-set in the
// workspace's transaction), judges it as a manual run is judged, and records
// it in that same transaction: started (with its run or experiment) or
// skipped with a code. A firing is claimed once across replicas and restarts;
// one later than the grace (faultcp was down) is not made up.
#include <ctime>

#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/api/rfc3339.h"
#include "userspace/orchestration/cron.h"
#include "userspace/orchestration/scenario.h"

namespace faultline::cp {
namespace schedules_detail {

const std::vector<FieldRule> kScheduleFields = {
    {"name", JsonType::String, true},      {"cron", JsonType::String, true},   {"timezone", JsonType::String, true},
    {"agent_id", JsonType::Integer, true}, {"scenario_id", JsonType::Integer}, {"step", JsonType::Object}};
const std::vector<FieldRule> kSchedulePatchFields = {{"enabled", JsonType::Boolean, true}};
constexpr int64_t kMaxFiringList = 1000;
// How many missed firings one `missed` row counts at most (an every-second
// schedule down for a day would be 86,400).
constexpr int64_t kMaxMissedCounted = 10'000;
// How many due times of one schedule a tick takes (the grace bounds how many
// can be due: later ones are one `missed` row).
constexpr int kMaxFiringsPerTick = 100;

struct CronAndZone {
  CronSchedule cron;
  CronZone zone;
};

std::variant<CronAndZone, CronError> read_cron(const std::string& cron, const std::string& timezone) {
  auto c = CronSchedule::parse(cron);
  if (auto* e = std::get_if<CronError>(&c)) {
    if (e->field == "cron") return *e;
    return CronError{"cron", e->text()};
  }
  auto z = CronZone::find(timezone);
  if (auto* e = std::get_if<CronError>(&z)) return *e;
  return CronAndZone{std::get<CronSchedule>(std::move(c)), std::get<CronZone>(std::move(z))};
}

// A schedule's step as a one-step scenario, so it is read (and later run) as
// a scenario's step is; errors name `step.` fields.
std::variant<Scenario, SpecError> read_step(const nlohmann::json& step) {
  if (step.is_object() && step.contains("wait_s"))
    return SpecError{"step", "a wait is not something a schedule can run: a template or an experiment"};
  const nlohmann::json doc{{"kind", "Scenario"},
                           {"name", "schedule"},
                           {"max_duration_s", kMaxScenarioDurationS},
                           {"steps", nlohmann::json::array({step})}};
  auto s = read_scenario(doc);
  if (auto* e = std::get_if<SpecError>(&s)) {
    SpecError named = *e;
    if (named.field.rfind("steps[0]", 0) == 0) named.field = "step" + named.field.substr(8);
    return named;
  }
  if (std::get<Scenario>(s).steps.at(0).is_wait())
    return SpecError{"step", "has no experiment or template: nothing to run"};
  return s;
}

// `unix_s` as local time in `zone`, RFC 3339 with its offset.
std::string local_time(int64_t unix_s, const CronZone& zone) {
  const int64_t off = zone.offset_at(unix_s);
  const time_t t = static_cast<time_t>(unix_s + off);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char sign = off < 0 ? '-' : '+';
  const int64_t a = off < 0 ? -off : off;
  char zone_part[16];
  std::snprintf(zone_part, sizeof zone_part, "%c%02lld:%02lld", sign, static_cast<long long>(a / 3600),
                static_cast<long long>(a % 3600 / 60));
  return std::string(buf) + zone_part;
}

nlohmann::json schedule_json(const ScheduleRow& s) {
  nlohmann::json j{{"id", s.id},
                   {"name", s.name},
                   {"cron", s.cron},
                   {"timezone", s.timezone},
                   {"agent_id", s.agent_id},
                   {"scenario_id", s.scenario_id ? nlohmann::json(*s.scenario_id) : nlohmann::json(nullptr)},
                   {"step", nullptr},
                   {"enabled", s.enabled},
                   {"next_due_ms", s.next_due_ms ? nlohmann::json(*s.next_due_ms) : nlohmann::json(nullptr)},
                   {"next_due", nullptr},
                   {"created_ms", s.created_ms},
                   {"created_by", s.created_by}};
  if (!s.step.empty()) j["step"] = nlohmann::json::parse(s.step, nullptr, false);
  if (s.next_due_ms)
    if (auto z = CronZone::find(s.timezone); auto* zone = std::get_if<CronZone>(&z))
      j["next_due"] = local_time(*s.next_due_ms / 1000, *zone);
  return j;
}

nlohmann::json firing_json(const ScheduleFiringRow& f) {
  auto opt = [](const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"id", f.id},
          {"schedule_id", f.schedule_id},
          {"due_ms", f.due_ms},
          {"fired_ms", f.fired_ms},
          {"status", f.status},
          {"code", f.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.code)},
          {"detail", f.detail},
          {"scenario_run_id", opt(f.scenario_run_id)},
          {"experiment_id", opt(f.experiment_id)},
          {"missed", f.missed}};
}

}  // namespace schedules_detail

using namespace schedules_detail;

HttpReply ControlPlane::create_schedule(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kScheduleFields)) return e->reply();
  ScheduleRow s;
  s.workspace_id = p.workspace_id;
  s.name = j["name"].get<std::string>();
  if (!valid_service_name(s.name)) return api_error(400, "name: must be 1-63 of a-z 0-9 . _ -", "name");
  s.cron = j["cron"].get<std::string>();
  s.timezone = j["timezone"].get<std::string>();
  auto read = read_cron(s.cron, s.timezone);
  if (auto* e = std::get_if<CronError>(&read)) return api_error(400, e->text(), e->field);
  const auto& [cron, zone] = std::get<CronAndZone>(read);
  if (j.contains("scenario_id") == j.contains("step"))
    return api_error(400, "scenario_id: a schedule runs a scenario (scenario_id) or one step (step), exactly one",
                     "scenario_id");
  s.agent_id = j["agent_id"].get<int64_t>();
  auto agent = store_.agent(p.workspace_id, s.agent_id);
  if (!agent) return storage_error(agent.error());
  if (!*agent) return api_error(404, "agent_id: no such agent", "agent_id");
  if (j.contains("scenario_id")) {
    s.scenario_id = j["scenario_id"].get<int64_t>();
    auto sc = store_.scenario(p.workspace_id, *s.scenario_id);
    if (!sc) return storage_error(sc.error());
    if (!*sc) return api_error(404, "scenario_id: no such scenario", "scenario_id");
  } else {
    auto step = read_step(j["step"]);
    if (auto* e = std::get_if<SpecError>(&step)) return api_error(400, e->text(), e->field);
    s.step = j["step"].dump();
  }
  const int64_t now = now_ms();
  auto next = cron.next_after(now / 1000, zone);
  if (!next) return api_error(400, "cron: fires at no time in the next ten years", "cron");
  s.next_due_ms = *next * 1000;
  s.created_ms = now;
  s.created_by = p.actor();
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto row = store_.insert_schedule(s);
  if (!row && row.error().err == kConflict) return api_error(409, row.error().message, "name");
  if (!row) return storage_error(row.error());
  if (auto a = audit(p, "schedule.create", "schedule:" + std::to_string(row->id),
                     {{"name", s.name}, {"cron", s.cron}, {"timezone", s.timezone}, {"agent_id", s.agent_id}});
      !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  return api_json(201, schedule_json(*row));
}

HttpReply ControlPlane::list_schedules(const Principal& p) {
  auto rows = store_.schedules(p.workspace_id);
  if (!rows) return storage_error(rows.error());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : *rows) out.push_back(schedule_json(r));
  return api_json(200, {{"schedules", out}});
}

HttpReply ControlPlane::get_schedule(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such schedule");
  auto row = store_.schedule(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such schedule");
  return api_json(200, schedule_json(**row));
}

// {"enabled": false} stops its firings; {"enabled": true} starts them again
// from the next one after now (none is made up for the time it was off).
HttpReply ControlPlane::patch_schedule(const HttpRequest& req, const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such schedule");
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kSchedulePatchFields)) return e->reply();
  const bool enabled = j["enabled"].get<bool>();
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto row = store_.schedule(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such schedule");
  std::optional<int64_t> next;
  if (enabled) {
    auto read = read_cron((*row)->cron, (*row)->timezone);
    if (auto* e = std::get_if<CronError>(&read))
      return api_error(500, "schedule " + std::to_string(*id) + " as stored does not read back: " + e->text());
    const auto& cz = std::get<CronAndZone>(read);
    if (auto n = cz.cron.next_after(now_ms() / 1000, cz.zone)) next = *n * 1000;
  }
  if (auto u = store_.set_schedule_enabled(p.workspace_id, *id, enabled, next); !u) return storage_error(u.error());
  if (auto a = audit(p, enabled ? "schedule.enable" : "schedule.disable", "schedule:" + std::to_string(*id), {}); !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  auto now_row = store_.schedule(p.workspace_id, *id);
  if (!now_row || !*now_row) return storage_error(now_row ? make_error(0, "the schedule vanished") : now_row.error());
  return api_json(200, schedule_json(**now_row));
}

HttpReply ControlPlane::delete_schedule(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such schedule");
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto gone = store_.delete_schedule(p.workspace_id, *id);
  if (!gone) return storage_error(gone.error());
  if (!*gone) return api_error(404, "no such schedule");
  if (auto a = audit(p, "schedule.delete", "schedule:" + std::to_string(*id), {}); !a) return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  return api_json(200, {{"deleted", true}, {"id", *id}});
}

HttpReply ControlPlane::list_schedule_firings(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such schedule");
  auto row = store_.schedule(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such schedule");
  auto rows = store_.schedule_firings(p.workspace_id, *id, kMaxFiringList);
  if (!rows) return storage_error(rows.error());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : *rows) out.push_back(firing_json(r));
  return api_json(200, {{"firings", out}});
}

// The worker: every due schedule, each firing claimed on its own, and each
// schedule's due times taken in order until none is due: a worker a second
// late on an every-second schedule records both, and never falls behind.
void ControlPlane::fire_schedules() {
  auto due = store_.due_schedules(now_ms());
  if (!due) std::fprintf(stderr, "faultcp: schedules: %s\n", due.error().describe().c_str());
  for (const auto& seen : due.value_or({})) {
    ScheduleRow s = seen;
    for (int i = 0; i < kMaxFiringsPerTick; ++i) {
      fire_schedule(s);
      auto again = store_.schedule(s.workspace_id, s.id);
      if (!again || !*again || !(*again)->enabled || !(*again)->next_due_ms || *(*again)->next_due_ms > now_ms() ||
          (*again)->next_due_ms == s.next_due_ms)
        break;
      s = **again;
    }
  }
  server_.after(config_.schedule_tick, [this] { fire_schedules(); });
}

void ControlPlane::fire_schedule(const ScheduleRow& seen) {
  const int64_t ws = seen.workspace_id;
  ScheduleFiringRow firing;
  std::optional<int64_t> woken;
  SqlTransaction tx(store_.sql());
  Status done = store_.begin(tx, ws);
  if (done) done = claim_schedule_firing(seen, firing, woken);
  if (done) done = tx.commit();
  if (!done) {
    // Rolled back: the firing is due again, for the next tick.
    std::fprintf(stderr, "faultcp: schedule %lld: %s\n", static_cast<long long>(seen.id),
                 done.error().describe().c_str());
    return;
  }
  if (woken) wake_agent(ws, *woken);
  if (!firing.scenario_run_id) return;
  // The run's first step now, as POST /v1/scenarios/{id}/run does: validated
  // at its dispatch. A first step refused there is this firing's skip.
  advance_scenario_run(ws, *firing.scenario_run_id);
  auto run = store_.scenario_run(ws, *firing.scenario_run_id);
  if (run && *run && (*run)->state == "refused") {
    firing.status = "skipped";
    firing.code = (*run)->code;
    firing.detail = "its scenario run " + std::to_string((*run)->id) + " was refused: " + (*run)->detail;
    if (auto u = store_.update_schedule_firing(firing); !u)
      std::fprintf(stderr, "faultcp: schedule %lld: %s\n", static_cast<long long>(seen.id),
                   u.error().describe().c_str());
  }
}

// Inside the workspace's transaction: re-reads the schedule, claims its due
// firing (another worker that saw it due finds it moved on and does nothing),
// then records the firing started or skipped. `firing.id` stays 0 when
// nothing was claimed.
Status ControlPlane::claim_schedule_firing(const ScheduleRow& seen, ScheduleFiringRow& firing,
                                           std::optional<int64_t>& woken) {
  const int64_t ws = seen.workspace_id, now = now_ms();
  auto row = store_.schedule(ws, seen.id);
  if (!row) return row.error();
  if (!*row || !(*row)->enabled || (*row)->next_due_ms != seen.next_due_ms || !seen.next_due_ms) return {};
  const ScheduleRow& s = **row;
  const int64_t due = *s.next_due_ms;
  firing = ScheduleFiringRow{0, s.id, ws, due, now, "skipped", "", "", std::nullopt, std::nullopt, 0};
  auto read = read_cron(s.cron, s.timezone);
  if (auto* e = std::get_if<CronError>(&read)) {
    // The zone left the host's tzdata: the schedule stops, saying why.
    auto claimed = store_.claim_schedule_firing(ws, s.id, due, std::nullopt);
    if (!claimed) return claimed.error();
    if (!*claimed) return {};
    firing.code = "schedule_unreadable";
    firing.detail = "the schedule as stored does not read back: " + e->text() + "; it fires no more";
    auto f = store_.insert_schedule_firing(firing);
    if (!f) return f.error();
    firing = *f;
    return audit_as(ws, "faultcp", "schedule.fire", "schedule:" + std::to_string(s.id), firing_json(firing));
  }
  const auto& cz = std::get<CronAndZone>(read);
  auto next_of = [&](int64_t unix_ms) -> std::optional<int64_t> {
    auto n = cz.cron.next_after(unix_ms / 1000, cz.zone);
    return n ? std::optional<int64_t>(*n * 1000) : std::nullopt;
  };
  // Firings later than the grace were missed while no faultcp ran: one row
  // counts them, none is made up, and the schedule goes on from the first
  // firing still within the grace.
  const int64_t grace = config_.schedule_grace.count();
  if (now - due > grace) {
    std::optional<int64_t> t = due;
    int64_t missed = 0, last = due;
    while (t && now - *t > grace && missed < kMaxMissedCounted) {
      last = *t;
      ++missed;
      t = next_of(*t);
    }
    if (t && now - *t > grace) t = next_of(now - grace - 1000);  // past the count's cap: skipped uncounted
    auto claimed = store_.claim_schedule_firing(ws, s.id, due, t);
    if (!claimed) return claimed.error();
    if (!*claimed) return {};
    firing.code = "missed";
    firing.missed = missed;
    firing.detail = std::to_string(missed) + (missed == kMaxMissedCounted ? " or more" : "") + " firing(s) from " +
                    rfc3339_from_ms(due) + " to " + rfc3339_from_ms(last) +
                    " were due while no faultcp ran (later than the grace of " + std::to_string(grace / 1000) +
                    " s): not made up";
    auto f = store_.insert_schedule_firing(firing);
    if (!f) return f.error();
    firing = *f;
    return audit_as(ws, "faultcp", "schedule.fire", "schedule:" + std::to_string(s.id), firing_json(firing));
  }
  auto claimed = store_.claim_schedule_firing(ws, s.id, due, next_of(due));
  if (!claimed) return claimed.error();
  if (!*claimed) return {};

  auto skip = [&](const std::string& code, const std::string& detail) -> Status {
    firing.status = "skipped";
    firing.code = code;
    firing.detail = detail;
    auto f = store_.insert_schedule_firing(firing);
    if (!f) return f.error();
    firing = *f;
    return audit_as(ws, "faultcp", "schedule.fire", "schedule:" + std::to_string(s.id), firing_json(firing));
  };
  // No overlap: the previous run of this schedule still going skips this one.
  auto last = store_.last_started_firing(ws, s.id);
  if (!last) return last.error();
  if (*last && (*last)->scenario_run_id) {
    auto r = store_.scenario_run(ws, *(*last)->scenario_run_id);
    if (!r) return r.error();
    if (*r && (*r)->state == "running")
      return skip("overlap", "scenario run " + std::to_string((*r)->id) + " of the previous firing is still running");
  } else if (*last && (*last)->experiment_id) {
    auto e = store_.experiment(ws, *(*last)->experiment_id);
    if (!e) return e.error();
    if (*e && !is_final_state((*e)->state))
      return skip("overlap", "experiment " + std::to_string((*e)->id) + " of the previous firing is " + (*e)->state);
  }
  auto w = store_.workspace(ws);
  if (!w) return w.error();
  auto a = store_.agent(ws, s.agent_id);
  if (!a) return a.error();
  if ((*w && (*w)->killed) || (*a && (*a)->killed))
    return skip("kill_switch",
                "a kill switch is engaged (the workspace's or agent " + std::to_string(s.agent_id) + "'s)");
  if (!*a) return skip("fact_unreadable", "agent " + std::to_string(s.agent_id) + " is gone");
  const std::string by = "schedule:" + std::to_string(s.id);

  if (s.scenario_id) {
    auto sc = store_.scenario(ws, *s.scenario_id);
    if (!sc) return sc.error();
    if (!*sc) return skip("scenario_unreadable", "scenario " + std::to_string(*s.scenario_id) + " is gone");
    auto doc = read_scenario(nlohmann::json::parse((*sc)->doc, nullptr, false));
    if (auto* e = std::get_if<SpecError>(&doc))
      return skip("scenario_unreadable", "the stored scenario does not read back: " + e->text());
    const Scenario& scenario = std::get<Scenario>(doc);
    auto run = store_.insert_scenario_run(ws, (*sc)->id, s.agent_id, now, now + scenario.max_duration_s * 1000, by);
    if (!run) return run.error();
    FL_TRY(audit_as(ws, by, "scenario.run", "scenario_run:" + std::to_string(run->id),
                    {{"scenario_id", (*sc)->id}, {"name", (*sc)->name}, {"agent_id", s.agent_id}, {"schedule", s.id}}));
    firing.status = "started";
    firing.scenario_run_id = run->id;
  } else {
    const nlohmann::json step_doc = nlohmann::json::parse(s.step, nullptr, false);
    auto read_s = read_step(step_doc);
    if (auto* e = std::get_if<SpecError>(&read_s))
      return skip("schedule_unreadable", "the stored step does not read back: " + e->text());
    const ScenarioStep& step = std::get<Scenario>(read_s).steps.at(0);
    ScenarioRunRow as_run;
    as_run.workspace_id = ws;
    as_run.agent_id = s.agent_id;
    auto refusal = refuse_scenario_step(as_run, step, step_doc);
    if (!refusal) return refusal.error();
    if (*refusal) {
      const auto& first = (**refusal)[0];
      return skip(first.value("code", ""), "refused at dispatch: " + first.value("message", ""));
    }
    auto e = store_.insert_experiment(ws, s.agent_id, step.spec.dump(), now);
    if (!e) return e.error();
    FL_TRY(audit_as(ws, by, "experiment.create", "experiment:" + std::to_string(e->id),
                    {{"agent_id", s.agent_id}, {"spec", step.spec}, {"schedule", s.id}}));
    firing.status = "started";
    firing.experiment_id = e->id;
    woken = s.agent_id;
  }
  auto f = store_.insert_schedule_firing(firing);
  if (!f) return f.error();
  firing = *f;
  return audit_as(ws, "faultcp", "schedule.fire", "schedule:" + std::to_string(s.id), firing_json(firing));
}

}  // namespace faultline::cp
