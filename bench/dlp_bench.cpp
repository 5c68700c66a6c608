// 9. DLP throughput on one core: Faultline's engine (the JSON-unescaped view,
// Hyperscan streaming, the confirm step) against RE2::Set, PCRE2-JIT and
// std::regex searching the same detectors' patterns over the same corpus:
// chat-API JSON bodies of Debian's text, base64 blobs, and a planted secret
// every 64 KiB. The peers only find candidates (no confirm, no streaming):
// what they do is less than ours. Targets: >= 1 GB/s and >= 5x RE2::Set.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <re2/re2.h>
#include <re2/set.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "bench/bench_util.h"
#include "userspace/guard/dlp_engine.h"

namespace {

using namespace flbench;

// The detectors' shapes as a peer writes them (the whole candidate, no confirm).
const std::vector<std::string> kPeerPatterns = {
    "(?:AKIA|ASIA)[A-Z0-9]{16}",
    "sk-ant-[a-z]+[0-9]{2}-[A-Za-z0-9_-]{80,160}",
    "sk-proj-[A-Za-z0-9_-]{40,250}",
    "gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}",
    "npm_[A-Za-z0-9]{36}",
    "xox[bpas]-[0-9]+-[0-9]+-[A-Za-z0-9]+",
    "AIza[A-Za-z0-9_-]{35}",
    "eyJ[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]*",
    "-----BEGIN [A-Z ]*PRIVATE KEY-----",
    "[0-9]{4}[ -]?[0-9]{4,6}[ -]?[0-9]{4}[ -]?[0-9]{0,4}",
    "[0-9]{3}-[0-9]{2}-[0-9]{4}",
    "[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}",
};

std::vector<std::string> make_corpus(size_t bytes) {
  std::string text;
  for (const char* dir : {"/usr/share/common-licenses", "/usr/include/linux"}) {
    if (!std::filesystem::is_directory(dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (text.size() > 8'000'000) break;
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path());
      text.append(std::istreambuf_iterator<char>(in), {});
    }
  }
  std::mt19937_64 rng(99);
  std::vector<std::string> docs;
  size_t total = 0, at = 0;
  const std::string b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  while (total < bytes) {
    std::string content = text.substr(at % (text.size() - 50'000), 40'000);
    at += 40'000;
    std::string blob;
    for (int i = 0; i < 12'000; ++i) blob += b64[rng() % 64];
    content += " attachment:" + blob + " key AKIA" + std::string("QWERTYUIOPASDFGH") + " mail ops@example.com";
    docs.push_back(nlohmann::json{
        {"model", "claude-sonnet-4"}, {"max_tokens", 1024}, {"messages", {{{"role", "user"}, {"content", content}}}}}
                       .dump());
    total += docs.back().size();
  }
  return docs;
}

size_t corpus_bytes(const std::vector<std::string>& docs) {
  size_t n = 0;
  for (const auto& d : docs) n += d.size();
  return n;
}

double gbps(size_t bytes, uint64_t ns) { return double(bytes) / double(ns); }

}  // namespace

int main(int argc, char** argv) {
  std::string summary;
  int reps = 5;
  size_t mib = 32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--summary" && i + 1 < argc)
      summary = argv[++i];
    else if (a == "--reps" && i + 1 < argc)
      reps = std::max(3, std::atoi(argv[++i]));
    else if (a == "--mib" && i + 1 < argc)
      mib = std::max<size_t>(4, std::stoul(argv[++i]));
    else {
      std::cerr << "usage: fl_bench_dlp [--summary FILE] [--reps N>=3] [--mib N>=4]\n";
      return 2;
    }
  }
  const auto docs = make_corpus(mib << 20);
  const size_t bytes = corpus_bytes(docs);

  faultline::DlpEngine::Options o;
  o.types = faultline::all_dlp_types();
  auto engine = faultline::DlpEngine::build(o);
  if (!engine) {
    std::cerr << "fl_bench_dlp: " << engine.error().describe() << "\n";
    return 1;
  }
  RE2::Options ro;
  ro.set_max_mem(256 << 20);
  RE2::Set set(ro, RE2::UNANCHORED);
  for (const auto& p : kPeerPatterns)
    if (set.Add(p, nullptr) < 0) return 1;
  if (!set.Compile()) return 1;
  std::string alternation;
  for (const auto& p : kPeerPatterns) alternation += (alternation.empty() ? "(?:" : "|(?:") + p + ")";
  int perr = 0;
  PCRE2_SIZE poff = 0;
  pcre2_code* pcre =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(alternation.c_str()), PCRE2_ZERO_TERMINATED, 0, &perr, &poff, nullptr);
  if (!pcre || pcre2_jit_compile(pcre, PCRE2_JIT_COMPLETE) != 0) return 1;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(pcre, nullptr);
  const std::regex stdre(alternation, std::regex::ECMAScript | std::regex::optimize);

