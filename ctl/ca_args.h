// `faultctl ca init|show|export|rotate` words -> CaArgs, with one-line errors
// naming the flag.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "ctl/help.h"

namespace faultline {

struct CaArgs {
  std::string action;          // init, show, export, rotate
  std::string dir;             // --dir; empty: default_ca_dir() (FAULTLINE_CA_DIR or /var/lib/faultline/ca)
  std::string out;             // export --out FILE; empty: stdout
  bool with_previous = false;  // export --with-previous
  bool json = false;           // show --json
};

[[nodiscard]] Result<Parsed<CaArgs>> parse_ca_args(const std::vector<std::string>& args);

}  // namespace faultline
