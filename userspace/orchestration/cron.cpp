// Cron expressions read field by field, and the next firing found by walking
// local days forward, then the matching times of a matching day; each local
// time is turned into an instant by the zone (libdate-tz over the host's
// tzdata), which is where DST gaps and folds are settled.
#include "userspace/orchestration/cron.h"

#include <date/tz.h>

#include <array>
#include <cctype>
#include <vector>

namespace faultline {
namespace {

struct FieldSpec {
  const char* name;
  int min, max;                         // the values accepted as written (day_of_week: 0-7)
  std::vector<std::string_view> names;  // names[i] is the value min + i
};

const FieldSpec kSecond{"second", 0, 59, {}};
const FieldSpec kMinute{"minute", 0, 59, {}};
const FieldSpec kHour{"hour", 0, 23, {}};
const FieldSpec kDayOfMonth{"day_of_month", 1, 31, {}};
const FieldSpec kMonth{
    "month", 1, 12, {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}};
const FieldSpec kDayOfWeek{"day_of_week", 0, 7, {"sun", "mon", "tue", "wed", "thu", "fri", "sat"}};

// The days each month may have (February 29 in a leap year).
constexpr std::array<int, 13> kMaxDays{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

// Ten years and a day: long enough for February 29 on a given weekday.
constexpr int64_t kSearchDays = 3653 + 1;

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t from = 0;
  for (size_t at; (at = s.find(sep, from)) != std::string_view::npos; from = at + 1)
    out.push_back(s.substr(from, at - from));
  out.push_back(s.substr(from));
  return out;
}

using FieldResult = std::variant<uint64_t, CronError>;

CronError field_error(const FieldSpec& f, const std::string& message) { return CronError{f.name, message}; }

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// One value of a field: a number in its range, or one of its names.
std::variant<int, CronError> read_value(std::string_view text, const FieldSpec& f) {
  const std::string range = std::to_string(f.min) + "-" + std::to_string(f.max);
  if (text.empty()) return field_error(f, "a value is missing (an empty bound of a range or step)");
  if (std::isdigit(static_cast<unsigned char>(text[0]))) {
    if (text.size() > 4) return field_error(f, quoted(text) + " is out of range " + range);
    int v = 0;
    for (char c : text) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return field_error(f, quoted(text) + " is not a number");
      v = v * 10 + (c - '0');
    }
    if (v < f.min || v > f.max) return field_error(f, quoted(text) + " is out of range " + range);
    return v;
  }
  const std::string name = lower(text);
  for (size_t i = 0; i < f.names.size(); ++i)
    if (f.names[i] == name) return f.min + static_cast<int>(i);
  if (f.names.empty()) return field_error(f, quoted(text) + " is not a number (" + range + ")");
  std::string known;
  for (auto n : f.names) known += (known.empty() ? "" : ", ") + std::string(n);
  return field_error(f, quoted(text) + " is neither a number (" + range + ") nor a name (" + known + ")");
}

// One field: a comma-separated list of `*`, `N`, `N-M`, each with an optional
// `/STEP`, and `N/STEP` (from N to the field's end). A mask of its values.
FieldResult read_field(std::string_view text, const FieldSpec& f) {
  uint64_t mask = 0;
  for (auto item : split(text, ',')) {
    if (item.empty()) return field_error(f, "an empty item in " + quoted(text));
    const auto parts = split(item, '/');
    if (parts.size() > 2) return field_error(f, quoted(item) + " has more than one '/'");
    int step = 1;
    if (parts.size() == 2) {
      const FieldSpec step_spec{f.name, 1, f.max - f.min + 1, {}};
      auto s = read_value(parts[1], step_spec);
      if (auto* e = std::get_if<CronError>(&s))
        return field_error(f, "the step of " + quoted(item) + ": " + e->message);
      step = std::get<int>(s);
    }
    int lo = f.min, hi = f.max;
    const std::string_view base = parts[0];
    if (base != "*") {
      const auto bounds = split(base, '-');
      if (bounds.size() > 2) return field_error(f, quoted(item) + " has more than one '-'");
      auto a = read_value(bounds[0], f);
      if (auto* e = std::get_if<CronError>(&a)) return *e;
      lo = std::get<int>(a);
      hi = parts.size() == 2 ? f.max : lo;
      if (bounds.size() == 2) {
        auto b = read_value(bounds[1], f);
        if (auto* e = std::get_if<CronError>(&b)) return *e;
        hi = std::get<int>(b);
        if (hi < lo) return field_error(f, "the range " + quoted(base) + " runs backwards");
      }
    }
    for (int v = lo; v <= hi; v += step) mask |= uint64_t{1} << v;
  }
  return mask;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    const size_t from = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > from) out.push_back(s.substr(from, i - from));
  }
  return out;
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

}  // namespace

std::variant<CronZone, CronError> CronZone::find(const std::string& name) {
  const CronError unknown{"timezone", quoted(name) +
                                          " is not a time zone of the host's tzdata (an IANA name such as "
                                          "Europe/Paris or UTC)"};
  if (name.empty() || name.size() > 64 || name.front() == '/' || name.find("..") != std::string::npos) return unknown;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '/' && c != '_' && c != '-' && c != '+') return unknown;
  try {
    return CronZone(name, date::locate_zone(name));
  } catch (const std::exception&) {
    return unknown;
  }
}

