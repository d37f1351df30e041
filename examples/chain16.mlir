// A chain of 16 scalar multiply-add pairs (32 elementwise ops); an example small enough to run in seconds in numba's CUDA simulator
func.func @chain(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %0 = nn.constant dense<1.001> : tensor<f32>
  %1 = nn.constant dense<0.001> : tensor<f32>
  %2 = nn.mul %x, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %3 = nn.add %2, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %4 = nn.mul %3, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %5 = nn.add %4, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %6 = nn.mul %5, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %7 = nn.add %6, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %8 = nn.mul %7, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %9 = nn.add %8, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %10 = nn.mul %9, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %11 = nn.add %10, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %12 = nn.mul %11, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %13 = nn.add %12, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %14 = nn.mul %13, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %15 = nn.add %14, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %16 = nn.mul %15, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %17 = nn.add %16, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %18 = nn.mul %17, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %19 = nn.add %18, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %20 = nn.mul %19, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %21 = nn.add %20, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %22 = nn.mul %21, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %23 = nn.add %22, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %24 = nn.mul %23, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %25 = nn.add %24, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %26 = nn.mul %25, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %27 = nn.add %26, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %28 = nn.mul %27, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %29 = nn.add %28, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %30 = nn.mul %29, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %31 = nn.add %30, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %32 = nn.mul %31, %0 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %33 = nn.add %32, %1 : (tensor<1024xf32>, tensor<f32>) -> tensor<1024xf32>
  func.return %33 : tensor<1024xf32>
}
