//===- MnemoAttrs.td - The memory plan as dialect attributes -*- tablegen -*-===//
//
// What plan-memory and remat decide, declared: every step function carries
// a #mnemo.step_plan, every op of it a #mnemo.placement, every argument a
// #mnemo.slot, and a step that remat rewrote a #mnemo.remat. Their
// verifiers hold what the emitters and the runtime rely on; they are read
// and written only through lang/PlanAttributes.h.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_ATTRS_TD
#define MNEMO_ATTRS_TD

include "lang/MnemoDialect.td"
include "mlir/IR/AttrTypeBase.td"

class Mnemo_Attr<string name, string attrMnemonic>
    : AttrDef<Mnemo_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Mnemo_MemoryRegionParameter
    : AttrParameter<"::mnemo::MemoryRegion", "a region of the plan"> {
  let parser = [{ ::mnemo::parseMemoryRegion($_parser) }];
  let printer = [{ $_printer << ::mnemo::regionName($_self) }];
}

// Integer lists in brackets, `[1, 2, 3]` (the default spelling has none,
// which struct(params) could not tell from the next parameter).
def Mnemo_IntegerListParameter : ArrayRefParameter<"int64_t"> {
  let parser = [{ ::mnemo::parseIntegerList($_parser) }];
  let printer = [{ ::mnemo::printIntegerList($_printer, $_self) }];
}
def Mnemo_OptionalIntegerListParameter : OptionalArrayRefParameter<"int64_t"> {
  let parser = [{ ::mnemo::parseIntegerList($_parser) }];
  let printer = [{ ::mnemo::printIntegerList($_printer, $_self) }];
}
// A flag, `true` or `false`; struct(params) leaves it out when false.
def Mnemo_FlagParameter : DefaultValuedParameter<"bool", "false"> {
  let parser = [{ ::mnemo::parseFlag($_parser) }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
}

def Mnemo_SlotAttr : Mnemo_Attr<"Slot", "slot"> {
  let summary = "where a step argument lives: a persistent region and an offset";
  let description = [{
    On each argument of a planned step function: the region (`parameters`
    for parameters and buffers, `optimizer_state`, `inputs` for the batch
    and the step counters) and the byte offset in it, 256-aligned.

    ```mlir
    %arg0: tensor<32x16xf32> {mnemo.slot = #mnemo.slot<parameters, 2048>}
    ```
  }];
  let parameters = (ins Mnemo_MemoryRegionParameter:$region, "int64_t":$offset);
  let assemblyFormat = "`<` $region `,` $offset `>`";
  let genVerifyDecl = 1;
}

def Mnemo_PlacementAttr : Mnemo_Attr<"Placement", "placement"> {
  let summary = "where an op's results live in the plan";
  let description = [{
    On each op of a planned step function, one entry per result:
    `offsets`, its byte offset in the arena (-1: not in the arena: a splat
    constant, a fused value, a result written into an argument or into the
    gradient region) and `sizes`, its bytes. `aliases` (when any result has
    one) names the argument a result is written into (-1: none);
    `gradient_offsets` (when any) places a parameter gradient in the
    gradient region; `strided_view` marks a transpose that the backends read
    through strides instead of copying; `channel_blocked` marks a 4-d f32
    activation that the CPU stores in blocks of channels (nChw16c or
    nChw8c, the block chosen at run time for the CPU's convolutions;
    passes/ChannelLayout.cpp), read and written only by ops that take that
    layout. The CUDA backend keeps every tensor plain.

    ```mlir
    %5 = mnemo.relu %4 {mnemo.placement = #mnemo.placement<offsets = [1024], sizes = [1024]>} : tensor<16x16xf32>
    ```
  }];
  let parameters = (ins Mnemo_IntegerListParameter:$offsets,
                        Mnemo_IntegerListParameter:$sizes,
                        Mnemo_OptionalIntegerListParameter:$aliases,
                        Mnemo_OptionalIntegerListParameter:$gradient_offsets,
                        Mnemo_FlagParameter:$strided_view,
                        Mnemo_FlagParameter:$channel_blocked);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Mnemo_StepPlanAttr : Mnemo_Attr<"StepPlan", "step_plan"> {
  let summary = "the sizes of a planned step's regions, and how it was planned";
  let description = [{
    On each planned step function: the arena (`arena_bytes`, at least
    `lower_bound_bytes`, the most bytes live at once, against `naive_bytes`
    for every tensor in its own buffer), the persistent gradient region
    (`gradient_bytes`, 0 with transient gradients), the kernels' workspace on
    the CPU and on CUDA, which planner's plan was kept, and the device whose
    memory the report's peak counts.
  }];
  let parameters = (ins "int64_t":$arena_bytes, "int64_t":$lower_bound_bytes,
                        "int64_t":$naive_bytes, "int64_t":$gradient_bytes,
                        "int64_t":$workspace_bytes,
                        "int64_t":$cuda_workspace_bytes,
                        StringRefParameter<"which planner's plan was kept">:$planner,
                        StringRefParameter<"cpu or cuda">:$budget_device);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Mnemo_RematAttr : Mnemo_Attr<"Remat", "remat"> {
  let summary = "what rematerialization recomputed, and for which budget";
  let description = [{
    On @train_step after the remat pass: the strategy, the ops recomputed
    (each marked `mnemo.recomputed`) and their FLOPs next to the step's; under
    a budget (`memory_budget`, bytes; 0: none) also how --remat=optimal's
    solver ended and `peak_bytes`, the peak remat tuned its choice for (the
    pipeline's planning tail on the chosen set), which the report's peak
    equals.
  }];
  let parameters = (ins StringRefParameter<"none, all, sqrt, auto or optimal">:$strategy,
                        "int64_t":$recomputed_ops, "int64_t":$recomputed_flops,
                        "int64_t":$step_flops,
                        DefaultValuedParameter<"int64_t", "0">:$memory_budget,
                        DefaultValuedParameter<"int64_t", "0">:$peak_bytes,
                        StringRefParameter<"the MILP solver's outcome", "\"\"">:$solver);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Mnemo_GradientBucketsAttr : Mnemo_Attr<"GradientBuckets", "gradient_buckets"> {
  let summary = "a data-parallel step's gradient buckets";
  let description = [{
    On @train_step when it was planned for `world_size` >= 1 ranks
    (mnemoc --world-size): the buckets of the gradient region that the ranks
    sum in one collective each, as byte `offsets` and `sizes`, in the order
    the step makes them ready. Each op where buckets become ready or are
    first read carries a #mnemo.gradient_sync. With the optimizer state
    sharded (ZeRO-1, mnemoc --shard-optimizer), `shard_bytes` is the part of
    the (padded) gradient region each rank owns: rank r updates the
    parameter elements whose gradients lie in [r * shard_bytes, (r + 1) *
    shard_bytes) and keeps their `state_tensors` optimizer states (Adam's
    exp_avg and exp_avg_sq: 2), each a copy of its part's layout.
    ```mlir
    func.func @train_step(...) attributes {mnemo.gradient_buckets = #mnemo.gradient_buckets<world_size = 2, offsets = [0, 4096], sizes = [4096, 512], shard_bytes = 2304, state_tensors = 2>}
    ```
  }];
  let parameters = (ins "int64_t":$world_size,
                        Mnemo_IntegerListParameter:$offsets,
                        Mnemo_IntegerListParameter:$sizes,
                        DefaultValuedParameter<"int64_t", "0">:$shard_bytes,
                        DefaultValuedParameter<"int64_t", "0">:$state_tensors);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Mnemo_GradientSyncAttr : Mnemo_Attr<"GradientSync", "gradient_sync"> {
  let summary = "where a data-parallel step starts and awaits gradient sums";
  let description = [{
    On an op of a data-parallel @train_step: the buckets (indices into
    #mnemo.gradient_buckets) whose gradients are all final once the op has
    run (`ready`: their sums over the ranks start after it), and those it is
    the first to read (`await`: their sums must have finished before it).
    ```mlir
    %7 = mnemo.adam_update ... {mnemo.gradient_sync = #mnemo.gradient_sync<ready = [], await = [0]>}
    ```
  }];
  let parameters = (ins Mnemo_IntegerListParameter:$ready,
                        Mnemo_IntegerListParameter:$await);
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif // MNEMO_ATTRS_TD
