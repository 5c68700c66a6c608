// The six templates of the catalogue (issue 29 §2), their schemas, checks,
// renders to the typed experiment and to Chaos Mesh.
#include "userspace/orchestration/catalogue.h"

#include <cmath>
#include <regex>

#include "base/sha256.h"

namespace faultline {
namespace {

// "ADDRESS:PORT": an IPv4 address, or an IPv6 one in brackets, and a port
// 1-65535. The end is `(?![\s\S])`, not `$`: Python's `$` (python3-jsonschema)
// also matches before a final newline, ECMAScript's does not.
constexpr const char* kDependencyPattern =
    R"(^(((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])|)"
    R"(\[[0-9A-Fa-f:.]{2,45}\]):([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|)"
    R"(6553[0-5])(?![\s\S]))";
constexpr int64_t kDependencyMaxLength = 64;

TemplateParam catalogue_duration() {
  return {"duration_s", TemplateParam::Kind::Range, 30, 120, {}, {}, true, "how long the fault lasts, in seconds"};
}
// The HTTP templates' optional TLS termination; `who` speaks TLS ("the dependency").
TemplateParam catalogue_terminate_tls(const std::string& who) {
  return {"terminate_tls",
          TemplateParam::Kind::Flag,
          0,
          0,
          {},
          {},
          false,
          who + " speaks TLS: end it with the local CA (which the service must trust)"};
}
TemplateParam catalogue_target() {
  return {"target", TemplateParam::Kind::Dependency,
          0,        0,
          {},       {},
          true,     "the dependency, ADDRESS:PORT: one the service was seen calling"};
}

std::vector<CatalogueTemplate> catalogue_templates() {
  const std::vector<std::string> dependency_facts = {
      "service.chaos",    "service.window",           "service.stateful", "profile.dependencies",
      "slo.burn_rate_1h", "slo.budget_remaining_30d", "kill_switch",      "experiments_in_flight"};
  std::vector<std::string> instance_facts = dependency_facts;
  instance_facts.erase(instance_facts.begin() + 3);  // no dependency
  std::vector<std::string> kill_facts = instance_facts;
  kill_facts.insert(kill_facts.begin() + 3, {"profile.replicas_ready", "service.min_available"});
  return {
      {"upstream_delay",
       1,
       FaultClass::Dependency,
       120,
       dependency_facts,
       "tcp: a latency toxic on the instance's connections to the dependency",
       "add latency to one instance's calls to a dependency",
       {catalogue_target(),
        {"latency_ms", TemplateParam::Kind::Range, 20, 500, {}, {}, true, "added latency, in milliseconds"},
        catalogue_duration()}},
      {"upstream_partition",
       1,
       FaultClass::Dependency,
       120,
       dependency_facts,
       "tcp: a timeout toxic (no data either way, connections held) on the instance's connections to the dependency",
       "cut one instance off from a dependency",
       {catalogue_target(), catalogue_duration()}},
      {"upstream_http_error",
       1,
       FaultClass::Dependency,
       120,
       dependency_facts,
       "http: an error status answered to a share of the instance's requests to the dependency",
       "answer a share of one instance's HTTP calls to a dependency with an error",
       {catalogue_target(),
        {"status", TemplateParam::Kind::IntChoice, 0, 0, {429, 500, 502, 503, 504}, {}, true, "the status answered"},
        {"percent", TemplateParam::Kind::Range, 5, 50, {}, {}, true, "share of the requests answered with it"},
        catalogue_terminate_tls("the dependency"),
        catalogue_duration()}},
      {"llm_provider_overloaded",
       1,
       FaultClass::Dependency,
       120,
       dependency_facts,
       "http: the provider's own overloaded answer to a share of the instance's model calls",
       "make a model provider look overloaded to one instance",
       {catalogue_target(),
        {"provider",
         TemplateParam::Kind::WordChoice,
         0,
         0,
         {},
         {"anthropic", "openai"},
         true,
         "whose overloaded answer is given"},
        {"percent", TemplateParam::Kind::Range, 5, 50, {}, {}, true, "share of the calls answered with it"},
        catalogue_terminate_tls("the provider"),
        catalogue_duration()}},
      {"cpu_stress_one",
       1,
       FaultClass::Local,
       120,
       instance_facts,
       "cpu: one worker at the load's duty cycle in the instance's cgroup",
       "load a CPU inside one instance",
       {{"load", TemplateParam::Kind::Range, 20, 80, {}, {}, true, "duty cycle of the worker, in percent"},
        catalogue_duration()}},
      {"process_kill_one",
       1,
       FaultClass::Kill,
       120,
       kill_facts,
       "process: SIGKILL to every process of the instance's cgroup, then watched for the duration",
       "kill one instance and watch the service recover",
       {catalogue_duration()}},
  };
}

std::string catalogue_join(const std::vector<std::string>& words, const char* last) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? std::string(" ") + last + " " : ", ";
    out += words[i];
  }
  return out;
}

