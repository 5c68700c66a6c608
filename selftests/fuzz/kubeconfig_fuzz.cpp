// libFuzzer target: a --k8s-kubeconfig file, any bytes at all: read, or
// refused with a message naming the file; what is read names an https server,
// and the command's copy made from it is JSON with a user holding at most the
// stand-in token.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "userspace/guard/kubeconfig.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto k = faultline::parse_kubeconfig(text, "kc.yaml", "/nonexistent-kubeconfig-dir", "");
  if (!k) {
    if (k.error().message.rfind("kc.yaml: ", 0) != 0 || !k.error().bad_input) __builtin_trap();
    return 0;
  }
  if (k->host.empty() || k->port == 0 || k->server.empty()) __builtin_trap();
  if (k->client_cert_pem.empty() != k->client_key_pem.empty()) __builtin_trap();
  const auto copy = nlohmann::json::parse(faultline::child_kubeconfig(*k, "CA"), nullptr, false);
  if (!copy.is_object() || copy["users"][0]["user"].size() > 1) __builtin_trap();
  return 0;
}
