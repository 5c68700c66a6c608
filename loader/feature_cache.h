// The kernel feature probes of this boot, kept in the state folder: a new
// faultctl reads them instead of loading a dozen programs again (the probes
// take tens of milliseconds, a read takes tens of microseconds).
//
// An entry is valid for one boot (/proc/sys/kernel/random/boot_id), one kernel
// release, one binary (its path, size and mtime: a rebuilt or upgraded binary
// probes again) and one probe set (the full one or the packet one). Only root
// reads and writes the cache (the probes mean nothing without CAP_BPF), and
// only a file that root owns and nobody else can write is believed.
// `faultctl features` probes afresh and rewrites the entry: the way to see a
// module loaded since (sch_fq, say).
#pragma once

#include <optional>
#include <string>

#include "loader/features.h"

namespace faultline {

struct FeatureCacheKey {
  std::string boot_id;
  std::string release;  // uname -r
  std::string binary;   // "<path> <size> <mtime ns>" of /proc/self/exe
  std::string probes;   // "full" or "packet"

  [[nodiscard]] std::string text() const;
  // This process's key for a probe set; nothing when it cannot be told (no
  // boot id, say): then nothing is cached.
  [[nodiscard]] static std::optional<FeatureCacheKey> current(const std::string& probes);
};

// <state root>/features.json
[[nodiscard]] std::string feature_cache_path();

// The cached probes of key in the file at path; nothing when the file is
// missing, not root's, writable by others, unparsable or has no such entry.
[[nodiscard]] std::optional<Features> read_cached_features(const std::string& path, const FeatureCacheKey& key);

// Puts key's entry into the file (atomically; the other entries of this boot
// kept, at most 8); errors are ignored by the callers (the cache only saves time).
[[nodiscard]] bool write_cached_features(const std::string& path, const FeatureCacheKey& key, const Features& f);

// Serialisation, for the cache and its tests.
[[nodiscard]] std::string features_to_json(const Features& f);
[[nodiscard]] std::optional<Features> features_from_json(const std::string& text);

}  // namespace faultline
