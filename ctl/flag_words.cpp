// cxxopts over faultctl's words: its exceptions become one-line bad-input errors.
#include "ctl/flag_words.h"

#include <algorithm>

#include "ctl/flag_error.h"

namespace faultline {

FlagTable flag_table(const cxxopts::Options& o) {
  FlagTable t;
  for (const auto& group : o.groups()) {
    for (const auto& option : o.group_help(group).options) {
      for (const auto& name : option.l) t[name] = !option.is_boolean;
    }
  }
  return t;
}

FlagsAndCommand split_command(const std::vector<std::string>& args) {
  auto dd = std::find(args.begin(), args.end(), "--");
  FlagsAndCommand out;
  out.flags.assign(args.begin(), dd);
  if (dd != args.end()) out.command.assign(dd + 1, args.end());
  return out;
}

Result<cxxopts::ParseResult> parse_flag_words(cxxopts::Options& o, const std::vector<std::string>& words,
                                              std::string_view stray_hint) {
  std::vector<const char*> argv = {"faultctl"};
  for (const auto& w : words) argv.push_back(w.c_str());
  cxxopts::ParseResult r;
  try {
    r = o.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const cxxopts::exceptions::exception& e) {
    return bad(e.what());
  }
  if (!r.unmatched().empty()) {
    std::string msg = "unexpected argument '" + r.unmatched().front() + "'";
    if (!stray_hint.empty()) msg += " " + std::string(stray_hint);
    return bad(msg);
  }
  return r;
}

}  // namespace faultline
