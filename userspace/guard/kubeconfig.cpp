// The kubeconfig's reading for --k8s-kubeconfig: the context, its cluster and
// user looked up by name, every field the guard acts on checked (an error
// naming the first one that is wrong), and the command's copy written.
#include "userspace/guard/kubeconfig.h"

#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace faultline {
namespace kubeconfig_impl {

constexpr size_t kMaxFileBytes = 1 << 20;

Error field_error(const std::string& origin, const std::string& field, const std::string& what) {
  return input_error(0, origin + ": " + field + ": " + what);
}

// Standard base64 (padding optional, whitespace skipped); nothing when it is not.
std::optional<std::string> base64_decode(std::string_view text) {
  std::string in;
  for (const char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) in.push_back(c);
  while (!in.empty() && in.back() == '=') in.pop_back();
  if (in.size() % 4 == 1) return std::nullopt;
  for (const char c : in)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/') return std::nullopt;
  const size_t pad = (4 - in.size() % 4) % 4;
  in.append(pad, '=');
  std::string out(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string base64_encode(std::string_view bytes) {
  std::string out((bytes.size() + 2) / 3 * 4 + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// A scalar field as text; nothing when absent; an error when not a scalar.
Result<std::optional<std::string>> scalar(const YAML::Node& map, const char* key, const std::string& origin,
                                          const std::string& where) {
  const YAML::Node n = map[key];
  if (!n || n.IsNull()) return std::optional<std::string>();
  if (!n.IsScalar()) return field_error(origin, where.empty() ? key : where + "." + key, "not a string");
  return std::optional<std::string>(n.Scalar());
}

// The entry of `list` (clusters, users, contexts) whose name is `name`, and
// the map under its `inner` key ("cluster", "user", "context").
Result<YAML::Node> named(const YAML::Node& root, const char* list, const char* inner, const std::string& name,
                         const std::string& origin, const std::string& referrer) {
  const YAML::Node l = root[list];
  if (l && !l.IsNull() && !l.IsSequence()) return field_error(origin, list, "not a list");
  if (l && l.IsSequence()) {
    for (size_t i = 0; i < l.size(); ++i) {
      const YAML::Node e = l[i];
      if (!e.IsMap() || !e["name"] || !e["name"].IsScalar() || e["name"].Scalar() != name) continue;
      const YAML::Node m = e[inner];
      if (!m || m.IsNull()) return YAML::Node(YAML::NodeType::Map);
      if (!m.IsMap()) return field_error(origin, std::string(list) + "[" + name + "]." + inner, "not a map");
      return m;
    }
  }
  return field_error(origin, referrer, "no entry named '" + name + "' in " + list);
}

std::string joined_path(const std::string& dir, const std::string& path) {
  if (path.empty() || path.front() == '/' || dir.empty()) return path;
  return dir + "/" + path;
}

Result<std::string> read_named_file(const std::string& path, const std::string& origin, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return field_error(origin, field, "cannot read " + path + ": " + std::strerror(errno));
  std::string text;
  text.resize(kMaxFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) return field_error(origin, field, path + ": over 1 MiB");
  return text;
}

// A PEM field given as a file (`key`) or as base64 data (`key`-data), not both.
Result<std::optional<std::string>> pem_field(const YAML::Node& map, const std::string& key, const std::string& origin,
                                             const std::string& where, const std::string& dir,
                                             std::string* origin_text = nullptr) {
  auto file = scalar(map, key.c_str(), origin, where);
  if (!file) return file.error();
  const std::string data_key = key + "-data";
  auto data = scalar(map, data_key.c_str(), origin, where);
  if (!data) return data.error();
  if (*file && *data)
    return field_error(origin, where + "." + key, "given twice: as " + key + " and as " + data_key + " (keep one)");
  if (*data) {
    auto pem = base64_decode(**data);
    if (!pem || pem->empty()) return field_error(origin, where + "." + data_key, "not base64 of a PEM text");
    if (origin_text != nullptr) *origin_text = data_key;
    return std::optional<std::string>(std::move(*pem));
  }
  if (*file) {
    if ((*file)->empty()) return field_error(origin, where + "." + key, "empty");
    const std::string path = joined_path(dir, **file);
    auto text = read_named_file(path, origin, where + "." + key);
    if (!text) return text.error();
    if (origin_text != nullptr) *origin_text = key + " " + path;
    return std::optional<std::string>(std::move(*text));
  }
  return std::optional<std::string>();
}

// https://host[:port][/path]: the host (lowercase, IPv6 unbracketed) and port.
Status read_server(const std::string& server, const std::string& origin, const std::string& field, KubeconfigUse& use) {
  constexpr std::string_view kHttps = "https://";
  std::string lower = server;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower.rfind("http://", 0) == 0)
    return field_error(origin, field,
                       "'" + server +
                           "': a plain http:// server; the guard presents the user's credentials over TLS "
                           "only (an https:// server)");
  if (lower.rfind(kHttps, 0) != 0) return field_error(origin, field, "'" + server + "': not an https:// URL");
  std::string authority = lower.substr(kHttps.size());
  authority = authority.substr(0, authority.find_first_of("/?#"));
  if (authority.find('@') != std::string::npos)
    return field_error(origin, field, "'" + server + "': credentials in the URL are not read");
  std::string host = authority;
  std::string port_text;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return field_error(origin, field, "'" + server + "': an unclosed [");
    host = authority.substr(1, close - 1);
    const std::string rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return field_error(origin, field, "'" + server + "': text after ]");
      port_text = rest.substr(1);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string::npos) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
  }
  if (host.empty()) return field_error(origin, field, "'" + server + "': no host");
  uint16_t port = 443;
  if (!port_text.empty()) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 || value > 65535)
      return field_error(origin, field, "'" + server + "': the port is not 1 to 65535");
    port = static_cast<uint16_t>(value);
  }
  use.server = server;
  use.host = host;
  use.port = port;
  return {};
}

