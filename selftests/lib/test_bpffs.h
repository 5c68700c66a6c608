// A test's private bpffs root (the FAULTLINE_BPFFS_ROOT its faultctl, faultd and
// fixtures use): the pins and folders under it, and the two lock files faultctl
// keeps for it under /run, removed. Call it after the test's processes are gone.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "loader/bpffs.h"

namespace fltest {

inline void remove_test_bpffs_root(const std::string& root) {
  if (root.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  // remove_layout_locks() without linking the loader (not every tier does).
  ::unlink(faultline::state_lock_path({root}).c_str());
  ::unlink(faultline::policy_lock_path({root}).c_str());
}

}  // namespace fltest
