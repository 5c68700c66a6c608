// The seeded generator behind --seed: the same stream in userspace (seccomp) and
// in the kernel (each CPU's fl_rng state), and a fresh seed when none is given.
#pragma once

#include <cstdint>

namespace faultline {

// splitmix64: spreads a seed (even 0, 1, 2 ...) over all 64 bits. Used only to
// derive generator states, never per decision.
[[nodiscard]] constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// The starting state of one stream of a seed: `stream` is the CPU for the packet
// programs (each CPU draws from its own state, so no two CPUs share one), 0 for a
// userspace generator. Never 0, which xorshift would keep forever.
[[nodiscard]] constexpr uint64_t seeded_state(uint64_t seed, uint64_t stream) {
  uint64_t s = splitmix64(seed ^ splitmix64(stream + 0x5EEDULL));
  return s != 0 ? s : 0x9E3779B97F4A7C15ULL;
}

// xorshift64*: the step the BPF programs take (fl_rng_next in
// bpf/lib/helpers.bpf.h); the two must stay the same function.
class SeededRandom {
 public:
  explicit constexpr SeededRandom(uint64_t seed, uint64_t stream = 0) : state_(seeded_state(seed, stream)) {}

  // 32 random bits, the scale of every probability in the ABI.
  constexpr uint32_t next_u32() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1DULL) >> 32);
  }

  // True with probability prob / (2^32 - 1), as fl_chance() decides in the
  // kernel: "always" never consumes a draw.
  constexpr bool chance(uint32_t prob) { return prob == 0xFFFFFFFFU || next_u32() < prob; }

 private:
  uint64_t state_;
};

// A seed from getrandom(), for a run given no --seed: drawn, then printed and
// recorded like a given one, so any run can be replayed.
[[nodiscard]] uint64_t draw_seed();

}  // namespace faultline
