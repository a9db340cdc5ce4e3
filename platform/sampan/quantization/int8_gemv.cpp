// One-row int8 Linear on the CPU for sampan.quantization.gemv (built on first use by torch.utils.cpp_extension).
//
//   y[n] = scale[n] * sum_k x[k] * w[n, k] + bias[n]   (then max(y, 0) when relu)
//
// x float32, w int8 [N, K] with one float scale per output row: the weight-only int8 Linear of quantize_dynamic. At
// batch 1 a Linear reads every weight once, so int8 weights (a quarter of fp32's bytes) could make it 4x faster, if
// the arithmetic keeps up. Converting each weight to float costs three vector instructions per eight weights (sign
// extension twice, conversion) before the multiply-add; instead x is rounded to int16 (steps of max|x| / 16383,
// relative error below 3e-5 of max|x|, against the int8 weights' 4e-3) and vpmaddwd multiplies 16 sign-extended
// weights by 16 x values and adds the pairs, into int32 sums: three instructions per 16 weights (AVX2, four output
// rows at a time so that the x loads are shared). A row with NaN, infinity or only values below 1e-34 is computed in
// float instead, so that it comes out as the reference's does.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace {
// x rounded to int16 steps of max|x| / 16383: a pair of products in vpmaddwd is at most 2 * 16383 * 128, and CHUNK
// of them per int32 lane stay below 2^31; the sums are turned into float after each CHUNK
constexpr float XMAX = 16383.f;
constexpr int64_t CHUNK = 8192;  // k per chunk: 512 vpmaddwd results per lane, 512 * 4.2e6 < 2^31

inline __m256i w16(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// sum_k xq[k] * w[n, k] for rows n0 .. n0 + R - 1 over k in [k0, k1) (multiples of 16), added to out[0 .. R)
template <int R>
inline void dot(const int16_t* xq, const int8_t* w, int64_t K, int64_t n0, int64_t k0, int64_t k1, float* out) {
  __m256i acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
  for (int64_t k = k0; k < k1; k += 16) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k));
    for (int r = 0; r < R; ++r) acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(xv, w16(w + (n0 + r) * K + k)));
  }
  for (int r = 0; r < R; ++r) out[r] += float(hsum(acc[r]));
}

// the scale, the bias and the ReLU of one output
inline float epilogue(float sum, float scale, float bias, bool relu) {
  const float v = sum * scale + bias;
  return relu && v < 0.f ? 0.f : v;
}

template <int R>
inline void outputs(const float* x, const int16_t* xq, float sx, const int8_t* w, const float* scale,
                    const float* bias, float* y, int64_t K, int64_t n0, bool relu) {
  float sums[R] = {};
  const int64_t K16 = K & ~int64_t{15};
  for (int64_t k0 = 0; k0 < K16; k0 += CHUNK) dot<R>(xq, w, K, n0, k0, std::min(K16, k0 + CHUNK), sums);
  for (int r = 0; r < R; ++r) {
    const int8_t* wn = w + (n0 + r) * K;
    float tail = 0.f;  // the last K % 16 products, in float
    for (int64_t k = K16; k < K; ++k) tail += x[k] * float(wn[k]);
    y[n0 + r] = epilogue(sums[r] * sx + tail, scale[n0 + r], bias[n0 + r], relu);
  }
}
}  // namespace

at::Tensor linear_w8(const at::Tensor& x, const at::Tensor& w, const at::Tensor& scale,
                        const c10::optional<at::Tensor>& bias, bool relu) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kChar,
              "linear_w8: w must be an int8 [out_features, in_features] matrix, got ", w.scalar_type(), " ",
              w.sizes());
  const int64_t N = w.size(0), K = w.size(1);
  TORCH_CHECK(x.scalar_type() == at::kFloat, "linear_w8: x must be float32, got ", x.scalar_type());
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == K, "linear_w8: x's last dimension must be in_features = ", K,
              ", got x of shape ", x.sizes());
  TORCH_CHECK(scale.numel() == N, "linear_w8: scale must hold one value per output row (", N, "), got ",
              scale.numel());
  TORCH_CHECK(!bias.has_value() || bias->numel() == N, "linear_w8: bias must hold ", N, " values, got ",
              bias.has_value() ? bias->numel() : 0);
  TORCH_CHECK(x.device().is_cpu() && w.device().is_cpu(), "linear_w8 runs on the CPU");
  const auto xc = x.contiguous();
  const auto wc = w.contiguous();
  const auto sc = scale.to(at::kFloat).reshape({-1}).contiguous();
  const auto bc = bias.has_value() ? bias->to(at::kFloat).reshape({-1}).contiguous() : at::zeros({N});
  auto sizes = x.sizes().vec();
  sizes.back() = N;
  auto y = at::empty(sizes, x.options());
  const int64_t M = N ? y.numel() / N : 0, N4 = N / 4;  // rows: from y, so that in_features = 0 gives the bias
  const float *xp = xc.data_ptr<float>(), *sp = sc.data_ptr<float>(), *bp = bc.data_ptr<float>();
  const int8_t* wp = wc.data_ptr<int8_t>();
  float* yp = y.data_ptr<float>();
  std::vector<int16_t> xq(K);
  for (int64_t m = 0; m < M; ++m) {  // rows one after another: this kernel is for one row (more go to fbgemm)
    const float* xm = xp + m * K;
    float* ym = yp + m * N;
    float amax = 0.f;
    bool finite = true;
    for (int64_t k = 0; k < K; ++k) {
      finite = finite && std::isfinite(xm[k]);
      amax = std::max(amax, std::abs(xm[k]));
    }
    const float sx = amax > 0.f ? amax / XMAX : 1.f, inv = 1.f / sx;
    if (!finite || !std::isfinite(inv)) {  // NaN, infinity or all below 1e-34: the float products, as the reference
      for (int64_t n = 0; n < N; ++n) {
        float s = 0.f;
        for (int64_t k = 0; k < K; ++k) s += xm[k] * float(wp[n * K + k]);
        ym[n] = epilogue(s, sp[n], bp[n], relu);
      }
      continue;
    }
    for (int64_t k = 0; k < K; ++k) xq[k] = static_cast<int16_t>(std::nearbyint(xm[k] * inv));
    const int16_t* q = xq.data();
    at::parallel_for(0, N4, 16, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) outputs<4>(xm, q, sx, wp, sp, bp, ym, K, 4 * b, relu);
    });
    for (int64_t n = 4 * N4; n < N; ++n) outputs<1>(xm, q, sx, wp, sp, bp, ym, K, n, relu);
  }
  return y;
}

TORCH_LIBRARY(sampan_int8, lib) {
  lib.def("linear_w8(Tensor x, Tensor w, Tensor scale, Tensor? bias, bool relu) -> Tensor");
}
TORCH_LIBRARY_IMPL(sampan_int8, CPU, lib) {
  lib.impl("linear_w8", &linear_w8);
}
