// The Kubernetes request facts (verb, resource, namespace, name) the guard
// reads from API paths, the --k8s-* patterns, the rules' matching in decide()
// and the Status a Kubernetes rule's denial is.
#include "userspace/guard/k8s_facts.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "userspace/guard/guard_answer.h"
#include "userspace/guard/guard_policy.h"

namespace faultline {
namespace {

struct PathCase {
  const char* method;
  const char* target;
  const char* verb;
  const char* resource;
  const char* ns;
  const char* name;
};

TEST(K8sFacts, VerbResourceNamespaceNameAsTheApiServerReadsThem) {
  const std::vector<PathCase> cases = {
      {"GET", "/api/v1/namespaces/prod/secrets/db", "get", "secrets", "prod", "db"},
      {"GET", "/api/v1/namespaces/prod/secrets", "list", "secrets", "prod", ""},
      {"GET", "/api/v1/namespaces/prod/secrets?watch=true&resourceVersion=5", "watch", "secrets", "prod", ""},
      {"GET", "/api/v1/namespaces/prod/secrets?watch=1", "watch", "secrets", "prod", ""},
      {"GET", "/api/v1/namespaces/prod/secrets?watch=false", "list", "secrets", "prod", ""},
      {"GET", "/api/v1/namespaces/prod/secrets?watch=0", "list", "secrets", "prod", ""},
      {"GET", "/api/v1/namespaces/prod/secrets?wat%63h=true", "watch", "secrets", "prod", ""},
      // kubectl get secret db --watch: a watch of one name by field selector.
      {"GET", "/api/v1/namespaces/prod/secrets?fieldSelector=metadata.name%3Ddb&watch=true", "watch", "secrets", "prod",
       "db"},
      {"GET", "/api/v1/secrets", "list", "secrets", "", ""},
      {"HEAD", "/api/v1/namespaces/dev/pods/p", "get", "pods", "dev", "p"},
      {"POST", "/api/v1/namespaces/dev/secrets", "create", "secrets", "dev", ""},
      {"PUT", "/api/v1/namespaces/dev/secrets/s", "update", "secrets", "dev", "s"},
      {"PATCH", "/api/v1/namespaces/dev/secrets/s", "patch", "secrets", "dev", "s"},
      {"DELETE", "/api/v1/namespaces/prod/secrets/db", "delete", "secrets", "prod", "db"},
      {"DELETE", "/api/v1/namespaces/prod/secrets", "deletecollection", "secrets", "prod", ""},
      {"DELETE", "/api/v1/namespaces/prod/secrets/", "deletecollection", "secrets", "prod", ""},
      // Connections into a pod are create, whatever the method.
      {"GET", "/api/v1/namespaces/dev/pods/p/exec?command=ls&stdout=true", "create", "pods/exec", "dev", "p"},
      {"POST", "/api/v1/namespaces/dev/pods/p/exec?command=ls", "create", "pods/exec", "dev", "p"},
      {"GET", "/api/v1/namespaces/dev/pods/p/attach", "create", "pods/attach", "dev", "p"},
      {"GET", "/api/v1/namespaces/dev/pods/p/portforward", "create", "pods/portforward", "dev", "p"},
      {"GET", "/api/v1/namespaces/dev/pods/p/log", "get", "pods/log", "dev", "p"},
      {"PUT", "/api/v1/namespaces/dev/pods/p/status", "update", "pods/status", "dev", "p"},
      {"GET", "/api/v1/namespaces/dev/pods/p/proxy/metrics", "get", "pods/proxy", "dev", "p"},
      // The namespaces themselves: the namespace is their name.
      {"GET", "/api/v1/namespaces", "list", "namespaces", "", ""},
      {"DELETE", "/api/v1/namespaces/prod", "delete", "namespaces", "prod", "prod"},
      {"PUT", "/api/v1/namespaces/prod/finalize", "update", "namespaces/finalize", "prod", "prod"},
      {"GET", "/api/v1/namespaces/prod/status", "get", "namespaces/status", "prod", "prod"},
      {"GET", "/api/v1/nodes/n1", "get", "nodes", "", "n1"},
      // Named groups: the resource group-qualified.
      {"DELETE", "/apis/apps/v1/namespaces/prod/deployments/web", "delete", "deployments.apps", "prod", "web"},
      {"PUT", "/apis/apps/v1/namespaces/prod/deployments/web/scale", "update", "deployments.apps/scale", "prod", "web"},
      {"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "list", "clusterroles.rbac.authorization.k8s.io", "",
       ""},
      // The legacy verb prefixes.
      {"GET", "/api/v1/watch/namespaces/prod/secrets", "watch", "secrets", "prod", ""},
      {"GET", "/api/v1/watch/namespaces/prod/secrets/db", "watch", "secrets", "prod", "db"},
      {"GET", "/api/v1/proxy/namespaces/dev/pods/p/a/b", "proxy", "pods", "dev", "p"},
      // Absolute form (a proxied plain-HTTP request), percent-encoding.
      {"DELETE", "http://10.0.0.1:6443/api/v1/namespaces/prod/secrets/db", "delete", "secrets", "prod", "db"},
      {"DELETE", "/api/v1/namespaces/pr%6fd/secrets/db", "delete", "secrets", "prod", "db"},
      {"OPTIONS", "/api/v1/namespaces/prod/secrets/db", "", "secrets", "prod", "db"},
  };
  for (const PathCase& c : cases) {
    SCOPED_TRACE(std::string(c.method) + " " + c.target);
    auto f = k8s_request_facts(c.method, c.target);
    ASSERT_TRUE(f.has_value());
    EXPECT_FALSE(f->unknown);
    EXPECT_EQ(f->verb, c.verb);
    EXPECT_EQ(f->resource, c.resource);
    EXPECT_EQ(f->namespace_, c.ns);
    EXPECT_EQ(f->name, c.name);
  }
}

TEST(K8sFacts, DiscoveryAndOtherPathsAreNoResourceRequest) {
  for (const char* t :
       {"/api", "/api/", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/apis/apps/v1/", "/version", "/healthz",
        "/openapi/v2", "/", "", "x", "/apix/v1/secrets", "http://h", "http://h?x=/api/v1/a", "/v1/messages"}) {
    SCOPED_TRACE(t);
    EXPECT_FALSE(k8s_request_facts("GET", t).has_value());
  }
}

TEST(K8sFacts, PathsTheGuardCannotReadAreUnknown) {
  for (const char* t :
       {"/api/v1/namespaces%2Fprod%2Fsecrets", "/api/v1/namespaces/prod%2fsecrets/db", "/api/v1//namespaces/prod",
        "/api/v1/namespaces/./prod/secrets", "/api/v1/namespaces/prod/../dev/secrets", "/api/v1/namespaces/pr%zzod",
        "//api/v1/namespaces/prod/secrets", "/./api/v1/secrets", "/api/v1/watch", "/api/v1/secrets%"}) {
    SCOPED_TRACE(t);
    auto f = k8s_request_facts("DELETE", t);
    ASSERT_TRUE(f.has_value());
    EXPECT_TRUE(f->unknown);
  }
}

GuardRule k8s_rule(const char* name, GuardVerdict action, std::string verb, std::string resource, std::string ns = "",
                   std::string n = "") {
  GuardRule r;
  r.name = name;
  r.action = action;
  r.k8s_verb = std::move(verb);
  r.k8s_resource = std::move(resource);
  r.k8s_namespace = std::move(ns);
  r.k8s_name = std::move(n);
  return r;
}

RequestFacts http(const char* method, const char* target, const char* host = "127.0.0.1") {
  RequestFacts f;
  f.method = method;
  f.host = host;
  f.port = 6443;
  f.path = target;
  f.k8s = k8s_request_facts(method, target);
  return f;
}

TEST(K8sRules, AndedWithTheHttpMatchersAndFailSafeOnUnknownPaths) {
  GuardPolicy p;
  p.mode = GuardMode::Enforce;
  p.rules.push_back(k8s_rule("no-prod-secrets", GuardVerdict::Deny, "delete", "secrets", "prod"));
  p.rules.push_back(k8s_rule("exec", GuardVerdict::Approve, "create", "pods/exec"));
  GuardRule reads = k8s_rule("reads", GuardVerdict::Allow, "*", "*");
  reads.host = *parse_host_matcher("api.cluster.example");
  p.rules.push_back(reads);
  p.default_allow = false;

  GuardDecision d = decide(p, http("DELETE", "/api/v1/namespaces/prod/secrets/db"));
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);
  EXPECT_EQ(d.rule, "no-prod-secrets");
  EXPECT_TRUE(d.k8s);
  // Namespace and name compare case-insensitively.
  EXPECT_EQ(decide(p, http("DELETE", "/api/v1/namespaces/PROD/secrets/db")).rule, "no-prod-secrets");
  // The same in dev: not this rule; the host rule allows it on its host only.
  d = decide(p, http("DELETE", "/api/v1/namespaces/dev/secrets/db", "api.cluster.example"));
  EXPECT_EQ(d.verdict, GuardVerdict::Allow);
  EXPECT_EQ(d.rule, "reads");
  d = decide(p, http("DELETE", "/api/v1/namespaces/dev/secrets/db"));
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);
  EXPECT_EQ(d.rule, "");
  EXPECT_FALSE(d.k8s);
  // Discovery is no resource request: no Kubernetes rule matches it.
  EXPECT_EQ(decide(p, http("GET", "/api/v1", "api.cluster.example")).rule, "");
  d = decide(p, http("GET", "/api/v1/namespaces/dev/pods/p/exec?command=sh", "api.cluster.example"));
  EXPECT_EQ(d.verdict, GuardVerdict::Approve);
  EXPECT_EQ(d.rule, "exec");
  // A path the guard cannot read: deny and approve rules match it, allow never.
  d = decide(p, http("DELETE", "/api/v1/namespaces%2Fprod%2Fsecrets/db", "api.cluster.example"));
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);
  EXPECT_EQ(d.rule, "no-prod-secrets");
  EXPECT_NE(d.reason.find("kubernetes facts unknown"), std::string::npos);
  EXPECT_FALSE(d.llm_facts_unknown);
  // A Kubernetes rule never matches a request that is not a Kubernetes one.
  GuardPolicy any;
  any.rules.push_back(k8s_rule("all", GuardVerdict::Deny, "*", "*"));
  EXPECT_EQ(decide(any, http("DELETE", "/v1/things/x")).verdict, GuardVerdict::Allow);
  EXPECT_EQ(decide(any, http("DELETE", "/apis/apps/v1/namespaces/a/deployments/b")).verdict, GuardVerdict::Deny);
}

