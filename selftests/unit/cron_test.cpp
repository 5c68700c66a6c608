// Cron expressions and their next firing in IANA zones (the host's tzdata):
// every field's syntax and its errors, names, macros, steps, the day-of-month
// / day-of-week OR rule, February 29, and the DST gaps and folds of
// Europe/Paris and America/New_York.
#include "userspace/orchestration/cron.h"

#include <gtest/gtest.h>

#include <ctime>
#include <vector>

namespace {

using faultline::CronError;
using faultline::CronSchedule;
using faultline::CronZone;

CronZone zone(const std::string& name) {
  auto z = CronZone::find(name);
  if (auto* e = std::get_if<CronError>(&z)) ADD_FAILURE() << e->text();
  return std::get<CronZone>(z);
}

CronSchedule cron(const std::string& expr) {
  auto c = CronSchedule::parse(expr);
  if (auto* e = std::get_if<CronError>(&c)) {
    ADD_FAILURE() << expr << ": " << e->text();
    return std::get<CronSchedule>(CronSchedule::parse("* * * * *"));
  }
  return std::get<CronSchedule>(c);
}

CronError error_of(const std::string& expr) {
  auto c = CronSchedule::parse(expr);
  if (auto* e = std::get_if<CronError>(&c)) return *e;
  ADD_FAILURE() << expr << " was accepted";
  return {};
}

// "YYYY-MM-DDTHH:MM:SSZ" as Unix seconds.
int64_t utc(const std::string& text) {
  std::tm tm{};
  EXPECT_NE(strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm), nullptr) << text;
  return static_cast<int64_t>(timegm(&tm));
}

