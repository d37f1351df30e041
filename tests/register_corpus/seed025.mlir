func.func @"73sQfKO-nJSaq23CU_9yCvk._xQL70GfYaGjwAX8qqfrDbaXb$VWGCjvO2DRrdt"(%kZCjTJ: tensor<1x3x3xf16>, %_0BsYBt: tensor<f16>) -> (tensor<f16>) {
  %sS6KJHtPSNkeotFA4mrVvSO = nn.gelu %_0BsYBt {approximate = "none"} : tensor<f16>
  %ag8qIJyfe9MbuPMYFMbz24PtUmUK3iqfz9bFLo3UX6bfbB = nn.tanh %sS6KJHtPSNkeotFA4mrVvSO : tensor<f16>
  func.return %ag8qIJyfe9MbuPMYFMbz24PtUmUK3iqfz9bFLo3UX6bfbB : tensor<f16>
}
