// A cron expression and its next firing in an IANA time zone: what a schedule
// on faultcp (/v1/schedules) fires on. Five fields (minute hour day-of-month
// month day-of-week), or six with a leading seconds field, or a macro
// (@hourly, @daily, @weekly, @monthly, @yearly). Local times a DST gap skips
// fire at the first instant after the gap; local times a fold repeats fire
// once, at their first occurrence.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace date {
class time_zone;
}

namespace faultline {

// What is wrong with a cron expression or a zone name: the field
// (`minute`, `hour`, `day_of_month`, `month`, `day_of_week`, `second`, or
// `cron` for the whole) and a sentence.
struct CronError {
  std::string field;
  std::string message;
  [[nodiscard]] std::string text() const { return field + ": " + message; }
};

// An IANA zone of the host's tzdata (/usr/share/zoneinfo, read by
// libdate-tz). Copyable; the zone itself lives as long as the process.
class CronZone {
 public:
  // `Europe/Paris`, `UTC`, ...; an unknown name is a CronError naming it.
  [[nodiscard]] static std::variant<CronZone, CronError> find(const std::string& name);
  [[nodiscard]] const std::string& name() const { return name_; }
  // The zone's offset from UTC at `unix_s`, in seconds (+7200 for CEST).
  [[nodiscard]] int64_t offset_at(int64_t unix_s) const;

 private:
  friend class CronSchedule;
  CronZone(std::string name, const date::time_zone* zone) : name_(std::move(name)), zone_(zone) {}
  std::string name_;
  const date::time_zone* zone_ = nullptr;
};

class CronSchedule {
 public:
  // Parses `expr`; every syntax error names its field and the item.
  [[nodiscard]] static std::variant<CronSchedule, CronError> parse(std::string_view expr);

  // The first firing strictly after `after_unix_s` in `zone`, as Unix
  // seconds; none when nothing matches within the next ten years.
  [[nodiscard]] std::optional<int64_t> next_after(int64_t after_unix_s, const CronZone& zone) const;

  // Whether the expression has a seconds field (six fields).
  [[nodiscard]] bool has_seconds() const { return has_seconds_; }

 private:
  CronSchedule() = default;
  [[nodiscard]] bool day_matches(int year, unsigned month, unsigned day, unsigned weekday) const;

  std::bitset<60> seconds_, minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;     // 1-31
  std::bitset<13> months_;   // 1-12
  std::bitset<7> weekdays_;  // 0 = Sunday (7 is read as 0)
  bool days_star_ = false;   // the day-of-month field starts with `*`
  bool weekdays_star_ = false;
  bool has_seconds_ = false;
};

}  // namespace faultline
