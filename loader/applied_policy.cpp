// Applied policy pins: the shared generation map, the source per generation,
// and each scope's instance, its inner maps built beside the live ones.
#include "loader/applied_policy.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "loader/map_ops.h"
#include "loader/sockaddr_object.h"

namespace faultline {
namespace {

constexpr uint32_t kSourceChunk = 4096;  // bytes per entry of a source map

// Entry 0 of a source map, the header: the text's length, then (since the
// digest was kept) a tag and the digest. A header without the tag (an older
// faultctl's) has zeros there: its digest reads as "".
struct SourceHeader {
  uint64_t len;
  char tag[8];  // kDigestTag
  uint32_t digest_len;
  char digest[PolicyGenerations::kSourceDigestMax];
};
constexpr char kDigestTag[8] = {'f', 'l', 'd', 'i', 'g', 'e', 's', 't'};
static_assert(sizeof(SourceHeader) <= kSourceChunk);

// Whether a batch operation's refusal means the kernel has none for this map
// type (then the caller goes one element at a time).
bool batch_unsupported(int err) {
  return err == EINVAL || err == ENOTSUP || err == EOPNOTSUPP || err == 524 /* ENOTSUPP */;
}

UniqueFd pinned(const std::string& path) { return UniqueFd(bpf_obj_get(path.c_str())); }

Status mkdir_one(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return {};
  return errno_error("cannot create " + path);
}

// An inner map for a map-of-maps slot; template_only makes the outer's template.
Result<UniqueFd> create_map(bpf_map_type type, const char* name, uint32_t key, uint32_t value, uint32_t entries,
                            uint32_t flags) {
  LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = flags);
  int fd = bpf_map_create(type, name, key, value, entries, &o);
  if (fd < 0) return errno_error(std::string("cannot create map ") + name);
  return UniqueFd(fd);
}

Status put_inner(int outer_fd, uint32_t gen, int inner_fd, const char* what) {
  if (bpf_map_update_elem(outer_fd, &gen, &inner_fd, BPF_ANY) != 0)
    return errno_error(std::string("cannot install the new ") + what);
  return {};
}

// The inner map in a map-of-maps slot, opened by its id; an empty fd if none.
Result<UniqueFd> inner_of(int outer_fd, uint32_t gen) {
  uint32_t id = 0;
  if (bpf_map_lookup_elem(outer_fd, &gen, &id) != 0) {
    if (errno == ENOENT) return UniqueFd();
    return errno_error("cannot read a generation slot");
  }
  int fd = bpf_map_get_fd_by_id(id);
  if (fd < 0) {
    if (errno == ENOENT) return UniqueFd();
    return errno_error("cannot open map id " + std::to_string(id));
  }
  return UniqueFd(fd);
}

// Deletes the watched names of one generation.
Status clear_watch(int fd, uint32_t gen) {
  std::vector<fl_dns_watch_key> gone;
  fl_dns_watch_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (next.gen == gen) gone.push_back(next);
    key = next;
    prev = &key;
  }
  for (const auto& k : gone) {
    if (bpf_map_delete_elem(fd, &k) != 0 && errno != ENOENT) return errno_error("cannot delete an old watched name");
  }
  return {};
}

