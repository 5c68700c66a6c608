// A plugin that imports a clock (WASI's clock_time_get): faultctl guard
// refuses it at start, since a policy plugin runs with no imports at all.

typedef unsigned int u32;
typedef unsigned long long u64;

__attribute__((import_module("wasi_snapshot_preview1"), import_name("clock_time_get"))) extern u32
clock_time_get(u32 id, u64 precision, u64* out);

static unsigned char heap[1 << 12];
static u64 now;

__attribute__((export_name("alloc"))) void* alloc(u32 len) { return len <= sizeof heap ? heap : 0; }

static const char kAllow[] = "{\"allow\":true}";

__attribute__((export_name("decide"))) u64 decide(const char* facts, u32 len) {
  (void)facts;
  (void)len;
  (void)clock_time_get(0, 1, &now);
  return ((u64)(u32)kAllow << 32) | (sizeof kAllow - 1);
}
