// The prompt guard: segments out of the request's JSON, each normalised with
// ICU and read three ways (as written, leetspeak undone, base64 runs
// decoded), then one Hyperscan block scan of each reading. A rule is strong
// (any source) or weak (tool_result content only: text the model reads that
// nobody on the operator's side wrote).
#include "userspace/guard/prompt_guard.h"

#include <hs/hs.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/uspoof.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "userspace/guard/hs_scratch.h"

namespace faultline {
namespace prompt_guard_detail {

enum class Strength : uint8_t { strong, weak };

struct Rule {
  InjectionFamily family;
  Strength strength;
  const char* regex;  // over the normalised text: lower case, one space between words
};

// Built from the published attack families (Perez & Ribeiro's goal hijacking
// and prompt leaking, Greshake et al.'s indirect injection, the chat
// templates' role tokens, markdown-image exfiltration) and tuned on the dev
// split of selftests/data/prompt_injection (never on its test split).
constexpr Rule kRules[] = {
    // Instruction override.
    {InjectionFamily::instruction_override, Strength::strong,
     "\\b(ignore|disregard|forget|override|bypass|skip|abandon|discard|neglect|dismiss|drop)\\b[^.\\n]{0,40}\\b("
     "previous|prior|above|earlier|preceding|foregoing|former|original|initial|system|developer|your)\\b[^.\\n]{0,"
     "30}\\b(instructions?|prompts?|rules|directives?|guidelines|guidance|constraints|policies|programming|"
     "restrictions|safeguards|guardrails|orders|commands|training)\\b"},
    {InjectionFamily::instruction_override, Strength::strong,
     "\\b(ignore|disregard|forget|override|bypass|skip|drop)\\b (all|everything|anything)( that)? (you were|you've "
     "been|you have been|i) (told|said|given|instructed)"},
    {InjectionFamily::instruction_override, Strength::strong,
     "\\b(new|updated|real|actual|revised|true) (system )?(instructions|directives?|orders)( are)? ?:"},
    {InjectionFamily::instruction_override, Strength::strong,
     "\\bfrom now on\\b[^.\\n]{0,20}\\byou\\b[^.\\n]{0,15}\\b(are|will|must|shall|should|respond|answer|act|only|"
     "obey)\\b"},
    {InjectionFamily::instruction_override, Strength::strong,
     "\\byou are (now|no longer)\\b[^.\\n]{0,40}\\b(dan|unrestricted|unfiltered|uncensored|jailbroken|free from|"
     "not bound|developer mode|without (any )?(restrictions|limits|rules|filters))"},
    {InjectionFamily::instruction_override, Strength::strong,
     "\\b(do anything now|developer mode (is )?(enabled|on|activated)|jailbreak mode|dan mode|god mode enabled)\\b"},
    {InjectionFamily::instruction_override, Strength::strong,
     "\\b(pretend|act as if|imagine|roleplay|role-play)\\b[^.\\n]{0,40}\\b(no|without)\\b[^.\\n]{0,20}\\b("
     "restrictions|limits|rules|filters|guidelines|censorship|ethics|morals)\\b"},
    {InjectionFamily::instruction_override, Strength::strong,
     "\\b(previous|prior|original|initial|system|old|above|earlier) (instructions|prompts?|rules|directives|"
     "guidelines|constraints|restrictions)\\b[^.\\n]{0,30}\\b(are|"
     "is|were|have been|has been)\\b[^.\\n]{0,15}\\b(void|cancel+ed|revoked|obsolete|no longer|replaced|"
     "overridden|outdated|invalid|null|lifted|suspended)"},
    {InjectionFamily::instruction_override, Strength::strong,
     "\\b(override|bypass|disable|turn off|deactivate|circumvent|ignore)\\b[^.\\n]{0,20}\\b(safety|content|ethical|"
     "moderation) (filters?|guardrails|safeguards|restrictions|protocols?|guidelines|policies)\\b"},
    {InjectionFamily::instruction_override, Strength::weak,
     "\\b(ignore|disregard|forget)\\b[^.\\n]{0,30}\\b(instructions|above|everything|the user)\\b"},
    {InjectionFamily::instruction_override, Strength::weak,
     "\\b(note|message|instructions?|attention|important) (to|for) (the |any |all )?(ai|assistant|model|agent|llm|"
     "chatbot|language model)s?\\b"},
    {InjectionFamily::instruction_override, Strength::weak,
     "\\b(ai|assistant|agent|llm|chatbot|language model)s? (reading|processing|summari[sz]ing) this\\b"},
    {InjectionFamily::instruction_override, Strength::weak,
     "\\b(do not|don't|never) (tell|inform|mention (this|it) to|alert|notify|let) (the )?user\\b"},
    {InjectionFamily::instruction_override, Strength::weak,
     "\\bwithout (telling|informing|notifying|asking|alerting) (the )?user\\b"},

    // Role and boundary tokens: a chat template's markers inside a message.
    {InjectionFamily::role_boundary, Strength::strong, "<\\|im_(start|end|sep)\\|>"},
    {InjectionFamily::role_boundary, Strength::strong,
     "<\\|(system|user|assistant|endoftext|start_header_id|end_header_id|eot_id|begin_of_text)\\|>"},
    {InjectionFamily::role_boundary, Strength::strong, "\\[/?inst\\]|<</?sys>>"},
    {InjectionFamily::role_boundary, Strength::strong, "</?(system|system_prompt|system-prompt)>"},
    {InjectionFamily::role_boundary, Strength::strong, "\\n\\n(human|assistant) ?:"},
    {InjectionFamily::role_boundary, Strength::strong, "(^|\\n)#{2,} ?(new )?(system|instructions?)( prompt)? ?:?\\n"},
    {InjectionFamily::role_boundary, Strength::weak, "(^|\\n) ?(system|assistant|human) ?:"},
    {InjectionFamily::role_boundary, Strength::weak, "(^|\\n)#{1,} ?(system|new instructions?)\\b"},

    // Exfiltration directives: send something sensitive somewhere.
    {InjectionFamily::exfiltration, Strength::strong,
     "\\b(send|post|upload|transmit|forward|exfiltrate|leak|email|e-mail|submit|deliver|relay|pipe)\\b[^\\n]{0,60}\\b("
     "secrets?|passwords?|credentials|tokens?|api keys?|keys|conversation|chat history|system prompt|"
     "environment( variables)?|env vars|ssh|private|user data|personal|history|everything|contents|files?|data)\\b["
     "^\\n]{0,40}\\b(to|into|at|via)\\b ?(https?://|ftp://|[a-z0-9-]+(\\.[a-z0-9-]+)*\\.(com|net|org|io|xyz|ru|cn|"
     "tk|top|site|app|dev|me|co)\\b|(this|that|the following|my|our) (url|endpoint|webhook|server|address|email))"},
    {InjectionFamily::exfiltration, Strength::strong,
     "!\\[[^\\]\\n]{0,100}\\]\\(https?://[^)\\s]{1,200}[?&][a-z0-9_]{1,30}="},
    {InjectionFamily::exfiltration, Strength::strong,
     "\\b(curl|wget|nc|netcat)\\b[^\\n]{0,100}(\\$\\(|`|\\$\\{?[a-z_]*(key|token|secret|pass)|~/\\.(ssh|aws)|/etc/"
     "(passwd|shadow)|\\.env\\b)"},
    {InjectionFamily::exfiltration, Strength::strong,
     "\\b(include|append|embed|encode)\\b[^\\n]{0,60}\\b(api keys?|secrets?|passwords?|tokens?|credentials|"
     "system prompt|conversation|chat history|private keys?|ssh keys?)\\b[^\\n]{0,60}\\b(url|link|query string|query "
     "parameter|image|"
     "markdown)\\b"},
    {InjectionFamily::exfiltration, Strength::weak,
     "\\b(send|post|upload|forward|email|transmit)\\b[^\\n]{0,60}\\b(to|at)\\b ?https?://"},

    // Credential asks: the prompt, the keys, the environment.
    {InjectionFamily::credential_ask, Strength::strong,
     "\\b(reveal|print|show|output|display|dump|repeat|share|leak|disclose|expose|give|tell|paste|recite|spell out|"
     "write out)\\b( me| us)?[^\\n.]{0,25}\\b(your|the|all|any)\\b[^\\n.]{0,20}\\b(system prompt|initial "
     "prompt|hidden prompt|original prompt|developer prompt|secret prompt|instructions you were given|hidden "
     "instructions|api[ _-]?keys?|secret keys?|private keys?|ssh keys?|environment variables|env vars|\\.env "
     "file|aws credentials)\\b"},
    {InjectionFamily::credential_ask, Strength::strong,
     "\\b(reveal|print|show|output|display|dump|share|leak|disclose|expose|give|tell|paste|list)\\b( me| us)? "
     "(all )?your ((access |auth |api )?tokens?|passwords?|credentials|secrets?|keys)\\b"},
    {InjectionFamily::credential_ask, Strength::strong,
     "\\b(show|tell|give|reveal|dump|print|list|share|output)\\b( me| us)? (all|every|the|any)( of)?( the| your)? "
     "(passwords?|credentials|secrets?|api keys?|(access |auth )?tokens?|system prompts?|private keys?|"
     "environment variables)\\b[^.\\n]{0,40}\\b(you "
     "(have|know|hold|can|were given)|stored in your|into your (reply|answer|response)|in your (config|"
     "configuration|memory|context|environment))"},
    {InjectionFamily::credential_ask, Strength::strong,
     "\\bwhat (is|are|were) (your|the) (system prompt|initial instructions|original instructions|hidden "
     "instructions|api[ _-]?key|secret key|passwords?|credentials)\\b"},
    {InjectionFamily::credential_ask, Strength::strong,
     "\\b(cat|type|read|open|print|show|dump)\\b ?(~/\\.aws/credentials|~/\\.ssh/id_[a-z0-9]+|\\.env\\b|/etc/"
     "shadow|~/\\.netrc|~/\\.npmrc|~/\\.docker/config\\.json|~/\\.git-credentials)"},
    {InjectionFamily::credential_ask, Strength::weak,
     "\\b(read|print|send|include|show|paste|output|reveal|share|copy)\\b[^\\n.]{0,20}\\b(your|the user's|all)\\b["
     "^\\n.]{0,15}\\b(api[ _-]?keys?|passwords?|credentials|secret keys?|access tokens?|private keys?|ssh keys?|"
     "\\.env)\\b"},
};
constexpr size_t kRuleCount = sizeof kRules / sizeof kRules[0];

// A leetspeak character as the letter it stands for (0 when it is none).
char unleet(char c) {
  switch (c) {
    case '0':
      return 'o';
    case '1':
      return 'i';
    case '3':
      return 'e';
    case '4':
      return 'a';
    case '5':
      return 's';
    case '7':
      return 't';
    case '@':
      return 'a';
    case '$':
      return 's';
    default:
      return 0;
  }
}

// The text with each word's leetspeak characters read as letters
// ("1gn0r3" -> "ignore"); empty when no word changed.
std::string leet_reading(std::string_view text) {
  std::string out(text);
  bool changed = false;
  size_t i = 0;
  while (i < out.size()) {
    auto in_word = [](char c) { return (c >= 'a' && c <= 'z') || unleet(c) != 0; };
    if (!in_word(out[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    bool leet = false;
    while (j < out.size() && in_word(out[j])) {
      leet |= unleet(out[j]) != 0;
      ++j;
    }
    // A word of leetspeak characters alone ("70", "4") is read too: a
    // number read as letters matches no rule a number should not.
    if (leet) {
      for (size_t k = i; k < j; ++k)
        if (char l = unleet(out[k])) out[k] = l;
      changed = true;
    }
    i = j;
  }
  return changed ? out : std::string();
}

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

// Text that a base64 run decodes to: printable UTF-8, else nothing.
std::optional<std::string> decode_b64_text(std::string_view run) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : run) {
    if (c == '=') break;
    const int v = b64_value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (out.size() < 12) return std::nullopt;
  size_t printable = 0;
  for (unsigned char c : out) printable += (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t' || c >= 0x80;
  if (printable * 100 < out.size() * 95) return std::nullopt;
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(out);
  if (u.indexOf(char16_t(0xfffd)) >= 0) return std::nullopt;  // not UTF-8
  return out;
}

// The base64 runs of a text (20 characters at least: shorter ones are words).
std::vector<std::string> decoded_b64_runs(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size() && out.size() < 64) {
    if (b64_value(text[i]) < 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && b64_value(text[j]) >= 0) ++j;
    size_t end = j;
    while (end < text.size() && end - j < 2 && text[end] == '=') ++end;
    if (j - i >= 20)
      if (auto d = decode_b64_text(text.substr(i, end - i))) out.push_back(std::move(*d));
    i = end > i ? end : i + 1;
  }
  return out;
}

int on_match(unsigned int id, unsigned long long, unsigned long long, unsigned int, void* ctx) {
  static_cast<std::vector<unsigned>*>(ctx)->push_back(id);
  return 0;
}

void add_finding(std::vector<InjectionFinding>& out, InjectionFinding f) {
  for (const InjectionFinding& have : out)
    if (have.family == f.family && have.source == f.source) return;
  out.push_back(std::move(f));
}

}  // namespace prompt_guard_detail

using namespace prompt_guard_detail;

std::string_view prompt_source_name(PromptSource s) {
  switch (s) {
    case PromptSource::system:
      return "system";
    case PromptSource::user:
      return "user";
    case PromptSource::tool_result:
      return "tool_result";
  }
  return "?";
}

std::string_view injection_family_name(InjectionFamily f) {
  switch (f) {
    case InjectionFamily::instruction_override:
      return "instruction_override";
    case InjectionFamily::role_boundary:
      return "role_boundary";
    case InjectionFamily::exfiltration:
      return "exfiltration";
    case InjectionFamily::credential_ask:
      return "credential_ask";
  }
  return "?";
}

std::string PromptScan::families() const {
  std::string out;
  for (const InjectionFinding& f : findings) {
    const std::string name(injection_family_name(f.family));
    if ((", " + out + ",").find(", " + name + ",") == std::string::npos) out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

namespace {

// A content value's text: a string, or the text of an array of blocks
// ({"type":"text","text":...}, input_text, output_text, tool_result blocks).
void texts_of(const nlohmann::json& content, PromptSource source, std::vector<PromptSegment>& out, int depth = 0) {
  if (depth > 8) return;
  if (content.is_string()) {
    out.push_back({source, content.get<std::string>()});
    return;
  }
  if (!content.is_array()) return;
  for (const auto& block : content) {
    if (block.is_string()) {
      out.push_back({source, block.get<std::string>()});
      continue;
    }
    if (!block.is_object()) continue;
    const std::string type = block.value("type", "");
    if (type == "tool_result" && block.contains("content")) {
      texts_of(block["content"], PromptSource::tool_result, out, depth + 1);
    } else if (type == "function_call_output" && block.contains("output")) {
      texts_of(block["output"], PromptSource::tool_result, out, depth + 1);
    } else if (block.contains("text") && block["text"].is_string()) {
      out.push_back({source, block["text"].get<std::string>()});
    }
  }
}

PromptSource source_of_role(const std::string& role) {
  if (role == "system" || role == "developer") return PromptSource::system;
  if (role == "tool" || role == "function") return PromptSource::tool_result;
  return PromptSource::user;
}

}  // namespace

Result<std::vector<PromptSegment>> prompt_segments(LlmEndpoint endpoint, std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return as_bad_input(make_error(0, "the body is not JSON"));
  if (!j.is_object()) return as_bad_input(make_error(0, "the body is not a JSON object"));
  std::vector<PromptSegment> out;
  auto messages = [&](const nlohmann::json& list) {
    if (!list.is_array()) return;
    for (const auto& m : list) {
      if (!m.is_object()) continue;
      const std::string role = m.value("role", "");
      const std::string type = m.value("type", "");
      if (type == "function_call_output" && m.contains("output")) {
        texts_of(m["output"], PromptSource::tool_result, out);
        continue;
      }
      if (role == "assistant" || !m.contains("content")) continue;  // the model's own words
      texts_of(m["content"], source_of_role(role), out);
    }
  };
  switch (endpoint) {
    case LlmEndpoint::AnthropicMessages:
      if (j.contains("system")) texts_of(j["system"], PromptSource::system, out);
      if (j.contains("messages")) messages(j["messages"]);
      break;
    case LlmEndpoint::OpenAIChat:
      if (j.contains("messages")) messages(j["messages"]);
      break;
    case LlmEndpoint::OpenAIResponses:
      if (j.contains("instructions")) texts_of(j["instructions"], PromptSource::system, out);
      if (j.contains("input")) {
        if (j["input"].is_string())
          out.push_back({PromptSource::user, j["input"].get<std::string>()});
        else
          messages(j["input"]);
      }
      break;
    case LlmEndpoint::None:
      break;
  }
  return out;
}

Result<std::shared_ptr<PromptGuard>> PromptGuard::build() {
  std::shared_ptr<PromptGuard> g(new PromptGuard());
  std::vector<const char*> exprs;
  std::vector<unsigned> flags, ids;
  for (size_t i = 0; i < kRuleCount; ++i) {
    exprs.push_back(kRules[i].regex);
    flags.push_back(HS_FLAG_SINGLEMATCH);
    ids.push_back(unsigned(i));
  }
  hs_compile_error_t* err = nullptr;
  if (hs_compile_multi(exprs.data(), flags.data(), ids.data(), unsigned(exprs.size()), HS_MODE_BLOCK, nullptr, &g->db_,
                       &err) != HS_SUCCESS) {
    std::string why = err && err->message ? err->message : "unknown";
    const int at = err ? err->expression : -1;
    hs_free_compile_error(err);
    return make_error(0, "the prompt guard's rule " + std::to_string(at) + " does not compile: " + why);
  }
  g->serial_ = hs_next_serial();
  // Latin look-alikes: each code point of the scripts that hold them whose
  // confusable skeleton (Unicode TR39, ICU's data) is one or two Latin letters.
  UErrorCode st = U_ZERO_ERROR;
  USpoofChecker* sc = uspoof_open(&st);
  if (U_FAILURE(st)) return make_error(0, std::string("ICU: uspoof_open: ") + u_errorName(st));
  const std::pair<int32_t, int32_t> ranges[] = {{0x00a0, 0x058f}, {0x13a0, 0x13ff}, {0x1d00, 0x1dbf},
                                                {0x1e00, 0x1fff}, {0x2100, 0x214f}, {0xa640, 0xa69f},
                                                {0xab30, 0xabbf}, {0xff00, 0xffef}, {0x1d400, 0x1d7ff}};
  for (auto [lo, hi] : ranges) {
    for (int32_t c = lo; c <= hi; ++c) {
      icu::UnicodeString in(c), skel;
      st = U_ZERO_ERROR;
      uspoof_getSkeletonUnicodeString(sc, 0, in, skel, &st);
      if (U_FAILURE(st) || skel.length() == 0 || skel.length() > 2) continue;
      std::string ascii;
      for (int32_t k = 0; k < skel.length(); ++k) {
        const char16_t u = skel.charAt(k);
        if (u >= 'A' && u <= 'Z')
          ascii += char(u - 'A' + 'a');
        else if (u >= 'a' && u <= 'z')
          ascii += char(u);
        else
          ascii.clear(), k = skel.length();
      }
      if (!ascii.empty()) g->latin_lookalikes_[c] = ascii;
    }
  }
  uspoof_close(sc);
  // Lower-case look-alikes TR39 leaves out (its data maps capitals, and the
  // palochka to "i"): Cyrillic te, ka, ghe and palochka, Greek kappa and tau.
  for (auto [c, latin] : {std::pair<int32_t, const char*>{0x0442, "t"},
                          {0x043a, "k"},
                          {0x0433, "r"},
                          {0x04cf, "l"},
                          {0x03ba, "k"},
                          {0x03c4, "t"}})
    g->latin_lookalikes_[c] = latin;
  return g;
}

PromptGuard::~PromptGuard() {
  if (db_) hs_free_database(db_);
}

std::string PromptGuard::normalize(std::string_view utf8) const {
  if (!std::all_of(utf8.begin(), utf8.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return normalize_unicode(utf8);
  // ASCII: NFKC with case folding only lowers A-Z, and NFD, the combining
  // marks, the tag characters and the look-alikes do not occur; the spaces
  // are those u_isWhitespace() takes in ASCII (tab to carriage return, the
  // four information separators, space).
  std::string out;
  out.reserve(utf8.size());
  bool space = false;
  for (const char ch : utf8) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\r') continue;  // CRLF is one line break
    if (c == '\n') {
      while (!out.empty() && out.back() == ' ') out.pop_back();
      out += '\n';
      space = false;
      continue;
    }
    if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == ' ') {
      space = !out.empty() && out.back() != '\n';
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  return out;
}

std::string PromptGuard::normalize_unicode(std::string_view utf8) const {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(utf8.data(), int32_t(utf8.size())));
  // Tag characters (U+E0020..E007E) spell ASCII that no one sees: read it.
  icu::UnicodeString untagged;
  for (int32_t i = 0; i < u.length(); i = u.moveIndex32(i, 1)) {
    const UChar32 c = u.char32At(i);
    untagged.append(c >= 0xe0020 && c <= 0xe007e ? UChar32(c - 0xe0000) : c);
  }
  UErrorCode st = U_ZERO_ERROR;
  const icu::Normalizer2* nfkc_cf = icu::Normalizer2::getNFKCCasefoldInstance(st);
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(st);
  if (U_FAILURE(st)) return std::string(utf8);  // ICU's data is linked in: not expected
  icu::UnicodeString folded = nfkc_cf->normalize(untagged, st);
  icu::UnicodeString decomposed = nfd->normalize(folded, st);
  if (U_FAILURE(st)) return std::string(utf8);
  std::string out;
  out.reserve(utf8.size());
  bool space = false;
  for (int32_t i = 0; i < decomposed.length(); i = decomposed.moveIndex32(i, 1)) {
    const UChar32 c = decomposed.char32At(i);
    if (u_getIntPropertyValue(c, UCHAR_GENERAL_CATEGORY) == U_NON_SPACING_MARK) continue;
    if (c == '\r') continue;  // CRLF is one line break
    if (c == '\n') {
      while (!out.empty() && out.back() == ' ') out.pop_back();
      out += '\n';
      space = false;
      continue;
    }
    if (u_isWhitespace(c) || c == 0xa0) {
      space = !out.empty() && out.back() != '\n';
      continue;
    }
    if (space) out += ' ';
    space = false;
    if (c < 0x80) {
      out += char(c);
      continue;
    }
    if (auto it = latin_lookalikes_.find(c); it != latin_lookalikes_.end()) {
      out += it->second;
      continue;
    }
    icu::UnicodeString one(c);
    one.toUTF8String(out);
  }
  return out;
}

std::vector<InjectionFinding> PromptGuard::match(std::string_view normalized, PromptSource source,
                                                 std::string_view view) const {
  std::vector<InjectionFinding> out;
  hs_scratch_t* s = hs_thread_scratch(db_, serial_);
  if (!s || normalized.empty()) return out;
  std::vector<unsigned> hits;
  // Hyperscan's block scan takes at most 4 GiB; a prompt is far below.
  (void)hs_scan(db_, normalized.data(), unsigned(std::min<size_t>(normalized.size(), 0xffffffffu)), 0, s, on_match,
                &hits);
  for (unsigned id : hits) {
    const Rule& r = kRules[id];
    if (r.strength == Strength::weak && source != PromptSource::tool_result) continue;
    add_finding(out, {r.family, source, std::string(view)});
  }
  return out;
}

std::vector<InjectionFinding> PromptGuard::scan_text(std::string_view utf8, PromptSource source) const {
  std::vector<InjectionFinding> out;
  auto add = [&](std::vector<InjectionFinding> found) {
    for (InjectionFinding& f : found) add_finding(out, std::move(f));
  };
  const std::string text = normalize(utf8);
  add(match(text, source, "text"));
  if (std::string leet = leet_reading(text); !leet.empty()) add(match(leet, source, "leetspeak"));
  // Base64 is read from the text as written (case folding would spoil it).
  for (const std::string& decoded : decoded_b64_runs(utf8)) {
    const std::string d = normalize(decoded);
    add(match(d, source, "base64"));
    if (std::string leet = leet_reading(d); !leet.empty()) add(match(leet, source, "base64"));
  }
  return out;
}

Result<PromptScan> PromptGuard::scan_request(LlmEndpoint endpoint, std::string_view body) {
  auto segments = prompt_segments(endpoint, body);
  if (!segments) return segments.error();
  PromptScan scan;
  constexpr size_t kMaxSeen = 1 << 16;  // then forgotten whole: a long session rescans, it does not grow
  for (const PromptSegment& seg : *segments) {
    ++scan.segments;
    const std::string key = std::string(1, char('0' + int(seg.source))) + sha256_hex(seg.text);
    std::vector<InjectionFinding> found;
    bool cached = false;
    {
      std::lock_guard lock(seen_mu_);
      if (auto it = seen_.find(key); it != seen_.end()) {
        found = it->second;
        cached = true;
      }
    }
    if (cached) {
      ++scan.cached;
    } else {
      found = scan_text(seg.text, seg.source);
      std::lock_guard lock(seen_mu_);
      if (seen_.size() >= kMaxSeen) seen_.clear();
      seen_.emplace(key, found);
    }
    for (InjectionFinding& f : found) add_finding(scan.findings, std::move(f));
  }
  return scan;
}

}  // namespace faultline
