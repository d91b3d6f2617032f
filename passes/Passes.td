//===- Passes.td - Mnemo passes ----------------------------*- tablegen -*-===//

#ifndef MNEMO_PASSES_TD
#define MNEMO_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"autodiff", "mlir::ModuleOp"> {
  let summary = "Builds @train_step and @eval_step from @forward";
  let description = [{
    Reverse-mode differentiation of `@forward`'s loss, followed by the
    optimizer the `mnemo.train` module attribute names, all as mnemo IR so
    that later passes plan the memory of the whole step.

    `@train_step(params..., optimizer state..., inputs..., targets..., step,
    total_steps) -> (loss, new params..., new state..., lr, grad_norm)`
    runs the forward, the backward (each op's gradient comes from its
    GradientOpInterface), optional clipping by global norm, the learning-rate
    schedule and one optimizer update per parameter. A result marked
    `mnemo.reuses_arg = i` may be written into argument `i`'s buffer.

    `@eval_step(inputs..., targets..., params...) -> (loss[, accuracy])` is
    the forward with its metrics; accuracy is there when the output holds
    class scores for an integer target.

    Before:
    ```mlir
    func.func @forward(%x: tensor<4x8xf32> {mnemo.role = "input"}, ...,
                       %w: tensor<3x8xf32> {mnemo.role = "param"}) -> (tensor<f32>, ...)
    ```
    After, in addition:
    ```mlir
    func.func @train_step(%w: tensor<3x8xf32>, %w_m: tensor<3x8xf32>, %w_v: tensor<3x8xf32>,
                          %x: tensor<4x8xf32>, ..., %step: tensor<i32>, %total: tensor<i32>)
    func.func @eval_step(%x: tensor<4x8xf32>, ..., %w: tensor<3x8xf32>)
    ```
    A parameter that does not reach the loss gets a warning at its
    declaration and is left unchanged.
  }];
  let dependentDialects = ["::mnemo::MnemoDialect", "::mlir::func::FuncDialect"];
}

def FuseAttention : Pass<"fuse-attention", "mlir::ModuleOp"> {
  let summary = "Rewrites written-out attention in @forward to mnemo.attention";
  let description = [{
    Finds `softmax(q @ k^T * s [+ mask | where(mask, ., -inf)])`
    [`dropout`] `@ v` in `@forward`, as Inductor's SDPA pattern matcher
    does, and replaces it with one `mnemo.attention` (FlashAttention-2: the
    [Tq, Tk] scores and probabilities are never kept, the backward
    recomputes them per tile). The scale may be a division or a
    multiplication by a constant; the mask a boolean `where` against -inf
    (a square `causal_mask` becomes the causal rule) or an added bias; a
    dropout of the probabilities keeps its seed, and so its masks. Keys and
    values expanded for grouped-query attention (reshape, broadcast,
    reshape) are read unexpanded. The chain must be private to the pattern
    (every intermediate read only by the next), softmax along the last
    axis, and the pieces an attention the op takes (`shape::attention`);
    anything else is left as written. The op is marked
    `mnemo.rewritten_attention`, and `--memory-report` lists where the
    rewrite fired.

    One difference in meaning: a row whose every key is masked out gives
    NaN written out (softmax of -inf) and zeros fused.
  }];
  let dependentDialects = ["::mnemo::MnemoDialect", "::mlir::func::FuncDialect"];
}

