// Winograd F(4x4, 3x3) convolution on the CPU for sampan.jit.winograd (built on first use by
// torch.utils.cpp_extension; see conv3x3_f4 there). Tiles of 6x6 inputs give 4x4 outputs: the input and output
// tile transforms (additions and small constant products, Lavin & Gray's B^T and A^T) run here, eight channels at
// a time so that the compiler vectorises them (AVX2); the 36 matrix products in between are one at::bmm.
#include <ATen/ATen.h>
#include <torch/library.h>
#include <ATen/Parallel.h>

#include <algorithm>

namespace {
constexpr int CB = 8;  // channels per vector (AVX2: 8 floats)

// B^T d for F(4x4, 3x3): six inputs, six outputs, CB channels each
inline void bt_rows(const float* d0, const float* d1, const float* d2, const float* d3, const float* d4,
               const float* d5, float (*r)[CB]) {
  for (int c = 0; c < CB; ++c) {
    r[0][c] = 4.f * d0[c] - 5.f * d2[c] + d4[c];
    r[1][c] = -4.f * (d1[c] + d2[c]) + d3[c] + d4[c];
    r[2][c] = 4.f * (d1[c] - d2[c]) - d3[c] + d4[c];
    r[3][c] = 2.f * (d3[c] - d1[c]) - d2[c] + d4[c];
    r[4][c] = 2.f * (d1[c] - d3[c]) - d2[c] + d4[c];
    r[5][c] = 4.f * d1[c] - 5.f * d3[c] + d5[c];
  }
}

// A^T m: six inputs, four outputs
inline void at_rows(const float* m0, const float* m1, const float* m2, const float* m3, const float* m4,
               const float* m5, float (*o)[CB]) {
  for (int c = 0; c < CB; ++c) {
    float s12 = m1[c] + m2[c], d12 = m1[c] - m2[c], s34 = m3[c] + m4[c], d34 = m3[c] - m4[c];
    o[0][c] = m0[c] + s12 + s34;
    o[1][c] = d12 + 2.f * d34;
    o[2][c] = s12 + 4.f * s34;
    o[3][c] = d12 + 8.f * d34 + m5[c];
  }
}
}  // namespace

// x: [N, H, W, C] contiguous, C % 8 == 0 -> V: [36, t1 - t0, C] for tiles t0..t1 of the N*th*tw
at::Tensor input_transform(const at::Tensor& x, int64_t pad, int64_t th, int64_t tw, int64_t t0, int64_t t1) {
  const int64_t H = x.size(1), W = x.size(2), C = x.size(3), T = t1 - t0;
  auto v = at::empty({36, T, C}, x.options());
  const float* xp = x.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  at::parallel_for(0, T, 1, [&](int64_t begin, int64_t end) {
    alignas(32) float zero[CB] = {0};
    alignas(32) float rows[6][6][CB];
    alignas(32) float out[6][CB];
    const float* d[6][6];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t g = t0 + t, n = g / (th * tw), ty = (g / tw) % th, tx = g % tw;
      const int64_t y0 = ty * 4 - pad, x0 = tx * 4 - pad;
      for (int64_t cb = 0; cb < C; cb += CB) {
        for (int i = 0; i < 6; ++i)
          for (int j = 0; j < 6; ++j) {
            const int64_t yy = y0 + i, xx = x0 + j;
            d[i][j] = (yy >= 0 && yy < H && xx >= 0 && xx < W) ? xp + ((n * H + yy) * W + xx) * C + cb : zero;
          }
        for (int i = 0; i < 6; ++i)  // along each row: rows[i][q] = (d[i] B)[q]
          bt_rows(d[i][0], d[i][1], d[i][2], d[i][3], d[i][4], d[i][5], rows[i]);
        for (int q = 0; q < 6; ++q) {  // along each column: B^T (rows)[., q]
          bt_rows(rows[0][q], rows[1][q], rows[2][q], rows[3][q], rows[4][q], rows[5][q], out);
          for (int p = 0; p < 6; ++p) {
            float* dst = vp + ((p * 6 + q) * T + t) * C + cb;
            for (int c = 0; c < CB; ++c) dst[c] = out[p][c];
          }
        }
      }
    }
  });
  return v;
}

