//===- ConvolutionSiteKernels.cpp - A convolution op, set up once ---------===//
//
// ConvSite (ConvolutionKernels.h): a convolution of the generated code,
// prepared before the first step (prepareConvolutions). Where the trainer
// is built with oneDNN (MNEMO_HAVE_ONEDNN), it creates oneDNN's primitives
// for the op's shape split over the step's threads, in the layouts oneDNN
// picks for this CPU, the reorders between those and the plan's NCHW /
// OIHW tensors, and checks that the blocked copies and the user-managed
// scratchpads fit in the op's planned workspace; every call then only
// points the memories at the step's buffers and executes.
// Through oneDNN's C API, which reports failures by status, not by
// exceptions (the C API's execute still allocates an argument map inside
// the library, some 20 small allocations a call, freed before it returns:
// the trainer counts them apart from the step's own). Otherwise, and for a site
// that does not fit, the im2col kernels (ConvolutionKernels.cpp). In the
// trainer's library.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/convolution/ConvolutionKernels.h"
#include "runtime/cpu/Half.h"
#include "runtime/cpu/LibrarySites.h"
#include "runtime/cpu/OneDnnContext.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

namespace mnemo::cpu {

namespace {
std::vector<ConvSite *> &sites() { return sitesOf<ConvSite>(); }
} // namespace

#if MNEMO_HAVE_ONEDNN

namespace {

OneDnnContext &context() { return oneDnnContext(); }

/// A plain 4-d memory descriptor (tag nchw, oihw, or any), f32 unless
/// said.
dnnl_memory_desc_t plainDesc(int64_t a, int64_t b, int64_t c, int64_t d,
                             dnnl_format_tag_t tag,
                             dnnl_data_type_t type = dnnl_f32) {
  dnnl_memory_desc_t md;
  dnnl_dims_t dims = {a, b, c, d};
  dnnl_memory_desc_init_by_tag(&md, 4, dims, type, tag);
  return md;
}

/// oneDNN's data type of a site's ConvData.
dnnl_data_type_t dataTypeOf(ConvData data) {
  return data == ConvData::BF16  ? dnnl_bf16
         : data == ConvData::F16 ? dnnl_f16
                                 : dnnl_f32;
}

/// The tag of activations in blocks of `block` channels (undef: none).
dnnl_format_tag_t blockedTag(int64_t block) {
  return block == 16  ? dnnl_nChw16c
         : block == 8 ? dnnl_nChw8c
                      : dnnl_format_tag_undef;
}

/// The channel block oneDNN's convolutions take on this CPU: that of the
/// source it picks for a 64-channel 3x3 convolution (16 on AVX-512, 8 on
/// AVX2), or 1 where it picks neither.
int64_t preferredChannelBlock() {
  OneDnnContext &c = context();
  if (!c.failure.empty())
    return 1;
  dnnl_memory_desc_t x = plainDesc(2, 64, 8, 8, dnnl_format_tag_any),
                     w = plainDesc(64, 64, 3, 3, dnnl_format_tag_any),
                     y = plainDesc(2, 64, 8, 8, dnnl_format_tag_any);
  dnnl_dims_t strides = {1, 1}, padding = {1, 1};
  dnnl_convolution_desc_t desc;
  dnnl_primitive_desc_t pd = nullptr;
  if (dnnl_convolution_forward_desc_init(
          &desc, dnnl_forward_training, dnnl_convolution_direct, &x, &w,
          nullptr, &y, strides, padding, padding) != dnnl_success ||
      dnnl_primitive_desc_create(&pd, &desc, nullptr, c.engine, nullptr) !=
          dnnl_success)
    return 1;
  const dnnl_memory_desc_t *picked =
      dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  int64_t block = 1;
  for (int64_t candidate : {16, 8}) {
    dnnl_memory_desc_t tagged = plainDesc(2, 64, 8, 8, blockedTag(candidate));
    if (dnnl_memory_desc_equal(picked, &tagged))
      block = candidate;
  }
  dnnl_primitive_desc_destroy(pd);
  return block;
}

} // namespace

/// A site's primitives and memories. The work is split into parts, one
/// per thread of the step's pool: the forward and the input gradient by
/// images (each part a contiguous run of images of the NCHW tensors), the
/// weight gradient by output channels (each part its own rows of the OIHW
/// gradient, from a strided view of the output gradient), so no part
/// reduces into another's result and the sums do not depend on which
/// thread runs a part. Each part runs oneDNN single-threaded.
struct ConvSite::OneDnn {
  /// One convolution of a part's size (at most two sizes: the parts', and
  /// the last part's), with the reorders of its split operand and result.
  struct Primitive {
    dnnl_primitive_t conv = nullptr, in = nullptr, out = nullptr;
  };
  struct Part {
    int64_t begin = 0; // first image or output channel
    int primitive = 0;
    // The split operand (x, dy; dy's channels for the weight gradient) and
    // the result: the plan's memory and the blocked copy.
    dnnl_memory_t in = nullptr, inBlocked = nullptr;
    dnnl_memory_t out = nullptr, outBlocked = nullptr;
    // The shared operand's blocked copy (weights; x for the weight
    // gradient): a memory per part, since executing sets handles.
    dnnl_memory_t shared = nullptr;
    dnnl_memory_t scratchpad = nullptr; // null: the primitive needs none
    dnnl_stream_t stream = nullptr;
    int64_t inOffset = 0, outOffset = 0, scratchpadOffset = 0; // bytes
  };
  /// A slice of the shared operand's reorder along its first dimension
  /// (output channels of the weights, images of x), in whole blocks of
  /// the blocked layout: the slices run on the step's threads.
  struct SharedSlice {
    dnnl_primitive_t reorder = nullptr;
    dnnl_memory_t plain = nullptr, blocked = nullptr;
    dnnl_stream_t stream = nullptr;
  };
  Primitive primitives[2];
  std::vector<Part> parts;
  dnnl_memory_t sharedPlain = nullptr, sharedBlocked = nullptr;
  dnnl_primitive_t sharedReorder = nullptr; // null: the plan's layout
  std::vector<SharedSlice> sharedSlices;    // empty: sharedReorder whole
  int inArg = 0, sharedArg = 0, outArg = 0;
  // Elements between the plan's pointers of consecutive images (or output
  // channels) of the split operand and of the result, and an element's
  // bytes.
  int64_t inStep = 0, outStep = 0, elementBytes = 4;
  std::vector<dnnl_primitive_desc_t> descs;
  std::vector<dnnl_memory_t> memories;