// A new (unshared) trie filled with BPF_MAP_UPDATE_BATCH, in chunks: one
// syscall per chunk instead of one per prefix (6.18 takes batches on LPM
// tries through the generic loop: about half the time of single updates at
// 100k). A kernel without batch operations on the trie type gets single
// updates.
Status fill_trie(int fd, const std::vector<std::pair<fl_sa_key, fl_sa_bucket>>& entries, const char* name) {
  constexpr size_t kChunk = 16384;
  std::vector<fl_sa_key> keys;
  std::vector<fl_sa_bucket> values;
  size_t done = 0;
  bool batch = true;
  while (batch && done < entries.size()) {
    const size_t n = std::min(kChunk, entries.size() - done);
    keys.resize(n);
    values.resize(n);
    for (size_t i = 0; i < n; ++i) {
      keys[i] = entries[done + i].first;
      values[i] = entries[done + i].second;
    }
    uint32_t count = static_cast<uint32_t>(n);
    LIBBPF_OPTS(bpf_map_batch_opts, o, .elem_flags = BPF_ANY);
    if (bpf_map_update_batch(fd, keys.data(), values.data(), &count, &o) == 0) {
      done += n;
      continue;
    }
    if (!batch_unsupported(errno)) return errno_error(std::string("cannot fill the new ") + name);
    done += count;  // written before the refusal, if any; the rest one by one
    batch = false;
  }
  for (; done < entries.size(); ++done) {
    if (bpf_map_update_elem(fd, &entries[done].first, &entries[done].second, BPF_ANY) != 0)
      return errno_error(std::string("cannot fill the new ") + name);
  }
  return {};
}

}  // namespace

AppliedPolicyPins applied_policy_pins(const BpffsLayout& layout) { return {layout.root + "/policy"}; }

Result<AppliedPolicyLock> AppliedPolicyLock::acquire(const BpffsLayout& layout, bool exclusive) {
  const std::string path = policy_lock_path(layout);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return errno_error("cannot open lock file " + path);
  if (::flock(fd.get(), exclusive ? LOCK_EX : LOCK_SH) != 0) return errno_error("cannot lock " + path);
  return AppliedPolicyLock(std::move(fd));
}

uint32_t applied_trie_capacity(size_t entries) {
  const size_t want = std::max<size_t>(entries + entries / 4, entries + 16);
  return static_cast<uint32_t>(std::min<size_t>(want, FL_SA_MAX_PREFIXES + FL_SA_MAX_PREFIXES / 4));
}

Result<PolicyGenerations> PolicyGenerations::open(const AppliedPolicyPins& pins, bool create) {
  UniqueFd gen = pinned(pins.gen()), source = pinned(pins.source());
  if (gen && source) return PolicyGenerations(std::move(gen), std::move(source));
  if (!create) return make_error(ENOENT, "no applied policy");
  FL_TRY(ensure_pin_root(pins.dir));
  const std::string root = pins.dir.substr(0, pins.dir.rfind('/'));
  FL_TRY(mkdir_one(root));
  FL_TRY(mkdir_one(pins.dir));
  FL_TRY(mkdir_one(pins.scopes()));
  if (!gen) {
    auto g = create_map(BPF_MAP_TYPE_ARRAY, "fl_sa_gen", 4, 4, 1, 0);
    if (!g) return g.error();
    if (bpf_obj_pin(g->get(), pins.gen().c_str()) != 0) return errno_error("cannot pin " + pins.gen());
    gen = std::move(*g);
  }
  if (!source) {
    auto tmpl = create_map(BPF_MAP_TYPE_ARRAY, "fl_pol_src_t", 4, kSourceChunk, 1, BPF_F_INNER_MAP);
    if (!tmpl) return tmpl.error();
    LIBBPF_OPTS(bpf_map_create_opts, o, .inner_map_fd = static_cast<__u32>(tmpl->get()));
    int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "fl_pol_source", 4, 4, 2, &o);
    if (fd < 0) return errno_error("cannot create the policy source map");
    source.reset(fd);
    if (bpf_obj_pin(fd, pins.source().c_str()) != 0) return errno_error("cannot pin " + pins.source());
  }
  return PolicyGenerations(std::move(gen), std::move(source));
}

Result<uint32_t> PolicyGenerations::live() const {
  uint32_t zero = 0, g = 0;
  if (bpf_map_lookup_elem(gen_.get(), &zero, &g) != 0) return errno_error("cannot read the live generation");
  return g & 1;
}

