// One owner for every bpftool skeleton: open, set rodata, load, attach, destroy
// once. A header holding a BpfSkeleton<Skel> member may forward-declare Skel;
// the owner's destructor and move assignment are then defined where the
// skeleton header is included.
#pragma once

#include <bpf/libbpf.h>

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "loader/verifier_cost.h"

namespace faultline {

template <typename Skel>
class BpfSkeleton {
 public:
  BpfSkeleton() = default;

  // name is the object's, for errors: "cannot open the <name> BPF object".
  [[nodiscard]] static Result<BpfSkeleton> open(std::string name, const bpf_object_open_opts* opts = nullptr) {
    Skel* s = Skel::open(opts);
    if (s == nullptr) return errno_error("cannot open the " + name + " BPF object");
    return BpfSkeleton(s, std::move(name));
  }

  // Load after rodata is set; the verifier log is behind FAULTLINE_LIBBPF_LOG.
  // `what` names the programs in the error ("the netfault BPF programs"); the
  // object's name does when it is empty.
  [[nodiscard]] Status load(std::string_view what = {}) {
    VerifierCostRecorder::before_load(skel_->obj);
    const int err = Skel::load(skel_.get());
    VerifierCostRecorder::after_load(skel_->obj, name_, err);
    if (err != 0)
      return make_error(err, "cannot load " + (what.empty() ? name_ : std::string(what)) +
                                 " (set FAULTLINE_LIBBPF_LOG=1 for the verifier log)");
    return {};
  }

  // Every program with a SEC() that libbpf can attach by itself.
  [[nodiscard]] Status attach() {
    if (int err = Skel::attach(skel_.get()); err != 0) return make_error(err, "cannot attach " + name_);
    return {};
  }

  [[nodiscard]] Skel* get() const { return skel_.get(); }
  Skel* operator->() const { return skel_.get(); }
  explicit operator bool() const { return skel_ != nullptr; }

 private:
  struct Destroy {
    void operator()(Skel* s) const { Skel::destroy(s); }
  };
  BpfSkeleton(Skel* s, std::string name) : skel_(s), name_(std::move(name)) {}
  std::unique_ptr<Skel, Destroy> skel_;
  std::string name_;
};

}  // namespace faultline
