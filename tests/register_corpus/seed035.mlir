func.func @FVeSsb32nfNfL(%S: tensor<6x12x12xf32>) -> (tensor<6x12x12xf32>) {
  %G.XxRa5cIbYMALygbSRkwBfwn4XrP$I$XoifuU0jJX2wXhAS = nn.neg %S : tensor<6x12x12xf32>
  func.return %G.XxRa5cIbYMALygbSRkwBfwn4XrP$I$XoifuU0jJX2wXhAS : tensor<6x12x12xf32>
}
