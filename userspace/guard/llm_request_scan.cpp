// The request body's LLM facts by a byte-at-a-time JSON state machine: it
// validates the whole document (a body the provider would refuse must not pass
// as "facts absent") but keeps only the nesting, one top-level key and the model.
#include "userspace/guard/llm_request_scan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace llm_request_scan_detail {

constexpr size_t kMaxKeyBytes = 64;     // longer than any key the scan looks for
constexpr size_t kMaxNumberBytes = 40;  // a max-tokens number's text; longer saturates
constexpr uint8_t kNumAfterMinus = 0;   // '-': a digit is due
constexpr uint8_t kNumZero = 1;         // a leading 0
constexpr uint8_t kNumInt = 2;          // integer digits
constexpr uint8_t kNumDot = 3;          // '.': a digit is due
constexpr uint8_t kNumFrac = 4;         // fraction digits
constexpr uint8_t kNumExp = 5;          // 'e': a sign or digit is due
constexpr uint8_t kNumExpSign = 6;      // exponent sign: a digit is due
constexpr uint8_t kNumExpDigits = 7;    // exponent digits

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A number's grammar: the state after `c`, or -1 when `c` ends the number
// (valid only from an accepting state), or -2 when `c` is an error.
int number_step(uint8_t state, char c) {
  const bool d = is_digit(c);
  switch (state) {
    case kNumAfterMinus:
      return c == '0' ? kNumZero : d ? kNumInt : -2;
    case kNumZero:
      return c == '.' ? kNumDot : (c == 'e' || c == 'E') ? kNumExp : d ? -2 : -1;
    case kNumInt:
      return d ? kNumInt : c == '.' ? kNumDot : (c == 'e' || c == 'E') ? kNumExp : -1;
    case kNumDot:
      return d ? kNumFrac : -2;
    case kNumFrac:
      return d ? kNumFrac : (c == 'e' || c == 'E') ? kNumExp : -1;
    case kNumExp:
      return (c == '+' || c == '-') ? kNumExpSign : d ? kNumExpDigits : -2;
    case kNumExpSign:
      return d ? kNumExpDigits : -2;
    default:
      return d ? kNumExpDigits : -1;
  }
}

bool number_accepts(uint8_t state) {
  return state == kNumZero || state == kNumInt || state == kNumFrac || state == kNumExpDigits;
}

