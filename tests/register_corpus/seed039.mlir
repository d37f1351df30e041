func.func @"1NI8I2:eYP\0AUQés-\\g0fDnUUH中adVu\0A 0NR97+6:A😀=\"P\\Yrwv5😀RQLfzGL$*1=q#jgCT"(%hm4: tensor<7xf32>) -> (tensor<1xf32>) {
  %qQBWZk13YoHvlFztOBxnpd18bLK4$3EjYYpD7 = nn.reduce_max %hm4 {axes = [0], keepdims = true} : (tensor<7xf32>) -> tensor<1xf32>
  %Knf_WA = nn.softmax %qQBWZk13YoHvlFztOBxnpd18bLK4$3EjYYpD7 {axis = -1} : tensor<1xf32>
  %xjN.jWUtnUnpSWQI43.F-u7nkagt2.0gJjgubRVx51FYoRYP-TFLMzB = nn.clamp %Knf_WA {min = -1.0} : tensor<1xf32>
  func.return %xjN.jWUtnUnpSWQI43.F-u7nkagt2.0gJjgubRVx51FYoRYP-TFLMzB : tensor<1xf32>
}