// m: [36, T, K] for tiles t0..t0+T, bias: [K] or empty -> their outputs in y: [N, Ho, Wo, K]
void output_transform(const at::Tensor& m, const at::Tensor& bias, at::Tensor& y, int64_t th, int64_t tw,
                      int64_t t0) {
  const int64_t T = m.size(1), K = m.size(2), Ho = y.size(1), Wo = y.size(2);
  const float* mp = m.data_ptr<float>();
  const float* bp = bias.numel() ? bias.data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, T, 1, [&](int64_t begin, int64_t end) {
    alignas(32) float rows[6][4][CB];
    alignas(32) float out[4][CB];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t g = t0 + t, n = g / (th * tw), ty = (g / tw) % th, tx = g % tw;
      for (int64_t kb = 0; kb < K; kb += CB) {
        const float* s[36];
        for (int e = 0; e < 36; ++e) s[e] = mp + (e * T + t) * K + kb;
        for (int p = 0; p < 6; ++p)  // along each row: (m A)[p]
          at_rows(s[p * 6], s[p * 6 + 1], s[p * 6 + 2], s[p * 6 + 3], s[p * 6 + 4], s[p * 6 + 5], rows[p]);
        for (int q = 0; q < 4; ++q) {
          at_rows(rows[0][q], rows[1][q], rows[2][q], rows[3][q], rows[4][q], rows[5][q], out);
          const int64_t xx = tx * 4 + q;
          if (xx >= Wo) continue;
          for (int p = 0; p < 4; ++p) {
            const int64_t yy = ty * 4 + p;
            if (yy >= Ho) continue;
            float* dst = yp + ((n * Ho + yy) * Wo + xx) * K + kb;
            if (bp) for (int c = 0; c < CB; ++c) dst[c] = out[p][c] + bp[kb + c];
            else for (int c = 0; c < CB; ++c) dst[c] = out[p][c];
          }
        }
      }
    }
  });
}

// x: [N, C, H, W] (any strides), u: [36, C, K] (G g G^T), bias: [K] or empty -> [N, K, Ho, Wo] channels-last
at::Tensor conv3x3_f4(const at::Tensor& x, const at::Tensor& u, const at::Tensor& bias, int64_t pad) {
  TORCH_CHECK(x.dim() == 4 && x.scalar_type() == at::kFloat && x.device().is_cpu(),
              "conv3x3_f4: x must be a float32 CPU tensor [N, C, H, W], got ", x.sizes(), " ", x.scalar_type());
  TORCH_CHECK(u.dim() == 3 && u.size(0) == 36 && u.size(1) == x.size(1) && u.scalar_type() == at::kFloat,
              "conv3x3_f4: u must be the transformed weights [36, C, K] with C = ", x.size(1), ", got ", u.sizes());
  TORCH_CHECK(x.size(1) % 8 == 0 && u.size(2) % 8 == 0, "conv3x3_f4: channels must be multiples of 8, got C = ",
              x.size(1), ", K = ", u.size(2));
  TORCH_CHECK(bias.numel() == 0 || bias.numel() == u.size(2), "conv3x3_f4: bias must be empty or [K]");
  TORCH_CHECK(pad >= 0 && pad <= 2 && x.size(2) + 2 * pad >= 3 && x.size(3) + 2 * pad >= 3,
              "conv3x3_f4: padding must be 0, 1 or 2 and leave at least a 3x3 input, got ", pad);
  const int64_t N = x.size(0), H = x.size(2), W = x.size(3), K = u.size(2);
  const int64_t Ho = H + 2 * pad - 2, Wo = W + 2 * pad - 2, th = (Ho + 3) / 4, tw = (Wo + 3) / 4;
  auto xn = x.permute({0, 2, 3, 1}).contiguous();
  auto uc = u.contiguous();
  auto b = bias.to(at::kFloat).contiguous();
  auto y = at::empty({N, Ho, Wo, K}, x.options());
  // Blocks of tiles whose transformed inputs and products (36 x tiles x channels floats each) stay in cache
  // (about 1 MB), but at least 64 tiles so that the matrix products keep the FMA units busy
  const int64_t T = N * th * tw, C = x.size(1);
  const int64_t per_tile = 36 * std::max(C, K) * int64_t{sizeof(float)};
  const int64_t block = std::max<int64_t>(64, (int64_t{1} << 20) / per_tile);
  for (int64_t t0 = 0; t0 < T; t0 += block) {
    const int64_t t1 = std::min(T, t0 + block);
    auto m = at::bmm(input_transform(xn, pad, th, tw, t0, t1), uc);
    output_transform(m, b, y, th, tw, t0);
  }
  return y.permute({0, 3, 1, 2});
}

TORCH_LIBRARY(sampan_winograd, lib) {
  lib.def("conv3x3_f4(Tensor x, Tensor u, Tensor bias, int pad) -> Tensor");
}
TORCH_LIBRARY_IMPL(sampan_winograd, CPU, lib) {
  lib.impl("conv3x3_f4", &conv3x3_f4);
}
