// faultctl catalogue list | show T | render T --param K=V ...: the templates
// automation may start (userspace/orchestration/catalogue.h), read and
// rendered without faultcp: to the typed experiment's JSON, or to Chaos Mesh.
#include "userspace/orchestration/catalogue.h"

#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"

namespace faultline {
namespace {

constexpr const char* kCatalogueUsage =
    "usage: faultctl catalogue list [--json]\n"
    "       faultctl catalogue show TEMPLATE\n"
    "       faultctl catalogue render TEMPLATE --param NAME=VALUE ... [--cgroup PATH]\n"
    "                 [--service NAME] [--run ID] [--format json|chaos-mesh]\n"
    "  list: the templates, their version, max duration and parameters' ranges.\n"
    "  show: one template's definition (its JSON Schema, facts, max duration) and\n"
    "    its SHA-256.\n"
    "  render: a template instance, its parameters checked against the schema (a\n"
    "    bad one: exit 2 naming it and its range).\n"
    "    --format json (default): the typed experiment it renders to, as\n"
    "      faultctl scenario and faultcp read it; --cgroup PATH (required) is the\n"
    "      instance's cgroup (faultcp draws one: mode one); --service and --run\n"
    "      are copied into the output.\n"
    "    --format chaos-mesh: a chaos-mesh.org/v1alpha1 document, mode one,\n"
    "      selecting labelSelectors {service: NAME} (--service, required),\n"
    "      labelled chaos-agent/run: ID (--run, default manual); no --cgroup.\n"
    "  Reference: docs/orchestration.md (The catalogue)\n";

constexpr Example kCatalogueExamples[] = {
    {"the templates and their parameters", "faultctl catalogue list"},
    {"one template's JSON Schema and SHA-256", "faultctl catalogue show upstream_delay"},
    {"200 ms on one instance's calls to its database, as an experiment",
     "faultctl catalogue render upstream_delay --param target=10.0.0.7:5432 --param latency_ms=200 "
     "--param duration_s=60 --cgroup /system.slice/checkout.service"},
    {"the same as a Chaos Mesh NetworkChaos",
     "faultctl catalogue render upstream_delay --param target=10.0.0.7:5432 --param latency_ms=200 "
     "--param duration_s=60 --service checkout --run r42 --format chaos-mesh"},
};

struct CatalogueArgs {
  std::string verb;  // list, show, render
  std::string name;  // the template (show, render)
  bool json = false;
  nlohmann::json params = nlohmann::json::object();
  std::vector<std::pair<std::string, std::string>> param_texts;  // as written, read once the template is known
  std::optional<std::string> cgroup, service, run;
  std::string format = "json";
};

Result<Parsed<CatalogueArgs>> parse_catalogue_args(const std::vector<std::string>& args) {
  CatalogueArgs a;
  auto value = [&](size_t& i, const std::string& flag) -> Result<std::string> {
    if (i + 1 >= args.size()) return bad(flag + " needs a value");
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "-h" || w == "--help")
      return Parsed<CatalogueArgs>(HelpText{with_examples(kCatalogueUsage, kCatalogueExamples)});
    if (a.verb.empty()) {
      if (w != "list" && w != "show" && w != "render") return bad("'" + w + "': expected list, show or render");
      a.verb = w;
      continue;
    }
    const bool renders = a.verb == "render";
    if (w == "--json" && a.verb == "list") {
      a.json = true;
    } else if (w == "--param" && renders) {
      auto v = value(i, w);
      if (!v) return v.error();
      const auto eq = v->find('=');
      if (eq == std::string::npos || eq == 0) return bad("--param '" + *v + "': expected NAME=VALUE");
      for (const auto& [n, _] : a.param_texts)
        if (n == v->substr(0, eq)) return bad("--param " + n + ": given twice");
      a.param_texts.emplace_back(v->substr(0, eq), v->substr(eq + 1));
    } else if ((w == "--cgroup" || w == "--service" || w == "--run" || w == "--format") && renders) {
      auto v = value(i, w);
      if (!v) return v.error();
      auto& slot = w == "--cgroup" ? a.cgroup : w == "--service" ? a.service : a.run;
      if (w == "--format") {
        if (*v != "json" && *v != "chaos-mesh") return bad("--format '" + *v + "': expected json or chaos-mesh");
        a.format = *v;
      } else {
        if (slot) return bad(w + ": given twice");
        slot = *v;
      }
    } else if (w.size() > 1 && w.front() == '-') {
      return bad("unknown flag '" + w + "' for catalogue " + a.verb);
    } else if (a.verb != "list" && a.name.empty()) {
      a.name = w;
    } else {
      return bad("unexpected argument '" + w + "'");
    }
  }
  if (a.verb.empty()) return bad("expected list, show or render");
  if (a.verb != "list" && a.name.empty()) return bad(a.verb + " needs a TEMPLATE (faultctl catalogue list)");
  if (a.format == "chaos-mesh" && a.cgroup)
    return bad("--cgroup: a Chaos Mesh file selects its instance by label (--service), not by cgroup");
  if (a.verb == "render" && a.format == "json" && !a.cgroup)
    return bad("--cgroup PATH is required: the cgroup of the instance the experiment acts on");
  if (a.verb == "render" && a.format == "chaos-mesh" && !a.service)
    return bad("--service NAME is required: the Chaos Mesh file selects an instance of it by label");
  return Parsed<CatalogueArgs>(std::move(a));
}

int catalogue_list(const CatalogueArgs& a) {
  if (a.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& t : catalogue()) {
      nlohmann::json d = t.definition();
      d["sha256"] = t.sha256();
      list.push_back(std::move(d));
    }
    std::cout << nlohmann::json{{"templates", list}}.dump(2) << "\n";
    return kExitCompleted;
  }
  for (const auto& t : catalogue()) {
    std::cout << t.name << " v" << t.version << "  (" << t.summary << "; at most " << t.max_duration_s << " s)\n";
    for (const auto& p : t.params)
      std::cout << "    " << p.name << (p.required ? "" : " (optional)") << ": " << p.range() << "  -- " << p.help
                << "\n";
  }
  return kExitCompleted;
}

