// The activity chain: canonical lines, their SHA-256, the per-identity check,
// and the appending writer.
#include "userspace/guard/activity_log.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <utility>

#include "base/sha256.h"
namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace activity_log_detail {

using OrderedJson = nlohmann::ordered_json;

constexpr std::array<std::string_view, 12> kFields = {"seq",  "ts",      "identity", "kind", "method", "host",
                                                      "path", "verdict", "rule",     "llm",  "prev",   "hash"};
constexpr std::array<std::string_view, 5> kLlmFields = {"model", "in", "out", "cache", "reasoning"};

OrderedJson canonical_object(const ActivityEntry& e) {
  OrderedJson llm = nullptr;
  if (e.llm)
    llm = OrderedJson{{"model", e.llm->model},
                      {"in", e.llm->in},
                      {"out", e.llm->out},
                      {"cache", e.llm->cache},
                      {"reasoning", e.llm->reasoning}};
  OrderedJson j{{"seq", e.seq},   {"ts", e.ts},     {"identity", e.identity}, {"kind", e.kind}, {"method", e.method},
                {"host", e.host}, {"path", e.path}, {"verdict", e.verdict},   {"rule", e.rule}};
  // Only when there is one: a line of before the field hashes as it did.
  if (!e.reason.empty()) j["reason"] = e.reason;
  j["llm"] = std::move(llm);
  j["prev"] = e.prev;
  return j;
}

std::string dump(const OrderedJson& j) { return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace); }

// The entry a parsed line holds, or what is wrong with its shape.
std::variant<ActivityEntry, std::string> entry_of(const nlohmann::json& j) {
  if (!j.is_object()) return std::string("not a JSON object");
  for (const auto& [key, value] : j.items())
    if (key != "reason" && std::find(kFields.begin(), kFields.end(), key) == kFields.end())
      return "unknown field '" + key + "'";
  for (std::string_view f : kFields)
    if (!j.contains(f)) return "missing field '" + std::string(f) + "'";
  ActivityEntry e;
  if (!j["seq"].is_number_unsigned() || j["seq"].get<uint64_t>() == 0) return std::string("seq is not a number from 1");
  e.seq = j["seq"].get<uint64_t>();
  for (auto [name, into] : {std::pair{"ts", &e.ts}, std::pair{"identity", &e.identity}, std::pair{"kind", &e.kind},
                            std::pair{"method", &e.method}, std::pair{"host", &e.host}, std::pair{"path", &e.path},
                            std::pair{"verdict", &e.verdict}, std::pair{"rule", &e.rule}, std::pair{"prev", &e.prev},
                            std::pair{"hash", &e.hash}}) {
    if (!j[name].is_string()) return std::string(name) + " is not text";
    *into = j[name].get<std::string>();
  }
  if (e.identity.empty()) return std::string("identity is empty");
  // Optional, and never empty: the writer leaves out an empty reason, so an
  // empty one was added afterwards (and would not hash as written).
  if (j.contains("reason")) {
    if (!j["reason"].is_string()) return std::string("reason is not text");
    e.reason = j["reason"].get<std::string>();
    if (e.reason.empty()) return std::string("reason is empty (a line without one has no reason field)");
  }
  const auto& llm = j["llm"];
  if (!llm.is_null()) {
    if (!llm.is_object()) return std::string("llm is neither an object nor null");
    for (const auto& [key, value] : llm.items())
      if (std::find(kLlmFields.begin(), kLlmFields.end(), key) == kLlmFields.end())
        return "unknown field 'llm." + key + "'";
    ActivityLlm l;
    if (!llm.contains("model") || !llm["model"].is_string()) return std::string("llm.model is not text");
    l.model = llm["model"].get<std::string>();
    for (auto [name, into] : {std::pair{"in", &l.in}, std::pair{"out", &l.out}, std::pair{"cache", &l.cache},
                              std::pair{"reasoning", &l.reasoning}}) {
      if (!llm.contains(name) || !llm[name].is_number_unsigned())
        return "llm." + std::string(name) + " is not a token count";
      *into = llm[name].get<uint64_t>();
    }
    e.llm = std::move(l);
  }
  return e;
}

}  // namespace activity_log_detail

