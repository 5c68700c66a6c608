// Hyperscan in streaming mode over a JSON-unescaped view, then the confirm
// step on a window around each hit. The view keeps only what a pending hit's
// window or a match still to come may need (kDlpLookbehind before the end,
// the hit's lookahead after it).
#include "userspace/guard/dlp_engine.h"

#include <hs/hs.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "userspace/guard/hs_scratch.h"

namespace faultline {
namespace dlp_engine_detail {

struct Anchor {
  DlpType type;
  const char* regex;
};
// Each detector's anchor: what Hyperscan finds; the confirm step does the rest.
constexpr Anchor kAnchors[] = {
    {DlpType::aws_access_key, "AKIA|ASIA"},
    {DlpType::anthropic_key, "sk-ant-"},
    {DlpType::openai_key, "sk-proj-"},
    {DlpType::github_token, "gh[pousr]_|github_pat_"},
    {DlpType::npm_token, "npm_"},
    {DlpType::slack_token, "xox[bpas]-"},
    {DlpType::google_api_key, "AIza"},
    {DlpType::jwt, "eyJ"},
    {DlpType::private_key, "-----BEGIN "},
    {DlpType::credit_card, "\\d{4}[ -]?\\d{4,6}[ -]?\\d{4}"},
    {DlpType::us_ssn, "\\d{3}-\\d{2}-\\d{4}"},
    {DlpType::email, "[A-Za-z0-9._%+-]@[A-Za-z0-9-]{1,63}\\.[A-Za-z]{2}"},
};

// A literal as a Hyperscan pattern: every byte but letters and digits escaped.
std::string escape_literal(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c)) {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

int on_match(unsigned int id, unsigned long long from, unsigned long long to, unsigned int flags, void* ctx) {
  (void)from;
  (void)flags;
  static_cast<DlpStream*>(ctx)->on_hit(id, to);
  return 0;
}

bool hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;  // a lone surrogate half
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// A complete JSON escape's bytes ("\n", "\u0041"), or nothing when it is not one.
std::optional<std::string> unescape(std::string_view e) {
  if (e.size() == 3 && e[0] == '%' && hex(e[1]) && hex(e[2]))  // a form's or a URL's %XX
    return std::string(1, static_cast<char>(std::stoi(std::string(e.substr(1)), nullptr, 16)));
  if (e[0] != '\\') return std::nullopt;
  if (e.size() == 2) {
    switch (e[1]) {
      case 'n':
        return std::string("\n");
      case 'r':
        return std::string("\r");
      case 't':
        return std::string("\t");
      case 'b':
        return std::string("\b");
      case 'f':
        return std::string("\f");
      case '/':
        return std::string("/");
      case '\\':
        return std::string("\\");
      case '"':
        return std::string("\"");
      default:
        return std::nullopt;
    }
  }
  if (e.size() == 6 && e[1] == 'u' && std::all_of(e.begin() + 2, e.end(), hex)) {
    std::string out;
    append_utf8(out, static_cast<uint32_t>(std::stoul(std::string(e.substr(2)), nullptr, 16)));
    return out;
  }
  return std::nullopt;
}

// Findings are kept in stream order whatever order their hits became ready in.
void insert_sorted(std::vector<DlpFinding>& v, DlpFinding f) {
  auto at = std::upper_bound(v.begin(), v.end(), f, [](const DlpFinding& a, const DlpFinding& b) {
    return std::make_pair(a.begin, a.kind()) < std::make_pair(b.begin, b.kind());
  });
  v.insert(at, std::move(f));
}

}  // namespace dlp_engine_detail

using namespace dlp_engine_detail;

std::string DlpFinding::kind() const { return type ? std::string(dlp_type_name(*type)) : "content:" + label; }

Result<std::shared_ptr<const DlpEngine>> DlpEngine::build(Options options) {
  std::shared_ptr<DlpEngine> e(new DlpEngine());
  e->serial_ = hs_next_serial();
  std::vector<std::string> exprs;
  std::vector<unsigned> flags, ids;
  for (const Anchor& a : kAnchors) {
    if (std::find(options.types.begin(), options.types.end(), a.type) == options.types.end()) continue;
    ids.push_back(static_cast<unsigned>(e->patterns_.size()));
    e->patterns_.push_back(Pattern{a.type, 0});
    exprs.emplace_back(a.regex);
    flags.push_back(0);
  }
  if (std::find(options.types.begin(), options.types.end(), DlpType::email) != options.types.end()) {
    auto tlds = TldSet::load(options.tld_path);
    if (!tlds) return tlds.error();
    e->tlds_ = std::move(*tlds);
  }
  for (size_t i = 0; i < options.content.size(); ++i) {
    const ContentRule& r = options.content[i];
    const std::string expr = r.regex ? r.pattern : escape_literal(r.pattern);
    const unsigned f = r.regex ? 0 : HS_FLAG_CASELESS;
    // Alone first, so that a refusal names its line.
    hs_database_t* one = nullptr;
    hs_compile_error_t* err = nullptr;
    if (hs_compile(expr.c_str(), f, HS_MODE_STREAM, nullptr, &one, &err) != HS_SUCCESS) {
      std::string why = err && err->message ? err->message : "refused by Hyperscan";
      hs_free_compile_error(err);
      return input_error(0, r.file + ":" + std::to_string(r.line) + ": label '" + r.label + "': " + why);
    }
    hs_free_database(one);
    ids.push_back(static_cast<unsigned>(e->patterns_.size()));
    e->patterns_.push_back(Pattern{std::nullopt, i});
    exprs.push_back(expr);
    flags.push_back(f);
  }
  if (exprs.empty()) return input_error(0, "the DLP engine has no detector and no content rule");
  std::vector<const char*> ptrs;
  for (const std::string& s : exprs) ptrs.push_back(s.c_str());
  hs_compile_error_t* err = nullptr;
  if (hs_compile_multi(ptrs.data(), flags.data(), ids.data(), static_cast<unsigned>(ptrs.size()), HS_MODE_STREAM,
                       nullptr, &e->db_, &err) != HS_SUCCESS) {
    std::string why = err && err->message ? err->message : "refused by Hyperscan";
    hs_free_compile_error(err);
    return make_error(0, "the DLP database: " + why);
  }
  e->options_ = std::move(options);
  return std::shared_ptr<const DlpEngine>(std::move(e));
}

DlpEngine::~DlpEngine() {
  if (db_) hs_free_database(db_);
}

DlpStream::DlpStream(std::shared_ptr<const DlpEngine> engine)
    : engine_(std::move(engine)), content_seen_(engine_->content().size(), false) {
  if (hs_open_stream(engine_->database(), 0, &stream_) != HS_SUCCESS) stream_ = nullptr;
}

DlpStream::~DlpStream() {
  if (stream_) (void)hs_close_stream(stream_, nullptr, nullptr, nullptr);
}

void DlpStream::on_hit(unsigned id, unsigned long long view_end) { pending_.push_back(Hit{id, view_end}); }

uint64_t DlpStream::raw_of(uint64_t view) const {
  auto it = std::upper_bound(breaks_.begin(), breaks_.end(), std::make_pair(view, UINT64_MAX));
  if (it == breaks_.begin()) return view;
  --it;
  return it->second + (view - it->first);
}

void DlpStream::push_view(std::string_view decoded, uint64_t raw_start, size_t raw_len) {
  // A break wherever the view and the raw bytes stop moving together (the
  // last break maps the view's end: no search).
  const auto& last = breaks_.back();
  if (last.second + (view_total_ - last.first) != raw_start) breaks_.emplace_back(view_total_, raw_start);
  buf_.append(decoded);
  view_total_ += decoded.size();
  if (decoded.size() != raw_len) breaks_.emplace_back(view_total_, raw_start + raw_len);
}

void DlpStream::scan_new() {
  // One Hyperscan call per piece fed, over all it decoded (not one per escape).
  if (stream_ && scanned_ < view_total_) {
    const char* from = buf_.data() + (scanned_ - buf_base_);
    if (hs_scratch_t* s = hs_thread_scratch(engine_->database(), engine_->serial()))
      (void)hs_scan_stream(stream_, from, static_cast<unsigned>(view_total_ - scanned_), 0, s, on_match, this);
  }
  scanned_ = view_total_;
}

void DlpStream::decode(std::string_view raw) {
  // The next '\\' and '%' by memchr each, looked for again only once passed.
  size_t next_bs = 0, next_pct = 0;
  auto next_escape = [&](size_t from) {
    auto find = [&](char c, size_t& cached) {
      if (cached != std::string_view::npos && cached < from) {
        const void* p = std::memchr(raw.data() + from, c, raw.size() - from);
        cached = p ? static_cast<size_t>(static_cast<const char*>(p) - raw.data()) : std::string_view::npos;
      }
      return cached;
    };
    return std::min(find('\\', next_bs), find('%', next_pct));
  };
  next_bs = next_pct = 0;
  if (!raw.empty()) {
    const void* b = std::memchr(raw.data(), '\\', raw.size());
    const void* p = std::memchr(raw.data(), '%', raw.size());
    next_bs = b ? static_cast<size_t>(static_cast<const char*>(b) - raw.data()) : std::string_view::npos;
    next_pct = p ? static_cast<size_t>(static_cast<const char*>(p) - raw.data()) : std::string_view::npos;
  }
  size_t i = 0;
  while (i < raw.size()) {
    if (!escape_.empty()) {
      escape_ += raw[i++];
      const bool u = escape_[0] == '\\' && escape_.size() >= 2 && escape_[1] == 'u';
      if (u && (escape_.size() == 2 || (escape_.size() < 6 && hex(escape_.back())))) continue;
      if (escape_[0] == '%' && escape_.size() < 3 && hex(escape_.back())) continue;
      std::optional<std::string> d = unescape(escape_);
      if (d) {
        push_view(*d, escape_raw_, escape_.size());
      } else {
        push_view(escape_, escape_raw_, escape_.size());  // not an escape: as it is
      }
      escape_.clear();
      continue;
    }
    const size_t bs = next_escape(i);
    const size_t plain_end = bs == std::string_view::npos ? raw.size() : bs;
    if (plain_end > i) push_view(raw.substr(i, plain_end - i), raw_total_ + i, plain_end - i);
    if (bs == std::string_view::npos) break;
    // A two-byte JSON escape whole in this piece (the usual "\n"): at once.
    if (raw[bs] == '\\' && bs + 1 < raw.size()) {
      const char c = raw[bs + 1];
      const char d = c == 'n'    ? '\n'
                     : c == 't'  ? '\t'
                     : c == 'r'  ? '\r'
                     : c == '"'  ? '"'
                     : c == '/'  ? '/'
                     : c == '\\' ? '\\'
                                 : 0;
      if (d) {
        push_view(std::string_view(&d, 1), raw_total_ + bs, 2);
        i = bs + 2;
        continue;
      }
    }
    escape_raw_ = raw_total_ + bs;
    escape_ = std::string(1, raw[bs]);
    i = bs + 1;
  }
  raw_total_ += raw.size();
}

void DlpStream::feed(std::string_view raw) {
  if (finished_ || raw.empty()) return;
  decode(raw);
  scan_new();
  confirm_ready(false);
  prune();
}

void DlpStream::finish() {
  if (finished_) return;
  if (!escape_.empty()) {
    push_view(escape_, escape_raw_, escape_.size());
    escape_.clear();
  }
  scan_new();
  if (stream_) {
    if (hs_scratch_t* s = hs_thread_scratch(engine_->database(), engine_->serial()))
      (void)hs_close_stream(stream_, s, on_match, this);
    else
      (void)hs_close_stream(stream_, nullptr, nullptr, nullptr);
    stream_ = nullptr;
  }
  finished_ = true;
  confirm_ready(true);
  prune();
}

void DlpStream::confirm_ready(bool finished) {
  std::vector<Hit> later;
  for (const Hit& h : pending_) {
    const DlpEngine::Pattern& p = engine_->pattern(h.id);
    if (!p.type) {
      if (content_seen_[p.content]) continue;
      content_seen_[p.content] = true;
      DlpFinding f;
      f.label = engine_->content()[p.content].label;
      f.begin = f.end = raw_of(h.view_end);
      f.hint = "content:" + f.label;
      insert_sorted(findings_, std::move(f));
      continue;
    }
    const uint64_t need = h.view_end + dlp_lookahead(*p.type);
    if (!finished && view_total_ < need) {
      later.push_back(h);
      continue;
    }
    const uint64_t wbegin = std::max(buf_base_, h.view_end > kDlpLookbehind ? h.view_end - kDlpLookbehind : 0);
    const uint64_t wend = std::min(view_total_, need);
    const std::string_view w(buf_.data() + (wbegin - buf_base_), wend - wbegin);
    const bool at_end = finished && wend == view_total_;
    auto span = dlp_confirm(*p.type, w, h.view_end - wbegin, at_end, engine_->tlds());
    if (!span) continue;
    const uint64_t vb = wbegin + span->begin, ve = wbegin + span->end;
    if (!seen_.emplace(static_cast<unsigned>(*p.type), vb).second) continue;
    DlpFinding f;
    f.type = p.type;
    f.begin = raw_of(vb);
    f.end = raw_of(ve);
    f.hint = dlp_hint(*p.type, w.substr(span->begin, span->end - span->begin));
    insert_sorted(findings_, std::move(f));
  }
  pending_ = std::move(later);
}

void DlpStream::prune() {
  uint64_t keep = view_total_ > kDlpLookbehind ? view_total_ - kDlpLookbehind : 0;
  for (const Hit& h : pending_) keep = std::min(keep, h.view_end > kDlpLookbehind ? h.view_end - kDlpLookbehind : 0);
  if (finished_) keep = view_total_;
  if (keep <= buf_base_) return;
  buf_.erase(0, keep - buf_base_);
  buf_base_ = keep;
  // The breaks before the window but the one it starts in.
  auto it = std::upper_bound(breaks_.begin(), breaks_.end(), std::make_pair(keep, UINT64_MAX));
  if (it != breaks_.begin()) --it;
  breaks_.erase(breaks_.begin(), it);
}

uint64_t DlpStream::settled_raw() const {
  if (finished_) return raw_total_;
  uint64_t v = view_total_ > kDlpLookbehind ? view_total_ - kDlpLookbehind : 0;
  for (const Hit& h : pending_) v = std::min(v, h.view_end > kDlpLookbehind ? h.view_end - kDlpLookbehind : 0);
  return std::min(raw_of(v), escape_.empty() ? raw_total_ : escape_raw_);
}

std::string DlpRedactor::release(uint64_t upto) {
  if (upto <= held_base_) return {};
  std::string out = held_.substr(0, upto - held_base_);
  for (const DlpFinding& f : scan_.findings()) {
    if (!f.type) continue;
    const uint64_t b = std::max(f.begin, held_base_), e = std::min(f.end, upto);
    for (uint64_t i = b; i < e; ++i) out[i - held_base_] = '*';
  }
  held_.erase(0, upto - held_base_);
  held_base_ = upto;
  return out;
}

std::string DlpRedactor::feed(std::string_view bytes) {
  held_.append(bytes);
  scan_.feed(bytes);
  return release(scan_.settled_raw());
}

std::string DlpRedactor::finish() {
  scan_.finish();
  return release(scan_.raw_fed());
}

std::vector<DlpFinding> dlp_scan(const std::shared_ptr<const DlpEngine>& engine, std::string_view bytes) {
  DlpStream s(engine);
  s.feed(bytes);
  s.finish();
  return s.findings();
}

}  // namespace faultline