Status PolicyGenerations::flip(uint32_t to) const {
  uint32_t zero = 0;
  if (bpf_map_update_elem(gen_.get(), &zero, &to, BPF_ANY) != 0) return errno_error("cannot switch the generation");
  return {};
}

// A source map's entries are written and read with one batch call where the
// kernel has batch operations on arrays (5.6+): a 4 MiB text is a thousand
// entries, a thousand bpf() calls one at a time.
Status PolicyGenerations::put_source(uint32_t gen, const std::string& text, const std::string& digest) const {
  if (digest.size() > kSourceDigestMax) return make_error(EINVAL, "a policy source digest longer than 64 bytes");
  const uint32_t chunks = static_cast<uint32_t>((text.size() + kSourceChunk - 1) / kSourceChunk);
  auto m = create_map(BPF_MAP_TYPE_ARRAY, "fl_pol_src", 4, kSourceChunk, chunks + 1, BPF_F_INNER_MAP);
  if (!m) return m.error();
  // Entry k at values[k * kSourceChunk]: the header, then the text, zero-padded.
  std::vector<char> values(static_cast<size_t>(chunks + 1) * kSourceChunk, 0);
  SourceHeader h{};
  h.len = text.size();
  std::memcpy(h.tag, kDigestTag, sizeof(h.tag));
  h.digest_len = static_cast<uint32_t>(digest.size());
  std::memcpy(h.digest, digest.data(), digest.size());
  std::memcpy(values.data(), &h, sizeof(h));
  std::memcpy(values.data() + kSourceChunk, text.data(), text.size());
  std::vector<uint32_t> keys(chunks + 1);
  for (uint32_t k = 0; k <= chunks; ++k) keys[k] = k;
  uint32_t count = chunks + 1;
  LIBBPF_OPTS(bpf_map_batch_opts, o, .elem_flags = BPF_ANY);
  uint32_t done = 0;
  if (bpf_map_update_batch(m->get(), keys.data(), values.data(), &count, &o) == 0) {
    done = chunks + 1;
  } else {
    if (!batch_unsupported(errno)) return errno_error("cannot store the policy source");
    done = count;  // written before the refusal, if any
  }
  for (; done <= chunks; ++done) {
    if (bpf_map_update_elem(m->get(), &keys[done], values.data() + static_cast<size_t>(done) * kSourceChunk, BPF_ANY) !=
        0)
      return errno_error("cannot store the policy source");
  }
  return put_inner(source_.get(), gen, m->get(), "policy source");
}

namespace {

Result<SourceHeader> read_header(int fd) {
  std::vector<char> buf(kSourceChunk);
  uint32_t k = 0;
  if (bpf_map_lookup_elem(fd, &k, buf.data()) != 0) return errno_error("cannot read the policy source");
  SourceHeader h{};
  std::memcpy(&h, buf.data(), sizeof(h));
  return h;
}

}  // namespace

Result<std::string> PolicyGenerations::source(uint32_t gen) const {
  auto m = inner_of(source_.get(), gen);
  if (!m) return m.error();
  if (!*m) return std::string();
  auto h = read_header(m->get());
  if (!h) return h.error();
  const uint64_t len = h->len;
  const uint32_t chunks = static_cast<uint32_t>((len + kSourceChunk - 1) / kSourceChunk);
  std::vector<char> values(static_cast<size_t>(chunks) * kSourceChunk);
  std::vector<uint32_t> keys(chunks);
  // Entries 1..chunks: a batch lookup starts after in_batch (the header, 0).
  uint32_t got = 0;
  if (chunks > 0) {
    uint32_t in = 0, out = 0, count = chunks;
    LIBBPF_OPTS(bpf_map_batch_opts, o);
    if (bpf_map_lookup_batch(m->get(), &in, &out, keys.data(), values.data(), &count, &o) == 0 || errno == ENOENT) {
      got = count;  // ENOENT: the end of the map came first (it holds no more than chunks + 1)
    } else if (!batch_unsupported(errno)) {
      return errno_error("cannot read the policy source");
    }
    if (got > 0 && (got != chunks || keys[0] != 1 || keys[got - 1] != chunks)) got = 0;  // read them one by one
  }
  for (uint32_t i = got; i < chunks; ++i) {
    const uint32_t k = i + 1;
    if (bpf_map_lookup_elem(m->get(), &k, values.data() + static_cast<size_t>(i) * kSourceChunk) != 0)
      return errno_error("cannot read the policy source");
  }
  return std::string(values.data(), len);
}