  std::vector<double> ours, re2s, pcres, stds, ratio;
  size_t found = 0;
  for (int rep = 0; rep < reps; ++rep) {
    uint64_t t = thread_cpu_ns();
    size_t n = 0;
    for (const auto& d : docs) {
      faultline::DlpStream s(*engine);
      for (size_t i = 0; i < d.size(); i += 16384) s.feed(std::string_view(d).substr(i, 16384));
      s.finish();
      n += s.findings().size();
    }
    const double a = gbps(bytes, thread_cpu_ns() - t);
    found = n;
    t = thread_cpu_ns();
    std::vector<int> hits;
    for (const auto& d : docs) {
      hits.clear();
      (void)set.Match(d, &hits);
    }
    const double b = gbps(bytes, thread_cpu_ns() - t);
    t = thread_cpu_ns();
    for (const auto& d : docs) {
      PCRE2_SIZE at = 0;
      while (pcre2_jit_match(pcre, reinterpret_cast<PCRE2_SPTR>(d.data()), d.size(), at, 0, md, nullptr) > 0) {
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        at = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
      }
    }
    const double c = gbps(bytes, thread_cpu_ns() - t);
    // std::regex is slow: a slice of the corpus (one document in 16).
    t = thread_cpu_ns();
    size_t slice = 0;
    for (size_t i = 0; i < docs.size(); i += 16) {
      for (auto it = std::sregex_iterator(docs[i].begin(), docs[i].end(), stdre); it != std::sregex_iterator(); ++it) {
      }
      slice += docs[i].size();
    }
    const double e = gbps(slice, thread_cpu_ns() - t);
    ours.push_back(a);
    re2s.push_back(b);
    pcres.push_back(c);
    stds.push_back(e);
    ratio.push_back(a / b);
    std::cout << "  rep " << rep + 1 << ": faultline " << fmt(a, 3) << " GB/s, RE2::Set " << fmt(b, 3)
              << " GB/s, PCRE2-JIT " << fmt(c, 3) << " GB/s, std::regex " << fmt(e, 4) << " GB/s (" << found
              << " findings)\n";
  }
  pcre2_match_data_free(md);
  pcre2_code_free(pcre);
  const Spread a = spread(ours), b = spread(re2s), c = spread(pcres), e = spread(stds), r = spread(ratio);
  const bool fast = a.median >= 1.0, vs_re2 = r.median >= 5.0;
  std::cout << "DLP, one core, " << (bytes >> 20) << " MiB of chat JSON: faultline " << fmt_spread(a, 3, " GB/s")
            << " (target >= 1 GB/s: " << verdict(fast) << "), " << fmt_spread(r, 2, "x")
            << " RE2::Set (target >= 5x: " << verdict(vs_re2) << "); RE2::Set " << fmt_spread(b, 3, " GB/s")
            << ", PCRE2-JIT " << fmt_spread(c, 3, " GB/s") << ", std::regex " << fmt_spread(e, 4, " GB/s") << "\n";
  append_summary(summary,
                 {"9 dlp", "faultline engine, one core", fmt_spread(a, 3, " GB/s"), "-", ">= 1 GB/s", verdict(fast)});
  append_summary(summary, {"9 dlp", "RE2::Set, same patterns", fmt_spread(b, 3, " GB/s"),
                           fmt_spread(r, 2, "x faultline/RE2"), ">= 5x", verdict(vs_re2)});
  append_summary(summary, {"9 dlp", "PCRE2-JIT, one alternation", fmt_spread(c, 3, " GB/s"),
                           fmt(a.median / c.median, 2) + "x faultline/PCRE2", "-", "report"});
  append_summary(summary, {"9 dlp", "std::regex, one alternation", fmt_spread(e, 4, " GB/s"),
                           fmt(a.median / e.median, 1) + "x faultline/std::regex", "-", "report"});
  return fast && vs_re2 ? 0 : 1;
}
