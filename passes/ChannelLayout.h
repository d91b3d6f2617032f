//===- ChannelLayout.h - Activations kept in channel blocks -----*- C++ -*-===//
//
// oneDNN's convolutions run on channel-blocked tensors (nChw16c on
// AVX-512, nChw8c on AVX2). A plan that stores every activation in NCHW
// reorders each convolution's input, output and gradients around every
// call: on ResNet-18's CPU step those reorders were about 20 ms of 355.
// Batch norm, ReLU and the elementwise ops between convolutions can read
// and write the blocked layout as well, so plan-memory marks the
// activations that only such ops touch `channel_blocked`
// (#mnemo.placement); the CPU's convolutions then read and write them as
// they are, and only the boundaries (the stem's input, global pooling,
// anything else) keep a reorder.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_CHANNELLAYOUT_H
#define MNEMO_PASSES_CHANNELLAYOUT_H

#include "passes/BufferAnalysis.h"

#include "llvm/ADT/DenseSet.h"

namespace mnemo {

/// The values of a step (in `analysis`'s order) that the CPU stores in
/// blocks of channels: 4-d f32, bf16 or f16 activations in the arena (or fused
/// into a loop) whose channels are a multiple of 16 (so that 8- and 16-channel
/// blocks need no padding), made and read only by convolutions (their
/// activation operands and results), batch norms and their gradients
/// (input, output gradient and result together) and same-shape elementwise
/// ops (all their operands and result together; splat constants read as
/// scalars). Everything else, function arguments and results included,
/// stays plain, and so does every value tied to it.
llvm::DenseSet<mlir::Value>
channelBlockedValues(const BufferAnalysis &analysis);

} // namespace mnemo

#endif // MNEMO_PASSES_CHANNELLAYOUT_H