  ~OneDnn() {
    for (Primitive &p : primitives)
      for (dnnl_primitive_t q : {p.conv, p.in, p.out})
        if (q)
          dnnl_primitive_destroy(q);
    if (sharedReorder)
      dnnl_primitive_destroy(sharedReorder);
    for (SharedSlice &slice : sharedSlices) {
      if (slice.reorder)
        dnnl_primitive_destroy(slice.reorder);
      if (slice.stream)
        dnnl_stream_destroy(slice.stream);
    }
    for (Part &part : parts)
      if (part.stream)
        dnnl_stream_destroy(part.stream);
    for (dnnl_memory_t m : memories)
      dnnl_memory_destroy(m);
    for (dnnl_primitive_desc_t d : descs)
      dnnl_primitive_desc_destroy(d);
  }
};

namespace {

using OneDnn = ConvSite::OneDnn;

/// Splits the shared operand's reorder (plain -> blocked, once a step)
/// into at most `maxParts` slices along the first dimension, so that it
/// runs on all of the step's threads: on one thread, ResNet-18's weight
/// and weight-gradient reorders kept the other thread idle for 29 ms of a
/// 380 ms step. Slices are whole 16-blocks (oneDNN's sub-memories must
/// start at a block), and only where the blocked copy has no padding (a
/// reorder of a slice would not zero padding that lies outside it). Where
/// oneDNN refuses a slice (a layout blocked by more than 16 along that
/// dimension), `dnn` keeps the one reorder.
void sliceSharedReorder(const dnnl_memory_desc_t &plain,
                        const dnnl_memory_desc_t &blocked, int64_t maxParts,
                        OneDnn &dnn) {
  OneDnnContext &c = context();
  int64_t elements = 1;
  for (int d = 0; d < plain.ndims; ++d)
    elements *= plain.dims[d];
  constexpr int64_t kBlock = 16;
  int64_t blocks = plain.dims[0] / kBlock;
  int64_t count = std::min<int64_t>(maxParts, blocks);
  if (count < 2 || plain.dims[0] % kBlock != 0 ||
      int64_t(dnnl_memory_desc_get_size(&blocked)) !=
          elements * dnn.elementBytes)
    return;
  int64_t size = kBlock * ((blocks + count - 1) / count);
  bool ok = true;
  for (int64_t begin = 0; ok && begin < plain.dims[0]; begin += size) {
    dnnl_dims_t dims, offsets = {begin, 0, 0, 0};
    for (int d = 0; d < plain.ndims; ++d)
      dims[d] = plain.dims[d];
    dims[0] = std::min(size, plain.dims[0] - begin);
    dnnl_memory_desc_t from, to;
    dnnl_primitive_desc_t pd = nullptr;
    OneDnn::SharedSlice &slice = dnn.sharedSlices.emplace_back();
    ok = dnnl_memory_desc_init_submemory(&from, &plain, dims, offsets) ==
             dnnl_success &&
         dnnl_memory_desc_init_submemory(&to, &blocked, dims, offsets) ==
             dnnl_success &&
         dnnl_reorder_primitive_desc_create(&pd, &from, c.engine, &to, c.engine,
                                            nullptr) == dnnl_success;
    if (pd)
      dnn.descs.push_back(pd);
    ok = ok && dnnl_primitive_create(&slice.reorder, pd) == dnnl_success;
    for (auto [desc, memory] :
         {std::pair{&from, &slice.plain}, std::pair{&to, &slice.blocked}})
      if (ok && dnnl_memory_create(memory, desc, c.engine, DNNL_MEMORY_NONE) ==
                    dnnl_success)
        dnn.memories.push_back(*memory);
      else
        ok = false;
    ok = ok && dnnl_stream_create(&slice.stream, c.engine,
                                  dnnl_stream_default_flags) == dnnl_success;
  }
  if (ok)
    return;
  for (OneDnn::SharedSlice &slice : dnn.sharedSlices) {
    if (slice.reorder)
      dnnl_primitive_destroy(slice.reorder);
    if (slice.stream)
      dnnl_stream_destroy(slice.stream);
  }
  dnn.sharedSlices.clear();
}

/// Sets up a site's OneDnn: the split into parts, the descriptors of the
/// plan's tensors and of oneDNN's, the (at most two) primitives, the
/// shared operand's copy, and each part's memories and place in the
/// workspace. One builder per attempt (prepare tries several).
class OneDnnBuilder {
public:
  /// The site split into at most `maxParts` parts, the activations
  /// `layouts` names in blocks of `block` channels (1: every activation
  /// plain). `directness` 2: the primitive takes those as they are, a
  /// weight gradient's slice of dy's channels too; 1: all but that slice,
  /// which is copied; 0: none, they are reordered to the layouts oneDNN
  /// picks like plain ones (where the blocked layout would cost oneDNN its
  /// fast kernels).
  OneDnnBuilder(const ConvShape &s, ConvKind kind, ConvData data,
                int64_t maxParts, ConvLayouts layouts, int64_t block,
                int directness, OneDnn &dnn)
      : s(s), kind(kind), type(dataTypeOf(data)), maxParts(maxParts),
        block(block), c(context()), dnn(dnn),
        byChannels(kind == ConvKind::WeightGrad) {
    dnn.elementBytes = data == ConvData::F32 ? 4 : 2;
    if (block == 1)
      layouts = {};
    xBlocked = kind == ConvKind::Forward     ? layouts.firstBlocked
               : kind == ConvKind::InputGrad ? layouts.resultBlocked
                                             : layouts.secondBlocked;
    yBlocked = kind == ConvKind::Forward ? layouts.resultBlocked
                                         : layouts.firstBlocked;
    direct = directness > 0;
    sliceDirect = directness > 1 && byChannels && yBlocked;
    split();
    chooseArguments();
  }

