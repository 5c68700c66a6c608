// The EXAMPLES of faultctl run, guard and mcp-guard --help parse as printed, so they cannot
// drift from the flags; and they fit in 80 columns.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ctl/guard_args.h"
#include "ctl/mcp_guard_args.h"
#include "ctl/packet_args.h"
#include "ctl/resource_args.h"
#include "ctl/syscall_args.h"

namespace faultline {
namespace {

// A command line split into words as a shell splits it: at blanks outside
// quotes, the quotes removed.
std::vector<std::string> shell_words(std::string_view line) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : line) {
    if (quote != 0 && c == quote) {
      quote = 0;
    } else if (quote == 0 && (c == '\'' || c == '"')) {
      quote = c;
      in_word = true;
    } else if (quote == 0 && c == ' ') {
      if (in_word) out.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) out.push_back(word);
  return out;
}

// The block after "EXAMPLES:", one line at a time.
std::vector<std::string> example_lines(const std::string& help) {
  std::vector<std::string> out;
  auto at = help.find("\nEXAMPLES:\n");
  if (at == std::string::npos) return out;
  std::string rest = help.substr(at + 11);
  for (size_t start = 0, nl; start < rest.size(); start = nl + 1) {
    nl = rest.find('\n', start);
    if (nl == std::string::npos) nl = rest.size();
    out.push_back(rest.substr(start, nl - start));
  }
  return out;
}

// The commands of the EXAMPLES block, their " \" continuations joined.
std::vector<std::vector<std::string>> example_commands(const std::string& help) {
  std::vector<std::vector<std::string>> out;
  std::string command;
  for (const std::string& line : example_lines(help)) {
    std::string_view l(line);
    while (l.starts_with(" ")) l.remove_prefix(1);
    if (l.starts_with("#") || l.empty()) continue;
    if (l.ends_with(" \\")) {
      command += std::string(l.substr(0, l.size() - 2)) + " ";
      continue;
    }
    out.push_back(shell_words(command + std::string(l)));
    command.clear();
  }
  return out;
}

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

template <typename Args>
std::string help_of(const Result<Parsed<Args>>& r) {
  if (!r.ok() || !std::holds_alternative<HelpText>(*r)) return "";
  return std::get<HelpText>(*r).text;
}

template <typename Args>
void expect_parses(const std::vector<std::string>& example, size_t skip,
                   Result<Parsed<Args>> (*parse)(const std::vector<std::string>&)) {
  ASSERT_GT(example.size(), skip) << joined(example);
  auto r = parse({example.begin() + static_cast<std::ptrdiff_t>(skip), example.end()});
  ASSERT_TRUE(r.ok()) << joined(example) << "\n  refused: " << r.error().message;
  EXPECT_TRUE(std::holds_alternative<Args>(*r)) << joined(example) << "\n  parsed as --help";
}

void expect_fits(const std::string& help, const char* who) {
  const auto lines = example_lines(help);
  EXPECT_GE(lines.size(), 2u) << who << ": no EXAMPLES block";
  for (const auto& l : lines) EXPECT_LE(l.size(), 80u) << who << ": " << l;
}

TEST(HelpExamples, PacketRunExamplesParse) {
  const std::string help = help_of(parse_packet_args({"--help"}));
  expect_fits(help, "run");
  const auto examples = example_commands(help);
  EXPECT_GE(examples.size(), 3u) << help;
  for (const auto& e : examples) {
    ASSERT_GE(e.size(), 2u);
    EXPECT_EQ(joined({e[0], e[1]}), "faultctl run");
    expect_parses(e, 2, parse_packet_args);
  }
}

TEST(HelpExamples, SyscallRunExamplesParse) {
  const std::string help = help_of(parse_syscall_args({"--help"}));
  expect_fits(help, "run syscall");
  const auto examples = example_commands(help);
  EXPECT_GE(examples.size(), 3u) << help;
  for (const auto& e : examples) {
    ASSERT_GE(e.size(), 3u);
    EXPECT_EQ(joined({e[0], e[1], e[2]}), "faultctl run syscall");
    expect_parses(e, 3, parse_syscall_args);
  }
}

TEST(HelpExamples, ResourceRunExamplesParse) {
  const std::string help = help_of(parse_resource_args({"cpu", "--help"}));
  expect_fits(help, "run cpu");
  const auto examples = example_commands(help);
  EXPECT_GE(examples.size(), 3u) << help;
  for (const auto& e : examples) {
    ASSERT_GE(e.size(), 2u);
    EXPECT_EQ(joined({e[0], e[1]}), "faultctl run");
    expect_parses(e, 2, parse_resource_args);
  }
}

TEST(HelpExamples, GuardExamplesParse) {
  // Some examples use the kernel's rules (a CIDR, --deny-errno), which the
  // parser refuses to a user before anything runs.
  if (::geteuid() != 0)
    GTEST_SKIP() << "*** SKIPPED: needs root: the guard's examples with kernel rules (a CIDR, --deny-errno) ***";
  const std::string help = help_of(parse_guard_args({"--help"}));
  expect_fits(help, "guard");
  const auto examples = example_commands(help);
  EXPECT_GE(examples.size(), 3u) << help;
  for (const auto& e : examples) {
    ASSERT_GE(e.size(), 2u);
    EXPECT_EQ(joined({e[0], e[1]}), "faultctl guard");
    expect_parses(e, 2, parse_guard_args);
  }
}

TEST(HelpExamples, McpGuardExamplesParse) {
  for (const std::vector<std::string>& ask :
       {std::vector<std::string>{"--help"}, std::vector<std::string>{"pins", "--help"}}) {
    const std::string help = help_of(parse_mcp_guard_args(ask));
    expect_fits(help, "mcp-guard");
    const auto examples = example_commands(help);
    EXPECT_GE(examples.size(), 3u) << help;
    for (const auto& e : examples) {
      ASSERT_GE(e.size(), 2u);
      EXPECT_EQ(joined({e[0], e[1]}), "faultctl mcp-guard");
      expect_parses(e, 2, parse_mcp_guard_args);
    }
  }
}

}  // namespace
}  // namespace faultline