int64_t CronZone::offset_at(int64_t unix_s) const {
  return zone_->get_info(date::sys_seconds{std::chrono::seconds{unix_s}}).offset.count();
}

std::variant<CronSchedule, CronError> CronSchedule::parse(std::string_view expr) {
  expr = trim(expr);
  if (expr.empty()) return CronError{"cron", "empty: 5 fields (minute hour day-of-month month day-of-week) expected"};
  std::string expanded;
  if (expr.front() == '@') {
    const std::string macro = lower(expr);
    if (macro == "@yearly" || macro == "@annually")
      expanded = "0 0 1 1 *";
    else if (macro == "@monthly")
      expanded = "0 0 1 * *";
    else if (macro == "@weekly")
      expanded = "0 0 * * 0";
    else if (macro == "@daily" || macro == "@midnight")
      expanded = "0 0 * * *";
    else if (macro == "@hourly")
      expanded = "0 * * * *";
    else
      return CronError{"cron", quoted(expr) +
                                   " is not a macro faultcp knows (@yearly, @annually, @monthly, @weekly, @daily, "
                                   "@midnight, @hourly)"};
    expr = expanded;
  }
  auto fields = words(expr);
  if (fields.size() != 5 && fields.size() != 6)
    return CronError{"cron", std::to_string(fields.size()) +
                                 " fields: 5 expected (minute hour day-of-month month day-of-week), or 6 with a "
                                 "leading seconds field"};
  CronSchedule s;
  s.has_seconds_ = fields.size() == 6;
  if (!s.has_seconds_) fields.insert(fields.begin(), std::string_view("0"));
  const std::array<const FieldSpec*, 6> specs{&kSecond, &kMinute, &kHour, &kDayOfMonth, &kMonth, &kDayOfWeek};
  std::array<uint64_t, 6> masks{};
  for (size_t i = 0; i < 6; ++i) {
    auto m = read_field(fields[i], *specs[i]);
    if (auto* e = std::get_if<CronError>(&m)) return *e;
    masks[i] = std::get<uint64_t>(m);
  }
  s.seconds_ = std::bitset<60>(masks[0]);
  s.minutes_ = std::bitset<60>(masks[1]);
  s.hours_ = std::bitset<24>(masks[2]);
  s.days_ = std::bitset<32>(masks[3]);
  s.months_ = std::bitset<13>(masks[4]);
  s.weekdays_ = std::bitset<7>(masks[5] & 0x7f);
  if (masks[5] & (uint64_t{1} << 7)) s.weekdays_.set(0);  // 7 is Sunday too
  s.days_star_ = fields[3].front() == '*';
  s.weekdays_star_ = fields[5].front() == '*';
  // With the day of week unrestricted, a day of month no selected month has
  // would never fire (`0 0 30 2 *`): refused now rather than silent forever.
  if (s.weekdays_star_) {
    bool possible = false;
    for (int m = 1; m <= 12; ++m)
      for (int d = 1; d <= kMaxDays[m]; ++d) possible = possible || (s.months_[m] && s.days_[d]);
    if (!possible) return CronError{"day_of_month", "no selected day exists in the selected months"};
  }
  return s;
}

bool CronSchedule::day_matches(int year, unsigned month, unsigned day, unsigned weekday) const {
  (void)year;
  if (!months_[month]) return false;
  const bool dom = days_[day], dow = weekdays_[weekday];
  // Vixie cron's rule: both fields restricted, either matches; otherwise both.
  if (days_star_ || weekdays_star_) return dom && dow;
  return dom || dow;
}

std::optional<int64_t> CronSchedule::next_after(int64_t after_unix_s, const CronZone& zone) const {
  using std::chrono::seconds;
  const date::time_zone* tz = zone.zone_;
  // Local times before the local time of `after` map to instants at or before
  // it (the mapping below never goes backwards), so the walk starts there.
  const int64_t local_after = after_unix_s + tz->get_info(date::sys_seconds{seconds{after_unix_s}}).offset.count();
  const int64_t first_day = floor_div(local_after, 86400);
  const int64_t from_in_first = local_after - first_day * 86400;
  // A local time as an instant: in a gap, the instant the gap ends; in a
  // fold, its first occurrence.
  auto instant = [tz](int64_t local) -> int64_t {
    const auto li = tz->get_info(date::local_seconds{seconds{local}});
    switch (li.result) {
      case date::local_info::nonexistent:
        return li.first.end.time_since_epoch().count();
      case date::local_info::ambiguous:
      case date::local_info::unique:
      default:
        return local - li.first.offset.count();
    }
  };
  for (int64_t dn = first_day; dn < first_day + kSearchDays; ++dn) {
    const date::sys_days day{date::days{dn}};
    const date::year_month_day ymd{day};
    if (!day_matches(static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                     date::weekday{day}.c_encoding()))
      continue;
    const int64_t from = dn == first_day ? from_in_first : 0;
    for (int h = 0; h < 24; ++h) {
      if (!hours_[h] || h * 3600 + 3599 < from) continue;
      for (int m = 0; m < 60; ++m) {
        if (!minutes_[m] || h * 3600 + m * 60 + 59 < from) continue;
        for (int s = 0; s < 60; ++s) {
          const int64_t t = h * 3600 + m * 60 + s;
          if (!seconds_[s] || t < from) continue;
          const int64_t at = instant(dn * 86400 + t);
          if (at > after_unix_s) return at;
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace faultline