TEST(K8sRules, GlobsOnResourceNamespaceAndName) {
  GuardPolicy p;
  p.rules.push_back(k8s_rule("pods-sub", GuardVerdict::Deny, "", "pods/*"));
  p.rules.push_back(k8s_rule("prod-ns", GuardVerdict::Deny, "get", "configmaps", "prod-*", "app-?"));
  EXPECT_EQ(decide(p, http("GET", "/api/v1/namespaces/a/pods/p/log")).rule, "pods-sub");
  EXPECT_EQ(decide(p, http("GET", "/api/v1/namespaces/a/pods/p")).rule, "");
  EXPECT_EQ(decide(p, http("GET", "/api/v1/namespaces/prod-eu/configmaps/app-1")).rule, "prod-ns");
  EXPECT_EQ(decide(p, http("GET", "/api/v1/namespaces/prod-eu/configmaps/app-12")).rule, "");
  // A name matcher never matches a collection.
  EXPECT_EQ(decide(p, http("GET", "/api/v1/namespaces/prod-eu/configmaps")).rule, "");
}

TEST(K8sPattern, KubectlOrderAndErrorsNamingTheFlag) {
  auto r = parse_k8s_pattern(GuardVerdict::Deny, "--k8s-deny", "delete secrets -n prod");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->name, "--k8s-deny delete secrets -n prod");
  EXPECT_EQ(r->k8s_verb, "delete");
  EXPECT_EQ(r->k8s_resource, "secrets");
  EXPECT_EQ(r->k8s_namespace, "prod");
  EXPECT_EQ(r->k8s_name, "");
  EXPECT_TRUE(needs_plaintext(*r));
  r = parse_k8s_pattern(GuardVerdict::Approve, "--k8s-approve", "CREATE pods/exec");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->k8s_verb, "create");
  EXPECT_EQ(r->k8s_resource, "pods/exec");
  r = parse_k8s_pattern(GuardVerdict::Allow, "--k8s-allow", "get configmaps app-config --namespace dev");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->k8s_name, "app-config");
  EXPECT_EQ(r->k8s_namespace, "dev");

  const std::vector<std::pair<const char*, const char*>> bad = {
      {"delete", "--k8s-deny 'delete': expected 'VERB RESOURCE [NAME] [-n NAMESPACE]'"},
      {"remove secrets", "--k8s-deny 'remove secrets': 'remove': a Kubernetes verb is get, list"},
      {"delete secrets -n", "--k8s-deny 'delete secrets -n': -n needs a namespace"},
      {"delete secrets -n a -n b", "--k8s-deny 'delete secrets -n a -n b': one namespace (-n) at most"},
      {"delete secrets --all", "--k8s-deny 'delete secrets --all': '--all': the only option is -n NAMESPACE"},
      {"delete secrets a b", "--k8s-deny 'delete secrets a b': expected"},
      {"", "--k8s-deny '': expected"},
  };
  for (const auto& [pattern, want] : bad) {
    SCOPED_TRACE(pattern);
    auto e = parse_k8s_pattern(GuardVerdict::Deny, "--k8s-deny", pattern);
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().message.rfind(want, 0), 0U) << e.error().message;
  }
  EXPECT_FALSE(parse_k8s_glob("a\tb", "name"));
  EXPECT_FALSE(parse_k8s_glob(std::string(254, 'a'), "name"));
}

TEST(K8sAnswer, AStatusKubectlPrints) {
  Denial d;
  d.rule = "--k8s-deny delete secrets -n prod";
  d.reason = "denied by rule";
  d.request_id = "req_g_7";
  const LlmAnswer a = denial_answer(d, DenialFormat::Kubernetes);
  EXPECT_EQ(a.status, 403);
  const auto j = nlohmann::json::parse(a.body);
  EXPECT_EQ(j["kind"], "Status");
  EXPECT_EQ(j["apiVersion"], "v1");
  EXPECT_EQ(j["status"], "Failure");
  EXPECT_EQ(j["reason"], "Forbidden");
  EXPECT_EQ(j["code"], 403);
  EXPECT_EQ(j["message"],
            "faultline guard: denied by rule '--k8s-deny delete secrets -n prod': denied by rule (request req_g_7)");
  d.cause = DenialCause::Budget;
  const LlmAnswer b = denial_answer(d, DenialFormat::Kubernetes);
  EXPECT_EQ(b.status, 429);
  EXPECT_EQ(nlohmann::json::parse(b.body)["reason"], "TooManyRequests");
}

}  // namespace
}  // namespace faultline
