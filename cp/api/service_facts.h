// The facts of one workspace as faultcp holds them (its store, Prometheus),
// read at each call: what the validator and the proposer's read-only tools
// read, never a request's claims.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cp/storage/store.h"
#include "userspace/orchestration/facts.h"

namespace faultline::cp {
namespace services_detail {

struct InstanceState {
  ServiceInstance instance;
  bool ready = false;
  std::string reason;
  std::optional<int64_t> last_seen_ms;
};

// The facts of one workspace as faultcp holds them, read at each call.
class ServiceStoreFacts final : public FactSource {
 public:
  ServiceStoreFacts(Store& store, int64_t ws, int64_t now_ms, int64_t ready_within_ms, InstantQuery* prom)
      : store_(store), ws_(ws), now_ms_(now_ms), ready_within_ms_(ready_within_ms), prom_(prom) {}

  Result<std::vector<InstanceState>> instances(const ServiceSpec& s) {
    auto w = store_.workspace(ws_);
    if (!w) return w.error();
    const bool ws_killed = *w && (*w)->killed;
    std::vector<InstanceState> out;
    for (const auto& i : s.instances) {
      InstanceState st{i, false, "", std::nullopt};
      auto a = store_.agent(ws_, i.agent);
      if (!a) return a.error();
      if (!*a) {
        st.reason = "no agent " + std::to_string(i.agent) + " in this workspace";
      } else {
        st.last_seen_ms = (*a)->last_seen_ms;
        const int64_t age = now_ms_ - (*a)->last_seen_ms;
        if ((*a)->killed)
          st.reason = "its agent's kill switch is engaged";
        else if (ws_killed)
          st.reason = "the workspace's kill switch is engaged";
        else if (age > ready_within_ms_)
          st.reason = "its agent last polled " + std::to_string(age / 1000) + " s ago";
        else
          st.ready = true;
      }
      out.push_back(std::move(st));
    }
    return out;
  }

  Result<std::optional<ServiceFacts>> facts_of(const ServiceRow& row) {
    auto spec = read_service_spec(nlohmann::json::parse(row.spec, nullptr, false));
    if (auto* e = std::get_if<SpecError>(&spec))
      return make_error(0, "service " + row.name + " as stored does not read back: " + e->text());
    ServiceFacts f;
    f.spec = std::get<ServiceSpec>(spec);
    auto inst = instances(f.spec);
    if (!inst) return inst.error();
    for (const auto& i : *inst) f.replicas_ready += i.ready ? 1 : 0;
    return std::optional<ServiceFacts>(std::move(f));
  }

  Result<std::optional<ServiceFacts>> service(const std::string& name) override {
    auto row = store_.service_by_name(ws_, name);
    if (!row) return row.error();
    if (!*row) return std::optional<ServiceFacts>();
    return facts_of(**row);
  }
  Result<SloReading> slo(const ServiceSpec& s) override {
    if (!prom_) return make_error(0, "faultcp was started without --prometheus-url");
    return read_slo(*prom_, s);
  }
  Result<bool> kill_switch_engaged(const ServiceFacts& s) override {
    auto w = store_.workspace(ws_);
    if (!w) return w.error();
    if (*w && (*w)->killed) return true;
    for (const auto& i : s.spec.instances) {
      auto a = store_.agent(ws_, i.agent);
      if (!a) return a.error();
      if (*a && (*a)->killed) return true;
    }
    return false;
  }
  // Every experiment not yet ended on an instance's agent counts, whatever it
  // targets on that host: one at a time per host the service runs on.
  Result<int64_t> experiments_in_flight(const ServiceFacts& s) override {
    auto active = store_.active_experiments(ws_);
    if (!active) return active.error();
    int64_t n = 0;
    for (const auto& e : *active)
      for (const auto& i : s.spec.instances)
        if (e.agent_id == i.agent) {
          ++n;
          break;
        }
    return n;
  }

 private:
  Store& store_;
  int64_t ws_, now_ms_, ready_within_ms_;
  InstantQuery* prom_;
};

}  // namespace services_detail
}  // namespace faultline::cp