Result<std::string> PolicyGenerations::source_digest(uint32_t gen) const {
  auto m = inner_of(source_.get(), gen);
  if (!m) return m.error();
  if (!*m) return std::string();
  auto h = read_header(m->get());
  if (!h) return h.error();
  if (std::memcmp(h->tag, kDigestTag, sizeof(kDigestTag)) != 0 || h->digest_len > kSourceDigestMax)
    return std::string();
  return std::string(h->digest, h->digest_len);
}

Status PolicyGenerations::clear_source(uint32_t gen) const {
  if (bpf_map_delete_elem(source_.get(), &gen) != 0 && errno != ENOENT)
    return errno_error("cannot delete an old policy source");
  return {};
}

Result<AppliedScope> AppliedScope::create(const std::string& dir, int gen_fd, int cgroup_fd) {
  auto obj = SockaddrObject::load_applied(gen_fd, dns_learner_probe().available);
  if (!obj) return obj.error();
  FL_TRY(obj->attach_applied(cgroup_fd));
  FL_TRY(obj->pin_applied(dir));
  return open(dir);
}

Result<AppliedScope> AppliedScope::open(const std::string& dir) {
  UniqueFd p = pinned(dir + "/fl_sa_gpolicy"), d = pinned(dir + "/fl_sa_gdeny"), a = pinned(dir + "/fl_sa_gallow"),
           h = pinned(dir + "/fl_sa_ghits"), s = pinned(dir + "/fl_sa_stats");
  if (!p || !d || !a || !h || !s) return errno_error("cannot open the pinned maps in " + dir);
  UniqueFd w = pinned(dir + "/fl_dns_watch"), l = pinned(dir + "/fl_dns_learn"), ds = pinned(dir + "/fl_dns_stats");
  return AppliedScope(std::move(p), std::move(d), std::move(a), std::move(h), std::move(s), std::move(w), std::move(l),
                      std::move(ds), ::access((dir + "/fl_dns_ingress").c_str(), F_OK) == 0);
}

