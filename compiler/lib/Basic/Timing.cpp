//===- Timing.cpp - Wall and CPU time of the phases of a run --------------===//
//
// Wall time from std::chrono's steady clock, CPU time (user + system of
// the whole process) from std::clock: both cheap enough to read around
// every pass.
//
//===----------------------------------------------------------------------===//

#include "gradc/Basic/Timing.h"

#include "llvm/Support/Format.h"

#include <chrono>
#include <ctime>

using namespace gradc;

static double wallSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

static double cpuSeconds() {
  return static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
}

PhaseTimer *PhaseTimer::active = nullptr;

PhaseTimer::PhaseTimer() : startWall(wallSeconds()), startCPU(cpuSeconds()) {}

unsigned PhaseTimer::enter(llvm::StringRef name) {
  int parent = open.empty() ? -1 : static_cast<int>(open.back());
  unsigned index = 0;
  for (; index < phases.size(); ++index)
    if (phases[index].parent == parent && phases[index].name == name)
      break;
  if (index == phases.size())
    phases.push_back(
        {name.str(), static_cast<unsigned>(open.size()), parent, 0, 0, 0});
  open.push_back(index);
  return index;
}

void PhaseTimer::leave(unsigned index, double wall, double cpu) {
  Phase &phase = phases[index];
  phase.wall += wall;
  phase.cpu += cpu;
  ++phase.count;
  open.pop_back();
}

void PhaseTimer::print(llvm::raw_ostream &os) const {
  double total = wallSeconds() - startWall;
  double totalCPU = cpuSeconds() - startCPU;
  // Children first listed after their parent: a depth-first walk.
  std::vector<unsigned> order;
  auto walk = [&](auto &self, int parent) -> void {
    for (unsigned i = 0; i < phases.size(); ++i)
      if (phases[i].parent == parent) {
        order.push_back(i);
        self(self, static_cast<int>(i));
      }
  };
  walk(walk, -1);
  os << "===" << std::string(73, '-') << "===\n"
     << "                      gradc phase timing (--time-phases)\n"
     << "===" << std::string(73, '-') << "===\n"
     << llvm::format("  Total: %.4f s wall, %.4f s CPU (since start-up of "
                     "main)\n\n",
                     total, totalCPU)
     << "   wall (s)   wall %    CPU (s)   runs  phase\n";
  for (unsigned i : order) {
    const Phase &p = phases[i];
    os << llvm::format("  %9.4f  %6.1f%%  %9.4f  %5u  ", p.wall,
                       total > 0 ? 100 * p.wall / total : 0.0, p.cpu, p.count)
       << std::string(2 * p.depth, ' ') << p.name << "\n";
  }
}

TimeRegion::TimeRegion(llvm::StringRef name) : timer(PhaseTimer::active) {
  if (!timer)
    return;
  index = timer->enter(name);
  startWall = wallSeconds();
  startCPU = cpuSeconds();
}

TimeRegion::~TimeRegion() {
  if (timer)
    timer->leave(index, wallSeconds() - startWall, cpuSeconds() - startCPU);
}