  /// An empty string on success, else why not.
  std::string build(int64_t workspaceBytes, std::string &implementation) {
    if (std::string why = createPrimitives(implementation); !why.empty())
      return why;
    if (std::string why = createShared(); !why.empty())
      return why;
    if (std::string why = createReorders(); !why.empty())
      return why;
    return createParts(workspaceBytes);
  }

private:
  /// Parts of `size` (channel parts in whole 16-channel blocks), the last
  /// one shorter.
  void split() {
    int64_t total = byChannels ? s.o : s.n;
    if (byChannels) {
      int64_t blocks = (s.o + 15) / 16;
      size = 16 * ((blocks + maxParts - 1) / std::max<int64_t>(1, maxParts));
    } else {
      size = (s.n + maxParts - 1) / std::max<int64_t>(1, maxParts);
    }
    size = std::min(std::max<int64_t>(1, size), total);
    count = (total + size - 1) / size;
    last = total - (count - 1) * size;
  }

  /// The queries of the split operand, the shared one and the result, and
  /// their execution arguments.
  void chooseArguments() {
    if (kind == ConvKind::Forward) {
      inQuery = dnnl_query_src_md, sharedQuery = dnnl_query_weights_md,
      outQuery = dnnl_query_dst_md;
      dnn.inArg = DNNL_ARG_SRC, dnn.sharedArg = DNNL_ARG_WEIGHTS,
      dnn.outArg = DNNL_ARG_DST;
    } else if (kind == ConvKind::InputGrad) {
      inQuery = dnnl_query_diff_dst_md, sharedQuery = dnnl_query_weights_md,
      outQuery = dnnl_query_diff_src_md;
      dnn.inArg = DNNL_ARG_DIFF_DST, dnn.sharedArg = DNNL_ARG_WEIGHTS,
      dnn.outArg = DNNL_ARG_DIFF_SRC;
    } else {
      inQuery = dnnl_query_diff_dst_md, sharedQuery = dnnl_query_src_md,
      outQuery = dnnl_query_diff_weights_md;
      dnn.inArg = DNNL_ARG_DIFF_DST, dnn.sharedArg = DNNL_ARG_SRC,
      dnn.outArg = DNNL_ARG_DIFF_WEIGHTS;
    }
    int64_t xImage = s.c * s.h * s.w, yImage = s.o * s.ho * s.wo;
    dnn.inStep = byChannels                  ? s.ho * s.wo
                 : kind == ConvKind::Forward ? xImage
                                             : yImage;
    dnn.outStep = byChannels                  ? s.c * s.kh * s.kw
                  : kind == ConvKind::Forward ? yImage
                                              : xImage;
  }