Status AppliedScope::fill(uint32_t gen, const ScopeImage& img) const {
  if (img.deny.size() > FL_SA_MAX_PREFIXES || img.allow.size() > FL_SA_MAX_PREFIXES)
    return make_error(E2BIG, "more than " + std::to_string(FL_SA_MAX_PREFIXES) + " prefixes in one trie");
  // Disarmed first: the slot is not live, and stays unjudged until complete.
  fl_sa_policy off{};
  if (bpf_map_update_elem(gpolicy_.get(), &gen, &off, BPF_ANY) != 0) return errno_error("cannot reset a generation");
  struct Trie {
    const std::vector<std::pair<fl_sa_key, fl_sa_bucket>>& entries;
    int outer;
    const char* name;
  };
  for (const Trie& t : {Trie{img.deny, gdeny_.get(), "fl_sa_deny"}, Trie{img.allow, gallow_.get(), "fl_sa_allow"}}) {
    auto m = create_map(BPF_MAP_TYPE_LPM_TRIE, t.name, sizeof(fl_sa_key), sizeof(fl_sa_bucket),
                        applied_trie_capacity(t.entries.size()), BPF_F_NO_PREALLOC);
    if (!m) return m.error();
    FL_TRY(fill_trie(m->get(), t.entries, t.name));
    FL_TRY(put_inner(t.outer, gen, m->get(), t.name));
  }
  if (!img.watch.empty()) {
    if (!watch_)
      return make_error(ENOTSUP,
                        "this scope was applied by a faultctl without host rules: delete the policy "
                        "(faultctl policy delete) and apply it again");
    if (!has_learner_)
      return make_error(ENOTSUP,
                        "this scope was applied without the DNS learner (fl_dns_ingress did not load "
                        "then), so host rules would learn nothing: delete the policy (faultctl policy "
                        "delete) and apply it again");
    // Replaces whatever an interrupted apply left in this (idle) generation.
    FL_TRY(clear_watch(watch_.get(), gen));
    for (const auto& [k0, w] : img.watch) {
      fl_dns_watch_key k = k0;
      k.gen = gen;
      if (bpf_map_update_elem(watch_.get(), &k, &w, BPF_ANY) != 0)
        return errno_error("cannot write the new generation's watched names");
    }
  }
  auto hits =
      create_map(BPF_MAP_TYPE_ARRAY, "fl_sa_rule_hits", 4, 8, std::max<uint32_t>(img.rules, 1), BPF_F_INNER_MAP);
  if (!hits) return hits.error();
  FL_TRY(put_inner(ghits_.get(), gen, hits->get(), "rule counters"));
  if (bpf_map_update_elem(gpolicy_.get(), &gen, &img.policy, BPF_ANY) != 0)
    return errno_error("cannot write the new generation's policy");
  return {};
}

Status AppliedScope::clear(uint32_t gen) const {
  fl_sa_policy off{};
  if (bpf_map_update_elem(gpolicy_.get(), &gen, &off, BPF_ANY) != 0) return errno_error("cannot reset a generation");
  for (int fd : {gdeny_.get(), gallow_.get(), ghits_.get()}) {
    if (bpf_map_delete_elem(fd, &gen) != 0 && errno != ENOENT) return errno_error("cannot delete an old generation");
  }
  if (watch_) FL_TRY(clear_watch(watch_.get(), gen));
  return {};
}

Status AppliedScope::learn(const fl_addr& addr, uint64_t hash, uint8_t wild, uint64_t expires_ns) const {
  if (!learn_) return make_error(ENOTSUP, "this scope has no learned addresses map (applied by an older faultctl)");
  fl_dns_learned cur{};
  if (bpf_map_lookup_elem(learn_.get(), &addr, &cur) != 0 && errno != ENOENT)
    return errno_error("cannot read a learned address");
  // The kernel's choice of slot (dns_learn_step): the same name, else the
  // slot to expire first.
  int slot = 0;
  for (int k = 0; k < FL_DNS_LEARN_SLOTS; ++k) {
    if (cur.n[k].hash == hash && cur.n[k].wild == wild) {
      slot = k;
      break;
    }
    if (cur.n[k].expires_ns < cur.n[slot].expires_ns) slot = k;
  }
  if (cur.n[slot].hash == hash && cur.n[slot].wild == wild && cur.n[slot].expires_ns > expires_ns) return {};
  cur.n[slot] = fl_dns_learn_slot{};
  cur.n[slot].hash = hash;
  cur.n[slot].wild = wild;
  cur.n[slot].expires_ns = expires_ns;
  if (bpf_map_update_elem(learn_.get(), &addr, &cur, BPF_ANY) != 0)
    return errno_error("cannot write a learned address");
  return {};
}

namespace {

bool any_alive(const fl_dns_learned& l, uint64_t now_ns) {
  for (const auto& s : l.n) {
    if (s.expires_ns > now_ns) return true;
  }
  return false;
}

}  // namespace

