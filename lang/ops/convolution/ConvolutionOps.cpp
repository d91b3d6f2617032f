//===- ConvolutionOps.cpp - Checks, gradient, geometry, CPU workspace -----===//
//
// A convolution's shapes follow lang/ShapeRules.h's conv2d, as the
// frontend's; its gradient is the two backward ops, each stated as the
// forward convolution it differentiates. getConvGeometry() gives the three
// ops in the forward's terms to the CPU and CUDA emitters; the CPU
// kernels' workspace (oneDNN's blocked copies or im2col columns, and
// 16-bit operands widened to f32) follows from it.
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"

#include <algorithm>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;

namespace {

std::vector<int64_t> toVector(ArrayRef<int64_t> values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

/// Scratch per convolution on the CPU: enough for large GEMMs, small next
/// to the arena of any model with convolutions worth the name.
constexpr int64_t kConvScratchBytes = 4 << 20;

/// The geometry of x [N,C,H,W] * w [O,C,KH,KW] -> y [N,O,HO,WO].
ConvGeometry geometryOf(Value x, Value w, Value y, ArrayRef<int64_t> stride,
                        ArrayRef<int64_t> padding) {
  ArrayRef<int64_t> xs = tensorType(x).getShape(),
                    ws = tensorType(w).getShape(),
                    ys = tensorType(y).getShape();
  ConvGeometry g = {xs[0],     xs[1],      xs[2],      xs[3], ws[0],
                    ws[2],     ws[3],      ys[2],      ys[3], stride[0],
                    stride[1], padding[0], padding[1], 1};
  int64_t perImage = 4 * (g.c * g.kh * g.kw + g.o) * g.ho * g.wo;
  g.imagesPerGemm = std::clamp<int64_t>(
      kConvScratchBytes / std::max<int64_t>(1, perImage), 1, g.n);
  return g;
}

/// What oneDNN's primitive of an f32 convolution needs beside the plan's
/// tensors (ConvSite, ConvolutionSiteKernels.cpp): the blocked copies of
/// the input, the output (or their gradients) and the weights, channels
/// padded to oneDNN's widest block (16 floats, AVX-512), each aligned to
/// 64 bytes; and 512 KiB for the alignment of the per-thread parts and
/// small scratchpads (ResNet-18's strided 1x1 projections need about 64
/// KiB on AVX-512). A site whose primitive needs more on the machine that
/// runs it falls back to im2col, which fits in any case, and the trainer's
/// `convolutions:` line says so.
int64_t oneDnnBytesOf(const ConvGeometry &g) {
  auto padded = [](int64_t channels) { return (channels + 15) / 16 * 16; };
  int64_t input = 4 * g.n * padded(g.c) * g.h * g.w;
  int64_t output = 4 * g.n * padded(g.o) * g.ho * g.wo;
  int64_t weights = 4 * padded(g.o) * padded(g.c) * g.kh * g.kw;
  return input + output + weights + (512 << 10);
}

/// The CPU kernels' workspace: the larger of im2col's (the columns of
/// imagesPerGemm images and their output rows; on 16-bit storage with the
/// operands and the result widened to f32) and oneDNN's (its f32 copies
/// bound its 16-bit ones).
int64_t workspaceOf(Operation *op, const ConvGeometry &g) {
  int64_t bytes = 4 * g.imagesPerGemm * (g.c * g.kh * g.kw + g.o) * g.ho * g.wo;
  Type element = tensorType(op->getResult(0)).getElementType();
  if (element.isBF16() || element.isF16())
    bytes += 4 * (tensorType(op->getOperand(0)).getNumElements() +
                  tensorType(op->getOperand(1)).getNumElements() +
                  tensorType(op->getResult(0)).getNumElements());
  return std::max(bytes, oneDnnBytesOf(g));
}

} // namespace

LogicalResult Conv2DOp::verify() {
  if (failed(
          verifySameElementType(*this, {getInput(), getWeight(), getResult()})))
    return failure();
  return verifyResult(
      *this, shape::conv2d(shapeOf(getInput()), shapeOf(getWeight()),
                           toVector(getStride()), toVector(getPadding())));
}

LogicalResult Conv2DInputGradOp::verify() {
  shape::ShapeResult forward =
      shape::conv2d(shapeOf(getResult()), shapeOf(getWeight()),
                    toVector(getStride()), toVector(getPadding()));
  if (!forward.ok() || forward.shape != shapeOf(getGrad()))
    return emitOpError("the result is not the input of a convolution with "
                       "this weight and output gradient");
  return success();
}

LogicalResult Conv2DWeightGradOp::verify() {
  shape::ShapeResult forward =
      shape::conv2d(shapeOf(getInput()), shapeOf(getResult()),
                    toVector(getStride()), toVector(getPadding()));
  if (!forward.ok() || forward.shape != shapeOf(getGrad()))
    return emitOpError("the result is not the weight of a convolution with "
                       "this input and output gradient");
  return success();
}

SmallVector<Value> Conv2DOp::buildGradient(OpBuilder &b,
                                           ArrayRef<Value> grads) {
  Value dx = b.create<Conv2DInputGradOp>(getLoc(), getInput().getType(),
                                         grads[0], getWeight(), getStrideAttr(),
                                         getPaddingAttr());
  Value dw = b.create<Conv2DWeightGradOp>(getLoc(), getWeight().getType(),
                                          grads[0], getInput(), getStrideAttr(),
                                          getPaddingAttr());
  return {dx, dw};
}

SmallVector<Value> Conv2DInputGradOp::buildGradient(OpBuilder &b,
                                                    ArrayRef<Value> grads) {
  // result = convT(g, W): g has the shape conv2d(result, W) has, and W
  // relates them as a convolution's weight relates its input (result's
  // gradient here) to its output (g).
  Value dg = b.create<Conv2DOp>(getLoc(), getGrad().getType(), grads[0],
                                getWeight(), getStrideAttr(), getPaddingAttr());
  Value dw =
      b.create<Conv2DWeightGradOp>(getLoc(), getWeight().getType(), getGrad(),
                                   grads[0], getStrideAttr(), getPaddingAttr());
  return {dg, dw};
}

ConvGeometry Conv2DOp::getConvGeometry() {
  return geometryOf(getInput(), getWeight(), getResult(), getStride(),
                    getPadding());
}

ConvGeometry Conv2DInputGradOp::getConvGeometry() {
  return geometryOf(getResult(), getWeight(), getGrad(), getStride(),
                    getPadding());
}

ConvGeometry Conv2DWeightGradOp::getConvGeometry() {
  return geometryOf(getInput(), getResult(), getGrad(), getStride(),
                    getPadding());
}

int64_t Conv2DOp::getCpuWorkspaceBytes() {
  return workspaceOf(*this, getConvGeometry());
}

int64_t Conv2DInputGradOp::getCpuWorkspaceBytes() {
  return workspaceOf(*this, getConvGeometry());
}

int64_t Conv2DWeightGradOp::getCpuWorkspaceBytes() {
  return workspaceOf(*this, getConvGeometry());
}

// cuDNN's workspace on the GPU (limited to the CPU's im2col scratch where
// that is larger, codegen's CudaEmitter).
int64_t Conv2DOp::getCudaScratchBytes() { return kCudaLibraryWorkspaceBytes; }
int64_t Conv2DInputGradOp::getCudaScratchBytes() {
  return kCudaLibraryWorkspaceBytes;
}
int64_t Conv2DWeightGradOp::getCudaScratchBytes() {
  return kCudaLibraryWorkspaceBytes;
}
