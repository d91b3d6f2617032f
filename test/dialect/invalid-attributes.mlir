// The model's and the plan's attributes are declared: a hand-written module
// that misspells a role or gives a name, a plan or a placement the wrong
// kind fails to parse instead of misleading a pass (lang/ModelAttributes.h,
// lang/PlanAttributes.h).
// RUN: mnemo-opt %s -split-input-file -verify-diagnostics

// expected-error@+1 {{argument 0's 'mnemo.role' must be one of input, target, param, buffer, opt_state, step, total_steps}}
func.func @forward(%x: tensor<2xf32> {mnemo.role = "weights", mnemo.name = "x"}) {
  return
}

// -----

// expected-error@+1 {{argument 0's 'mnemo.name' must be a string}}
func.func @forward(%x: tensor<2xf32> {mnemo.role = "param", mnemo.name = 3 : i64}) {
  return
}

// -----

// expected-error@+1 {{argument 0's 'mnemo.init' must be a dictionary}}
func.func @forward(%x: tensor<2xf32> {mnemo.role = "param", mnemo.name = "w", mnemo.init = "zeros"}) {
  return
}

// -----

// expected-error@+1 {{result 0's 'mnemo.name' must be a string}}
func.func @forward(%x: tensor<2xf32>) -> (tensor<2xf32> {mnemo.name = 1 : i64}) {
  return %x : tensor<2xf32>
}

// -----

// expected-error@+1 {{'mnemo.precision' must be "f32", "bf16" or "f16"}}
module attributes {mnemo.precision = "fp8"} {
}

// -----

// expected-error@+1 {{'mnemo.train' must be a dictionary}}
module attributes {mnemo.train = "adam"} {
}

// -----

// expected-error@+1 {{'mnemo.role' belongs on a function's arguments}}
module attributes {mnemo.role = "param"} {
}

// -----

func.func @observed(%w: tensor<2xf32>, %lo: tensor<1xf32>, %hi: tensor<1xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{'mnemo.observer' must be a dictionary with a float 'averaging_constant'}}
  %q = "mnemo.fake_quant"(%w, %lo, %hi) {axis = -1 : i64, qmin = -128 : i64, qmax = 127 : i64, symmetric = true, mnemo.observer = {}} : (tensor<2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
  return %q : tensor<2xf32>
}

// -----

// expected-error@+1 {{argument 0's 'mnemo.slot' must be a #mnemo.slot}}
func.func @step(%x: tensor<2xf32> {mnemo.slot = 0 : i64}) {
  return
}

// -----

// expected-error@+1 {{result 0's 'mnemo.reuses_arg' must be an integer}}
func.func @step(%x: tensor<2xf32>) -> (tensor<2xf32> {mnemo.reuses_arg = "x"}) {
  return %x : tensor<2xf32>
}

// -----

// A data-parallel step's buckets hold f32 values, for one or more ranks.
// expected-error@+1 {{gradient buckets are for 1 or more ranks, not 0}}
func.func @train_step() attributes {mnemo.gradient_buckets = #mnemo.gradient_buckets<world_size = 0, offsets = [0], sizes = [256]>} {
  return
}

// -----

// expected-error@+1 {{a gradient bucket holds f32 values at a non-negative offset}}
func.func @train_step() attributes {mnemo.gradient_buckets = #mnemo.gradient_buckets<world_size = 2, offsets = [0], sizes = [6]>} {
  return
}

// -----

// A sync point names buckets of its step.
func.func @train_step() attributes {mnemo.gradient_buckets = #mnemo.gradient_buckets<world_size = 2, offsets = [0], sizes = [256]>} {
  // expected-error@+1 {{gradient bucket 1 is not one of its step's 1}}
  return {mnemo.gradient_sync = #mnemo.gradient_sync<ready = [], await = [1]>}
}

// -----

func.func @train_step(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{duplicate or unknown struct parameter name: strided}}
  %0 = mnemo.relu %a {mnemo.placement = #mnemo.placement<offsets = [0], sizes = [16], strided = true>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @train_step(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+2 {{expected 'false' or 'true'}}
  // expected-error@+1 {{failed to parse Mnemo_PlacementAttr parameter 'channel_blocked'}}
  %0 = mnemo.relu %a {mnemo.placement = #mnemo.placement<offsets = [0], sizes = [16], channel_blocked = 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @train_step(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{has 1 offsets and 2 sizes}}
  %0 = mnemo.relu %a {mnemo.placement = #mnemo.placement<offsets = [0], sizes = [16, 16]>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
