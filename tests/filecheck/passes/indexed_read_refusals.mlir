// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups --remarks 2>&1 >/dev/null | filecheck %s

// A concat or gather is read in place by the kernel consuming it only over
// operands read from memory (group inputs, slices and reshapes of them), or,
// for a concat, values the kernel computes for it alone (concat_fusion.mlir);
// each refusal is a `missed:` remark saying why.

// CHECK: missed: nn.concat (%c) not fused into group g0: nn.concat would read nn.exp, a value the same kernel also needs outside the concat's operands (a result, or read by another op); a kernel evaluates a concat's computed operands only under the concat's select, at the shape of their piece
func.func @computed_operand_read_elsewhere(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> (tensor<3x8xf32>, tensor<3x4xf32>) {
  %e = nn.exp %x : tensor<3x4xf32>
  %c = nn.concat %e, %y {axis = 1} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x8xf32>
  %r = nn.relu %c : tensor<3x8xf32>
  %n = nn.neg %e : tensor<3x4xf32>
  func.return %r, %n : tensor<3x8xf32>, tensor<3x4xf32>
}

// -----

// CHECK: missed: nn.transpose (%t) not fused into group g0: nn.concat would read nn.transpose, a value the same kernel computes; a kernel reads an nn.concat in place only over operands it reads from memory (group inputs, and slices and reshapes of them)
func.func @transposed_operand(%x: tensor<4x3xf32>, %y: tensor<3x4xf32>) -> tensor<3x8xf32> {
  %t = nn.transpose %x {perm = [1, 0]} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %c = nn.concat %t, %y {axis = 1} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x8xf32>
  %r = nn.relu %c : tensor<3x8xf32>
  func.return %r : tensor<3x8xf32>
}

// -----

// CHECK: missed: nn.add (%a) not fused into group g0: nn.gather would read nn.add, a value the same kernel computes
func.func @computed_table(%t: tensor<5x4xf32>, %ids: tensor<3xi64>) -> tensor<3x4xf32> {
  %a = nn.add %t, %t : (tensor<5x4xf32>, tensor<5x4xf32>) -> tensor<5x4xf32>
  %g = nn.gather %a, %ids {axis = 0} : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %r = nn.relu %g : tensor<3x4xf32>
  func.return %r : tensor<3x4xf32>
}