  dnnl_memory_desc_t any(int64_t a, int64_t b, int64_t h, int64_t w) const {
    return plainDesc(a, b, h, w, dnnl_format_tag_any, type);
  }
  /// An activation as the plan keeps it: in blocks, or NCHW.
  dnnl_memory_desc_t activation(bool blocked, int64_t n, int64_t channels,
                                int64_t h, int64_t w) const {
    return plainDesc(n, channels, h, w, blocked ? blockedTag(block) : dnnl_nchw,
                     type);
  }
  /// A weight gradient's part reads dy's channels [begin, begin + n) of
  /// every image, whole blocks of the blocked dy: its sub-memory at channel
  /// 0, moved to `begin` by the handle (begin * HO * WO floats on, as in
  /// NCHW).
  dnnl_memory_desc_t blockedSlice(int64_t n) const {
    dnnl_memory_desc_t whole = activation(true, s.n, s.o, s.ho, s.wo), md;
    dnnl_dims_t dims = {s.n, n, s.ho, s.wo}, offsets = {0, 0, 0, 0};
    dnnl_memory_desc_init_submemory(&md, &whole, dims, offsets);
    return md;
  }
  /// The plan's layout of a part's split operand.
  dnnl_memory_desc_t plainIn(int64_t n) const {
    if (!byChannels)
      return kind == ConvKind::Forward
                 ? activation(xBlocked, n, s.c, s.h, s.w)
                 : activation(yBlocked, n, s.o, s.ho, s.wo);
    if (yBlocked)
      return blockedSlice(n);
    // dy's channels [begin, begin + n) of every image: a strided view.
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {s.n, n, s.ho, s.wo};
    dnnl_dims_t steps = {s.o * s.ho * s.wo, s.ho * s.wo, s.wo, 1};
    dnnl_memory_desc_init_by_strides(&md, 4, dims, type, steps);
    return md;
  }
  /// The plan's layout of a part's result.
  dnnl_memory_desc_t plainOut(int64_t n) const {
    if (byChannels)
      return plainDesc(n, s.c, s.kh, s.kw, dnnl_oihw, type);
    return kind == ConvKind::Forward ? activation(yBlocked, n, s.o, s.ho, s.wo)
                                     : activation(xBlocked, n, s.c, s.h, s.w);
  }
  /// The plan's layout of the shared operand.
  dnnl_memory_desc_t sharedPlain() const {
    return byChannels ? activation(xBlocked, s.n, s.c, s.h, s.w)
                      : plainDesc(s.o, s.c, s.kh, s.kw, dnnl_oihw, type);
  }

  dnnl_primitive_desc_t create(const void *desc,
                               const_dnnl_primitive_desc_t hint) {
    dnnl_primitive_desc_t pd = nullptr;
    if (dnnl_primitive_desc_create(&pd, desc, attr, c.engine, hint) !=
        dnnl_success)
      return nullptr;
    dnn.descs.push_back(pd);
    return pd;
  }
  /// The convolution of a part of `n` images and `o` output channels.
  dnnl_primitive_desc_t convolution(int64_t n, int64_t o) {
    dnnl_dims_t strides = {s.strideH, s.strideW};
    dnnl_dims_t padL = {s.padH, s.padW};
    // The right padding that gives the planned output size.
    dnnl_dims_t padR = {(s.ho - 1) * s.strideH + s.kh - s.h - s.padH,
                        (s.wo - 1) * s.strideW + s.kw - s.w - s.padW};
    dnnl_memory_desc_t x = xBlocked && direct
                               ? activation(true, n, s.c, s.h, s.w)
                               : any(n, s.c, s.h, s.w),
                       w = any(o, s.c, s.kh, s.kw),
                       y = yBlocked && direct && !byChannels
                               ? activation(true, n, o, s.ho, s.wo)
                               : any(n, o, s.ho, s.wo),
                       dySlice = sliceDirect ? blockedSlice(o) : y;
    dnnl_convolution_desc_t forwardDesc;
    dnnl_convolution_forward_desc_init(&forwardDesc, dnnl_forward_training,
                                       dnnl_convolution_direct, &x, &w, nullptr,
                                       &y, strides, padL, padR);
    dnnl_primitive_desc_t forward = create(&forwardDesc, nullptr);
    if (!forward || kind == ConvKind::Forward)
      return forward;
    dnnl_convolution_desc_t d;
    if (kind == ConvKind::InputGrad)
      dnnl_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &x,
                                               &w, &y, strides, padL, padR);
    else
      dnnl_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct,
                                                  &x, &w, nullptr, &dySlice,
                                                  strides, padL, padR);
    return create(&d, forward);
  }

