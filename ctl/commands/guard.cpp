// faultctl guard ... -- CMD: as any user, the command's HTTP(S) through the
// request guard's proxy (host, path and method rules, approvals, the activity
// log); as root also a fresh cgroup under an egress policy in the kernel, which
// when enforcing refuses egress that bypasses the proxy; with --fault-* /
// --faults its HTTP requests through a fault proxy in this process (composed
// here: the kernel's guard may not use the proxy).
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>

#include "base/child.h"
#include "base/clock.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/guard_args.h"
#include "ctl/guard_exec_prompt.h"
#include "ctl/guard_fault_proxy.h"
#include "ctl/guard_fs.h"
#include "ctl/guard_integrity.h"
#include "ctl/guard_pg_gate.h"
#include "userspace/guard/exec_gate.h"
#include "userspace/guard_runtime/guard_capture.h"

namespace faultline {
namespace guard_command_impl {

std::atomic<int> g_signal{0};
void remember_signal(int sig) { g_signal.store(sig); }

// The exit code of a guard whose circuit breaker ended the command.
constexpr int kExitBreaker = 9;
// How long the command's group has between SIGTERM and SIGKILL.
constexpr auto kBreakerGrace = std::chrono::seconds(2);

// --circuit-breaker: the command leads a process group of its own, so that
// the breaker ends it and everything it started in it. When faultctl has the
// terminal's foreground, the group is given it (as a shell does) and it comes
// back at the end. Once the judge has revoked the egress, tick() sends the
// group SIGTERM, then SIGKILL after the grace.
class BreakerRun {
 public:
  explicit BreakerRun(GuardJudge* judge) : judge_(judge) {}
  ~BreakerRun() {
    if (!foreground_) return;
    struct sigaction ign {
    }, old{};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGTTOU, &ign, &old);
    (void)::tcsetpgrp(STDIN_FILENO, ::getpgrp());
    sigaction(SIGTTOU, &old, nullptr);
  }
  // In the child, before its exec: async-signal-safe only.
  static bool lead_group() { return ::setpgid(0, 0) == 0; }
  // Here, once it is forked.
  void forked(pid_t child) {
    (void)::setpgid(child, child);  // either side may come first
    if (::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) {
      struct sigaction ign {
      }, old{};
      ign.sa_handler = SIG_IGN;
      sigaction(SIGTTOU, &ign, &old);
      foreground_ = ::tcsetpgrp(STDIN_FILENO, child) == 0;
      sigaction(SIGTTOU, &old, nullptr);
      // A command that read the terminal before it had it was stopped (SIGTTIN).
      if (foreground_) ::kill(-child, SIGCONT);
    }
  }
  void tick(pid_t child) {
    if (judge_ == nullptr || !judge_->revoked()) return;
    const auto now = std::chrono::steady_clock::now();
    if (!term_sent_) {
      term_sent_ = true;
      term_at_ = now;
      ::kill(-child, SIGTERM);
      ::kill(child, SIGTERM);  // in case it could not lead its group
    } else if (!kill_sent_ && now - term_at_ >= kBreakerGrace) {
      kill_sent_ = true;
      ::kill(-child, SIGKILL);
      ::kill(child, SIGKILL);
    }
  }
  [[nodiscard]] bool ended() const { return term_sent_; }