def FuseLinearCrossEntropy : Pass<"fuse-linear-cross-entropy", "mlir::ModuleOp"> {
  let summary = "Fuses cross_entropy of a classifier's product in @forward";
  let description = [{
    Finds `cross_entropy(h @ W^T, y)` (a tied embedding table or a `Linear`
    without bias: `transpose_rhs`) and `cross_entropy(h @ W, y)` in
    `@forward` and replaces them with one `mnemo.linear_cross_entropy`,
    which computes the logits in chunks of rows (the chunk's logits about
    the size of `h`, at least 64 rows: LossesKernels.h's
    classifierChunkRows) and keeps each row's log-sum-exp for the backward,
    so neither the logits nor their gradient ever exists whole, as llm.c's
    and Liger-Kernel's fused classifiers. The logits may also be the
    forward's result (the model's output); nothing else may read them. A
    product plus a bias of the classes (`h @ W^T + b`: a `Linear` with one,
    BERT's decoder) fuses too, with the bias an operand of the fused op,
    where the logits outgrow one chunk; a smaller one (ten classes) is left
    as written, since the fused op would hold its logits whole anyway.

    `min-chunk-rows` raises the chunk's floor: the default pipeline asks
    512 when the plan is for a GPU (`--device=cuda`), where cuBLASLt's
    products of GPT-2 small's 128-row chunks ran on its small-tile sm80
    kernels (38 ms of a 150 ms step, ncu on an H200) and the classifier's
    weight gradient summed 64 thin products.
  }];
  let options = [
    Option<"minChunkRows", "min-chunk-rows", "int64_t", "64",
           "The fewest rows a chunk of logits holds (fewer only when the "
           "loss has fewer rows)">,
  ];
  let dependentDialects = ["::mnemo::MnemoDialect", "::mlir::func::FuncDialect"];
}

def FuseClassifierGradient : Pass<"fuse-classifier-gradient", "mlir::ModuleOp"> {
  let summary = "Computes the fused classifier loss's gradient with the loss";
  let description = [{
    Runs after autodiff. A `mnemo.linear_cross_entropy` and its
    `mnemo.linear_cross_entropy_grad` become one
    `mnemo.linear_cross_entropy_with_grad` at the loss's place where the
    gradient reaching the loss exists there (the step's seed, a constant
    1 or a loss scale): each chunk's logits are computed once, give their
    rows' loss, and become their gradient at once, so the head's product
    runs three times a step (as unfused), not four, and the backward no
    longer reads the hidden states. A loss whose gradient is computed after
    it (a loss scaled by a value the forward computes later) keeps the two
    ops.
  }];
  let dependentDialects = ["::mnemo::MnemoDialect"];
}