std::string activity_canonical_line(const ActivityEntry& e) {
  return activity_log_detail::dump(activity_log_detail::canonical_object(e));
}

std::string activity_hash(const ActivityEntry& e) { return sha256_hex(activity_canonical_line(e)); }

std::string activity_line(const ActivityEntry& e) {
  auto j = activity_log_detail::canonical_object(e);
  j["hash"] = e.hash;
  return activity_log_detail::dump(j);
}

std::string ActivityFault::describe() const {
  std::string s = "line " + std::to_string(line);
  if (!identity.empty() || seq) {
    s += " (";
    if (!identity.empty()) s += "identity " + identity;
    if (seq) s += std::string(identity.empty() ? "" : ", ") + "seq " + std::to_string(*seq);
    s += ")";
  }
  return s + ": " + problem;
}

void ActivityChain::extend(const ActivityEntry& e) {
  ++lines_;
  ++entries_;
  Head& head = heads_[e.identity];
  head.seq = e.seq;
  head.hash = e.hash;
}

std::variant<ActivityEntry, ActivityFault> ActivityChain::check_line(std::string_view line) {
  using namespace activity_log_detail;
  ActivityFault fault;
  fault.line = ++lines_;
  if (line.empty()) {
    fault.problem = "an empty line";
    return fault;
  }
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) {
    fault.problem = "not JSON";
    return fault;
  }
  // Name the entry as well as the line says, even when its shape is wrong.
  if (j.is_object() && j.contains("identity") && j["identity"].is_string())
    fault.identity = j["identity"].get<std::string>();
  if (j.is_object() && j.contains("seq") && j["seq"].is_number_unsigned()) fault.seq = j["seq"].get<uint64_t>();
  auto parsed = entry_of(j);
  if (auto* why = std::get_if<std::string>(&parsed)) {
    fault.problem = *why;
    return fault;
  }
  ActivityEntry& e = std::get<ActivityEntry>(parsed);
  if (activity_hash(e) != e.hash) {
    fault.problem = "hash mismatch: the entry was changed after it was written";
    return fault;
  }
  const Head head = [&] {
    auto it = heads_.find(e.identity);
    return it == heads_.end() ? Head{} : it->second;
  }();
  if (e.seq != head.seq + 1) {
    fault.problem = "seq " + std::to_string(e.seq) + " where " + std::to_string(head.seq + 1) +
                    " was expected (an entry before it was deleted or moved)";
    return fault;
  }
  if (e.prev != head.hash) {
    fault.problem = head.seq == 0 ? "prev is not empty on the identity's first entry"
                                  : "prev does not match the hash of seq " + std::to_string(head.seq) +
                                        " (that entry was replaced)";
    return fault;
  }
  heads_[e.identity] = Head{e.seq, e.hash};
  ++entries_;
  return std::move(e);
}

uint64_t ActivityChain::last_seq(const std::string& identity) const {
  auto it = heads_.find(identity);
  return it == heads_.end() ? 0 : it->second.seq;
}

std::string ActivityChain::last_hash(const std::string& identity) const {
  auto it = heads_.find(identity);
  return it == heads_.end() ? "" : it->second.hash;
}

Result<ActivityVerdict> verify_activity(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return input_error(errno, path + ": cannot read");
  ActivityChain chain;
  ActivityVerdict v;
  std::string line;
  while (std::getline(in, line)) {
    auto checked = chain.check_line(line);
    if (auto* fault = std::get_if<ActivityFault>(&checked)) {
      v.first_bad = std::move(*fault);
      break;
    }
  }
  if (in.bad()) return input_error(EIO, path + ": cannot read");
  v.entries = chain.entries();
  v.identities = chain.identities();
  return v;
}

namespace activity_log_detail {

std::string timestamp_of(const timespec& ts) {
  std::tm tm{};
  ::gmtime_r(&ts.tv_sec, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03ldZ", ts.tv_nsec / 1000000);
  return buf;
}

}  // namespace activity_log_detail

std::string activity_timestamp_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return activity_log_detail::timestamp_of(ts);
}

