// RUN: fusec %s -p "" | filecheck %s --enable-var-scope --check-prefixes=CHECK,CUSTOM
// RUN: fusec %s -p "" --print-op-generic | fusec - -p "" | filecheck %s --enable-var-scope

// nn.constant prints its value exactly: a splat as one literal, up to 16
// elements as (nested) literals, more as the hex bytes MLIR also accepts.
// Floats print as the shortest literal that reads back to the same value in
// their own type.

// CHECK-LABEL: func.func @literals
func.func @literals() -> (tensor<f32>, tensor<2x3xf32>, tensor<4xi1>, tensor<3xi32>, tensor<2x2xi64>, tensor<3xf16>, tensor<3xbf16>, tensor<2xf64>, tensor<4x8xf32>) {
  // CHECK-NEXT: %[[SCALAR:.*]] = nn.constant dense<0.5> : tensor<f32>
  // CHECK-NEXT: %[[MATRIX:.*]] = nn.constant dense<{{\[}}[1.0, -2.5, 3.0e-07], [0.1, 10000000000.0, -1.0]]> : tensor<2x3xf32>
  // CHECK-NEXT: %[[MASK:.*]] = nn.constant dense<[true, false, false, true]> : tensor<4xi1>
  // CHECK-NEXT: %[[INTS:.*]] = nn.constant dense<[1, -2, 2147483647]> : tensor<3xi32>
  // CHECK-NEXT: %[[LONGS:.*]] = nn.constant dense<{{\[}}[-9223372036854775808, 0], [1, 9223372036854775807]]> : tensor<2x2xi64>
  // CHECK-NEXT: %[[HALVES:.*]] = nn.constant dense<[0.1, 65500.0, -3.0]> : tensor<3xf16>
  // CHECK-NEXT: %[[BRAINS:.*]] = nn.constant dense<[1.000000e+00, 5.000000e-01, -2.000000e+00]> : tensor<3xbf16>
  // CHECK-NEXT: %[[DOUBLES:.*]] = nn.constant dense<[0.1, 3.141592653589793]> : tensor<2xf64>
  // CHECK-NEXT: %[[SPLAT:.*]] = nn.constant dense<-1.25> : tensor<4x8xf32>
  // CHECK-NEXT: func.return %[[SCALAR]], %[[MATRIX]], %[[MASK]], %[[INTS]], %[[LONGS]], %[[HALVES]], %[[BRAINS]], %[[DOUBLES]], %[[SPLAT]] :
  %scalar = nn.constant dense<0.5> : tensor<f32>
  %matrix = nn.constant dense<[[1.0, -2.5, 3.0e-07], [0.1, 1.0e+10, -1.0]]> : tensor<2x3xf32>
  %mask = nn.constant dense<[true, false, false, true]> : tensor<4xi1>
  %ints = nn.constant dense<[1, -2, 2147483647]> : tensor<3xi32>
  %longs = nn.constant dense<[[-9223372036854775808, 0], [1, 9223372036854775807]]> : tensor<2x2xi64>
  %halves = nn.constant dense<[0.1, 65504.0, -3.0]> : tensor<3xf16>
  %brains = nn.constant dense<[1.0, 0.5, -2.0]> : tensor<3xbf16>
  %doubles = nn.constant dense<[0.1, 3.141592653589793]> : tensor<2xf64>
  %splat = nn.constant dense<-1.25> : tensor<4x8xf32>
  func.return %scalar, %matrix, %mask, %ints, %longs, %halves, %brains, %doubles, %splat : tensor<f32>, tensor<2x3xf32>, tensor<4xi1>, tensor<3xi32>, tensor<2x2xi64>, tensor<3xf16>, tensor<3xbf16>, tensor<2xf64>, tensor<4x8xf32>
}

// More than 16 elements print as little-endian hex bytes (i1 as 0xFF/0x00
// per element); a splat stays one literal whatever its size; short hex input
// prints back as literals.

// CHECK-LABEL: func.func @hex
func.func @hex() -> (tensor<17xf32>, tensor<3x6xi64>, tensor<20xi1>, tensor<2xf32>, tensor<17xi32>) {
  // CHECK-NEXT: %[[F:.*]] = nn.constant dense<"0x000000000000803F0000004000004040000080400000A0400000C0400000E040000000410000104100002041000030410000404100005041000060410000704100008041"> : tensor<17xf32>
  // CHECK-NEXT: %[[I:.*]] = nn.constant dense<"0x00000000000000000100000000000000020000000000000003000000000000000400000000000000050000000000000006000000000000000700000000000000080000000000000009000000000000000A000000000000000B000000000000000C000000000000000D000000000000000E000000000000000F000000000000001000000000000000FFFFFFFFFFFFFFFF"> : tensor<3x6xi64>
  // CHECK-NEXT: %[[M:.*]] = nn.constant dense<"0xFF00FF00FF00FF00FF00FF00FF00FF00FF00FFFF"> : tensor<20xi1>
  // CHECK-NEXT: %[[H:.*]] = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  // CHECK-NEXT: %[[S:.*]] = nn.constant dense<7> : tensor<17xi32>
  // CHECK-NEXT: func.return %[[F]], %[[I]], %[[M]], %[[H]], %[[S]] :
  %f = nn.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]> : tensor<17xf32>
  %i = nn.constant dense<[[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11], [12, 13, 14, 15, 16, -1]]> : tensor<3x6xi64>
  %m = nn.constant dense<[true, false, true, false, true, false, true, false, true, false, true, false, true, false, true, false, true, false, true, true]> : tensor<20xi1>
  %h = nn.constant dense<"0x0000803F00000040"> : tensor<2xf32>
  %s = nn.constant dense<7> : tensor<17xi32>
  func.return %f, %i, %m, %h, %s : tensor<17xf32>, tensor<3x6xi64>, tensor<20xi1>, tensor<2xf32>, tensor<17xi32>
}

// A constant feeds ops like any value; the fusion contract sits beside it.

// CHECK-LABEL: func.func @constant_operands
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32>)
func.func @constant_operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: %[[C:.*]] = nn.constant {fusion = "never"} dense<2.0> : tensor<f32>
  // CHECK-NEXT: %[[Y:.*]] = nn.mul %[[X]], %[[C]] : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  // CHECK-NEXT: func.return %[[Y]]
  %c = nn.constant {fusion = "never"} dense<2.0> : tensor<f32>
  %y = nn.mul %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -0.0 differs from 0.0 bit for bit, so [0.0, -0.0] is not a splat. (Only
// the custom printer is checked: xDSL's generic printer folds it to a splat.)

// CUSTOM-LABEL: func.func @signed_zeros
func.func @signed_zeros() -> (tensor<2xf32>, tensor<2xf32>) {
  // CUSTOM-NEXT: %[[Z:.*]] = nn.constant dense<[0.0, -0.0]> : tensor<2xf32>
  // CUSTOM-NEXT: %[[N:.*]] = nn.constant dense<-0.0> : tensor<2xf32>
  %z = nn.constant dense<[0.0, -0.0]> : tensor<2xf32>
  %n = nn.constant dense<-0.0> : tensor<2xf32>
  func.return %z, %n : tensor<2xf32>, tensor<2xf32>
}