std::string json_quote(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace llm_request_scan_detail

LlmEndpoint llm_endpoint_for_target(std::string_view target) {
  const size_t q = target.find_first_of("?#");
  const std::string_view path = target.substr(0, q);
  if (path == "/v1/messages") return LlmEndpoint::AnthropicMessages;
  if (path == "/v1/chat/completions") return LlmEndpoint::OpenAIChat;
  if (path == "/v1/responses") return LlmEndpoint::OpenAIResponses;
  return LlmEndpoint::None;
}

void LlmRequestScanner::fail(std::string_view why) {
  if (phase_ == Phase::bad) return;
  phase_ = Phase::bad;
  why_ = why;
}

bool LlmRequestScanner::all_seen() const { return facts_.model && facts_.stream && max_seen_; }

LlmScanState LlmRequestScanner::state() const {
  if (phase_ == Phase::bad) return LlmScanState::unparseable;
  if (phase_ == Phase::done || all_seen()) return LlmScanState::complete;
  return LlmScanState::scanning;
}

size_t LlmRequestScanner::state_bytes() const {
  return sizeof(*this) + stack_.capacity() + text_.capacity() + num_text_.capacity() + why_.capacity() +
         (facts_.model ? facts_.model->capacity() : 0);
}

LlmScanState LlmRequestScanner::finish() {
  if (phase_ == Phase::start) fail("the body is empty");
  if (phase_ != Phase::done) fail("the body ended inside the JSON object");
  return state();
}

void LlmRequestScanner::put_byte(char c) {
  if (role_ == StringRole::skip) return;
  flush_surrogate();
  const size_t limit = role_ == StringRole::model ? kMaxModelBytes : llm_request_scan_detail::kMaxKeyBytes;
  if (text_.size() >= limit) {
    text_overflow_ = true;
    return;
  }
  text_.push_back(c);
}

void LlmRequestScanner::flush_surrogate() {
  if (high_surrogate_ == 0) return;
  high_surrogate_ = 0;  // a lone high surrogate: a decoder puts U+FFFD in its place
  put_decoded(0xFFFD);
}

void LlmRequestScanner::put_decoded(uint32_t cp) {
  char buf[4];
  size_t n = 0;
  if (cp < 0x80) {
    buf[n++] = static_cast<char>(cp);
  } else if (cp < 0x800) {
    buf[n++] = static_cast<char>(0xC0 | (cp >> 6));
    buf[n++] = static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    buf[n++] = static_cast<char>(0xE0 | (cp >> 12));
    buf[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    buf[n++] = static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    buf[n++] = static_cast<char>(0xF0 | (cp >> 18));
    buf[n++] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    buf[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    buf[n++] = static_cast<char>(0x80 | (cp & 0x3F));
  }
  for (size_t i = 0; i < n; ++i) put_byte(buf[i]);
}

void LlmRequestScanner::end_value() {
  if (value_is_top_) field_ = Field::other;
  value_is_top_ = false;
  phase_ = stack_.empty() ? Phase::done : Phase::after_value;
}

void LlmRequestScanner::end_string(size_t at) {
  flush_surrogate();
  const StringRole role = role_;
  role_ = StringRole::skip;
  if (role == StringRole::top_key) {
    ++members_;
    field_ = Field::other;
    if (!text_overflow_) {
      if (text_ == "model")
        field_ = Field::model;
      else if (text_ == "stream")
        field_ = Field::stream;
      else if (text_ == "max_tokens" || text_ == "max_completion_tokens" || text_ == "max_output_tokens")
        field_ = Field::max_tokens;
      else if (text_ == "stream_options")
        field_ = Field::stream_options;
    }
    if (field_ == Field::stream_options) facts_.stream_options_present = true;
    phase_ = Phase::colon;
    return;
  }
  if (role == StringRole::model) {
    if (text_overflow_) return fail("the model is longer than 256 bytes");
    if (facts_.model && *facts_.model != text_) return fail("two different top-level model values");
    facts_.model = text_;
    if (observer_ != nullptr) observer_->model_value_ends(at);
    return end_value();
  }
  if (string_is_key_) {
    phase_ = Phase::colon;
    return;
  }
  end_value();
}

void LlmRequestScanner::end_number() {
  using namespace llm_request_scan_detail;
  if (field_ == Field::max_tokens && value_is_top_) {
    if (num_negative_) return fail("a negative max tokens");
    uint64_t v = 0;
    if (num_text_.size() >= kMaxNumberBytes) {
      v = UINT64_MAX;  // more digits than fit: as large as it gets (fails safe against a limit)
    } else if (num_fraction_) {
      const double d = std::strtod(num_text_.c_str(), nullptr);
      v = !(d < 1.8e19) ? UINT64_MAX : static_cast<uint64_t>(std::ceil(d));
    } else {
      for (char c : num_text_) {
        const uint64_t digit = static_cast<uint64_t>(c - '0');
        v = v > (UINT64_MAX - digit) / 10 ? UINT64_MAX : v * 10 + digit;
      }
    }
    facts_.max_tokens = std::max(facts_.max_tokens.value_or(0), v);
    max_seen_ = true;
  }
  end_value();
}

void LlmRequestScanner::end_literal() {
  if (field_ == Field::stream && value_is_top_ && *literal_ != 'n') {
    const bool v = *literal_ == 't';
    if (facts_.stream && *facts_.stream != v) return fail("two different top-level stream values");
    facts_.stream = v;
  }
  end_value();
}

void LlmRequestScanner::begin_value(char c, size_t at) {
  if (stack_.empty() && c != '{') return fail("the body is not a JSON object");
  value_is_top_ = stack_.size() == 1;
  const Field f = value_is_top_ ? field_ : Field::other;
  const bool fact = f == Field::model || f == Field::stream || f == Field::max_tokens;
  if (c == '{' || c == '[') {
    if (fact) return fail("a fact of the wrong type (an object or array)");
    if (stack_.size() >= kMaxDepth) return fail("nesting deeper than 256");
    stack_.push_back(c);
    value_is_top_ = false;
    phase_ = c == '{' ? Phase::key_or_end : Phase::array_start;
    return;
  }
  if (c == '"') {
    if (f == Field::stream || f == Field::max_tokens) return fail("a fact of the wrong type (a string)");
    string_is_key_ = false;
    role_ = f == Field::model ? StringRole::model : StringRole::skip;
    text_.clear();
    text_overflow_ = false;
    phase_ = Phase::string;
    if (role_ == StringRole::model && observer_ != nullptr) observer_->model_value_begins(at);
    return;
  }
  if (c == '-' || llm_request_scan_detail::is_digit(c)) {
    if (f == Field::model || f == Field::stream) return fail("a fact of the wrong type (a number)");
    using namespace llm_request_scan_detail;
    num_state_ = c == '-' ? kNumAfterMinus : c == '0' ? kNumZero : kNumInt;
    num_negative_ = c == '-';
    num_fraction_ = false;
    num_text_.clear();
    if (f == Field::max_tokens) num_text_.push_back(c);
    phase_ = Phase::number;
    return;
  }
  if (c == 't' || c == 'f' || c == 'n') {
    if ((f == Field::model || f == Field::max_tokens) && c != 'n') return fail("a fact of the wrong type (a boolean)");
    literal_ = c == 't' ? "true" : c == 'f' ? "false" : "null";
    literal_at_ = 1;
    phase_ = Phase::literal;
    return;
  }
  fail("not JSON: an unexpected character where a value is due");
}

void LlmRequestScanner::close_container(char c, size_t at) {
  if (stack_.empty() || (c == '}') != (stack_.back() == '{')) return fail("not JSON: a mismatched bracket");
  stack_.pop_back();
  if (stack_.empty()) {
    if (observer_ != nullptr) observer_->object_ends(at);
    phase_ = Phase::done;
    return;
  }
  value_is_top_ = stack_.size() == 1;  // the container was the value of a top-level member
  end_value();
}

LlmScanState LlmRequestScanner::feed(std::string_view chunk) {
  using namespace llm_request_scan_detail;
  const size_t n = chunk.size();
  for (size_t i = 0; i < n && phase_ != Phase::bad; ++i) {
    char c = chunk[i];
    switch (phase_) {
      case Phase::string: {
        if (role_ == StringRole::skip) {  // the prompt: only a quote, a backslash or a control byte matters
          while (i < n) {
            const auto b = static_cast<unsigned char>(chunk[i]);
            if (b == '"' || b == '\\' || b < 0x20) break;
            ++i;
          }
          if (i == n) return state();
          c = chunk[i];
        }
        if (c == '"')
          end_string(i);
        else if (c == '\\')
          phase_ = Phase::escape;
        else if (static_cast<unsigned char>(c) < 0x20)
          fail("not JSON: a control character in a string");
        else
          put_byte(c);
        break;
      }
      case Phase::escape: {
        phase_ = Phase::string;
        switch (c) {
          case '"':
          case '\\':
          case '/':
            put_byte(c);
            break;
          case 'b':
            put_byte('\b');
            break;
          case 'f':
            put_byte('\f');
            break;
          case 'n':
            put_byte('\n');
            break;
          case 'r':
            put_byte('\r');
            break;
          case 't':
            put_byte('\t');
            break;
          case 'u':
            phase_ = Phase::unicode;
            unicode_ = 0;
            unicode_digits_ = 0;
            break;
          default:
            fail("not JSON: a bad escape in a string");
        }
        break;
      }
      case Phase::unicode: {
        const int h = hex_value(c);
        if (h < 0) {
          fail("not JSON: a bad \\u escape");
          break;
        }
        unicode_ = (unicode_ << 4) | static_cast<uint32_t>(h);
        if (++unicode_digits_ < 4) break;
        phase_ = Phase::string;
        if (role_ == StringRole::skip) break;
        // Keys and the model are compared as a JSON decoder reads them, so
        // "mod\u0065l" is the model key, as the provider will take it.
        if (unicode_ >= 0xD800 && unicode_ <= 0xDBFF) {
          flush_surrogate();
          high_surrogate_ = static_cast<uint16_t>(unicode_);
        } else if (unicode_ >= 0xDC00 && unicode_ <= 0xDFFF) {
          if (high_surrogate_ != 0) {
            const uint32_t cp =
                0x10000 + ((static_cast<uint32_t>(high_surrogate_) - 0xD800) << 10) + (unicode_ - 0xDC00);
            high_surrogate_ = 0;
            put_decoded(cp);
          } else {
            put_decoded(0xFFFD);
          }
        } else {
          put_decoded(unicode_);
        }
        break;
      }
      case Phase::number: {
        const int next = number_step(num_state_, c);
        if (next == -2) {
          fail("not JSON: a malformed number");
          break;
        }
        if (next >= 0) {
          num_state_ = static_cast<uint8_t>(next);
          if (next >= kNumDot) num_fraction_ = true;
          if (field_ == Field::max_tokens && value_is_top_ && num_text_.size() < kMaxNumberBytes)
            num_text_.push_back(c);
          break;
        }
        end_number();  // c is not part of it: read it again in the phase after
        --i;
        break;
      }
      case Phase::literal:
        if (c != literal_[literal_at_]) {
          fail("not JSON: a bad literal");
          break;
        }
        if (literal_[++literal_at_] == '\0') end_literal();
        break;
      case Phase::start:
      case Phase::value:
        if (!is_ws(c)) begin_value(c, i);
        break;
      case Phase::array_start:
        if (is_ws(c)) break;
        if (c == ']')
          close_container(c, i);
        else
          begin_value(c, i);
        break;
      case Phase::key_or_end:
      case Phase::key:
        if (is_ws(c)) break;
        if (c == '}' && phase_ == Phase::key_or_end) {
          close_container(c, i);
        } else if (c == '"') {
          string_is_key_ = true;
          role_ = stack_.size() == 1 ? StringRole::top_key : StringRole::skip;
          text_.clear();
          text_overflow_ = false;
          phase_ = Phase::string;
        } else {
          fail("not JSON: a key is due");
        }
        break;
      case Phase::colon:
        if (is_ws(c)) break;
        if (c == ':')
          phase_ = Phase::value;
        else
          fail("not JSON: ':' is due after a key");
        break;
      case Phase::after_value:
        if (is_ws(c)) break;
        if (c == ',')
          phase_ = stack_.back() == '{' ? Phase::key : Phase::value;
        else if (c == '}' || c == ']')
          close_container(c, i);
        else
          fail("not JSON: ',' or a closing bracket is due");
        break;
      case Phase::done:
        if (!is_ws(c)) fail("not JSON: bytes after the object");
        break;
      case Phase::bad:
        break;
    }
  }
  return state();
}

Result<LlmModelRoute> parse_model_route(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    return input_error(EINVAL,
                       "--route-model '" + std::string(text) + "': expected FROM=TO (claude-opus-4=claude-sonnet-4)");
  return LlmModelRoute{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

LlmRequestRewriter::LlmRequestRewriter(LlmEndpoint endpoint, std::vector<LlmModelRoute> routes,
                                       bool inject_include_usage)
    : endpoint_(endpoint), routes_(std::move(routes)), inject_(inject_include_usage) {
  scan_.set_observer(this);
}

void LlmRequestRewriter::emit(std::string_view bytes) { out_.append(bytes); }

void LlmRequestRewriter::model_value_begins(size_t at) {
  emit(chunk_.substr(copied_, at - copied_));
  copied_ = at;
  holding_ = true;
  held_.clear();
}

void LlmRequestRewriter::model_value_ends(size_t at) {
  held_.append(chunk_.substr(copied_, at + 1 - copied_));
  copied_ = at + 1;
  holding_ = false;
  const std::string& model = *scan_.facts().model;
  const auto route =
      std::find_if(routes_.begin(), routes_.end(), [&](const LlmModelRoute& r) { return r.from == model; });
  if (route == routes_.end()) {
    emit(held_);
    return;
  }
  const std::string quoted = llm_request_scan_detail::json_quote(route->to);
  delta_ += static_cast<int64_t>(quoted.size()) - static_cast<int64_t>(held_.size());
  emit(quoted);
  routed_from_ = model;
}

void LlmRequestRewriter::object_ends(size_t at) {
  const LlmRequestFacts& f = scan_.facts();
  if (!inject_ || endpoint_ != LlmEndpoint::OpenAIChat || f.stream != true || f.stream_options_present) return;
  emit(chunk_.substr(copied_, at - copied_));
  copied_ = at;
  std::string add = scan_.top_level_members() > 0 ? "," : "";
  add += kIncludeUsage;
  delta_ += static_cast<int64_t>(add.size());
  emit(add);
  injected_ = true;
}

std::string LlmRequestRewriter::feed(std::string_view chunk) {
  out_.clear();
  chunk_ = chunk;
  copied_ = 0;
  scan_.feed(chunk);
  if (holding_ && scan_.state() == LlmScanState::unparseable) {
    emit(held_);  // the model was never complete: what was held goes on as it came
    held_.clear();
    holding_ = false;
  }
  if (holding_)
    held_.append(chunk.substr(copied_));
  else
    emit(chunk.substr(copied_));
  chunk_ = {};
  return std::move(out_);
}

std::string LlmRequestRewriter::finish() {
  (void)scan_.finish();
  if (!holding_) return {};
  holding_ = false;
  return std::move(held_);
}

}  // namespace faultline
