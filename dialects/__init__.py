"""The dialects fusec speaks: `nn` (input tensor programs) and `fusion` (kernels)."""