Status read_cluster(const YAML::Node& c, const std::string& origin, const std::string& where, const std::string& dir,
                    KubeconfigUse& use) {
  auto server = scalar(c, "server", origin, where);
  if (!server) return server.error();
  if (!*server || (*server)->empty()) return field_error(origin, where + ".server", "missing");
  FL_TRY(read_server(**server, origin, where + ".server", use));
  auto proxy = scalar(c, "proxy-url", origin, where);
  if (!proxy) return proxy.error();
  if (*proxy && !(*proxy)->empty())
    return field_error(origin, where + ".proxy-url",
                       "not supported with --k8s-kubeconfig (the guard connects to the server itself)");
  auto name = scalar(c, "tls-server-name", origin, where);
  if (!name) return name.error();
  if (*name) use.tls_server_name = **name;
  const YAML::Node insecure = c["insecure-skip-tls-verify"];
  if (insecure && !insecure.IsNull()) {
    bool value = false;
    if (!insecure.IsScalar() || !YAML::convert<bool>::decode(insecure, value))
      return field_error(origin, where + ".insecure-skip-tls-verify", "not true or false");
    use.insecure = value;
  }
  auto ca = pem_field(c, "certificate-authority", origin, where, dir);
  if (!ca) return ca.error();
  if (*ca) {
    if (use.insecure)
      return field_error(origin, where + ".insecure-skip-tls-verify",
                         "true with a certificate-authority: give one or the other (as kubectl)");
    if (ca->value().find("-----BEGIN CERTIFICATE-----") == std::string::npos)
      return field_error(origin, where + ".certificate-authority", "holds no PEM certificate");
    use.ca_pem = std::move(**ca);
  }
  return {};
}