  /// The 16-bit type's name, for the reasons a site runs im2col.
  const char *halfName() const { return type == dnnl_bf16 ? "bf16" : "f16"; }

  static int64_t align(int64_t bytes) { return (bytes + 63) / 64 * 64; }
  static int64_t bytesOf(const dnnl_memory_desc_t *md) {
    return int64_t(dnnl_memory_desc_get_size(md));
  }
  bool memory(const dnnl_memory_desc_t *md, dnnl_memory_t &m) {
    if (dnnl_memory_create(&m, md, c.engine, DNNL_MEMORY_NONE) != dnnl_success)
      return false;
    dnn.memories.push_back(m);
    return true;
  }
  bool reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
               dnnl_primitive_t &r) {
    dnnl_primitive_desc_t pd = nullptr;
    if (dnnl_reorder_primitive_desc_create(&pd, from, c.engine, to, c.engine,
                                           nullptr) != dnnl_success)
      return false;
    dnn.descs.push_back(pd);
    // Plain <-> blocked reorders of one type need no scratchpad.
    const dnnl_memory_desc_t *scratch =
        dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (scratch && bytesOf(scratch) != 0)
      return false;
    return dnnl_primitive_create(&r, pd) == dnnl_success;
  }

  /// The (at most two) primitives' descriptors, with user-managed
  /// scratchpads (they live in the planned workspace).
  std::string createPrimitives(std::string &implementation) {
    if (dnnl_primitive_attr_create(&attr) != dnnl_success)
      return "oneDNN cannot create attributes";
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    int64_t sizes[2] = {size, last};
    for (int k = 0; k < (last != size ? 2 : 1); ++k)
      pds[k] =
          byChannels ? convolution(s.n, sizes[k]) : convolution(sizes[k], s.o);
    dnnl_primitive_attr_destroy(attr);
    if (!pds[0] || (last != size && !pds[1]))
      return type == dnnl_f32 ? std::string("oneDNN has no convolution for "
                                            "this shape")
                              : std::string("oneDNN has no ") + halfName() +
                                    " convolution for this shape on this CPU";
    const char *impl = nullptr;
    dnnl_primitive_desc_query(pds[0], dnnl_query_impl_info_str, 0, &impl);
    implementation = impl ? impl : "?";
    // A layout the plan imposes must not cost oneDNN's fast kernels, nor
    // 16-bit storage (where oneDNN's reference code is far slower than
    // widening for im2col).
    bool reference = implementation.rfind("ref", 0) == 0;
    if (direct && (xBlocked || yBlocked) && reference)
      return "oneDNN has only its reference convolution for the blocked "
             "activations";
    if (type != dnnl_f32 && reference)
      return std::string("oneDNN has only its reference convolution for ") +
             halfName() + " on this CPU";
    return "";
  }

  /// The shared operand: one blocked copy, the same for every part, at the
  /// start of the workspace.
  std::string createShared() {
    shared = dnnl_primitive_desc_query_md(pds[0], sharedQuery, 0);
    if (pds[1] && !dnnl_memory_desc_equal(shared, dnnl_primitive_desc_query_md(
                                                      pds[1], sharedQuery, 0)))
      return "oneDNN picks different layouts for the parts";
    dnnl_memory_desc_t plain = sharedPlain();
    if (!memory(&plain, dnn.sharedPlain))
      return "oneDNN cannot describe the convolution's tensors";
    if (dnnl_memory_desc_equal(shared, &plain)) {
      dnn.sharedBlocked = dnn.sharedPlain;
      return "";
    }
    if (!memory(shared, dnn.sharedBlocked) ||
        !reorder(&plain, shared, dnn.sharedReorder))
      return "oneDNN has no reorder for the convolution's layouts";
    used = align(bytesOf(shared));
    sliceSharedReorder(plain, *shared, maxParts, dnn);
    return "";
  }

  /// Each primitive's reorders of its split operand and result, where
  /// oneDNN's layout is not the plan's.
  std::string createReorders() {
    int64_t sizes[2] = {size, last};
    for (int k = 0; k < 2 && pds[k]; ++k) {
      dnnl_memory_desc_t in = plainIn(sizes[k]), out = plainOut(sizes[k]);
      const dnnl_memory_desc_t *inBlocked =
          dnnl_primitive_desc_query_md(pds[k], inQuery, 0);
      const dnnl_memory_desc_t *outBlocked =
          dnnl_primitive_desc_query_md(pds[k], outQuery, 0);
      if (!dnnl_memory_desc_equal(inBlocked, &in) &&
          !reorder(&in, inBlocked, dnn.primitives[k].in))
        return "oneDNN has no reorder for the convolution's layouts";
      if (!dnnl_memory_desc_equal(outBlocked, &out) &&
          !reorder(outBlocked, &out, dnn.primitives[k].out))
        return "oneDNN has no reorder for the convolution's layouts";
      if (dnnl_primitive_create(&dnn.primitives[k].conv, pds[k]) !=
          dnnl_success)
        return "oneDNN cannot create the convolution";
    }
    return "";
  }

  /// A workspace place of `bytes` after those given out so far.
  int64_t place(const dnnl_memory_desc_t *md) {
    int64_t offset = used;
    used += align(bytesOf(md));
    return offset;
  }

  /// The parts: their memories, streams and places in the workspace, which
  /// must hold them all.
  std::string createParts(int64_t workspaceBytes) {
    const char *undescribed =
        "oneDNN cannot describe the convolution's tensors";
    for (int64_t p = 0; p < count; ++p) {
      OneDnn::Part part;
      part.begin = p * size;
      part.primitive = p == count - 1 && last != size ? 1 : 0;
      int64_t n = part.primitive ? last : size;
      dnnl_primitive_desc_t pd = pds[part.primitive];
      dnnl_memory_desc_t in = plainIn(n), out = plainOut(n);
      if (!memory(&in, part.in) || !memory(&out, part.out) ||
          !memory(shared, part.shared))
        return undescribed;
      part.inBlocked = part.in;
      part.outBlocked = part.out;
      // Where a reorder makes one, the blocked copy of the split operand or
      // the result: its memory and its place in the workspace.
      auto blockedCopy = [&](dnnl_primitive_t reorder, dnnl_query_t query,
                             dnnl_memory_t &copy, int64_t &offset) {
        if (!reorder)
          return true;
        const dnnl_memory_desc_t *md =
            dnnl_primitive_desc_query_md(pd, query, 0);
        if (!memory(md, copy))
          return false;
        offset = place(md);
        return true;
      };
      const OneDnn::Primitive &primitive = dnn.primitives[part.primitive];
      if (!blockedCopy(primitive.in, inQuery, part.inBlocked, part.inOffset) ||
          !blockedCopy(primitive.out, outQuery, part.outBlocked,
                       part.outOffset))
        return undescribed;
      // A scratchpad of its own (user-managed: in the workspace too).
      const dnnl_memory_desc_t *scratch =
          dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
      if (scratch && bytesOf(scratch) != 0) {
        if (!memory(scratch, part.scratchpad))
          return "oneDNN cannot describe the scratchpad";
        part.scratchpadOffset = place(scratch);
      }
      if (dnnl_stream_create(&part.stream, c.engine,
                             dnnl_stream_default_flags) != dnnl_success)
        return "oneDNN cannot create a stream";
      dnn.parts.push_back(part);
    }
    if (used > workspaceBytes)
      return "the blocked copies and scratchpads (" + std::to_string(used) +
             " bytes) exceed the op's planned workspace (" +
             std::to_string(workspaceBytes) + ")";
    return "";
  }

  const ConvShape &s;
  ConvKind kind;
  dnnl_data_type_t type; // the operands' and the result's
  int64_t maxParts, block;
  OneDnnContext &c;
  OneDnn &dnn;
  bool byChannels, xBlocked = false, yBlocked = false, direct = false,
                   sliceDirect = false;
  int64_t size = 1, count = 1, last = 1; // the parts' sizes
  dnnl_query_t inQuery = dnnl_query_undef, sharedQuery = dnnl_query_undef,
               outQuery = dnnl_query_undef;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_desc_t pds[2] = {nullptr, nullptr};
  const dnnl_memory_desc_t *shared = nullptr; // oneDNN's layout of it
  int64_t used = 0;                           // workspace bytes given out
};