// fdatasync(2) off the writing thread: asked for after sync_every entries.
struct ActivityWriterSyncer {
  explicit ActivityWriterSyncer(int fd) : fd(fd), thread([this] { run(); }) {}
  ~ActivityWriterSyncer() {
    {
      std::lock_guard hold(mu);
      stop = true;
    }
    cv.notify_one();
    thread.join();
  }
  void ask() {
    {
      std::lock_guard hold(mu);
      wanted = true;
    }
    cv.notify_one();
  }
  // The errno of a failed sync since the last call, or 0.
  int take_error() {
    std::lock_guard hold(mu);
    return std::exchange(failed, 0);
  }
  void run() {
    std::unique_lock hold(mu);
    for (;;) {
      cv.wait(hold, [this] { return wanted || stop; });
      if (!wanted && stop) return;
      wanted = false;
      hold.unlock();
      const int rc = ::fdatasync(fd);
      const int err = rc == 0 ? 0 : errno;
      hold.lock();
      if (err != 0) failed = err;
    }
  }
  const int fd;  // the writer's; it outlives this (destroyed first)
  std::mutex mu;
  std::condition_variable cv;
  bool wanted = false, stop = false;
  int failed = 0;
  std::thread thread;
};

// The writer's state, on the heap so that its thread's `this` survives a move
// of the ActivityWriter. Only the writing thread touches the file and the
// chain; the queue and the counters are under mu.
struct ActivityWriter::Core {
  struct Pending {
    ActivityEntry entry;
    timespec posted{};                                         // the entry's ts when it has none
    std::optional<std::promise<Result<ActivityEntry>>> reply;  // append()'s; none for post()
  };

  Core(UniqueFd fd_in, std::string path_in, Options options_in, ActivityChain chain_in)
      : fd(std::move(fd_in)),
        path(std::move(path_in)),
        options(std::move(options_in)),
        chain(std::move(chain_in)),
        syncer(std::in_place, fd.get()),
        thread([this] { run(); }) {}
  ~Core() {
    {
      std::lock_guard hold(mu);
      stopping = true;
    }
    work.notify_one();
    thread.join();   // every queued entry written first
    syncer.reset();  // its last sync finished
    if (fd.valid()) (void)::fdatasync(fd.get());
  }

  // Returns the ticket of the entry: written once `done` reaches it.
  uint64_t enqueue(Pending p) {
    std::unique_lock hold(mu);
    room.wait(hold, [this] { return queue.size() < options.queue_limit; });
    queue.push_back(std::move(p));
    const uint64_t ticket = ++posted;
    hold.unlock();
    work.notify_one();
    return ticket;
  }