// An integer as JSON Schema counts one: a number with no fraction (30.0 too),
// never a boolean.
std::optional<int64_t> catalogue_integer(const nlohmann::json& v) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return INT64_MAX;
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d)) {
      if (d > 9.2e18) return INT64_MAX;
      if (d < -9.2e18) return INT64_MIN;
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

std::string catalogue_shown(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

std::optional<SpecError> catalogue_check_value(const TemplateParam& p, const nlohmann::json& v) {
  auto wrong = [&](const std::string& why) { return SpecError{p.name, why}; };
  switch (p.kind) {
    case TemplateParam::Kind::Range: {
      auto n = catalogue_integer(v);
      if (!n) return wrong(catalogue_shown(v) + " is not a whole number: " + p.range());
      if (*n < p.min || *n > p.max) return wrong(catalogue_shown(v) + " is out of range " + p.range());
      return std::nullopt;
    }
    case TemplateParam::Kind::IntChoice: {
      auto n = catalogue_integer(v);
      for (int64_t i : p.ints)
        if (n && *n == i) return std::nullopt;
      return wrong(catalogue_shown(v) + " is not one of " + p.range());
    }
    case TemplateParam::Kind::WordChoice:
      if (v.is_string())
        for (const auto& w : p.words)
          if (v.get<std::string>() == w) return std::nullopt;
      return wrong(catalogue_shown(v) + " is not one of " + p.range());
    case TemplateParam::Kind::Flag:
      if (!v.is_boolean()) return wrong(catalogue_shown(v) + " is not true or false");
      return std::nullopt;
    case TemplateParam::Kind::Dependency: {
      static const std::regex pattern(kDependencyPattern, std::regex::ECMAScript);
      if (!v.is_string() || v.get<std::string>().size() > kDependencyMaxLength ||
          !std::regex_search(v.get<std::string>(), pattern))
        return wrong(catalogue_shown(v) + " is not " + p.range());
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string catalogue_param_names(const CatalogueTemplate& t) {
  std::vector<std::string> names;
  for (const auto& p : t.params) names.push_back(p.name);
  return catalogue_join(names, "and");
}

// The YAML scalar of a string: always double-quoted, JSON's escapes are YAML's.
std::string catalogue_yaml_text(const std::string& s) { return nlohmann::json(s).dump(); }

// "app-1.internal" for metadata.name: lower case, '-' for what a DNS-1123 name has not.
std::string catalogue_dns_name(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    out += ok ? c : (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : '-';
  }
  return out;
}

// A Kubernetes label value: 1-63 of [A-Za-z0-9._-], alphanumeric at both ends.
bool catalogue_label_value(const std::string& v) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (v.empty() || v.size() > 63 || !alnum(v.front()) || !alnum(v.back())) return false;
  for (char c : v)
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

// The host of ADDRESS:PORT ("[::1]:443" -> "::1") and its port.
std::pair<std::string, std::string> catalogue_split_target(const std::string& t) {
  const auto colon = t.rfind(':');
  std::string host = t.substr(0, colon);
  if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
  return {host, t.substr(colon + 1)};
}

}  // namespace

std::string TemplateParam::range() const {
  switch (kind) {
    case Kind::Range:
      return std::to_string(min) + "-" + std::to_string(max);
    case Kind::IntChoice: {
      std::vector<std::string> w;
      for (int64_t i : ints) w.push_back(std::to_string(i));
      return catalogue_join(w, "or");
    }
    case Kind::WordChoice:
      return catalogue_join(words, "or");
    case Kind::Flag:
      return "true or false";
    case Kind::Dependency:
      return "ADDRESS:PORT (an IPv4 address or [IPv6], a port 1-65535)";
  }
  return "";
}

const std::vector<CatalogueTemplate>& catalogue() {
  static const std::vector<CatalogueTemplate> templates = catalogue_templates();
  return templates;
}

const CatalogueTemplate* find_template(const std::string& name) {
  for (const auto& t : catalogue())
    if (t.name == name) return &t;
  return nullptr;
}

const TemplateParam* CatalogueTemplate::param(const std::string& n) const {
  for (const auto& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

nlohmann::json CatalogueTemplate::schema() const {
  nlohmann::json props = nlohmann::json::object();
  nlohmann::json required = nlohmann::json::array();
  for (const auto& p : params) {
    nlohmann::json s{{"description", p.help}};
    switch (p.kind) {
      case TemplateParam::Kind::Range:
        s["type"] = "integer";
        s["minimum"] = p.min;
        s["maximum"] = p.max;
        break;
      case TemplateParam::Kind::IntChoice:
        s["type"] = "integer";
        s["enum"] = p.ints;
        break;
      case TemplateParam::Kind::WordChoice:
        s["type"] = "string";
        s["enum"] = p.words;
        break;
      case TemplateParam::Kind::Flag:
        s["type"] = "boolean";
        break;
      case TemplateParam::Kind::Dependency:
        s["type"] = "string";
        s["maxLength"] = kDependencyMaxLength;
        s["pattern"] = kDependencyPattern;
        break;
    }
    props[p.name] = std::move(s);
    if (p.required) required.push_back(p.name);
  }
  return {{"$schema", "https://json-schema.org/draft/2020-12/schema"},
          {"$id", "urn:faultline:catalogue:" + name + ":" + std::to_string(version)},
          {"title", name + " v" + std::to_string(version)},
          {"description", summary},
          {"type", "object"},
          {"additionalProperties", false},
          {"required", required},
          {"properties", props}};
}

nlohmann::json CatalogueTemplate::definition() const {
  const char* cls_name = cls == FaultClass::Dependency ? "dependency" : cls == FaultClass::Kill ? "kill" : "local";
  return {{"name", name},      {"version", version},       {"class", cls_name}, {"max_duration_s", max_duration_s},
          {"facts", facts},    {"renders_to", renders_to}, {"mode", "one"},     {"summary", summary},
          {"schema", schema()}};
}

std::string CatalogueTemplate::sha256() const { return sha256_hex(definition().dump()); }

std::optional<SpecError> check_params(const CatalogueTemplate& t, const nlohmann::json& params) {
  if (!params.is_object()) return SpecError{"params", "must be a JSON object of " + catalogue_param_names(t)};
  for (const auto& item : params.items())
    if (!t.param(item.key()))
      return SpecError{item.key(), "not a parameter of " + t.name + " (" + catalogue_param_names(t) + ")"};
  for (const auto& p : t.params) {
    if (!params.contains(p.name)) {
      if (p.required) return SpecError{p.name, "is required (" + p.range() + ")"};
      continue;
    }
    if (auto e = catalogue_check_value(p, params[p.name])) return e;
  }
  return std::nullopt;
}

nlohmann::json param_value(const CatalogueTemplate& t, const std::string& name, const std::string& text) {
  const TemplateParam* p = t.param(name);
  if (!p) return text;
  if (p->kind == TemplateParam::Kind::Range || p->kind == TemplateParam::Kind::IntChoice) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_discarded() && j.is_number()) return j;
  }
  if (p->kind == TemplateParam::Kind::Flag && (text == "true" || text == "false")) return text == "true";
  return text;
}

Result<RenderedTemplate> render_template(const CatalogueTemplate& t, const nlohmann::json& params,
                                         const TemplateInstance& instance) {
  if (auto e = check_params(t, params)) return input_error(0, e->text());
  if (instance.cgroup.empty())
    return input_error(0, "cgroup: " + t.name + " acts on one instance: its cgroup is required");
  const int64_t duration = *catalogue_integer(params["duration_s"]);
  nlohmann::json spec{{"duration_sec", duration}, {"cgroup", instance.cgroup}};
  auto integer = [&](const char* k) { return *catalogue_integer(params[k]); };
  auto tls = [&] { return params.contains("terminate_tls") && params["terminate_tls"].get<bool>(); };
  if (t.name == "upstream_delay") {
    spec["kind"] = "tcp";
    spec["target"] = params["target"];
    spec["toxic"] = nlohmann::json::array({"latency=" + std::to_string(integer("latency_ms")) + "ms"});
  } else if (t.name == "upstream_partition") {
    spec["kind"] = "tcp";
    spec["target"] = params["target"];
    spec["toxic"] = nlohmann::json::array({"timeout=0"});
  } else if (t.name == "upstream_http_error") {
    spec["kind"] = "http";
    spec["target"] = params["target"];
    spec["status"] = integer("status");
    spec["percent"] = integer("percent");
    if (tls()) spec["terminate_tls"] = true;
  } else if (t.name == "llm_provider_overloaded") {
    spec["kind"] = "http";
    spec["target"] = params["target"];
    spec["llm"] = "overloaded";
    spec["llm_provider"] = params["provider"];
    spec["percent"] = integer("percent");
    if (tls()) spec["terminate_tls"] = true;
  } else if (t.name == "cpu_stress_one") {
    spec["kind"] = "cpu";
    spec["cores"] = 1;
    spec["load"] = integer("load");
  } else if (t.name == "process_kill_one") {
    spec["kind"] = "process";
    spec["action"] = "kill";
    spec["signal"] = "SIGKILL";
  } else {
    return input_error(0, t.name + " has no render");
  }
  auto e = experiment_from_json(spec, "");
  if (!e) return input_error(0, t.name + " rendered an experiment that does not hold: " + e.error().message);
  return RenderedTemplate{std::move(spec), std::move(*e)};
}

Result<std::string> render_chaos_mesh(const CatalogueTemplate& t, const nlohmann::json& params,
                                      const ChaosMeshTarget& target) {
  if (auto e = check_params(t, params)) return input_error(0, e->text());
  if (!valid_service_name(target.service))
    return input_error(0,
                       "service: a Chaos Mesh file selects the instance by its service's name (1-63 of "
                       "a-z 0-9 . _ -), and none was given");
  if (!catalogue_label_value(target.run))
    return input_error(0, "run: '" + target.run +
                              "' cannot be the label chaos-agent/run's value (1-63 of A-Z a-z 0-9 . _ -, "
                              "starting and ending with a letter or digit)");
  const std::string duration = std::to_string(*catalogue_integer(params["duration_s"])) + "s";
  std::string kind, body;
  if (t.name == "upstream_delay" || t.name == "upstream_partition") {
    const auto [host, port] = catalogue_split_target(params["target"].get<std::string>());
    kind = "NetworkChaos";
    body = "  action: " + std::string(t.name == "upstream_delay" ? "delay" : "partition") +
           "\n"
           "  mode: one\n"
           "  selector:\n"
           "    labelSelectors:\n"
           "      service: " +
           catalogue_yaml_text(target.service) +
           "\n"
           "  direction: to\n"
           "  externalTargets:\n"
           "    - " +
           catalogue_yaml_text(host) + "  # port " + port + ": NetworkChaos has no port\n";
    if (t.name == "upstream_delay")
      body += "  delay:\n    latency: " +
              catalogue_yaml_text(std::to_string(*catalogue_integer(params["latency_ms"])) + "ms") + "\n";
    body += "  duration: " + catalogue_yaml_text(duration) + "\n";
  } else if (t.name == "cpu_stress_one") {
    kind = "StressChaos";
    body =
        "  mode: one\n"
        "  selector:\n"
        "    labelSelectors:\n"
        "      service: " +
        catalogue_yaml_text(target.service) +
        "\n"
        "  stressors:\n"
        "    cpu:\n"
        "      workers: 1\n"
        "      load: " +
        std::to_string(*catalogue_integer(params["load"])) + "\n  duration: " + catalogue_yaml_text(duration) + "\n";
  } else if (t.name == "process_kill_one") {
    kind = "PodChaos";
    body =
        "  action: pod-kill\n"
        "  mode: one\n"
        "  selector:\n"
        "    labelSelectors:\n"
        "      service: " +
        catalogue_yaml_text(target.service) +
        "\n"
        "  gracePeriod: 0  # SIGKILL\n"
        "  duration: " +
        catalogue_yaml_text(duration) + "  # the watch after the kill\n";
  } else {
    return input_error(0, t.name +
                              " has no Chaos Mesh form: HTTPChaos faults the requests a pod serves, this "
                              "template the requests the service makes (render it with --format json)");
  }
  return "apiVersion: chaos-mesh.org/v1alpha1\n"
         "kind: " +
         kind +
         "\n"
         "metadata:\n"
         "  name: " +
         catalogue_yaml_text(catalogue_dns_name(t.name + "-" + target.service)) +
         "\n"
         "  labels:\n"
         "    chaos-agent/run: " +
         catalogue_yaml_text(target.run) +
         "\n"
         "  annotations:\n"
         "    faultline.template: " +
         catalogue_yaml_text(t.name + "@" + std::to_string(t.version)) +
         "\n"
         "    faultline.template-sha256: " +
         catalogue_yaml_text(t.sha256()) +
         "\n"
         "spec:\n" +
         body;
}

}  // namespace faultline