/// Sets up `dnn` for the site (OneDnnBuilder). An empty string on success,
/// else why not.
std::string createOneDnn(const ConvShape &s, ConvKind kind, ConvData data,
                         int64_t workspaceBytes, int64_t maxParts,
                         ConvLayouts layouts, int64_t block, int directness,
                         OneDnn &dnn, std::string &implementation) {
  OneDnnContext &c = context();
  if (!c.failure.empty())
    return c.failure;
  c.alone();
  return OneDnnBuilder(s, kind, data, maxParts, layouts, block, directness, dnn)
      .build(workspaceBytes, implementation);
}

} // namespace

#else

struct ConvSite::OneDnn {};

#endif

ConvSite::ConvSite(const ConvShape &shape, ConvKind kind,
                   int64_t workspaceBytes, ConvLayouts layouts, ConvData data)
    : shape(shape), kind(kind), workspaceBytes(workspaceBytes),
      layouts(layouts), data(data), how("im2col + sgemm: not prepared") {
  addSite(this);
}

ConvSite::~ConvSite() { removeSite(this); }

void ConvSite::prepare(int threads, int64_t block) {
  dnn.reset();
#if MNEMO_HAVE_ONEDNN
  // MNEMO_ONEDNN=0 in the environment: im2col everywhere (to compare).
  if (oneDnnTurnedOff()) {
    how = "im2col + sgemm: MNEMO_ONEDNN=0";
    return;
  }
  // As many parts as threads; where those do not fit in the workspace
  // (or oneDNN refuses them), one. Blocked activations as they are, else
  // reordered.
  std::string why;
  for (int64_t parts : {int64_t(threads), int64_t(1)}) {
    for (int directness : {2, 1, 0}) {
      if (directness == 2 &&
          !(kind == ConvKind::WeightGrad && layouts.firstBlocked))
        continue;
      auto made = std::make_unique<OneDnn>();
      std::string implementation;
      why = createOneDnn(shape, kind, data, workspaceBytes, parts, layouts,
                         block, directness, *made, implementation);
      if (why.empty()) {
        dnn = std::move(made);
        how = implementation;
        return;
      }
      if (block == 1 || !layouts.any())
        break;
    }
    if (threads == 1)
      break;
  }
  how = "im2col + sgemm: " + why;
#else
  (void)threads;
  (void)block;
  how = "im2col + sgemm: the trainer was built without oneDNN";
#endif
}

