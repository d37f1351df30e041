func.func @scale_shift_residual(%x: tensor<64x128x56x56xf32>, %res: tensor<64x128x56x56xf32>, %scale: tensor<128x1x1xf32>, %shift: tensor<128x1x1xf32>) -> tensor<64x128x56x56xf32> {
  %0 = nn.mul %x, %scale : (tensor<64x128x56x56xf32>, tensor<128x1x1xf32>) -> tensor<64x128x56x56xf32>
  %1 = nn.add %0, %shift : (tensor<64x128x56x56xf32>, tensor<128x1x1xf32>) -> tensor<64x128x56x56xf32>
  %2 = nn.add %1, %res : (tensor<64x128x56x56xf32>, tensor<64x128x56x56xf32>) -> tensor<64x128x56x56xf32>
  %3 = nn.relu %2 : tensor<64x128x56x56xf32>
  func.return %3 : tensor<64x128x56x56xf32>
}
