func.func @VfkWJSz0(%Tr$C-vRmk6AXs: tensor<6x10x2xf32>, %t6LAAXj: tensor<2x10xf32>) -> (tensor<2x10xf32>) {
  %Y$ = nn.abs %t6LAAXj : tensor<2x10xf32>
  func.return %Y$ : tensor<2x10xf32>
}
