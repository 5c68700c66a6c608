// The catalogue: the experiments automation may start, as versioned templates
// in code. Each has a JSON Schema of its parameters (additionalProperties
// false: a model or a person fills the blanks, nothing else), its max
// duration, the facts the validator reads before it runs, and a render to the
// typed experiment (`Experiment`, read back by experiment_from_json()). Its
// SHA-256 (of its definition: name, version, schema, facts, what it renders
// to) goes into every record made from it, so a changed template is a new one.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/result.h"
#include "userspace/ops/experiment.h"
#include "userspace/orchestration/service.h"
#include "userspace/orchestration/validator.h"

namespace faultline {

// One parameter of a template, and the JSON Schema keywords it becomes.
struct TemplateParam {
  enum class Kind {
    Range,       // an integer from min to max
    IntChoice,   // one of `ints` (an HTTP status)
    WordChoice,  // one of `words` (a provider)
    Flag,        // a boolean
    Dependency,  // "ADDRESS:PORT" of a dependency the service was seen calling
  };
  std::string name;
  Kind kind = Kind::Range;
  int64_t min = 0, max = 0;
  std::vector<int64_t> ints;
  std::vector<std::string> words;
  bool required = true;
  std::string help;

  // "20-500", "429, 500, 502, 503 or 504", "anthropic or openai", ...
  [[nodiscard]] std::string range() const;
};

struct CatalogueTemplate {
  std::string name;
  int version = 1;
  FaultClass cls = FaultClass::Local;
  int64_t max_duration_s = 0;
  std::vector<std::string> facts;  // what the validator reads before a run
  std::string renders_to;          // the experiment family and its fault, for people
  std::string summary;
  std::vector<TemplateParam> params;

  // The parameters' JSON Schema (draft 2020-12, additionalProperties false).
  [[nodiscard]] nlohmann::json schema() const;
  // Everything that defines the template; its SHA-256 is sha256().
  [[nodiscard]] nlohmann::json definition() const;
  [[nodiscard]] std::string sha256() const;
  [[nodiscard]] const TemplateParam* param(const std::string& name) const;
};

// Every template, in catalogue order.
[[nodiscard]] const std::vector<CatalogueTemplate>& catalogue();
// The template of that name; none when there is none.
[[nodiscard]] const CatalogueTemplate* find_template(const std::string& name);

// The checks the schema makes, made here: unknown, missing and out-of-range
// parameters, each named with its range. python3-jsonschema agrees with it
// (selftests/orchestration/catalogue_test.cpp).
[[nodiscard]] std::optional<SpecError> check_params(const CatalogueTemplate& t, const nlohmann::json& params);

// A parameter written as text (`--param latency_ms=200`) as its JSON value:
// an integer, a boolean or a string, by the parameter's kind. Unknown names
// are left as strings: check_params() names them.
[[nodiscard]] nlohmann::json param_value(const CatalogueTemplate& t, const std::string& name, const std::string& text);

// The instance a template acts on: faultcp draws one (mode: one); on the
// command line it is given.
struct TemplateInstance {
  std::string cgroup;  // cgroup v2 path, as `faultctl run --cgroup` takes it
};

struct RenderedTemplate {
  nlohmann::json spec;  // the experiment's JSON, as experiment_from_json() reads it
  Experiment experiment;
};

// The typed experiment of a template instance: params are checked first
// (check_params), then the spec is read back by experiment_from_json(), so a
// render is a valid experiment or an error (bad input) naming the field.
[[nodiscard]] Result<RenderedTemplate> render_template(const CatalogueTemplate& t, const nlohmann::json& params,
                                                       const TemplateInstance& instance);

// What a Chaos Mesh file of a template is labelled and selects.
struct ChaosMeshTarget {
  std::string service;  // labelSelectors {service: NAME}
  std::string run;      // the label chaos-agent/run
};

// The template as a chaos-mesh.org/v1alpha1 document (mode: one): a
// NetworkChaos (upstream_delay, upstream_partition), a StressChaos
// (cpu_stress_one) or a PodChaos (process_kill_one). The HTTP templates have
// no Chaos Mesh form (HTTPChaos faults what a pod serves, not what it
// calls): refused as bad input.
[[nodiscard]] Result<std::string> render_chaos_mesh(const CatalogueTemplate& t, const nlohmann::json& params,
                                                    const ChaosMeshTarget& target);

}  // namespace faultline
