#include "ctl/global_flags.h"

#include "ctl/flag_error.h"

namespace faultline {

Result<GlobalFlags> take_global_flags(std::vector<std::string>& args, const EnvLookup& env) {
  GlobalFlags flags;
  if (const char* e = env("FAULTLINE_CP"); e != nullptr && *e != '\0') flags.cp_url = e;
  if (const char* e = env("FAULTLINE_CP_TOKEN"); e != nullptr && *e != '\0') flags.cp_token = e;
  size_t at = 0;
  while (at < args.size()) {
    const std::string& word = args[at];
    const size_t eq = word.find('=');
    const std::string flag = word.substr(0, eq);
    if (flag != "--control-plane" && flag != "--token") break;
    std::string value;
    if (eq != std::string::npos) {
      value = word.substr(eq + 1);
      at += 1;
    } else if (at + 1 < args.size()) {
      value = args[at + 1];
      at += 2;
    } else {
      return bad(flag + " needs a value");
    }
    if (value.empty()) return bad(flag + ": empty value");
    if (flag == "--token") {
      flags.cp_token = value;
    } else {
      flags.cp_url = value;
      flags.cp_flag_given = true;
    }
  }
  args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(at));
  return flags;
}

}  // namespace faultline