Status read_user(const YAML::Node& u, const std::string& origin, const std::string& where, const std::string& dir,
                 KubeconfigUse& use) {
  for (const char* plugin : {"exec", "auth-provider"}) {
    const YAML::Node n = u[plugin];
    if (n && !n.IsNull())
      return field_error(
          origin, where + "." + plugin,
          std::string(plugin == std::string_view("exec") ? "an exec credential plugin" : "an auth-provider") +
              " is not supported by --k8s-kubeconfig; use a token, tokenFile or a client certificate "
              "(fetch the token with the plugin into a file, and name it in tokenFile)");
  }
  auto token = scalar(u, "token", origin, where);
  if (!token) return token.error();
  auto token_file = scalar(u, "tokenFile", origin, where);
  if (!token_file) return token_file.error();
  auto username = scalar(u, "username", origin, where);
  if (!username) return username.error();
  auto password = scalar(u, "password", origin, where);
  if (!password) return password.error();
  const bool bearer = (*token && !(*token)->empty()) || (*token_file && !(*token_file)->empty());
  const bool basic = (*username && !(*username)->empty()) || (*password && !(*password)->empty());
  if (bearer && basic)
    return field_error(origin, where + ".username", "with a token too: give one way to authenticate (as kubectl)");
  HttpCredential h;
  h.where = "the kubeconfig user '" + use.user_name + "'";
  h.host = use.host;
  h.port = use.port;
  h.header = "Authorization";
  if (*token && !(*token)->empty()) {
    if ((*token)->find_first_of("\r\n") != std::string::npos)
      return field_error(origin, where + ".token", "holds a line break");
    h.value = "Bearer ${SECRET}";
    h.secret = {SecretKind::literal, **token};
    use.authorization = std::move(h);
  } else if (*token_file && !(*token_file)->empty()) {
    h.value = "Bearer ${SECRET}";
    h.secret = {SecretKind::file, joined_path(dir, **token_file)};
    use.authorization = std::move(h);
  } else if (basic) {
    if (!*username || (*username)->empty()) return field_error(origin, where + ".username", "missing (a password is)");
    if ((*username)->find(':') != std::string::npos) return field_error(origin, where + ".username", "holds a ':'");
    const std::string pair = **username + ":" + (*password ? **password : std::string());
    if (pair.find_first_of("\r\n") != std::string::npos)
      return field_error(origin, where + ".password", "holds a line break");
    h.value = "Basic ${SECRET}";
    h.secret = {SecretKind::literal, base64_encode(pair)};
    use.authorization = std::move(h);
  }
  auto cert = pem_field(u, "client-certificate", origin, where, dir, &use.client_cert_origin);
  if (!cert) return cert.error();
  auto key = pem_field(u, "client-key", origin, where, dir);
  if (!key) return key.error();
  if (cert->has_value() != key->has_value())
    return field_error(origin, where + (*cert ? ".client-key" : ".client-certificate"),
                       "missing (a client certificate needs both client-certificate and client-key)");
  if (*cert) {
    if ((*cert)->find("-----BEGIN CERTIFICATE-----") == std::string::npos)
      return field_error(origin, where + ".client-certificate", "holds no PEM certificate");
    if ((*key)->find("PRIVATE KEY-----") == std::string::npos)
      return field_error(origin, where + ".client-key", "holds no PEM private key");
    use.client_cert_pem = std::move(**cert);
    use.client_key_pem = std::move(**key);
  }
  return {};
}

}  // namespace kubeconfig_impl

using namespace kubeconfig_impl;

Result<KubeconfigUse> parse_kubeconfig(std::string_view text, const std::string& origin, const std::string& dir,
                                       const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return input_error(0, origin + ": not YAML: " + e.what());
  }
  if (!root.IsMap()) return input_error(0, origin + ": not a kubeconfig (a map with clusters, users, contexts)");
  KubeconfigUse use;
  use.context = context;
  std::string context_field = "--k8s-context";
  if (use.context.empty()) {
    auto current = scalar(root, "current-context", origin, "");
    if (!current) return current.error();
    if (!*current || (*current)->empty())
      return field_error(origin, "current-context", "missing (name the context with --k8s-context)");
    use.context = **current;
    context_field = "current-context";
  }
  auto ctx = named(root, "contexts", "context", use.context, origin, context_field);
  if (!ctx) return ctx.error();
  const std::string ctx_where = "contexts[" + use.context + "].context";
  auto cluster = scalar(*ctx, "cluster", origin, ctx_where);
  if (!cluster) return cluster.error();
  if (!*cluster || (*cluster)->empty()) return field_error(origin, ctx_where + ".cluster", "missing");
  use.cluster_name = **cluster;
  auto user = scalar(*ctx, "user", origin, ctx_where);
  if (!user) return user.error();
  if (*user) use.user_name = **user;
  auto ns = scalar(*ctx, "namespace", origin, ctx_where);
  if (!ns) return ns.error();
  if (*ns) use.namespace_name = **ns;

  auto c = named(root, "clusters", "cluster", use.cluster_name, origin, ctx_where + ".cluster");
  if (!c) return c.error();
  FL_TRY(read_cluster(*c, origin, "clusters[" + use.cluster_name + "].cluster", dir, use));
  if (!use.user_name.empty()) {
    auto u = named(root, "users", "user", use.user_name, origin, ctx_where + ".user");
    if (!u) return u.error();
    FL_TRY(read_user(*u, origin, "users[" + use.user_name + "].user", dir, use));
  }
  use.file = origin;
  return use;
}

