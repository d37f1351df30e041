// RUN: fusec %s -p 'decompose,form-fusion-groups{target="h200" gemm="library"},group-each-op,tile-and-promote{gemm="library"}' 2>/dev/null | filecheck %s
// RUN: fusec %s -p 'decompose,form-fusion-groups{target="h200" gemm="library"},group-each-op,tile-and-promote{gemm="library"}' --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec %s -p 'decompose,form-fusion-groups{target="h200" gemm="library" library-epilogue=false},group-each-op,tile-and-promote{gemm="library" library-epilogue=false}' 2>&1 | filecheck %s --check-prefix=OFF

// The bias add, residual add and tanh GELU after a library GEMM run in its
// cuBLASLt call; the multiply after the activation stays a pointwise kernel.
// REMARK: remark: group g0: the library call computes nn.add (bias), nn.add (residual), nn.gelu (gelu_tanh) (cuBLASLt epilogue)
// CHECK: fusion.group
// CHECK-SAME: gemm = "library"
// CHECK: nn.matmul
// CHECK-NEXT: nn.add
// CHECK-NEXT: nn.add
// CHECK-NEXT: nn.gelu
// CHECK-NEXT: fusion.yield
// CHECK: fusion.group
// CHECK-SAME: kind = "pointwise"
// CHECK-NOT: nn.add
// CHECK: nn.mul
// OFF: fusion.group
// OFF-SAME: gemm = "library"
// OFF: nn.matmul
// OFF-NEXT: fusion.yield
// OFF: kind = "pointwise"
// OFF: nn.add
// OFF: nn.add
// OFF: nn.gelu
// OFF: nn.mul
func.func @block(%x: tensor<64x32xf16>, %w: tensor<32x48xf16>, %b: tensor<48xf16>, %r: tensor<64x48xf16>) -> tensor<64x48xf16> {
  %m = nn.matmul %x, %w : (tensor<64x32xf16>, tensor<32x48xf16>) -> tensor<64x48xf16>
  %s = nn.add %m, %b : (tensor<64x48xf16>, tensor<48xf16>) -> tensor<64x48xf16>
  %t = nn.add %s, %r : (tensor<64x48xf16>, tensor<64x48xf16>) -> tensor<64x48xf16>
  %g = nn.gelu %t {approximate = "tanh"} : tensor<64x48xf16>
  %y = nn.mul %g, %g : (tensor<64x48xf16>, tensor<64x48xf16>) -> tensor<64x48xf16>
  func.return %y : tensor<64x48xf16>
}
