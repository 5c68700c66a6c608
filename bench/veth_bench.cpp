// fl_bench_veth: iperf3 through a veth pair between two namespaces, with the
// netfault program attached on the client's device (a fault that never matches:
// loss on an address that is not the peer) against nothing attached. The two
// variants alternate within every repetition (A B, B A, A B, ...).
//
// TCP for --seconds (GSO hides per-packet cost) and 64-byte UDP as fast as one
// vCPU sends (the per-packet view). Client and server are pinned to different CPUs.
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"

using namespace flbench;

namespace {

struct Opts {
  std::string client_ns, server_ns, server_ip = "198.18.0.2", non_peer = "198.19.255.254";
  std::string faultctl, summary;
  std::string client_cpu = "0", server_cpu = "1", port = "5201";
  int reps = 5;
  int seconds = 3;
  bool udp = true;
};

Child g_server, g_fault;

void stop_children() {
  if (g_fault.pid > 0) {
    kill(g_fault.pid, SIGTERM);
    wait_child(g_fault, 10'000);
  }
  if (g_server.pid > 0) {
    kill(g_server.pid, SIGTERM);
    wait_child(g_server, 5'000);
  }
}

void on_signal(int) {
  stop_children();
  _exit(130);
}

struct Sample {
  double tcp_gbps = NAN;
  double udp_tx_pps = NAN, udp_rx_pps = NAN;
};

// One iperf3 client run; retried once (the server may still be finishing the last test).
nlohmann::json iperf(const Opts& o, bool udp) {
  std::vector<std::string> argv = {
      "ip",     "netns", "exec",      o.client_ns, "taskset", "-c", o.client_cpu,
      "iperf3", "-c",    o.server_ip, "-p",        o.port,    "-t", std::to_string(o.seconds),
      "-J"};
  if (udp) {
    for (const char* a : {"-u", "-b", "0", "-l", "64"}) argv.push_back(a);
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    sleep_ms(300);  // let the server finish the previous test
    Child c = spawn(argv, Out::Capture, true);
    std::string text = slurp(c.out);
    int rc = wait_child(c, (o.seconds + 30) * 1000);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (rc == 0 && !j.is_discarded() && !j.contains("error")) return j;
    std::cerr << "fl_bench_veth: iperf3 " << (udp ? "UDP" : "TCP") << " failed (exit " << rc << ")"
              << (j.is_object() && j.contains("error") ? ": " + j["error"].get<std::string>() : "") << "; retrying\n";
    sleep_ms(1000);
  }
  return nullptr;
}

Sample measure(const Opts& o) {
  Sample s;
  auto t = iperf(o, false);
  if (!t.is_null()) s.tcp_gbps = t["end"]["sum_received"]["bits_per_second"].get<double>() / 1e9;
  if (o.udp) {
    auto u = iperf(o, true);
    if (!u.is_null()) {
      const auto& tx = u["end"]["sum_sent"];
      const auto& rx = u["end"]["sum_received"];
      s.udp_tx_pps = tx["packets"].get<double>() / tx["seconds"].get<double>();
      s.udp_rx_pps = (rx["packets"].get<double>() - rx["lost_packets"].get<double>()) / rx["seconds"].get<double>();
    }
  }
  return s;
}

bool attach(const Opts& o, std::string& how) {
  g_fault = spawn({o.faultctl, "run", "loss", "--percent", "0.0001", "--target", o.non_peer, "--netns", o.client_ns,
                   "--duration", "60s"},
                  Out::Capture, true);
  std::string line;
  while (read_line(g_fault.out, line, 20'000)) {
    if (line.find(" applied: ") != std::string::npos) {
      how = line.substr(line.find(" via ") == std::string::npos ? 0 : line.find(" via ") + 1);
      return true;
    }
  }
  std::cerr << "fl_bench_veth: faultctl run did not apply the fault\n";
  kill(g_fault.pid, SIGTERM);
  wait_child(g_fault, 10'000);
  return false;
}

bool detach() {
  kill(g_fault.pid, SIGTERM);  // ends the fault; the last one tears the attachment down
  int rc = wait_child(g_fault, 20'000);
  return rc == 1 || rc == 0;  // "interrupted" exits 1
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--client-ns")
      o.client_ns = next();
    else if (a == "--server-ns")
      o.server_ns = next();
    else if (a == "--server-ip")
      o.server_ip = next();
    else if (a == "--non-peer")
      o.non_peer = next();
    else if (a == "--faultctl")
      o.faultctl = next();
    else if (a == "--summary")
      o.summary = next();
    else if (a == "--client-cpu")
      o.client_cpu = next();
    else if (a == "--server-cpu")
      o.server_cpu = next();
    else if (a == "--port")
      o.port = next();
    else if (a == "--reps")
      o.reps = std::max(3, std::atoi(next().c_str()));
    else if (a == "--seconds")
      o.seconds = std::max(1, std::atoi(next().c_str()));
    else if (a == "--no-udp")
      o.udp = false;
    else {
      std::cerr << "usage: fl_bench_veth --client-ns A --server-ns B --faultctl PATH [--server-ip IP] [--non-peer IP]\n"
                   "       [--client-cpu N] [--server-cpu N] [--reps N>=3] [--seconds N] [--no-udp] [--summary FILE]\n"
                   "FAULTLINE_BPFFS_ROOT should name a private state for the faultctl runs.\n";
      return 2;
    }
  }
  if (o.client_ns.empty() || o.server_ns.empty() || o.faultctl.empty()) {
    std::cerr << "fl_bench_veth: --client-ns, --server-ns and --faultctl are required\n";
    return 2;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN);

  g_server = spawn({"ip", "netns", "exec", o.server_ns, "taskset", "-c", o.server_cpu, "iperf3", "-s", "-p", o.port},
                   Out::Null, true);
  sleep_ms(500);

  std::vector<Sample> none, attached;
  std::string how;
  std::cout << "veth throughput: iperf3 client in " << o.client_ns << " (CPU " << o.client_cpu << ") -> server in "
            << o.server_ns << " (CPU " << o.server_cpu << "), " << o.seconds << " s per run, " << o.reps
            << " repetitions, variants alternating\n";
  for (int r = 0; r < o.reps; ++r) {
    for (int k = 0; k < 2; ++k) {
      bool with = (r + k) % 2 == 1;  // rep 0: none, attached; rep 1: attached, none; ...
      if (with) {
        if (!attach(o, how)) {
          stop_children();
          return 1;
        }
        attached.push_back(measure(o));
        if (!detach()) std::cerr << "fl_bench_veth: faultctl did not end cleanly\n";
      } else {
        none.push_back(measure(o));
      }
      const Sample& s = with ? attached.back() : none.back();
      std::cout << "  rep " << r + 1 << " " << (with ? "attached" : "none    ") << "  TCP " << fmt(s.tcp_gbps, 2)
                << " Gbit/s";
      if (o.udp)
        std::cout << "  UDP64 sent " << fmt(s.udp_tx_pps / 1e3, 0) << " kpps, received " << fmt(s.udp_rx_pps / 1e3, 0)
                  << " kpps";
      std::cout << std::endl;
    }
  }
  stop_children();

  auto col = [](const std::vector<Sample>& v, double Sample::*m) {
    std::vector<double> out;
    for (const auto& s : v) out.push_back(s.*m);
    return out;
  };
  auto ratio = [&](double Sample::*m) {
    std::vector<double> out;
    for (size_t i = 0; i < none.size() && i < attached.size(); ++i) out.push_back(attached[i].*m / none[i].*m);
    return spread(out);
  };
  std::cout << "\nattached = the netfault program on the client's veth egress (" << how << "), loss fault on "
            << o.non_peer << " (never matches)\n";
  std::cout << "metric                      none                  attached              attached/none (per rep)\n";
  auto line = [&](const char* name, double Sample::*m, double scale, int prec) {
    auto a = spread(col(none, m)), b = spread(col(attached, m));
    for (auto* s : {&a, &b}) {
      s->median /= scale;
      s->min /= scale;
      s->max /= scale;
    }
    std::string n = name;
    std::cout << n << std::string(28 - std::min<size_t>(27, n.size()), ' ') << fmt_spread(a, prec)
              << std::string(22 - std::min<size_t>(21, fmt_spread(a, prec).size()), ' ') << fmt_spread(b, prec)
              << std::string(22 - std::min<size_t>(21, fmt_spread(b, prec).size()), ' ') << fmt_spread(ratio(m), 3)
              << "\n";
    return std::make_pair(a, b);
  };
  auto tcp = line("TCP Gbit/s", &Sample::tcp_gbps, 1, 2);
  Spread tr = ratio(&Sample::tcp_gbps);
  append_summary(o.summary, {"2 veth", "TCP throughput, attached vs none",
                             fmt(tcp.second.median, 2) + " vs " + fmt(tcp.first.median, 2) + " Gbit/s",
                             fmt_spread(tr, 3) + "x", ">= 0.97x", verdict(tr.median >= 0.97)});
  if (o.udp) {
    auto tx = line("UDP 64B sent, kpps", &Sample::udp_tx_pps, 1e3, 0);
    auto rx = line("UDP 64B received, kpps", &Sample::udp_rx_pps, 1e3, 0);
    Spread txr = ratio(&Sample::udp_tx_pps), rxr = ratio(&Sample::udp_rx_pps);
    append_summary(o.summary, {"2 veth", "UDP 64B sent pps, attached vs none",
                               fmt(tx.second.median, 0) + " vs " + fmt(tx.first.median, 0) + " kpps",
                               fmt_spread(txr, 3) + "x", "-", "report"});
    append_summary(o.summary, {"2 veth", "UDP 64B received pps, attached vs none",
                               fmt(rx.second.median, 0) + " vs " + fmt(rx.first.median, 0) + " kpps",
                               fmt_spread(rxr, 3) + "x", "-", "report"});
  }
  return 0;
}
