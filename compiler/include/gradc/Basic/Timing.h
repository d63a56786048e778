//===- Timing.h - Wall and CPU time of the phases of a run ------*- C++ -*-===//
//
// `gradc --time-phases`: how long each phase of one compilation took (read,
// parse, check, lower, differentiate, each IR pass, the emitter, LLVM's
// lowering, optimisation and code generation), printed at the end as a
// table in the manner of LLVM's `-time-passes`. The driver installs a
// PhaseTimer; library code marks its phases with a TimeRegion, which costs
// one load and a branch when no timer is installed.
//
//   { TimeRegion region("simplify"); runSimplify(module, diags); }
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_BASIC_TIMING_H
#define GRADC_BASIC_TIMING_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace gradc {

/// The phases of one run: regions with the same name under the same
/// enclosing region add up; they are printed in the order they first
/// started, nested regions indented under their parent.
class PhaseTimer {
public:
  /// The timer that TimeRegion records into; null (the default) disables
  /// timing.
  static PhaseTimer *active;

  PhaseTimer();
  /// Prints the table: wall seconds, its share of the whole run, CPU
  /// seconds (user + system) and the number of times each phase ran.
  void print(llvm::raw_ostream &os) const;

private:
  friend class TimeRegion;
  struct Phase {
    std::string name;
    unsigned depth;
    int parent;
    double wall = 0, cpu = 0;
    unsigned count = 0;
  };
  unsigned enter(llvm::StringRef name);
  void leave(unsigned index, double wall, double cpu);

  std::vector<Phase> phases;
  std::vector<unsigned> open;
  double startWall, startCPU;
};

/// Times the enclosing scope as the phase `name` of PhaseTimer::active.
class TimeRegion {
public:
  explicit TimeRegion(llvm::StringRef name);
  ~TimeRegion();
  TimeRegion(const TimeRegion &) = delete;
  TimeRegion &operator=(const TimeRegion &) = delete;

private:
  PhaseTimer *timer;
  unsigned index = 0;
  double startWall = 0, startCPU = 0;
};

} // namespace gradc

#endif // GRADC_BASIC_TIMING_H
