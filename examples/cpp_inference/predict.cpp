// Loads an AOTInductor package written by `sampan.jit.save(..., format="aoti")` and prints predictions.
//
//   ./predict MODEL.aoti.pt2 INPUT.f32 DIM0 DIM1 ...
//
// INPUT.f32 holds the input tensor as raw little-endian float32 values (numpy: x.astype("float32").tofile(path)),
// DIM0 DIM1 ... its shape. For every row of the first output it prints
//   row <i> class <argmax> logits <v0> <v1> ...
// with 9 significant digits, so a script can compare them with Python's.
// Only the headers it uses (ATen/core/Tensor.h, not all of ATen/ATen.h): the build takes ~6 CPU-seconds
// instead of ~15.
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0] << " MODEL.aoti.pt2 INPUT.f32 DIM0 [DIM1 ...]\n";
    return 2;
  }
  std::vector<int64_t> shape;
  int64_t numel = 1;
  for (int i = 3; i < argc; ++i) {
    shape.push_back(std::stoll(argv[i]));
    numel *= shape.back();
  }
  std::vector<float> data(numel);
  std::ifstream in(argv[2], std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(data.data()), numel * sizeof(float))) {
    std::cerr << "error: " << argv[2] << " holds fewer than " << numel << " float32 values\n";
    return 1;
  }
  at::Tensor input = at::from_blob(data.data(), shape, at::kFloat).clone();

  try {
    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    std::vector<at::Tensor> outputs = loader.run({input});
    at::Tensor logits = outputs.at(0).contiguous().to(at::kFloat).reshape({shape[0], -1});
    at::Tensor classes = logits.argmax(1);
    for (int64_t row = 0; row < logits.size(0); ++row) {
      std::printf("row %lld class %lld logits", static_cast<long long>(row),
                  static_cast<long long>(classes[row].item<int64_t>()));
      for (int64_t j = 0; j < logits.size(1); ++j) std::printf(" %.9g", logits[row][j].item<float>());
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
