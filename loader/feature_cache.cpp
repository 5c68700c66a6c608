#include "loader/feature_cache.h"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/run_dir.h"

namespace faultline {
namespace {

constexpr size_t kMaxEntries = 8;

// Every probe of Features, with its name in the file.
std::vector<std::pair<const char*, FeatureProbe Features::*>> probe_fields() {
  return {{"bpf_syscall", &Features::bpf_syscall},
          {"tcx", &Features::tcx},
          {"clsact", &Features::clsact},
          {"bpf_loop", &Features::bpf_loop},
          {"sch_fq", &Features::sch_fq},
          {"cgroup_v2", &Features::cgroup_v2},
          {"set_retval", &Features::set_retval},
          {"ringbuf", &Features::ringbuf},
          {"lsm_listed", &Features::lsm_listed},
          {"bpf_lsm", &Features::bpf_lsm},
          {"fentry", &Features::fentry},
          {"kprobe_override", &Features::kprobe_override},
          {"seccomp_notify", &Features::seccomp_notify},
          {"fanotify_perm", &Features::fanotify_perm},
          {"io_uring", &Features::io_uring},
          {"skb_task_helpers", &Features::skb_task_helpers}};
}

nlohmann::json to_json(const Features& f) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, field] : probe_fields()) {
    const FeatureProbe& p = f.*field;
    j[name] = {{"available", p.available}, {"detail", p.detail}};
  }
  j["cgroup_v2_mount"] = f.cgroup_v2_mount;
  return j;
}

std::optional<Features> from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("cgroup_v2_mount") || !j["cgroup_v2_mount"].is_string()) return std::nullopt;
  Features f;
  for (const auto& [name, field] : probe_fields()) {
    if (!j.contains(name)) return std::nullopt;
    const auto& p = j[name];
    if (!p.is_object() || !p.contains("available") || !p["available"].is_boolean() || !p.contains("detail") ||
        !p["detail"].is_string())
      return std::nullopt;
    f.*field = FeatureProbe{p["available"].get<bool>(), p["detail"].get<std::string>()};
  }
  f.cgroup_v2_mount = j["cgroup_v2_mount"].get<std::string>();
  return f;
}

// The file as root wrote it, or nothing.
std::optional<nlohmann::json> read_trusted(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return std::nullopt;
  auto text = read_text_file(path);
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("entries") || !j["entries"].is_array()) return std::nullopt;
  return j;
}

}  // namespace

std::string FeatureCacheKey::text() const { return boot_id + "|" + release + "|" + binary + "|" + probes; }

std::optional<FeatureCacheKey> FeatureCacheKey::current(const std::string& probes) {
  FeatureCacheKey k;
  auto boot = read_text_file("/proc/sys/kernel/random/boot_id");
  if (!boot || boot->empty()) return std::nullopt;
  k.boot_id = *boot;
  while (!k.boot_id.empty() && (k.boot_id.back() == '\n' || k.boot_id.back() == ' ')) k.boot_id.pop_back();
  utsname u{};
  if (::uname(&u) != 0) return std::nullopt;
  k.release = u.release;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  struct stat st {};
  if (n <= 0 || ::stat("/proc/self/exe", &st) != 0) return std::nullopt;
  k.binary = std::string(exe, static_cast<size_t>(n)) + " " + std::to_string(st.st_size) + " " +
             std::to_string(static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL + st.st_mtim.tv_nsec);
  k.probes = probes;
  return k;
}

std::string feature_cache_path() { return state_root() + "/features.json"; }

std::optional<Features> read_cached_features(const std::string& path, const FeatureCacheKey& key) {
  auto j = read_trusted(path);
  if (!j) return std::nullopt;
  const std::string want = key.text();
  for (const auto& e : (*j)["entries"]) {
    if (e.is_object() && e.contains("key") && e["key"].is_string() && e["key"].get<std::string>() == want &&
        e.contains("features"))
      return from_json(e["features"]);
  }
  return std::nullopt;
}

bool write_cached_features(const std::string& path, const FeatureCacheKey& key, const Features& f) {
  if (::geteuid() != 0) return false;
  const std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty() && !ensure_private_dir(dir, true)) return false;
  nlohmann::json entries = nlohmann::json::array();
  entries.push_back({{"key", key.text()}, {"features", to_json(f)}});
  if (auto old = read_trusted(path)) {
    // Other binaries' and probe sets' entries of this boot stay; the oldest go.
    for (const auto& e : (*old)["entries"]) {
      if (entries.size() >= kMaxEntries) break;
      if (!e.is_object() || !e.contains("key") || !e["key"].is_string()) continue;
      const std::string k = e["key"].get<std::string>();
      if (k != key.text() && k.rfind(key.boot_id + "|", 0) == 0) entries.push_back(e);
    }
  }
  nlohmann::json file{{"entries", entries}};
  return static_cast<bool>(write_file_atomic(path, file.dump(1) + "\n"));
}

std::string features_to_json(const Features& f) { return to_json(f).dump(); }

std::optional<Features> features_from_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return from_json(j);
}

}  // namespace faultline