def Amp : Pass<"amp", "mlir::ModuleOp"> {
  let summary = "Mixed precision: runs @forward's ops in bf16 or f16 by category";
  let description = [{
    An autocast-style policy over `@forward`, before autodiff, so that the
    activations saved for backward are stored in low precision and the
    backward follows (a cast's gradient is the cast back).

    Each op falls in one category (PyTorch autocast's and TVM
    ToMixedPrecision's split):
    - low: matmul, batch_matmul, conv2d run in the low type;
    - f32: reductions (sum, mean), exp, log, pow, rsqrt, softmax,
      log_softmax, layer and RMS norm, the losses and accuracy run in f32;
    - follow: everything else runs in the widest type of its activation
      operands. Parameters and constants follow the activation they meet
      (a bias added to a bf16 product is cast to bf16, as autocast's
      `linear` does), so the activation stream stays low between f32 ops.
      batch_norm follows its input alone: its scale, bias and statistics
      stay f32 beside 16-bit data (PyTorch's autocast leaves it so too).

    Parameters stay f32 (master weights): each use gets a cast, and CSE
    leaves one cast per parameter, shared by the forward and, through the
    saved value, the backward. Results keep their declared types (a cast
    back before the return). Layers named in the train section's
    `keep_f32` (or the policy file's) run in f32 throughout.

    The precision is the train section's `precision` unless the `precision`
    option says otherwise; f32 changes nothing. A policy file (JSON) may
    move ops between categories and name layers to keep in f32:
    `{"low": ["matmul"], "f32": ["gelu"], "follow": [], "keep_f32": ["head"]}`.
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"\"",
           "bf16, f16 or f32 (default: the train section's)">,
    Option<"policyFile", "policy", "std::string", "\"\"",
           "A JSON policy file that overrides categories and layers">,
  ];
  let dependentDialects = ["::mnemo::MnemoDialect", "::mlir::func::FuncDialect"];
}

def Qat : Pass<"qat", "mlir::ModuleOp"> {
  let summary = "Quantization-aware training: fake-quantized weights in @forward";
  let description = [{
    Each parameter that a `quantize PATTERN = qat(...)` directive names is
    read through `fake_quant` in `@forward`, with its observed range as two
    new arguments of role `buffer` (`<param>.observer.min` and `.max`,
    per output channel or per tensor), kept with the parameters and in
    checkpoints. Autodiff then updates the ranges in @train_step with an
    `observe_minmax` before each fake-quant (min/max or moving-average
    observers, PyTorch's defaults) and differentiates through the clipped
    straight-through estimator; @eval_step fake-quantizes with the stored
    ranges, as PyTorch does with its observers disabled.

    bits 8 quantizes to [-128, 127], bits 4 to [-8, 7]. Post-training
    `int8`/`int4` directives leave training as it is: `train --export`
    quantizes the trained weights.
  }];
  let dependentDialects = ["::mnemo::MnemoDialect", "::mlir::func::FuncDialect"];
}

def CompressWeights : Pass<"compress-weights", "mlir::ModuleOp"> {
  let summary = "Inference: @eval_step alone, reading compressed weights";
  let description = [{
    What `mnemoc --mode=inference` compiles: `@train_step` is dropped (no
    gradients, no optimizer state) and `@eval_step` reads its weights in
    the layouts `train --export` writes, under the same argument names:

    - a weight a `quantize` directive names (qat, int8, int4): its codes
      (`<w>`, i8; int4 packs two per byte), `<w>.scale` and
      `<w>.zero_point` per output channel, group or tensor. An int8 weight
      `[N, K]` per output channel whose every use is `x @ W^T` runs as
      `quantize_rows` + `matmul_int8` (int8 GEMM, int32 accumulation); any
      other is `dequantize`d where it is read.
    - a 2:4 weight (`nm(n = 2, m = 4)`, K a multiple of 8) read only by
      `x @ W^T`: `matmul_sparse24` on its kept values `<w>` `[N, K/2]` and
      positions `<w>.indices` `[N, K/8]`.
    - a weight pruned by per-layer magnitude, read only by `x @ W^T`, when
      CSR at the directive's final sparsity is smaller than the dense
      weight: `matmul_csr` on `<w>.values`, `<w>.columns` (i16 when K <=
      32768) and `<w>.row_offsets`. The plan holds the nonzeros the final
      sparsity keeps.

    Other pruned weights (global magnitude, structured) stay dense with
    their zeros. `@eval_step` gets `mnemo.dense_weight_bytes`, the bytes of
    the parameters as trained, for the memory report.
  }];
  let dependentDialects = ["::mnemo::MnemoDialect", "::mlir::func::FuncDialect"];
}

def Remat : Pass<"remat", "mlir::ModuleOp"> {
  let summary = "Recomputes activations in the backward to meet a memory budget";
  let description = [{
    On `@train_step` after autodiff. A forward value that the backward reads
    is kept from its forward op to its last backward use; recomputing it in
    the backward (cloning its op, with its location, right before the first
    backward use, marked `mnemo.recomputed`) ends its life at its last
    forward use instead.

    Budget or not (`recompute-cheap`, with strategies `auto` and `optimal`),
    the pass first recomputes what costs a pass over a value and keeps nothing
    alive longer: the result of an elementwise or normalization op (at most
    8 FLOPs an element) whose operands the backward keeps anyway until the
    result's first backward use (GELU's output from the input its gradient
    reads; a layer norm's from the residual stream), as torch.compile's
    min-cut partitioner does for pointwise ops. The set is kept only if the
    real plan's peak goes down.

    The budget bounds the planned peak (arena, persistent regions and
    workspace) as the real pipeline plans it: every candidate set is
    checked by running schedule, fuse-elementwise and plan-memory on a copy.
    Strategy `auto` orders the candidates by recomputed FLOPs per byte
    saved (elementwise chains first, products last) and takes the shortest
    prefix whose plan fits. Strategy `optimal` solves a mixed-integer
    program with CBC (RematMilp.h): the least recomputed FLOPs such that
    every op's live bytes fit a capacity, over the op order remat sees;
    the capacity tightens until the real plan fits. `all` and `sqrt` keep
    only layer (or repeat-block) outputs, every block or every sqrt(n). A budget at or above the plan without
    recomputation recomputes nothing; a budget no candidate set meets is an
    error that names the smallest peak found.

    The step function gets a `#mnemo.remat` (the strategy, the recomputed
    ops and FLOPs next to the step's) for the memory report; under a budget
    also its `peak_bytes`, the chosen set planned once more by the
    pipeline's own tail (buildPlanningPipeline, full effort), which the
    report and the emitted plan must equal.
  }];
  let options = [
    Option<"budget", "budget", "int64_t", "0",
           "Bytes the planned peak may use (default: the train section's memory_budget)">,
    Option<"strategy", "strategy", "std::string", "\"auto\"",
           "none, all, sqrt, auto or optimal">,
    Option<"timeLimit", "time-limit", "double", "60",
           "Seconds the MILP solver of strategy optimal may search, in all (a choice that misses the budget in the real plan is solved again, within what is left)">,
    Option<"budgetDevice", "budget-device", "std::string", "\"cpu\"",
           "The device the budget is for: cpu or cuda">,
    Option<"transientGradients", "transient-gradients", "bool", "false",
           "Plan candidates with gradients in the arena, as plan-memory's "
           "option of the same name will">,
    Option<"recomputeCheap", "recompute-cheap", "bool", "true",
           "Recompute in the backward what an elementwise or normalization "
           "op computes from values the backward keeps anyway">,
    Option<"worldSize", "world-size", "int64_t", "0",
           "Plan candidates for this many data-parallel ranks, as "
           "plan-gradient-exchange will (0: not data-parallel)">,
    Option<"shardOptimizer", "shard-optimizer", "bool", "false",
           "With world-size: candidates keep 1/world-size of the optimizer "
           "state (ZeRO-1), as the emitted plan will">,
  ];
  let dependentDialects = ["::mnemo::MnemoDialect", "::mlir::func::FuncDialect"];
}

def Schedule : Pass<"schedule", "mlir::ModuleOp"> {
  let summary = "Reorders the step functions' ops to lower their peak memory";
  let description = [{
    A memory-aware topological order for @train_step and @eval_step: list
    scheduling that, among the ops whose operands are ready, runs the one
    that frees the most bytes net of what it allocates (ties keep the
    original order). In a training step this moves each parameter's update
    right after its gradient is complete, so gradients die early. The new
    order is kept only if the lower bound on the arena (the most bytes live
    at once) does not rise; otherwise the original order stays.
  }];
}

def FuseElementwise : Pass<"fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Marks elementwise producers that their consumer's loop computes";
  let description = [{
    In @train_step and @eval_step, an elementwise op (or a broadcast) whose
    result is used by exactly one elementwise op of the same shape is marked
    `mnemo.fused`: the backends compute it inside that consumer's loop, and
    plan-memory gives it no buffer (what it reads stays live until the loop
    runs). A chain such as `relu(matmul + broadcast(bias))` becomes one loop
    that reads the bias with stride 0 and stores only the relu.

    ```mlir
    %3 = mnemo.broadcast %b {mnemo.fused} : (tensor<512xf32>) -> tensor<128x512xf32>
    %4 = mnemo.add %2, %3 {mnemo.fused} : tensor<128x512xf32>
    %5 = mnemo.relu %4 : tensor<128x512xf32>
    ```

    A value with several consumers, or one that the function returns, is
    stored: recomputing it would cost work, and this pass never trades work
    for memory (rematerialization does, under a budget).
  }];
}

def PlanMemory : Pass<"plan-memory", "mlir::ModuleOp"> {
  let summary = "Gives every transient tensor of the step functions an arena offset";
  let description = [{
    For @train_step and @eval_step: buffers and live intervals over the op
    order (views share their source's buffer, elementwise ops may write into
    a dying operand, optimizer updates write their argument in place), then
    offsets in one arena with 256-byte alignment, from the best of three
    greedy best-fit planners (by size, by lifetime, by size times lifetime),
    improved, while above the lower bound, by a local search over the
    placement order, or, for small functions, by an exact branch-and-bound
    search that finishes within its node limit. Both searches are bounded
    by work, not time: a model always gets the same plan.
    The plan is verified (no two buffers live at once overlap) and written
    into the IR as the dialect's plan attributes (lang/MnemoAttrs.td, read
    and written through lang/PlanAttributes.h):

    ```mlir
    %5 = mnemo.relu %4 {mnemo.placement = #mnemo.placement<offsets = [262144], sizes = [262144]>}
        : tensor<128x512xf32>
    func.func @train_step(...) attributes {mnemo.plan = #mnemo.step_plan<arena_bytes = 1048576,
        lower_bound_bytes = 1048576, naive_bytes = 4194304, gradient_bytes = 0, workspace_bytes = 0,
        cuda_workspace_bytes = 33554432, planner = "greedy-by-size", budget_device = "cpu">}
    ```

    An offset is -1 for a result that is not in the arena (a splat
    constant, an update written into its argument, which the placement's
    `aliases` name, or a parameter gradient). Parameter gradients (the
    values the global norm and the optimizer read) get a persistent region
    of their own, one slot per gradient, as parameters and optimizer state
    do: the placement's `gradient_offsets` place them and the step plan's
    `gradient_bytes` sizes it. With `transient-gradients` they are planned
    in the arena instead, which saves memory when nothing needs them between
    steps. Arguments get a `#mnemo.slot<region, offset>` (`parameters`,
    `optimizer_state`, `inputs`).
  }];
  let options = [
    Option<"localSearchWork", "local-search-work", "int64_t", "50000000",
           "Pairs of buffers the local search over placement orders may compare per function (n(n-1)/2 a placement; about 0.2 s on one core). A work limit, not a time limit, so that every compilation gives the same plan">,
    Option<"exactSearchNodes", "exact-search-nodes", "int64_t", "1000000",
           "Nodes the exact search may visit per function (about 0.7 s on one core) before it gives up">,
    Option<"exactMaxBuffers", "exact-max-buffers", "int64_t", "64",
           "Run the exact search only below this many buffers">,
    Option<"budgetDevice", "budget-device", "std::string", "\"cpu\"",
           "The device whose memory the report's peak counts: cpu, or cuda (the plan, the CUDA workspace, a second batch buffer and the control block, as the one cudaMalloc)">,
    Option<"transientGradients", "transient-gradients", "bool", "false",
           "Plan parameter gradients in the arena instead of a persistent region">,
    Option<"gradientsByReadiness", "gradients-by-readiness", "bool", "false",
           "Lay gradients out in the order the step finishes them (data parallelism: contiguous buckets that become ready one after another)">,
  ];
}

def PlanGradientExchange : Pass<"plan-gradient-exchange", "mlir::ModuleOp"> {
  let summary = "Buckets a data-parallel step's gradients and places their sums in the schedule";
  let description = [{
    For a plan made for `world-size` >= 1 ranks: every rank holds the whole
    model, computes the gradients of its rows of the global batch, and sums
    them with the other ranks' before any op reads them. This pass cuts the
    gradient region (laid out in the order the step finishes its gradients,
    plan-memory's `gradients-by-readiness`) into contiguous buckets of at
    most `bucket-bytes` (a larger gradient is a bucket alone), each ready at the op that finishes its last gradient and
    needed at the first op that reads one of them (the gradient norm, an
    optimizer update), and marks both places, so that a bucket's sum runs
    while the rest of the backward computes (PyTorch DDP's buckets, at
    compile time):

    ```mlir
    func.func @train_step(...) attributes {mnemo.gradient_buckets = #mnemo.gradient_buckets<world_size = 2, offsets = [0, 8192], sizes = [8192, 256]>}
    %9 = mnemo.matmul ... {mnemo.gradient_sync = #mnemo.gradient_sync<ready = [0], await = []>}
    ```

    A bucket never holds a gradient that is read before another of its
    gradients is final. The gradients must be f32 in a persistent region
    (not `transient-gradients`).

    With `shard-optimizer` (ZeRO-1), the gradient region is padded to
    world-size equal parts of a multiple of 64 bytes; rank r owns part r. The
    optimizer's per-element states (Adam's two moments, SGD's momentum)
    get slots in a full layout of `state_tensors` copies of the gradient
    region (state t of the element whose gradient is at byte x at t * G +
    x), of which each rank holds its parts: the plan's optimizer state is
    1/world-size of the unsharded one.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "0",
           "The ranks of the data-parallel run (0: nothing to do; 1: one "
           "rank, which runs the collectives' path)">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", "4194304",
           "The gradient bytes a bucket collects before its sum starts">,
    Option<"shardOptimizer", "shard-optimizer", "bool", "false",
           "ZeRO-1: each rank keeps the optimizer state of 1/world-size of the gradient region and updates those parameter elements; buckets are reduce-scattered and the parameters all-gathered">,
  ];
}

#endif // MNEMO_PASSES_TD
