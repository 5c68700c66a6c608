// The credentials' secrets held in memory and refreshed on a thread of their
// own; a replaced secret's bytes are wiped before they are freed.
#include "userspace/guard/credential_store.h"

#include <openssl/crypto.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace faultline {
namespace credential_store_impl {

constexpr size_t kMaxSecretBytes = 64 << 10;

void wipe(std::optional<std::string>& s) {
  if (s && !s->empty()) OPENSSL_cleanse(s->data(), s->size());
  s.reset();
}

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace credential_store_impl

using namespace credential_store_impl;

std::string secret_source_text(const SecretSource& s) {
  switch (s.kind) {
    case SecretKind::env:
      return "env " + s.ref;
    case SecretKind::file:
      return "file " + s.ref;
    case SecretKind::literal:
      return "literal";
  }
  return "?";
}

std::shared_ptr<CredentialStore> CredentialStore::start(CredsFile file, std::chrono::milliseconds ttl,
                                                        std::function<void(const std::string&)> log) {
  std::shared_ptr<CredentialStore> s(new CredentialStore(std::move(file), ttl, std::move(log)));
  s->thread_ = std::thread([p = s.get()] { p->loop(); });
  return s;
}

CredentialStore::CredentialStore(CredsFile file, std::chrono::milliseconds ttl,
                                 std::function<void(const std::string&)> log)
    : file_(std::move(file)), ttl_(ttl), log_(std::move(log)) {
  // An env source is read once and removed from this process's environment
  // before the command is started, so the command never inherits it.
  env_values_.resize(file_.http.size());
  for (size_t i = 0; i < file_.http.size(); ++i) {
    const SecretSource& s = file_.http[i].secret;
    if (s.kind != SecretKind::env) continue;
    for (size_t j = 0; j < i; ++j)
      if (file_.http[j].secret.kind == SecretKind::env && file_.http[j].secret.ref == s.ref)
        env_values_[i] = env_values_[j];
    if (const char* v = std::getenv(s.ref.c_str()); v != nullptr && !env_values_[i]) env_values_[i] = std::string(v);
  }
  for (size_t i = 0; i < file_.http.size(); ++i)
    if (file_.http[i].secret.kind == SecretKind::env) ::unsetenv(file_.http[i].secret.ref.c_str());
  held_.resize(file_.http.size());
  refresh();
}

CredentialStore::~CredentialStore() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (Held& h : held_) wipe(h.secret);
  for (auto& v : env_values_) wipe(v);
  for (HttpCredential& c : file_.http)
    if (c.secret.kind == SecretKind::literal && !c.secret.ref.empty())
      OPENSSL_cleanse(c.secret.ref.data(), c.secret.ref.size());
}

CredentialStore::Held CredentialStore::read(const SecretSource& s, size_t i) {
  Held h;
  std::string value;
  switch (s.kind) {
    case SecretKind::literal:
      value = s.ref;
      break;
    case SecretKind::env:
      if (!env_values_[i]) {
        h.why = "the variable " + s.ref + " was not set when the guard started";
        return h;
      }
      value = *env_values_[i];
      break;
    case SecretKind::file: {
      std::ifstream in(s.ref, std::ios::binary);
      if (!in) {
        h.why = "cannot read " + s.ref + ": " + std::strerror(errno);
        return h;
      }
      value.resize(kMaxSecretBytes + 1);
      in.read(value.data(), static_cast<std::streamsize>(value.size()));
      value.resize(static_cast<size_t>(in.gcount()));
      if (value.size() > kMaxSecretBytes) {
        OPENSSL_cleanse(value.data(), value.size());
        h.why = s.ref + " is over 64 KiB";
        return h;
      }
      // One trailing line break (echo's, an editor's) is not the secret's.
      if (!value.empty() && value.back() == '\n') value.pop_back();
      if (!value.empty() && value.back() == '\r') value.pop_back();
      break;
    }
  }
  for (const char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      OPENSSL_cleanse(value.data(), value.size());
      h.why = "the secret from " + secret_source_text(s) + " holds a control character (a header cannot carry it)";
      return h;
    }
  }
  if (value.empty()) {
    h.why = "the secret from " + secret_source_text(s) + " is empty";
    return h;
  }
  h.secret = std::move(value);
  return h;
}

void CredentialStore::refresh() {
  for (size_t i = 0; i < file_.http.size(); ++i) {
    Held h = read(file_.http[i].secret, i);
    std::string line;
    {
      std::lock_guard lock(mu_);
      Held& old = held_[i];
      const bool was = old.secret.has_value(), is = h.secret.has_value();
      if (!is && (was || old.why.empty() || old.why != h.why))
        line = "faultline guard: creds: " + file_.http[i].where + " (" + file_.http[i].host +
               "): missing, its requests are denied: " + h.why;
      else if (is && !was && !old.why.empty())
        line = "faultline guard: creds: " + file_.http[i].where + " (" + file_.http[i].host + "): the secret is back";
      wipe(old.secret);
      old = std::move(h);
    }
    if (!line.empty() && log_) log_(line);
  }
}

size_t CredentialStore::missing() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const Held& h : held_) n += h.secret ? 0 : 1;
  return n;
}

void CredentialStore::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (cv_.wait_for(lock, ttl_, [this] { return stop_; })) return;
    lock.unlock();
    refresh();
    lock.lock();
  }
}

std::optional<size_t> CredentialStore::match(std::string_view host, uint16_t port) const {
  for (size_t i = 0; i < file_.http.size(); ++i) {
    const HttpCredential& c = file_.http[i];
    if (iequal(c.host, host) && (!c.port || *c.port == port)) return i;
  }
  return std::nullopt;
}

Result<std::pair<std::string, std::string>> CredentialStore::header(size_t i) const {
  const HttpCredential& c = file_.http[i];
  std::lock_guard lock(mu_);
  const Held& h = held_[i];
  if (!h.secret) return make_error(ENOENT, "the secret of " + c.where + " is missing: " + h.why);
  return std::make_pair(c.header, expand_secret(c.value, *h.secret));
}

}  // namespace faultline