Result<size_t> AppliedScope::reap_learned(uint64_t now_ns) const {
  if (!learn_) return size_t{0};
  std::vector<fl_addr> dead;
  fl_addr key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(learn_.get(), prev, &next) == 0) {
    fl_dns_learned l{};
    if (bpf_map_lookup_elem(learn_.get(), &next, &l) == 0 && !any_alive(l, now_ns)) dead.push_back(next);
    key = next;
    prev = &key;
  }
  size_t n = 0;
  for (const auto& a : dead) {
    // Learned again since it was read: keep it.
    fl_dns_learned l{};
    if (bpf_map_lookup_elem(learn_.get(), &a, &l) == 0 && any_alive(l, now_ns)) continue;
    if (bpf_map_delete_elem(learn_.get(), &a) == 0) ++n;
  }
  return n;
}

Result<size_t> AppliedScope::learned_count(uint64_t now_ns) const {
  if (!learn_) return size_t{0};
  size_t n = 0;
  fl_addr key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(learn_.get(), prev, &next) == 0) {
    fl_dns_learned l{};
    if (bpf_map_lookup_elem(learn_.get(), &next, &l) == 0 && any_alive(l, now_ns)) ++n;
    key = next;
    prev = &key;
  }
  return n;
}

Result<fl_dns_stats> AppliedScope::dns_stats() const {
  if (!dns_stats_) return fl_dns_stats{};
  auto sum = sum_percpu<fl_dns_stats>(dns_stats_.get(), 0, [](fl_dns_stats& t, const fl_dns_stats& p) {
    t.answers += p.answers;
    t.matched += p.matched;
    t.malformed += p.malformed;
    t.learned += p.learned;
    t.expired += p.expired;
  });
  if (!sum) return make_error(sum.error().err, "cannot read the DNS learning counters");
  return sum;
}

Result<fl_sa_policy> AppliedScope::policy(uint32_t gen) const {
  fl_sa_policy p{};
  if (bpf_map_lookup_elem(gpolicy_.get(), &gen, &p) != 0) return errno_error("cannot read a generation's policy");
  return p;
}

Result<fl_sa_stats> AppliedScope::stats() const { return sum_sa_stats(stats_.get()); }

Result<std::vector<uint64_t>> AppliedScope::rule_hits(uint32_t gen) const {
  auto m = inner_of(ghits_.get(), gen);
  if (!m) return m.error();
  std::vector<uint64_t> out;
  if (!*m) return out;
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(m->get(), &info, &len) != 0) return errno_error("cannot read the rule counters");
  out.resize(info.max_entries);
  for (uint32_t id = 0; id < info.max_entries; ++id) {
    if (bpf_map_lookup_elem(m->get(), &id, &out[id]) != 0) return errno_error("cannot read the rule counters");
  }
  return out;
}

Status remove_applied_scope(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return errno == ENOENT ? Status{} : errno_error("cannot open " + dir);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  ::closedir(d);
  for (const auto& n : names) {
    if (::unlink((dir + "/" + n).c_str()) != 0 && errno != ENOENT) return errno_error("cannot remove " + dir + "/" + n);
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return errno_error("cannot remove " + dir);
  return {};
}

std::vector<std::string> applied_scope_keys(const AppliedPolicyPins& pins) {
  std::vector<std::string> keys;
  DIR* d = ::opendir(pins.scopes().c_str());
  if (d == nullptr) return keys;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) keys.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(keys.begin(), keys.end());
  return keys;
}

void remove_applied_policy_pins(const AppliedPolicyPins& pins) {
  ::unlink(pins.gen().c_str());
  ::unlink(pins.source().c_str());
  ::rmdir(pins.scopes().c_str());
  ::rmdir(pins.dir.c_str());
}

void wait_for_policy_readers() {
  // The cgroup hooks run under rcu_read_lock: a grace period after the flip,
  // no hook still holds the old generation. membarrier(GLOBAL) waits for one
  // (synchronize_rcu) on a machine of more than one CPU; where it is refused
  // (nohz_full) or skips it (one CPU), a pause far longer than any hook.
  if (::syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0 || ::sysconf(_SC_NPROCESSORS_ONLN) < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace faultline
