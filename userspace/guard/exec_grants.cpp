#include "userspace/guard/exec_grants.h"

#include <algorithm>

namespace faultline {

std::string ExecGrants::add(const std::string& command, const std::string& rule) {
  std::lock_guard lock(mu_);
  for (const auto& g : grants_)
    if (g.command == command) return g.id;
  ExecGrant g{prefix_ + ".g" + std::to_string(++next_), command, rule, std::chrono::system_clock::now()};
  grants_.push_back(g);
  return g.id;
}

std::optional<ExecGrant> ExecGrants::find(const std::string& command) const {
  std::lock_guard lock(mu_);
  for (const auto& g : grants_)
    if (g.command == command) return g;
  return std::nullopt;
}

std::vector<ExecGrant> ExecGrants::list() const {
  std::lock_guard lock(mu_);
  return grants_;
}

bool ExecGrants::revoke(const std::string& id) {
  std::lock_guard lock(mu_);
  const auto n = std::erase_if(grants_, [&](const ExecGrant& g) { return g.id == id; });
  return n > 0;
}

size_t ExecGrants::revoke_all() {
  std::lock_guard lock(mu_);
  return std::exchange(grants_, {}).size();
}

}  // namespace faultline