int catalogue_render(const CatalogueArgs& a, const CatalogueTemplate& t) {
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [n, text] : a.param_texts) params[n] = param_value(t, n, text);
  if (a.format == "chaos-mesh") {
    auto yaml = render_chaos_mesh(t, params, ChaosMeshTarget{*a.service, a.run.value_or("manual")});
    if (!yaml) return report_error("faultctl catalogue render", yaml.error());
    std::cout << *yaml;
    return kExitCompleted;
  }
  auto r = render_template(t, params, TemplateInstance{*a.cgroup});
  if (!r) return report_error("faultctl catalogue render", r.error());
  nlohmann::json out{{"template", t.name},
                     {"version", t.version},
                     {"template_sha256", t.sha256()},
                     {"params", params},
                     {"instance", {{"cgroup", *a.cgroup}}},
                     {"experiment", r->spec}};
  if (a.service) out["service"] = *a.service;
  if (a.run) out["run"] = *a.run;
  std::cout << out.dump(2) << "\n";
  return kExitCompleted;
}

int run_catalogue(const CatalogueArgs& a) {
  if (a.verb == "list") return catalogue_list(a);
  const CatalogueTemplate* t = find_template(a.name);
  if (!t) {
    std::cerr << "faultctl catalogue " << a.verb << ": '" << a.name << "' is not a template: one of " << fault_names()
              << "\n";
    return kExitBadInput;
  }
  if (a.verb == "show") {
    nlohmann::json d = t->definition();
    d["sha256"] = t->sha256();
    std::cout << d.dump(2) << "\n";
    return kExitCompleted;
  }
  return catalogue_render(a, *t);
}

}  // namespace

int cmd_catalogue(const std::vector<std::string>& args) {
  return run_command("faultctl catalogue", parse_catalogue_args(args), kRootNever, run_catalogue);
}

}  // namespace faultline