// Unix seconds as local time in `z`, "YYYY-MM-DD HH:MM:SS +HH:MM".
std::string local(int64_t t, const CronZone& z) {
  const int64_t off = z.offset_at(t);
  const time_t lt = static_cast<time_t>(t + off);
  std::tm tm{};
  gmtime_r(&lt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  char o[16];
  std::snprintf(o, sizeof o, " %c%02d:%02d", off < 0 ? '-' : '+', static_cast<int>(std::abs(off) / 3600),
                static_cast<int>(std::abs(off) % 3600 / 60));
  return std::string(buf) + o;
}

// The next `n` firings after `from`, as local times.
std::vector<std::string> firings(const std::string& expr, const std::string& tz, const std::string& from, int n) {
  const CronZone z = zone(tz);
  const CronSchedule c = cron(expr);
  std::vector<std::string> out;
  int64_t t = utc(from);
  for (int i = 0; i < n; ++i) {
    auto next = c.next_after(t, z);
    if (!next) break;
    EXPECT_GT(*next, t);
    out.push_back(local(*next, z));
    t = *next;
  }
  return out;
}

using Times = std::vector<std::string>;

TEST(Cron, FieldsRangesListsStepsAndNames) {
  EXPECT_EQ(firings("*/20 * * * *", "UTC", "2026-01-05T10:05:00Z", 3),
            (Times{"2026-01-05 10:20:00 +00:00", "2026-01-05 10:40:00 +00:00", "2026-01-05 11:00:00 +00:00"}));
  EXPECT_EQ(firings("0 9-17/4 * * *", "UTC", "2026-01-05T10:00:00Z", 3),
            (Times{"2026-01-05 13:00:00 +00:00", "2026-01-05 17:00:00 +00:00", "2026-01-06 09:00:00 +00:00"}));
  EXPECT_EQ(firings("15,45 3 * * *", "UTC", "2026-01-05T03:20:00Z", 2),
            (Times{"2026-01-05 03:45:00 +00:00", "2026-01-06 03:15:00 +00:00"}));
  EXPECT_EQ(firings("30 8 * * MON-fri", "UTC", "2026-01-09T09:00:00Z", 2),  // a Friday
            (Times{"2026-01-12 08:30:00 +00:00", "2026-01-13 08:30:00 +00:00"}));
  EXPECT_EQ(firings("0 0 1 jan,JUL *", "UTC", "2026-02-01T00:00:00Z", 2),
            (Times{"2026-07-01 00:00:00 +00:00", "2027-01-01 00:00:00 +00:00"}));
  EXPECT_EQ(firings("0 12 * * 7", "UTC", "2026-01-05T00:00:00Z", 1), (Times{"2026-01-11 12:00:00 +00:00"}))
      << "7 is Sunday, as 0 is";
  EXPECT_EQ(firings("0 12 * * 5/1", "UTC", "2026-01-05T00:00:00Z", 3),  // N/STEP: Friday to Saturday... and 7
            (Times{"2026-01-09 12:00:00 +00:00", "2026-01-10 12:00:00 +00:00", "2026-01-11 12:00:00 +00:00"}));
}

TEST(Cron, SecondsFieldAndMacros) {
  const CronSchedule every2 = cron("*/2 * * * * *");
  EXPECT_TRUE(every2.has_seconds());
  EXPECT_FALSE(cron("* * * * *").has_seconds());
  EXPECT_EQ(firings("*/2 * * * * *", "UTC", "2026-01-05T10:00:59Z", 2),
            (Times{"2026-01-05 10:01:00 +00:00", "2026-01-05 10:01:02 +00:00"}));
  EXPECT_EQ(firings("@hourly", "UTC", "2026-01-05T10:00:00Z", 1), (Times{"2026-01-05 11:00:00 +00:00"}));
  EXPECT_EQ(firings("@daily", "UTC", "2026-01-05T10:00:00Z", 1), (Times{"2026-01-06 00:00:00 +00:00"}));
  EXPECT_EQ(firings("@weekly", "UTC", "2026-01-05T10:00:00Z", 1), (Times{"2026-01-11 00:00:00 +00:00"}));
  EXPECT_EQ(firings("@monthly", "UTC", "2026-01-05T10:00:00Z", 1), (Times{"2026-02-01 00:00:00 +00:00"}));
  EXPECT_EQ(firings("@yearly", "UTC", "2026-01-05T10:00:00Z", 1), (Times{"2027-01-01 00:00:00 +00:00"}));
  EXPECT_EQ(firings("@midnight", "UTC", "2026-01-05T10:00:00Z", 1),
            firings("@daily", "UTC", "2026-01-05T10:00:00Z", 1));
}

// Both restricted: either matches (Vixie cron). One is `*`: only the other.
TEST(Cron, DayOfMonthOrDayOfWeek) {
  // The 13th, or any Friday: January 2026 has Fridays 2, 9, 16.
  EXPECT_EQ(firings("0 0 13 * 5", "UTC", "2026-01-01T00:00:00Z", 4),
            (Times{"2026-01-02 00:00:00 +00:00", "2026-01-09 00:00:00 +00:00", "2026-01-13 00:00:00 +00:00",
                   "2026-01-16 00:00:00 +00:00"}));
  EXPECT_EQ(firings("0 0 13 * *", "UTC", "2026-01-01T00:00:00Z", 1), (Times{"2026-01-13 00:00:00 +00:00"}));
  EXPECT_EQ(firings("0 0 * * 5", "UTC", "2026-01-03T00:00:00Z", 1), (Times{"2026-01-09 00:00:00 +00:00"}));
  // A day-of-month starting with `*` counts as unrestricted: both must match
  // (odd days that are Fridays).
  EXPECT_EQ(firings("0 0 */2 * 5", "UTC", "2026-01-01T00:00:00Z", 2),
            (Times{"2026-01-09 00:00:00 +00:00", "2026-01-23 00:00:00 +00:00"}));
}

TEST(Cron, FebruaryTwentyNinthFiresInLeapYearsOnly) {
  EXPECT_EQ(firings("0 0 29 2 *", "UTC", "2026-03-01T00:00:00Z", 3),
            (Times{"2028-02-29 00:00:00 +00:00", "2032-02-29 00:00:00 +00:00", "2036-02-29 00:00:00 +00:00"}));
  EXPECT_EQ(firings("0 0 31 * *", "UTC", "2026-01-31T00:00:00Z", 2),
            (Times{"2026-03-31 00:00:00 +00:00", "2026-05-31 00:00:00 +00:00"}))
      << "months without a 31st are passed over";
  // February 29 that is a Monday (dow `*` only with the OR rule otherwise):
  // with both restricted, any Monday fires too.
  EXPECT_EQ(firings("0 0 29 2 mon", "UTC", "2026-02-20T00:00:00Z", 2),
            (Times{"2026-02-23 00:00:00 +00:00", "2027-02-01 00:00:00 +00:00"}));
}

// Europe/Paris, 2026-03-29: 02:00 CET becomes 03:00 CEST. A local time in
// the gap fires at the first instant after it (03:00 CEST), once.
TEST(CronDst, ParisGapFiresAtTheFirstInstantAfterOnce) {
  EXPECT_EQ(firings("30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z", 2),
            (Times{"2026-03-29 03:00:00 +02:00", "2026-03-30 02:30:00 +02:00"}));
  EXPECT_EQ(firings("*/20 * * * *", "Europe/Paris", "2026-03-29T00:30:00Z", 4),  // 01:30 CET
            (Times{"2026-03-29 01:40:00 +01:00", "2026-03-29 03:00:00 +02:00", "2026-03-29 03:20:00 +02:00",
                   "2026-03-29 03:40:00 +02:00"}))
      << "02:00, 02:20, 02:40 do not exist: one firing at 03:00";
}

// Europe/Paris, 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:00-02:59 comes
// twice. A local time in the fold fires once, at its first occurrence.
TEST(CronDst, ParisFoldFiresOnce) {
  EXPECT_EQ(firings("30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z", 2),
            (Times{"2026-10-25 02:30:00 +02:00", "2026-10-26 02:30:00 +01:00"}));
  EXPECT_EQ(firings("0,30 * * * *", "Europe/Paris", "2026-10-24T23:15:00Z", 5),  // 01:15 CEST
            (Times{"2026-10-25 01:30:00 +02:00", "2026-10-25 02:00:00 +02:00", "2026-10-25 02:30:00 +02:00",
                   "2026-10-25 03:00:00 +01:00", "2026-10-25 03:30:00 +01:00"}));
  // From inside the second pass of the fold: nothing fires again before 03:00.
  EXPECT_EQ(firings("*/10 * * * *", "Europe/Paris", "2026-10-25T01:05:00Z", 1), (Times{"2026-10-25 03:00:00 +01:00"}));
}

// America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST.
TEST(CronDst, NewYorkGapAndFold) {
  EXPECT_EQ(firings("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 2),
            (Times{"2026-03-08 03:00:00 -04:00", "2026-03-09 02:30:00 -04:00"}));
  EXPECT_EQ(firings("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 2),
            (Times{"2026-11-01 01:30:00 -04:00", "2026-11-02 01:30:00 -05:00"}));
  EXPECT_EQ(firings("0 * * * *", "America/New_York", "2026-11-01T04:30:00Z", 3),  // 00:30 EDT
            (Times{"2026-11-01 01:00:00 -04:00", "2026-11-01 02:00:00 -05:00", "2026-11-01 03:00:00 -05:00"}))
      << "01:00 EST (the second pass) does not fire again";
}

TEST(CronZoneNames, UnknownZonesAreRefusedByName) {
  for (const std::string bad : {"Mars/Olympus", "", "../../etc/passwd", "/usr/share/zoneinfo/UTC", "Europe/Paris "}) {
    auto z = CronZone::find(bad);
    ASSERT_TRUE(std::holds_alternative<CronError>(z)) << bad;
    EXPECT_EQ(std::get<CronError>(z).field, "timezone");
    EXPECT_NE(std::get<CronError>(z).message.find("\"" + bad + "\""), std::string::npos)
        << std::get<CronError>(z).message;
  }
  EXPECT_EQ(zone("America/New_York").offset_at(utc("2026-07-01T00:00:00Z")), -4 * 3600);
  EXPECT_EQ(zone("UTC").offset_at(utc("2026-07-01T00:00:00Z")), 0);
}

struct BadCron {
  const char* expr;
  const char* field;
  const char* says;
};

TEST(CronErrors, EachFieldsSyntaxErrorNamesTheField) {
  const BadCron table[] = {
      {"", "cron", "empty"},
      {"* * * *", "cron", "4 fields"},
      {"* * * * * * *", "cron", "7 fields"},
      {"@reboot", "cron", "not a macro"},
      {"60 * * * *", "minute", "\"60\" is out of range 0-59"},
      {"x * * * *", "minute", "\"x\" is not a number"},
      {"1,,2 * * * *", "minute", "an empty item"},
      {"5-2 * * * *", "minute", "runs backwards"},
      {"*/0 * * * *", "minute", "the step of \"*/0\""},
      {"*/61 * * * *", "minute", "the step of"},
      {"1/2/3 * * * *", "minute", "more than one '/'"},
      {"1-2-3 * * * *", "minute", "more than one '-'"},
      {"1- * * * *", "minute", "missing"},
      {"* 24 * * *", "hour", "out of range 0-23"},
      {"* * 0 * *", "day_of_month", "out of range 1-31"},
      {"* * 32 * *", "day_of_month", "out of range 1-31"},
      {"* * * 13 *", "month", "out of range 1-12"},
      {"* * * foo *", "month", "neither a number"},
      {"* * * * 8", "day_of_week", "out of range 0-7"},
      {"* * * * sunday", "day_of_week", "neither a number"},
      {"60 * * * * *", "second", "out of range 0-59"},
      {"0 0 30 2 *", "day_of_month", "no selected day"},
      {"0 0 31 4,6,9,11 *", "day_of_month", "no selected day"},
      {"99999 * * * *", "minute", "out of range"},
  };
  for (const auto& row : table) {
    const CronError e = error_of(row.expr);
    EXPECT_EQ(e.field, row.field) << row.expr << ": " << e.text();
    EXPECT_NE(e.message.find(row.says), std::string::npos) << row.expr << ": " << e.text();
  }
}

TEST(Cron, FebruaryTwentyNinthAcrossTheCenturyGap) {
  const CronSchedule c = cron("0 0 29 2 *");
  const auto next = c.next_after(utc("2096-03-01T00:00:00Z"), zone("UTC"));
  ASSERT_TRUE(next.has_value()) << "2104 is a leap year, within ten years of 2096 even without 2100";
}

}  // namespace
