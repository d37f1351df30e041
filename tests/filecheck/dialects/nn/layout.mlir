// RUN: fusec %s -p "" | filecheck %s --enable-var-scope
// RUN: fusec %s -p "" --print-op-generic | fusec - -p "" | filecheck %s --enable-var-scope

// CHECK-LABEL: func.func @reshape_broadcast_transpose
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>, %[[R:[^:]*]]: tensor<8xf32>, %[[S:[^:]*]]: tensor<f32>)
func.func @reshape_broadcast_transpose(%x: tensor<4x8xf32>, %r: tensor<8xf32>, %s: tensor<f32>) -> (tensor<8x4x2xf32>, tensor<3x4x8xf32>, tensor<2x2xf32>, tensor<1xf32>) {
  // CHECK-NEXT: %[[RS:.*]] = nn.reshape %[[X]] : (tensor<4x8xf32>) -> tensor<2x4x4xf32>
  // CHECK-NEXT: %[[T:.*]] = nn.transpose %[[RS]] {perm = [2, 1, 0]} : (tensor<2x4x4xf32>) -> tensor<4x4x2xf32>
  // CHECK-NEXT: %[[T2:.*]] = nn.transpose %[[X]] {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  // CHECK-NEXT: %[[B3:.*]] = nn.broadcast_to %[[T2]] : (tensor<8x4xf32>) -> tensor<2x8x4xf32>
  // CHECK-NEXT: %[[T3:.*]] = nn.transpose %[[B3]] {perm = [1, 2, 0]} : (tensor<2x8x4xf32>) -> tensor<8x4x2xf32>
  // CHECK-NEXT: %[[BR:.*]] = nn.broadcast_to %[[R]] : (tensor<8xf32>) -> tensor<3x4x8xf32>
  // CHECK-NEXT: %[[BS:.*]] = nn.broadcast_to %[[S]] : (tensor<f32>) -> tensor<2x2xf32>
  // CHECK-NEXT: %[[R1:.*]] = nn.reshape %[[S]] : (tensor<f32>) -> tensor<1xf32>
  // CHECK-NEXT: func.return %[[T3]], %[[BR]], %[[BS]], %[[R1]]
  %rs = nn.reshape %x : (tensor<4x8xf32>) -> tensor<2x4x4xf32>
  %t = nn.transpose %rs {perm = [2, 1, 0]} : (tensor<2x4x4xf32>) -> tensor<4x4x2xf32>
  %t2 = nn.transpose %x {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %b3 = nn.broadcast_to %t2 : (tensor<8x4xf32>) -> tensor<2x8x4xf32>
  %t3 = nn.transpose %b3 {perm = [1, 2, 0]} : (tensor<2x8x4xf32>) -> tensor<8x4x2xf32>
  %br = nn.broadcast_to %r : (tensor<8xf32>) -> tensor<3x4x8xf32>
  %bs = nn.broadcast_to %s : (tensor<f32>) -> tensor<2x2xf32>
  %r1 = nn.reshape %s : (tensor<f32>) -> tensor<1xf32>
  func.return %t3, %br, %bs, %r1 : tensor<8x4x2xf32>, tensor<3x4x8xf32>, tensor<2x2xf32>, tensor<1xf32>
}

// slice: strides default to 1 (omitted), explicit strides kept, empty and
// full slices allowed.

// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>)
func.func @slice(%x: tensor<4x8xf32>) -> (tensor<2x8xf32>, tensor<4x3xf32>, tensor<0x8xf32>, tensor<4x8xf32>) {
  // CHECK-NEXT: %[[S0:.*]] = nn.slice %[[X]] {starts = [1, 0], limits = [3, 8]} : (tensor<4x8xf32>) -> tensor<2x8xf32>
  // CHECK-NEXT: %[[S1:.*]] = nn.slice %[[X]] {starts = [0, 2], limits = [4, 8], strides = [1, 2]} : (tensor<4x8xf32>) -> tensor<4x3xf32>
  // CHECK-NEXT: %[[S2:.*]] = nn.slice %[[X]] {starts = [2, 0], limits = [2, 8]} : (tensor<4x8xf32>) -> tensor<0x8xf32>
  // CHECK-NEXT: %[[S3:.*]] = nn.slice %[[X]] {starts = [0, 0], limits = [4, 8], strides = [1, 1]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: func.return %[[S0]], %[[S1]], %[[S2]], %[[S3]]
  %s0 = nn.slice %x {starts = [1, 0], limits = [3, 8]} : (tensor<4x8xf32>) -> tensor<2x8xf32>
  %s1 = nn.slice %x {starts = [0, 2], limits = [4, 8], strides = [1, 2]} : (tensor<4x8xf32>) -> tensor<4x3xf32>
  %s2 = nn.slice %x {starts = [2, 0], limits = [2, 8]} : (tensor<4x8xf32>) -> tensor<0x8xf32>
  %s3 = nn.slice %x {starts = [0, 0], limits = [4, 8], strides = [1, 1]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %s0, %s1, %s2, %s3 : tensor<2x8xf32>, tensor<4x3xf32>, tensor<0x8xf32>, tensor<4x8xf32>
}

// concat is variadic: one, two or three operands, in order; a negative axis
// counts from the end; axis 0 is the default.

// CHECK-LABEL: func.func @concat
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4x2xf32>, %[[B:[^:]*]]: tensor<4x3xf32>, %[[C:[^:]*]]: tensor<1x2xf32>, %[[M:[^:]*]]: tensor<2xi1>)
func.func @concat(%a: tensor<4x2xf32>, %b: tensor<4x3xf32>, %c: tensor<1x2xf32>, %m: tensor<2xi1>) -> (tensor<4x2xf32>, tensor<4x7xf32>, tensor<9x2xf32>, tensor<4xi1>) {
  // CHECK-NEXT: %[[ONE:.*]] = nn.concat %[[A]] : (tensor<4x2xf32>) -> tensor<4x2xf32>
  // CHECK-NEXT: %[[TWO:.*]] = nn.concat %[[A]], %[[B]], %[[A]] {axis = -1} : (tensor<4x2xf32>, tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x7xf32>
  // CHECK-NEXT: %[[ROWS:.*]] = nn.concat %[[A]], %[[C]], %[[A]] {axis = 0} : (tensor<4x2xf32>, tensor<1x2xf32>, tensor<4x2xf32>) -> tensor<9x2xf32>
  // CHECK-NEXT: %[[MASKS:.*]] = nn.concat %[[M]], %[[M]] : (tensor<2xi1>, tensor<2xi1>) -> tensor<4xi1>
  // CHECK-NEXT: func.return %[[ONE]], %[[TWO]], %[[ROWS]], %[[MASKS]]
  %one = nn.concat %a : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %two = nn.concat %a, %b, %a {axis = -1} : (tensor<4x2xf32>, tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x7xf32>
  %rows = nn.concat %a, %c, %a {axis = 0} : (tensor<4x2xf32>, tensor<1x2xf32>, tensor<4x2xf32>) -> tensor<9x2xf32>
  %masks = nn.concat %m, %m : (tensor<2xi1>, tensor<2xi1>) -> tensor<4xi1>
  func.return %one, %two, %rows, %masks : tensor<4x2xf32>, tensor<4x7xf32>, tensor<9x2xf32>, tensor<4xi1>
}

// gather: i64 or i32 indices of any rank; axis 0 by default.

// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[T:[^:]*]]: tensor<100x16xf32>, %[[I:[^:]*]]: tensor<2x5xi64>, %[[J:[^:]*]]: tensor<3xi32>)
func.func @gather(%t: tensor<100x16xf32>, %i: tensor<2x5xi64>, %j: tensor<3xi32>) -> (tensor<2x5x16xf32>, tensor<100x3xf32>) {
  // CHECK-NEXT: %[[ROWS:.*]] = nn.gather %[[T]], %[[I]] : (tensor<100x16xf32>, tensor<2x5xi64>) -> tensor<2x5x16xf32>
  // CHECK-NEXT: %[[COLS:.*]] = nn.gather %[[T]], %[[J]] {axis = -1} : (tensor<100x16xf32>, tensor<3xi32>) -> tensor<100x3xf32>
  // CHECK-NEXT: func.return %[[ROWS]], %[[COLS]]
  %rows = nn.gather %t, %i : (tensor<100x16xf32>, tensor<2x5xi64>) -> tensor<2x5x16xf32>
  %cols = nn.gather %t, %j {axis = -1} : (tensor<100x16xf32>, tensor<3xi32>) -> tensor<100x3xf32>
  func.return %rows, %cols : tensor<2x5x16xf32>, tensor<100x3xf32>
}