  void run() {
    std::deque<Pending> batch;
    std::unique_lock hold(mu);
    for (;;) {
      work.wait(hold, [this] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, and nothing left
      batch.swap(queue);
      hold.unlock();
      room.notify_all();
      for (auto& p : batch) {
        auto written = write_one(std::move(p.entry), p.posted);
        if (!written) {
          if (options.on_error) options.on_error(written.error());
          std::lock_guard keep(mu);
          if (!first_error) first_error = written.error();
        }
        if (p.reply) p.reply->set_value(std::move(written));
      }
      const size_t n = batch.size();
      batch.clear();
      hold.lock();
      done += n;
      drained.notify_all();
    }
  }

  Result<ActivityEntry> write_one(ActivityEntry e, const timespec& posted_at) {
    if (e.identity.empty()) return input_error(EINVAL, "an activity entry without an identity");
    if (const int err = syncer->take_error(); err != 0)
      return make_error(err, path + ": cannot sync the activity log: " + std::strerror(err));
    if (e.ts.empty()) e.ts = activity_log_detail::timestamp_of(posted_at);
    // The identity keys its chain as the line spells it: invalid UTF-8 replaced
    // (U+FFFD), as a verifier, or this writer reopened, reads it back.
    e.identity =
        nlohmann::json::parse(nlohmann::json(e.identity).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
            .get<std::string>();
    e.path = options.redactor.text(e.path);
    if (!e.reason.empty()) e.reason = options.redactor.text(e.reason);
    e.seq = chain.last_seq(e.identity) + 1;
    e.prev = chain.last_hash(e.identity);
    e.hash = activity_hash(e);
    const std::string line = activity_line(e) + "\n";
    const ssize_t n = ::write(fd.get(), line.data(), line.size());
    if (n != static_cast<ssize_t>(line.size()))
      return n < 0 ? errno_error(path + ": cannot append to the activity log")
                   : make_error(EIO, path + ": a short write to the activity log");
    chain.extend(e);
    if (options.on_append) options.on_append(e, line);
    if (++unsynced >= options.sync_every) {
      unsynced = 0;
      syncer->ask();
    }
    return e;
  }

  Status flush() {
    std::unique_lock hold(mu);
    const uint64_t upto = posted;
    drained.wait(hold, [&] { return done >= upto; });
    if (first_error) return *std::exchange(first_error, std::nullopt);
    return {};
  }

  UniqueFd fd;
  std::string path;
  Options options;
  ActivityChain chain;  // the writing thread's
  size_t unsynced = 0;  // the writing thread's
  std::optional<ActivityWriterSyncer> syncer;
  std::mutex mu;
  std::condition_variable work, room, drained;
  std::deque<Pending> queue;
  uint64_t posted = 0, done = 0;
  std::optional<Error> first_error;
  bool stopping = false;
  std::thread thread;  // last: started once the members above exist
};

ActivityWriter::ActivityWriter(std::unique_ptr<Core> core) : core_(std::move(core)) {}
ActivityWriter::ActivityWriter(ActivityWriter&&) noexcept = default;
ActivityWriter& ActivityWriter::operator=(ActivityWriter&&) noexcept = default;

ActivityWriter::~ActivityWriter() = default;

Result<ActivityWriter> ActivityWriter::open(const std::string& path, Options options) {
  if (options.sync_every == 0) options.sync_every = 1;
  if (options.queue_limit == 0) options.queue_limit = 1;
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return input_error(errno, path + ": cannot open the activity log");
  // Resume every identity's chain from the file as it is.
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = ::pread(fd.get(), buf, sizeof buf, static_cast<off_t>(text.size()))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(path + ": cannot read the activity log");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  if (!text.empty() && text.back() != '\n')
    return input_error(EINVAL, path +
                                   ": its last line is torn (no newline at its end): move the file aside "
                                   "(faultctl activity verify names the line)");
  ActivityChain chain;
  for (size_t start = 0; start < text.size();) {
    const size_t nl = text.find('\n', start);
    auto checked = chain.check_line(std::string_view(text).substr(start, nl - start));
    if (auto* fault = std::get_if<ActivityFault>(&checked))
      return input_error(EINVAL, path + ": " + fault->describe() + ": a broken chain is never extended");
    start = nl + 1;
  }
  return ActivityWriter(std::make_unique<Core>(std::move(fd), path, std::move(options), std::move(chain)));
}

void ActivityWriter::post(ActivityEntry entry) {
  Core::Pending p{std::move(entry)};
  if (p.entry.ts.empty()) ::clock_gettime(CLOCK_REALTIME, &p.posted);
  core_->enqueue(std::move(p));
}

Result<ActivityEntry> ActivityWriter::append(ActivityEntry entry) {
  Core::Pending p{std::move(entry)};
  if (p.entry.ts.empty()) ::clock_gettime(CLOCK_REALTIME, &p.posted);
  auto written = p.reply.emplace().get_future();
  core_->enqueue(std::move(p));
  return written.get();
}

Status ActivityWriter::flush() { return core_->flush(); }

Status ActivityWriter::sync() {
  FL_TRY(flush());
  if (::fdatasync(core_->fd.get()) != 0) return errno_error(core_->path + ": cannot sync the activity log");
  return {};
}

}  // namespace faultline