bool ConvSite::runOneDnn(const void *first, const void *second, void *result,
                         float *workspace) const {
#if MNEMO_HAVE_ONEDNN
  if (dnn) {
    OneDnnContext &c = context();
    // The plan's pointers by bytes: the elements are f32 or 16-bit.
    auto *firstBytes = static_cast<uint8_t *>(const_cast<void *>(first));
    auto *resultBytes = static_cast<uint8_t *>(result);
    auto *base = reinterpret_cast<uint8_t *>(workspace);
    // The shared operand's blocked copy, once: in slices on the step's
    // threads, or whole on this one.
    if (!dnn->sharedSlices.empty()) {
      parallelFor(int64_t(dnn->sharedSlices.size()), 1,
                  [&](int64_t begin, int64_t end) {
                    c.alone();
                    LibraryCallScope library;
                    for (int64_t k = begin; k < end; ++k) {
                      const OneDnn::SharedSlice &slice = dnn->sharedSlices[k];
                      // A sub-memory's handle is its whole tensor's.
                      dnnl_memory_set_data_handle(slice.plain,
                                                  const_cast<void *>(second));
                      dnnl_memory_set_data_handle(slice.blocked, base);
                      dnnl_exec_arg_t move[2] = {{DNNL_ARG_FROM, slice.plain},
                                                 {DNNL_ARG_TO, slice.blocked}};
                      dnnl_primitive_execute(slice.reorder, slice.stream, 2,
                                             move);
                      dnnl_stream_wait(slice.stream);
                    }
                  });
    } else if (dnn->sharedReorder) {
      c.alone();
      LibraryCallScope library;
      dnnl_memory_set_data_handle(dnn->sharedPlain, const_cast<void *>(second));
      dnnl_memory_set_data_handle(dnn->sharedBlocked, base);
      dnnl_exec_arg_t move[2] = {{DNNL_ARG_FROM, dnn->sharedPlain},
                                 {DNNL_ARG_TO, dnn->sharedBlocked}};
      dnnl_primitive_execute(dnn->sharedReorder, c.stream, 2, move);
      dnnl_stream_wait(c.stream);
    }
    void *shared = dnn->sharedReorder ? static_cast<void *>(base)
                                      : const_cast<void *>(second);
    parallelFor(int64_t(dnn->parts.size()), 1, [&](int64_t begin, int64_t end) {
      c.alone();
      // oneDNN's execute allocates its argument map: counted apart.
      LibraryCallScope library;
      for (int64_t k = begin; k < end; ++k) {
        const OneDnn::Part &part = dnn->parts[k];
        const OneDnn::Primitive &p = dnn->primitives[part.primitive];
        dnnl_memory_set_data_handle(
            part.in, firstBytes + part.begin * dnn->inStep * dnn->elementBytes);
        dnnl_memory_set_data_handle(part.out,
                                    resultBytes + part.begin * dnn->outStep *
                                                      dnn->elementBytes);
        dnnl_memory_set_data_handle(part.shared, shared);
        if (p.in) {
          dnnl_memory_set_data_handle(part.inBlocked, base + part.inOffset);
          dnnl_exec_arg_t move[2] = {{DNNL_ARG_FROM, part.in},
                                     {DNNL_ARG_TO, part.inBlocked}};
          dnnl_primitive_execute(p.in, part.stream, 2, move);
        }
        if (p.out)
          dnnl_memory_set_data_handle(part.outBlocked, base + part.outOffset);
        dnnl_exec_arg_t args[4] = {{dnn->inArg, part.inBlocked},
                                   {dnn->sharedArg, part.shared},
                                   {dnn->outArg, part.outBlocked},
                                   {DNNL_ARG_SCRATCHPAD, part.scratchpad}};
        if (part.scratchpad)
          dnnl_memory_set_data_handle(part.scratchpad,
                                      base + part.scratchpadOffset);
        dnnl_primitive_execute(p.conv, part.stream, part.scratchpad ? 4 : 3,
                               args);
        if (p.out) {
          dnnl_exec_arg_t move[2] = {{DNNL_ARG_FROM, part.outBlocked},
                                     {DNNL_ARG_TO, part.out}};
          dnnl_primitive_execute(p.out, part.stream, 2, move);
        }
        dnnl_stream_wait(part.stream);
      }
    });
    return true;
  }
#else
  (void)first, (void)second, (void)result, (void)workspace;
#endif
  return false;
}