Result<KubeconfigUse> read_kubeconfig(const std::string& path, const std::string& context) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return as_bad_input(errno_error(path));
  std::string text;
  text.resize(kMaxFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) return input_error(0, path + ": over 1 MiB");
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  return parse_kubeconfig(text, path, dir, context);
}

std::string child_kubeconfig(const KubeconfigUse& use, std::string_view guard_ca_pem) {
  using nlohmann::json;
  json cluster = {{"server", use.server}, {"certificate-authority-data", base64_encode(guard_ca_pem)}};
  if (!use.tls_server_name.empty()) cluster["tls-server-name"] = use.tls_server_name;
  const std::string user = use.user_name.empty() ? "faultline-guard" : use.user_name;
  // kubectl asks for a username on the terminal when an https cluster's user
  // has nothing to identify it; the stand-in token keeps it from asking. The
  // guard replaces it with the real Authorization, and beside a client
  // certificate the API server authenticates the certificate first.
  json child_user = json::object();
  if (use.authorization || !use.client_cert_pem.empty()) child_user["token"] = std::string(kChildStandInToken);
  json context = {{"cluster", use.cluster_name}, {"user", user}};
  if (!use.namespace_name.empty()) context["namespace"] = use.namespace_name;
  const json doc = {{"apiVersion", "v1"},
                    {"kind", "Config"},
                    {"clusters", json::array({{{"name", use.cluster_name}, {"cluster", cluster}}})},
                    {"users", json::array({{{"name", user}, {"user", child_user}}})},
                    {"contexts", json::array({{{"name", use.context}, {"context", context}}})},
                    {"current-context", use.context}};
  return doc.dump(2) + "\n";
}

TlsClientOptions kubeconfig_upstream_tls(const KubeconfigUse& use) {
  TlsClientOptions u;
  u.upstream_ca_pem = use.ca_pem;
  u.system_roots = use.ca_pem.empty();
  u.verify = !use.insecure;
  u.client_cert_pem = use.client_cert_pem;
  u.client_key_pem = use.client_key_pem;
  return u;
}

Result<std::shared_ptr<TlsClientContext>> kubeconfig_upstream_client(const KubeconfigUse& use) {
  auto client = TlsClientContext::create(kubeconfig_upstream_tls(use));
  if (client) return client;
  const std::string& m = client.error().message;
  const std::string user = "users[" + use.user_name + "].user.";
  const std::string field = m.rfind("upstream roots", 0) == 0
                                ? "clusters[" + use.cluster_name + "].cluster.certificate-authority"
                            : m.rfind("client certificate", 0) == 0 ? user + "client-certificate"
                            : m.rfind("client key", 0) == 0         ? user + "client-key"
                                                                    : std::string("TLS");
  return input_error(0, use.file + ": " + field + ": " + m);
}

std::string kubeconfig_credentials_text(const KubeconfigUse& use) {
  std::string out;
  if (use.authorization) {
    if (use.authorization->value.rfind("Basic", 0) == 0)
      out = "a username and password";
    else if (use.authorization->secret.kind == SecretKind::file)
      out = "a bearer token (tokenFile " + use.authorization->secret.ref + ")";
    else
      out = "a bearer token";
  }
  if (!use.client_cert_pem.empty())
    out += (out.empty() ? "" : " and ") + std::string("a client certificate (") + use.client_cert_origin + ")";
  return out.empty() ? "no credentials" : out;
}

}  // namespace faultline