 private:
  GuardJudge* judge_;
  bool foreground_ = false;
  bool term_sent_ = false, kill_sent_ = false;
  std::chrono::steady_clock::time_point term_at_;
};

// A flagged exec for people: "'rm -rf /srv' (rm-recursive-force: ...), pid 42".
std::string exec_what(const ExecJudgement& j) {
  std::string what;
  if (j.unreadable.empty()) {
    const CommandRisk& r = j.risks.front();
    what = "'" + r.command + "' (" + r.rule + ": " + r.reason + ")";
  } else {
    what = "an exec whose words could not be read (" + j.unreadable + ")";
  }
  return what + ", pid " + std::to_string(j.pid);
}

// One line, written at once: the gate's and the deciders' threads share stderr.
void say_exec(const std::string& what) {
  const std::string line = "faultline guard: exec: " + what + "\n";
  std::cerr.write(line.data(), static_cast<std::streamsize>(line.size())).flush();
}

// --block-dangerous: the exec gate, each flagged exec said on stderr and,
// with the request guard, kept in its activity log. --approve-dangerous
// (enforcing): held in the guard's approval queue instead of refused, and
// asked on the terminal too when there is a prompt; a command line granted
// "always" runs without asking again.
Result<std::unique_ptr<ExecGate>> start_exec_gate(bool enforce, bool approve, GuardCapture* capture,
                                                  std::shared_ptr<ExecPrompt> prompt) {
  ExecGateOptions o;
  o.enforce = enforce;
  GuardJudge* judge = capture != nullptr ? &capture->judge() : nullptr;
  o.on_flagged = [judge](const ExecJudgement& j) {
    say_exec(std::string(j.blocked ? "blocked " : "would block (monitor: it ran) ") + exec_what(j));
    if (judge != nullptr) judge->record_exec(j, GuardVerdict::Deny);
  };
  if (judge != nullptr) o.on_exec = [judge](const ExecJudgement& j) { judge->note_exec(j); };
  if (approve && judge != nullptr) {
    o.hold = [judge, prompt](const ExecJudgement& j, ExecAnswer answer) {
      const std::string command = exec_command_text(j);
      if (j.unreadable.empty()) {
        if (auto grant = judge->exec_grants().find(command)) {
          say_exec("always allowed (" + grant->id + "), it runs: " + exec_what(j));
          judge->record_exec(j, GuardVerdict::Allow);
          answer(true);
          return;
        }
      }
      // The settle runs on the deciding thread; the judge outlives the queue's
      // entries. A decision made elsewhere (faultctl approvals, faultcp, the
      // timeout) withdraws the terminal's question; `asked` orders the two,
      // whichever thread comes first.
      struct Asked {
        std::mutex mu;
        std::string id;  // set once the hold has its id
        bool settled = false;
      };
      auto asked = std::make_shared<Asked>();
      auto settle = [judge, j, prompt, asked, answer = std::move(answer)](ApprovalOutcome outcome,
                                                                          const std::string& why) {
        const bool approved = outcome == ApprovalOutcome::Approved;
        if (prompt) {
          std::lock_guard lock(asked->mu);
          asked->settled = true;
          if (!asked->id.empty())
            prompt->withdraw(asked->id, approved                               ? "approved elsewhere, it runs"
                                        : outcome == ApprovalOutcome::TimedOut ? "not decided in time, refused"
                                                                               : "denied elsewhere, refused");
        }
        say_exec(std::string(approved                               ? "approved, it runs: "
                             : outcome == ApprovalOutcome::TimedOut ? "not decided in time, refused: "
                                                                    : "denied, refused: ") +
                 exec_what(j) + (why.empty() ? "" : " (" + why + ")"));
        judge->record_exec(j, approved ? GuardVerdict::Allow : GuardVerdict::Deny);
        answer(approved);
      };
      const std::string id = judge->hold_exec(j, std::move(settle));
      say_exec("held for approval " + id + ": " + exec_what(j) + "; faultctl approvals approve " + id + " | deny " +
               id);
      judge->record_exec(j, GuardVerdict::Approve);
      if (!prompt) return;
      std::lock_guard lock(asked->mu);
      asked->id = id;
      if (asked->settled) return;
      const std::string rule = j.risks.empty() ? std::string() : j.risks.front().rule;
      prompt->ask(id, exec_what(j), j.unreadable.empty(), [judge, id, command, rule](PromptAnswer a) {
        if (a == PromptAnswer::Always) {
          const std::string grant = judge->exec_grants().add(command, rule);
          say_exec("always allow " + grant + " (this session; faultctl approvals revoke " + grant + "): " + command);
        }
        // Decided elsewhere meanwhile: the queue has nothing of that id, and that decision stands.
        (void)judge->approvals().decide(id, a != PromptAnswer::Deny, "at the terminal");
      });
    };
  }
  return ExecGate::create(std::move(o));
}

void print_exec_summary(const ExecGate& gate) {
  std::cerr << "faultline guard: execs: " << gate.judged() << " judged, " << gate.flagged() << " flagged, "
            << gate.held() << " held, " << gate.blocked() << " blocked (--block-dangerous)\n";
}

// The command as a child of ours, signals passed on, its exit code (as a user:
// no cgroup to put it in). With gate: its filter installed in the child.
int run_wrapped(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
                ExecGate* gate, GuardFsWatch* watch, BreakerRun* breaker) {
  ChildEnvironment child_env(env);
  auto held = HeldChild::spawn(
      argv,
      [&child_env, gate, breaker] {
        child_env.apply();
        if (breaker != nullptr && !BreakerRun::lead_group()) return false;
        return gate == nullptr || gate->install_in_child();
      },
      "faultctl guard");
  if (!held) {
    std::cerr << "faultctl guard: " << held.error().describe() << "\n";
    return 1;
  }
  if (gate != nullptr) gate->serve();
  if (watch != nullptr) watch->forked(held->pid());
  if (breaker != nullptr) breaker->forked(held->pid());
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = remember_signal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  if (auto st = held->release(); !st) {
    std::cerr << "faultctl guard: " << st.error().describe() << "\n";
    return 127;
  }
  int code = 1;
  for (;;) {
    if (int sig = g_signal.exchange(0); sig != 0) ::kill(held->pid(), sig);
    if (breaker != nullptr) breaker->tick(held->pid());
    if (auto c = held->poll_exit()) {
      code = *c;
      break;
    }
    sleep_ms(20);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return breaker != nullptr && breaker->ended() ? kExitBreaker : code;
}

// The resolvers the command's libc asks (/etc/resolv.conf's nameservers):
// transparent capture needs names resolved by the command itself, and DNS to
// anywhere else stays a fenced channel.
std::vector<std::string> resolv_conf_nameservers() {
  std::vector<std::string> out;
  std::ifstream in("/etc/resolv.conf");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, addr;
    if (words >> key >> addr && key == "nameserver") out.push_back(addr);
  }
  return out;
}

// The kernel's side of a root request guard: every TCP connect is let through
// the policy and redirected to the guard's proxy (transparent capture, judged
// there by request), DNS to the system's resolvers is allowed, and everything
// else (other UDP, other protocols) is refused, so nothing bypasses the guard.
Status capture_in_kernel(GuardOptions& g, bool enforce, const GuardCapture& capture) {
  std::vector<EgressRule> allows;
  for (const char* tcp : {"0.0.0.0/0:1-65535/tcp", "[::/0]:1-65535/tcp"}) {
    auto r = parse_rule(Verdict::Allow, tcp);
    if (!r) return r.error();
    r->text = std::string(tcp) + " (redirected to the guard's proxy)";
    allows.push_back(*r);
  }
  for (const std::string& ns : resolv_conf_nameservers()) {
    const std::string text = (ns.find(':') != std::string::npos ? "[" + ns + "]" : ns) + ":53/udp";
    auto r = parse_rule(Verdict::Allow, text);
    if (!r) continue;  // a scoped IPv6 resolver (fe80::1%eth0): not allowed, said below
    r->text = text + " (a resolver of /etc/resolv.conf)";
    allows.push_back(*r);
  }
  g.rules.insert(g.rules.begin(), allows.begin(), allows.end());
  g.redirects.insert(g.redirects.end(), capture.redirects().begin(), capture.redirects().end());
  g.enforce = g.enforce || enforce;  // an egress scope of --policy that enforces keeps doing so
  g.default_deny = true;
  for (auto v : {Verdict::Allow, Verdict::Deny})
    if (auto t = compile_rules(g.rules, v); !t) return make_error(EINVAL, t.error().message);
  if (auto t = compile_redirects(g.redirects); !t) return make_error(EINVAL, t.error().message);
  return {};
}

bool capture_gateway(const GuardArgs& a) { return a.capture.gateway; }

// --gateway: no command; the proxy serves until SIGINT or SIGTERM, then the summary.
int run_gateway(GuardCapture& capture) {
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = remember_signal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  while (g_signal.load() == 0) sleep_ms(50);
  std::cerr << "faultline guard: gateway: " << (g_signal.load() == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping\n";
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  capture.print_summary(std::cerr);
  return 0;
}

}  // namespace guard_command_impl

using namespace guard_command_impl;

int cmd_guard(const std::vector<std::string>& args) {
  // Root is checked by the parser: as a user the request guard runs alone.
  return run_command("faultctl guard", parse_guard_args(args), kRootNever, [](GuardArgs& a) -> int {
    std::unique_ptr<GuardCapture> capture;
    std::unique_ptr<GuardPgGate> pg;                       // after capture: the gate uses its judge
    std::vector<std::pair<std::string, std::string>> env;  // the request guard's and the gate's variables
    // A policy that can change while the command runs (SIGHUP, faultcp).
    const bool policy_reloads = !a.capture.policy_file.empty() || !a.capture.cp_url.empty();
    if (a.breaker.on)
      a.capture.breaker = std::make_shared<CircuitBreaker>(a.breaker.threshold, a.breaker.window, nullptr);
    if (a.requests) {
      a.capture.transparent = ::geteuid() == 0 && !a.capture.gateway;
      auto started = GuardCapture::start(std::move(a.capture), std::cerr);
      if (!started) {
        std::cerr << "faultctl guard: " << started.error().describe() << "\n";
        return started.error().bad_input ? int(kExitBadInput) : 1;
      }
      capture = std::move(*started);
      if (capture_gateway(a)) return run_gateway(*capture);
      env = capture->env();
      if (a.pg.enabled()) {
        auto gate = GuardPgGate::start(a.pg, capture->judge(), std::cerr);
        if (!gate) {
          std::cerr << "faultctl guard: " << gate.error().describe() << "\n";
          return gate.error().bad_input ? int(kExitBadInput) : 1;
        }
        pg = std::move(*gate);
        const auto pg_env = pg->env();
        env.insert(env.end(), pg_env.begin(), pg_env.end());
        if (::geteuid() == 0) {
          // The kernel's capture sends every TCP connect to the HTTP proxy:
          // the gate's own address stays itself, and a direct connect to the
          // upstream is caught by the gate (its own connects are faultctl's,
          // outside the command's cgroup).
          for (const std::string& dest : {pg->address(), endpoint_text(pg->upstream())}) {
            auto r = parse_redirect(dest + "/tcp=" + pg->address());
            if (!r) {
              std::cerr << "faultctl guard: --pg-listen: " << r.error().message << "\n";
              return int(kExitBadInput);
            }
            r->text = dest + " (the Postgres gate)";
            a.guard.redirects.push_back(*r);
          }
        }
      }
    }
    std::unique_ptr<BreakerRun> breaker;
    if (a.breaker.on && capture) {
      breaker = std::make_unique<BreakerRun>(&capture->judge());
      std::cerr << "faultline guard: --circuit-breaker: threshold " << a.breaker.threshold << " within "
                << a.breaker.window.count() / 1000
                << "s (injection, exfil, honeytoken, response threat 100; tamper 60; a denial 25); crossing it "
                << (capture->judge().policy()->mode == GuardMode::Enforce
                        ? "revokes the egress and ends the command's process group (exit 9)"
                        : "is reported (monitor: nothing revoked or ended)")
                << "\n";
    }
    std::unique_ptr<ExecGate> gate;
    if (a.block_dangerous) {
      const bool enforce = a.guard.enforce || (capture && capture->judge().policy()->mode == GuardMode::Enforce);
      std::shared_ptr<ExecPrompt> prompt;
      if (a.approve_dangerous && a.approve_prompt == GuardArgs::ApprovePrompt::Tty) {
        auto opened = ExecPrompt::open("/dev/tty");
        if (!opened) {
          std::cerr << "faultctl guard: --approve-prompt tty: " << opened.error().describe()
                    << " (no terminal to ask on; use auto or off)\n";
          return int(kExitBadInput);
        }
        prompt = std::move(*opened);
      } else if (a.approve_dangerous && a.approve_prompt == GuardArgs::ApprovePrompt::Auto) {
        prompt = ExecPrompt::open_terminal();
      }
      auto made = start_exec_gate(enforce, a.approve_dangerous, capture.get(), prompt);
      if (!made) {
        std::cerr << "faultctl guard: --block-dangerous: " << made.error().describe() << "\n";
        return 1;
      }
      gate = std::move(*made);
      std::cerr << "faultline guard: every exec of the command is judged by the dangerous-command rules ("
                << (!enforce              ? "monitor: reported, not refused"
                    : a.approve_dangerous ? (prompt ? "enforce: held for approval, asked on this terminal too, "
                                                      "refused with EPERM unless approved"
                                                    : "enforce: held for approval, refused with EPERM unless approved")
                                          : "enforce: refused with EPERM")
                << ")\n";
      a.guard.before_exec = [g = gate.get()] { return g->install_in_child(); };
      a.guard.forked = [g = gate.get()](pid_t) { g->serve(); };
    }
    std::unique_ptr<GuardFsWatch> watch;
    if (a.watch_fs.enabled) {
      auto started = GuardFsWatch::start(a.watch_fs, capture ? &capture->judge() : nullptr, std::cerr);
      if (!started) {
        std::cerr << "faultctl guard: " << started.error().describe() << "\n";
        return started.error().bad_input ? int(kExitBadInput) : 1;
      }
      watch = std::move(*started);
      a.guard.forked = [w = watch.get(), before = std::move(a.guard.forked)](pid_t pid) {
        if (before) before(pid);
        w->forked(pid);
      };
    }
    std::unique_ptr<GuardIntegrity> integrity;
    if (a.integrity.enabled()) {
      auto started = GuardIntegrity::start(a.integrity, capture ? &capture->judge() : nullptr, std::cerr);
      if (!started) {
        std::cerr << "faultctl guard: " << started.error().describe() << "\n";
        return started.error().bad_input ? int(kExitBadInput) : 1;
      }
      integrity = std::move(*started);
      a.guard.forked = [i = integrity.get(), before = std::move(a.guard.forked)](pid_t pid) {
        if (before) before(pid);
        i->forked(pid);
      };
    }
    std::unique_ptr<FsGate> fs_gate;
    if (a.enforce_fs) {
      const bool enforce = a.guard.enforce || (capture && capture->judge().policy()->mode == GuardMode::Enforce);
      auto made = start_fs_gate(std::move(a.fs_gate), enforce, capture ? &capture->judge() : nullptr, std::cerr);
      if (!made) {
        std::cerr << "faultctl guard: " << made.error().describe() << "\n";
        return 1;
      }
      fs_gate = std::move(*made);
      // Its namespace first, then the exec gate's filter: the last thing before the exec.
      a.guard.before_exec = [f = fs_gate.get(), before = std::move(a.guard.before_exec)] {
        return f->prepare_in_child() && (!before || before());
      };
      a.guard.forked = [f = fs_gate.get(), before = std::move(a.guard.forked)](pid_t pid) {
        if (before) before(pid);
        f->serve(pid);
      };
    }
    if (capture) {
      if (::geteuid() != 0) {
        const int code = run_wrapped(a.guard.command, env, gate.get(), watch.get(), breaker.get());
        if (integrity) integrity->finish(std::cerr);
        if (watch) watch->finish(std::cerr);
        if (gate) print_exec_summary(*gate);
        if (pg) pg->print_summary(std::cerr);
        pg.reset();
        capture->print_summary(std::cerr);
        return code;
      }
      const bool enforce = capture->judge().policy()->mode == GuardMode::Enforce;
      // --enforce, or an egress scope of --policy that enforces: fixed; else
      // the fence follows the request guard's policy as it is reloaded.
      const bool fixed_enforce = a.guard.enforce;
      if (auto st = capture_in_kernel(a.guard, enforce, *capture); !st) {
        std::cerr << "faultctl guard: " << st.error().message << "\n";
        return int(kExitBadInput);
      }
      std::cerr << "faultline guard: root: every TCP connection of the command is captured transparently "
                   "(redirected to the guard's proxy, judged by Host, SNI or destination); DNS goes to the "
                   "system's resolvers only"
                << (enforce ? "; other egress (UDP, other protocols) is refused in the kernel\n"
                            : " (monitor: other egress is logged as would-deny)\n");
      if (!fixed_enforce && policy_reloads) {
        a.guard.enforce_now = [judge = &capture->judge()] { return judge->policy()->mode == GuardMode::Enforce; };
        std::cerr << "faultline guard: the kernel fence follows the policy's mode as it is reloaded (SIGHUP, "
                     "faultcp), within 100 ms\n";
      }
      a.guard.env.insert(a.guard.env.end(), env.begin(), env.end());
    }
    std::unique_ptr<GuardFaultProxy> faults;
    if (!a.faults.empty()) {
      auto started = GuardFaultProxy::start(a.faults, std::cerr);
      if (!started) {
        std::cerr << "faultctl guard: HTTP faults: " << started.error().describe() << "\n";
        return 1;
      }
      faults = std::move(*started);
      for (const auto& r : faults->redirects()) a.guard.redirects.push_back(r);
      if (auto t = compile_redirects(a.guard.redirects); !t) {
        std::cerr << "faultctl guard: --fault-host with --redirect: " << t.error().message << "\n";
        return int(kExitBadInput);
      }
      a.guard.env.insert(a.guard.env.end(), faults->env().begin(), faults->env().end());
    }
    if (breaker) {
      a.guard.before_exec = [inner = std::move(a.guard.before_exec)] {
        return BreakerRun::lead_group() && (!inner || inner());
      };
      a.guard.tick = [b = breaker.get(), forked = false](pid_t child) mutable {
        if (!forked) {  // the first tick comes after the fork and the release
          forked = true;
          b->forked(child);
        }
        b->tick(child);
        return b->ended();  // the fence goes with the proxy's egress
      };
    }
    Guard g(std::move(a.guard), std::cerr);
    int code = g.run();
    if (integrity) integrity->finish(std::cerr);
    if (breaker && breaker->ended()) code = kExitBreaker;
    if (fs_gate) {
      fs_gate->stop();
      print_fs_gate_summary(*fs_gate, std::cerr);
    }
    if (watch) watch->finish(std::cerr);
    if (gate) print_exec_summary(*gate);
    if (faults) faults->print_summary(std::cerr);
    if (pg) pg->print_summary(std::cerr);
    pg.reset();
    if (capture) capture->print_summary(std::cerr);
    return code;
  });
}

}  // namespace faultline
