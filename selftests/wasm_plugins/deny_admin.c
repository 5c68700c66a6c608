// An example --wasm-policy plugin (docs/detectors.md, "WebAssembly policy
// plugins"): deny a POST whose path contains "/admin". Built with clang's
// wasm32 target, no libc: clang-14 --target=wasm32 -nostdlib -O2
// -Wl,--no-entry -o deny_admin.wasm deny_admin.c
//
// The ABI: the guard calls alloc(len) for room for the request's facts (JSON),
// copies them there, then decide(ptr, len); decide answers with
// (pointer << 32) | length of {"allow":bool,"reason":string} in its memory.
// Each request runs in a fresh instance, so a bump allocator is enough.

typedef unsigned int u32;
typedef unsigned long long u64;

static unsigned char heap[1 << 16];
static u32 used;

__attribute__((export_name("alloc"))) void* alloc(u32 len) {
  if (len > sizeof heap - used) return 0;
  void* p = heap + used;
  used += (len + 7) & ~7u;
  return p;
}

// Where `needle` starts in text[0, len), or -1.
static int find(const char* text, u32 len, const char* needle) {
  u32 n = 0;
  while (needle[n]) ++n;
  for (u32 i = 0; i + n <= len; ++i) {
    u32 k = 0;
    while (k < n && text[i + k] == needle[k]) ++k;
    if (k == n) return (int)i;
  }
  return -1;
}

// The JSON string value of `"key":"` in the facts (the guard writes them
// compact, without spaces), as [*at, *at + *n); 0 when there is none.
static int string_member(const char* facts, u32 len, const char* key, const char** at, u32* n) {
  int k = find(facts, len, key);
  if (k < 0) return 0;
  const char* v = facts + k;
  u32 left = len - (u32)k;
  u32 key_len = 0;
  while (key[key_len]) ++key_len;
  v += key_len;
  left -= key_len;
  u32 i = 0;
  while (i < left && v[i] != '"') i += v[i] == '\\' ? 2 : 1;
  *at = v;
  *n = i < left ? i : left;
  return 1;
}

static const char kAllow[] = "{\"allow\":true}";
static const char kDeny[] = "{\"allow\":false,\"reason\":\"POST to an /admin path\"}";

static u64 answer(const char* text, u32 len) { return ((u64)(u32)text << 32) | len; }

__attribute__((export_name("decide"))) u64 decide(const char* facts, u32 len) {
  const char *method, *path;
  u32 method_len, path_len;
  if (!string_member(facts, len, "\"method\":\"", &method, &method_len)) return answer(kAllow, sizeof kAllow - 1);
  if (!string_member(facts, len, "\"path\":\"", &path, &path_len)) return answer(kAllow, sizeof kAllow - 1);
  if (method_len == 4 && find(method, 4, "POST") == 0 && find(path, path_len, "/admin") >= 0)
    return answer(kDeny, sizeof kDeny - 1);
  return answer(kAllow, sizeof kAllow - 1);
}
