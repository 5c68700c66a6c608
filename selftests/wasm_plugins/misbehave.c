// A --wasm-policy plugin that fails on purpose, by the request's path, for
// the guard's tests: "/spin" loops forever (the fuel ends it), "/trap" traps,
// "/recurse" recurses until the call stack ends, "/garbage" answers what is
// not JSON, "/far" answers a pointer out of its memory; any other path is
// allowed. Built like deny_admin.c.

typedef unsigned int u32;
typedef unsigned long long u64;

static unsigned char heap[1 << 16];

__attribute__((export_name("alloc"))) void* alloc(u32 len) { return len <= sizeof heap ? heap : 0; }

static int contains(const char* text, u32 len, const char* needle) {
  u32 n = 0;
  while (needle[n]) ++n;
  for (u32 i = 0; i + n <= len; ++i) {
    u32 k = 0;
    while (k < n && text[i + k] == needle[k]) ++k;
    if (k == n) return 1;
  }
  return 0;
}

static u64 answer(const char* text, u32 len) { return ((u64)(u32)text << 32) | len; }

static volatile u32 spins;

// A frame of its own each call (the volatile buffer keeps clang from turning
// the recursion into a loop).
__attribute__((noinline)) static u32 recurse(u32 depth) {
  volatile unsigned char frame[32];
  frame[depth % 32] = (unsigned char)depth;
  return depth == 0 ? 0 : recurse(depth + 1) + frame[depth % 32];
}

static const char kAllow[] = "{\"allow\":true,\"reason\":\"nothing wrong\"}";
static const char kGarbage[] = "allow: yes";

__attribute__((export_name("decide"))) u64 decide(const char* facts, u32 len) {
  if (contains(facts, len, "\"path\":\"/spin"))
    for (;;) ++spins;
  if (contains(facts, len, "\"path\":\"/trap")) __builtin_trap();
  if (contains(facts, len, "\"path\":\"/recurse")) return recurse(1);
  if (contains(facts, len, "\"path\":\"/garbage")) return answer(kGarbage, sizeof kGarbage - 1);
  if (contains(facts, len, "\"path\":\"/far")) return ((u64)0xFFFFFF00u << 32) | 64;
  return answer(kAllow, sizeof kAllow - 1);
}
