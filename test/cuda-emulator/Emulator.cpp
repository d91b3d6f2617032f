//===- Emulator.cpp - Running CUDA blocks as fibers on the CPU ------------===//

#include "test/cuda-emulator/Emulator.h"

#include <boost/context/fiber.hpp>
#include <boost/context/pooled_fixedsize_stack.hpp>

#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace mnemo::emulator;
namespace context = boost::context;

namespace {

// Boost.Context's fibers switch in user space; glibc's swapcontext makes a
// system call per switch (it saves the signal mask), which was 85% of an
// emulated step's time.
constexpr size_t kStackBytes = 64 * 1024;

struct Fiber {
  ThreadContext context;
  context::fiber suspended; // where the thread resumes; empty once it ended
  bool done = false, waiting = false;
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<float> exchange; // one slot per thread, for shuffles
  context::fiber scheduler;    // held by the running thread: where it yields
  int running = -1;
  void (*kernel)(const void *) = nullptr;
  const void *argument = nullptr;
};

Block block;

/// The threads' stacks, reused from block to block and launch to launch.
context::pooled_fixedsize_stack &stacks() {
  static context::pooled_fixedsize_stack pool(kStackBytes);
  return pool;
}

context::fiber threadMain(context::fiber &&scheduler) {
  block.scheduler = std::move(scheduler);
  block.kernel(block.argument);
  block.fibers[block.running].done = true;
  return std::move(block.scheduler);
}

} // namespace

const ThreadContext &mnemo::emulator::current() {
  return block.fibers[block.running].context;
}

void mnemo::emulator::barrier() {
  block.fibers[block.running].waiting = true;
  block.scheduler = std::move(block.scheduler).resume();
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
  block.kernel = kernel;
  block.argument = argument;
  block.fibers.clear();
  block.fibers.resize(threads);
  block.exchange.assign(threads, 0.0f);
  for (unsigned by = 0; by < gridY; ++by)
    for (unsigned bx = 0; bx < gridX; ++bx) {
      for (unsigned t = 0; t < threads; ++t) {
        Fiber &f = block.fibers[t];
        f.done = f.waiting = false;
        f.context.thread = {t, 0, 0};
        f.context.block = {bx, by, 0};
        f.context.blockDim = {threads, 1, 1};
        f.context.gridDim = {gridX, gridY, 1};
        f.suspended = context::fiber(std::allocator_arg, stacks(), threadMain);
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
          f.suspended = std::move(f.suspended).resume();
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
