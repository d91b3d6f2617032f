//===- Emulator.cpp - Running CUDA blocks as fibers on the CPU ------------===//

#include "test/cuda-emulator/Emulator.h"

#include <cstdio>
#include <cstdlib>
#include <ucontext.h>
#include <vector>

using namespace mnemo::emulator;

namespace {

constexpr size_t kStackBytes = 64 * 1024;

struct Fiber {
  ThreadContext context;
  ucontext_t ucontext;
  bool done = false, waiting = false;
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<float> exchange; // one slot per thread, for shuffles
  ucontext_t scheduler;
  int running = -1;
  void (*kernel)(const void *) = nullptr;
  const void *argument = nullptr;
};

Block block;
std::vector<std::vector<char>> stacks;

void fiberMain() {
  block.kernel(block.argument);
  block.fibers[block.running].done = true;
  // Returning resumes the scheduler (uc_link).
}

} // namespace

const ThreadContext &mnemo::emulator::current() {
  return block.fibers[block.running].context;
}

void mnemo::emulator::barrier() {
  Fiber &self = block.fibers[block.running];
  self.waiting = true;
  swapcontext(&self.ucontext, &block.scheduler);
}

float mnemo::emulator::shuffleXor(float value, int laneMask) {
  int self = block.running;
  block.exchange[self] = value;
  barrier();
  int partner = (self & ~31) | ((self & 31) ^ laneMask);
  float result =
      partner < int(block.exchange.size()) ? block.exchange[partner] : value;
  barrier(); // nobody overwrites a slot before everyone has read
  return result;
}

void mnemo::emulator::launch(void (*kernel)(const void *), const void *argument,
                             unsigned gridX, unsigned gridY, unsigned threads) {
  if (threads == 0 || threads > 1024 || gridX == 0 || gridY == 0) {
    std::fprintf(stderr, "emulator: invalid launch (%u x %u blocks of %u)\n",
                 gridX, gridY, threads);
    std::abort();
  }
  if (stacks.size() < threads)
    stacks.resize(threads, std::vector<char>(kStackBytes));
  block.kernel = kernel;
  block.argument = argument;
  block.fibers.assign(threads, Fiber());
  block.exchange.assign(threads, 0.0f);
  for (unsigned by = 0; by < gridY; ++by)
    for (unsigned bx = 0; bx < gridX; ++bx) {
      for (unsigned t = 0; t < threads; ++t) {
        Fiber &f = block.fibers[t];
        f = Fiber();
        f.context.thread = {t, 0, 0};
        f.context.block = {bx, by, 0};
        f.context.blockDim = {threads, 1, 1};
        f.context.gridDim = {gridX, gridY, 1};
        getcontext(&f.ucontext);
        f.ucontext.uc_stack.ss_sp = stacks[t].data();
        f.ucontext.uc_stack.ss_size = kStackBytes;
        f.ucontext.uc_link = &block.scheduler;
        makecontext(&f.ucontext, fiberMain, 0);
      }
      // Run every live fiber until it waits or ends; release a barrier
      // when every live fiber waits at it.
      for (;;) {
        bool live = false;
        for (unsigned t = 0; t < threads; ++t) {
          Fiber &f = block.fibers[t];
          if (f.done || f.waiting)
            continue;
          block.running = int(t);
          swapcontext(&block.scheduler, &f.ucontext);
        }
        for (Fiber &f : block.fibers)
          if (!f.done) {
            live = true;
            f.waiting = false;
          }
        if (!live)
          break;
      }
      block.running = -1;
    }
}