template <typename T>
void ConvSite::run(const T *first, const T *second, T *result,
                   float *workspace) const {
  if (runOneDnn(first, second, result, workspace))
    return;
  if constexpr (!std::is_same_v<T, float>) {
    conv2dHalf(int(kind), shape, first, second, result, workspace);
  } else if (kind == ConvKind::Forward) {
    conv2d(shape, first, second, result, workspace);
  } else if (kind == ConvKind::InputGrad) {
    conv2dInputGrad(shape, first, second, result, workspace);
  } else {
    conv2dWeightGrad(shape, first, second, result, workspace);
  }
}

template void ConvSite::run<float>(const float *, const float *, float *,
                                   float *) const;
template void ConvSite::run<bf16_t>(const bf16_t *, const bf16_t *, bf16_t *,
                                    float *) const;
template void ConvSite::run<f16_t>(const f16_t *, const f16_t *, f16_t *,
                                   float *) const;

namespace {
/// channelBlock()'s value, which prepareConvolutions sets, and why the
/// plan's blocked activations are plain in this run (empty: they are not).
int64_t runChannelBlock = 1;
std::string whyPlain;
} // namespace

int64_t channelBlock() { return runChannelBlock; }

void prepareConvolutions(int threads) {
  int64_t block = 1;
#if MNEMO_HAVE_ONEDNN
  if (!oneDnnTurnedOff())
    block = preferredChannelBlock();
#endif
  for (ConvSite *site : sites())
    site->prepare(threads, block);
  // The blocked activations are one layout for the whole step: where a site
  // that touches them runs im2col (which reads NCHW), all are plain.
  whyPlain.clear();
  auto refused = std::find_if(sites().begin(), sites().end(), [](ConvSite *s) {
    return s->readsBlocked() && !s->usesOneDnn();
  });
  if (block > 1 && refused != sites().end()) {
    whyPlain = "a convolution in " + std::to_string(block) +
               "-channel blocks runs " + (*refused)->implementation();
    block = 1;
    for (ConvSite *site : sites())
      site->prepare(threads, block);
  }
  runChannelBlock = block;
}

std::string convolutionSummary() {
  const auto &all = sites();
  if (all.empty())
    return "";
  int blocked = int(std::count_if(
      all.begin(), all.end(), [](ConvSite *s) { return s->readsBlocked(); }));
  return "convolutions: " + sitesSummary(all, "im2col") +
         (blocked && runChannelBlock > 1
              ? "; " + std::to_string(blocked) +
                    " keep activations in blocks of " +
                    std::to_string(runChannelBlock) + " channels"
          : blocked && !whyPlain.empty() ? "; activations plain: " + whyPlain
                                         : std::string());
}

} // namespace mnemo::cpu
