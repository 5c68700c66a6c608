// Typed access to BPF maps by fd: walking keys, and per-CPU values read, summed
// or reset. Every caller in the tree goes through these; no get_next_key loops.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "base/result.h"

namespace faultline {

// Calls fn(key) for every key of the map, in the kernel's order; fn may return
// false to stop. Keys deleted during the walk may restart it (the kernel goes
// back to the first key when the previous one is gone): collect with map_keys()
// before deleting.
template <typename K, typename Fn>
void for_each_key(int map_fd, Fn&& fn) {
  K prev{}, next{};
  const void* cursor = nullptr;  // none: start at the first key
  while (bpf_map_get_next_key(map_fd, cursor, &next) == 0) {
    if constexpr (std::is_same_v<std::invoke_result_t<Fn&, const K&>, bool>) {
      if (!fn(static_cast<const K&>(next))) return;
    } else {
      fn(static_cast<const K&>(next));
    }
    prev = next;
    cursor = &prev;
  }
}

// Every key of the map, as a snapshot.
template <typename K>
[[nodiscard]] std::vector<K> map_keys(int map_fd) {
  std::vector<K> keys;
  for_each_key<K>(map_fd, [&](const K& k) { keys.push_back(k); });
  return keys;
}

// Whether the map holds no key (an array map never does).
template <typename K>
[[nodiscard]] bool map_is_empty(int map_fd) {
  K first{};
  return bpf_map_get_next_key(map_fd, nullptr, &first) != 0 && errno == ENOENT;
}

// Per-CPU maps hold one value per possible CPU.
[[nodiscard]] inline int possible_cpus() {
  static const int n = libbpf_num_possible_cpus();
  return n;
}

template <typename V>
[[nodiscard]] Result<std::vector<V>> lookup_percpu(int map_fd, uint32_t key) {
  static_assert(sizeof(V) % 8 == 0, "per-CPU values are 8-byte aligned");
  std::vector<V> v(static_cast<size_t>(possible_cpus()));
  if (bpf_map_lookup_elem(map_fd, &key, v.data()) != 0) return errno_error("per-CPU lookup failed");
  return v;
}

// The values of every CPU folded into one: fold(sum, one_cpu) adds a CPU's value.
template <typename V, typename Fold>
[[nodiscard]] Result<V> sum_percpu(int map_fd, uint32_t key, Fold&& fold) {
  auto per = lookup_percpu<V>(map_fd, key);
  if (!per) return per.error();
  V sum{};
  for (const V& v : *per) fold(sum, v);
  return sum;
}

// A counter summed over CPUs.
template <typename V>
requires std::is_arithmetic_v<V>
[[nodiscard]] Result<V> sum_percpu(int map_fd, uint32_t key) {
  return sum_percpu<V>(map_fd, key, [](V& sum, V v) { sum += v; });
}

// Every CPU's value set to zero.
template <typename V>
[[nodiscard]] Status zero_percpu(int map_fd, uint32_t key) {
  std::vector<V> v(static_cast<size_t>(possible_cpus()));
  if (bpf_map_update_elem(map_fd, &key, v.data(), BPF_ANY) != 0) return errno_error("per-CPU reset failed");
  return {};
}

}  // namespace faultline
