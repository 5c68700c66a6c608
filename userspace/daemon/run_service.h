// Runs that faultd serves (POST /v1/runs): each on its own thread, over the
// connection the server hands over, printing what `faultctl run` would print,
// line by line, as JSON frames; the client's forwarded signals and its hanging
// up stop the run as a signal stops a standalone one.
//
// The request is a typed packet experiment and how to print it
// (served_run.h). The stream, after it:
//   faultd -> faultctl  "HTTP/1.1 200 OK" and a head, then one JSON object per line:
//                       {"out": TEXT} | {"err": TEXT}   what the run printed, in order
//                       {"exit_code": N}                 the last line: the run is over
//                       {"left": TEXT}                   the last line: faultd stopped and
//                                                        left the fault on in the kernel
//   faultctl -> faultd  "signal N\n" for each stop signal it received; closing the
//                       connection is a SIGHUP.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "userspace/net/http_server.h"
#include "userspace/run/guarded_run.h"
#include "userspace/run/runnable_fault.h"

namespace faultline {

// What a served run prints to and hears from, and the fault it watches.
class RunStreams {
 public:
  virtual ~RunStreams() = default;
  [[nodiscard]] virtual const RunIo& io() = 0;
  // The fault as the run must watch it: the same fault, except that when
  // faultd stops it leaves the fault on in the kernel (to end at its expiry)
  // instead of ending it. Valid for the length of the run.
  [[nodiscard]] virtual RunnableFault& hold(RunnableFault& fault) = 0;
};

class RunService {
 public:
  // Starts the first run's thread ahead (parked until a run comes).
  RunService(HttpServer& server, std::function<void(const std::string&)> log);
  ~RunService();  // leave_all(), then waits for every run's thread
  RunService(const RunService&) = delete;
  RunService& operator=(const RunService&) = delete;

  // POST /v1/runs: a body that is not a run request, or whose experiment its
  // reader refuses, gets 400 naming the field and its flag; otherwise the
  // connection is taken over and the run starts on its own thread.
  [[nodiscard]] HttpReply start(const HttpRequest& req);
  // Runs still on.
  [[nodiscard]] size_t active() const;
  // faultd stops: every run stops watching and leaves its fault on in the
  // kernel, where it ends at its expiry (faultctl abort ends it sooner); each
  // client is told so.
  void leave_all();

  struct Run;
  struct Spare;

 private:
  void reap_finished();
  // A thread started now and parked until run_on() hands it a run: the run
  // does not wait for a thread to be made (tens of microseconds, more on a
  // loaded machine). One is kept ready; each run's start has the next made
  // 100 ms later, on the serving thread.
  [[nodiscard]] static std::shared_ptr<Spare> make_spare();
  // Runs job on the spare thread (or a new one if none is ready) as run's thread. Under mu_.
  void run_on(Run& run, std::function<void()> job);

  HttpServer& server_;
  std::function<void(const std::string&)> log_;
  mutable std::mutex mu_;
  std::list<std::shared_ptr<Run>> runs_;
  std::shared_ptr<Spare> spare_;  // under mu_
  std::atomic<bool> leaving_{false};
};

}  // namespace faultline
