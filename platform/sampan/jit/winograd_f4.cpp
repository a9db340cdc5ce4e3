// Winograd F(4x4, 3x3) convolution on the CPU for sampan.jit.winograd (built on first use by
// torch.utils.cpp_extension; see conv3x3_f4 there). Tiles of 6x6 inputs give 4x4 outputs: the input and output
// tile transforms (additions and small constant products, Lavin & Gray's B^T and A^T) run here, eight channels at
// a time in AVX2 registers (sixteen in AVX-512 ones where the CPU has them), and so do the 36 matrix products in
// between (an AVX2 micro-kernel on weights packed in
// panels of 8 output channels: 1.2-1.45x faster than at::bmm at these thin shapes on an AMD EPYC Zen 4, whose MKL
// takes its AVX2 path; on AVX-512 CPUs, panels of 16 output channels and an AVX-512 micro-kernel, 1.2-1.4x faster
// again on an Intel Xeon with two 512-bit FMA units).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace {
constexpr int CB = 8;  // channels per vector (AVX2: 8 floats)

// The tile transforms run on GCC's generic vectors of W floats: W = 8 (AVX2) everywhere, W = 16 (AVX-512) inside
// the functions built for AVX-512 below, which inline the same templates
template <int W>
struct Lanes {
  typedef float V __attribute__((vector_size(W * sizeof(float))));
};

template <class V>
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// B^T d for F(4x4, 3x3) along one line of the tile: six inputs, six outputs, W channels each
template <class V>
inline void bt6(const V (&d)[6], V (&r)[6]) {
  r[0] = 4.f * d[0] - 5.f * d[2] + d[4];
  r[1] = -4.f * (d[1] + d[2]) + d[3] + d[4];
  r[2] = 4.f * (d[1] - d[2]) - d[3] + d[4];
  r[3] = 2.f * (d[3] - d[1]) - d[2] + d[4];
  r[4] = 2.f * (d[1] - d[3]) - d[2] + d[4];
  r[5] = 4.f * d[1] - 5.f * d[3] + d[5];
}

// A^T m along one line: six inputs, four outputs
template <class V>
inline void at4(const V (&m)[6], V (&o)[4]) {
  const V s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
  o[0] = m[0] + s12 + s34;
  o[1] = d12 + 2.f * d34;
  o[2] = s12 + 4.f * s34;
  o[3] = d12 + 8.f * d34 + m[5];
}

// out[MR x 8*NV] = a[MR x C] (rows lda apart) * the NV panels of b (panel v at b + v * C * 8, row k at k * 8):
// MR x NV accumulators stay in registers (6 x 2 = 12 of the 16 AVX2 registers) while k runs over C
template <int MR, int NV>
inline void micro(const float* __restrict a, int64_t lda, const float* __restrict b, int64_t C,
                  float* __restrict out, int64_t ldo) {
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t k = 0; k < C; ++k) {
    __m256 bk[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bk[v] = _mm256_loadu_ps(b + v * C * CB + k * CB);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r * lda + k);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(ar, bk[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + r * ldo + v * CB, acc[r][v]);
}

constexpr int ROWS = 6;  // tiles (rows) per micro-kernel call

// The same on AVX-512 (Intel CPUs with two 512-bit FMA units do twice the work per cycle): panels of 16 output
// channels, MR x NV accumulators of 16 floats in the 32 AVX-512 registers; built for AVX-512 in this AVX2 unit and
// called only where the CPU has it (products checks)
#define SAMPAN_AVX512 __attribute__((target("avx512f")))
constexpr int CB16 = 16;
// 12 x 2 accumulators + 2 panels' rows + 1 broadcast: 27 registers (8 and 14 rows were no faster)
constexpr int ROWS16 = 12;

// pf: where the next panels start (they follow these in memory), fetched into L2 while these are multiplied (one
// cache line per panel and k), or null. With few rows per call (resnet18 at batch 1) the products otherwise wait on
// memory: on an Intel Xeon, 256 channels at 16 rows with the weights out of cache took 1.13 ms without (8 GB/s of
// weights) and 0.77 ms with (12 GB/s); the AVX2 kernel gained nothing from the same there
template <int MR, int NV>
SAMPAN_AVX512 inline void micro16(const float* __restrict a, int64_t lda, const float* __restrict b, int64_t C,
                                  float* __restrict out, int64_t ldo, const float* pf) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < C; ++k) {
    __m512 bk[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bk[v] = _mm512_loadu_ps(b + v * C * CB16 + k * CB16);
    if (pf != nullptr)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v)
        _mm_prefetch(reinterpret_cast<const char*>(pf + v * C * CB16 + k * CB16), _MM_HINT_T1);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r * lda + k]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(ar, bk[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(out + r * ldo + v * CB16, acc[r][v]);
}

template <int NV, int MR = 1>
SAMPAN_AVX512 inline void tail16(int64_t n, const float* a, int64_t C, const float* b, float* out, int64_t K,
                                 const float* pf) {
  if constexpr (MR < ROWS16) {
    if (n == MR) return micro16<MR, NV>(a, C, b, C, out, K, pf);
    tail16<NV, MR + 1>(n, a, C, b, out, K, pf);
  }
}

// The T rows in blocks of at most ROWS16 rows of near-equal size (49 rows: 4 x 10 + 9, not 4 x 12 + 1, whose one-row
// block costs nearly as much as a full one; resnet18 at batch 1 3 % faster so on the Intel Xeon). pf: the next
// panels, fetched during the first block (later blocks find these in cache; fetching a part in each block instead
// was 7 % slower there)
template <int NV>
SAMPAN_AVX512 void gemm_rows16(int64_t T, const float* a, int64_t C, const float* b, float* out, int64_t K,
                               const float* pf) {
  const int64_t blocks = (T + ROWS16 - 1) / ROWS16;
  for (int64_t i = 0; i < blocks; ++i, pf = nullptr) {
    const int64_t t = T * i / blocks, n = T * (i + 1) / blocks - t;
    if (n == ROWS16)
      micro16<ROWS16, NV>(a + t * C, C, b, C, out + t * K, K, pf);
    else
      tail16<NV>(n, a + t * C, C, b, out + t * K, K, pf);
  }
}

// The same blocking in the AVX2 kernel's blocks of at most 6 rows (1-2 % faster by AVX2 emulation on the Xeon)
template <int NV>
inline void gemm_rows(int64_t T, const float* a, int64_t C, const float* b, float* out, int64_t K) {
  const int64_t blocks = (T + ROWS - 1) / ROWS;
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t t = T * i / blocks, n = T * (i + 1) / blocks - t;
    switch (n) {
      case 6: micro<6, NV>(a + t * C, C, b, C, out + t * K, K); break;
      case 5: micro<5, NV>(a + t * C, C, b, C, out + t * K, K); break;
      case 4: micro<4, NV>(a + t * C, C, b, C, out + t * K, K); break;
      case 3: micro<3, NV>(a + t * C, C, b, C, out + t * K, K); break;
      case 2: micro<2, NV>(a + t * C, C, b, C, out + t * K, K); break;
      default: micro<1, NV>(a + t * C, C, b, C, out + t * K, K); break;
    }
  }
}
}  // namespace

// v: [36, T, C], u: [36, K / P, C, P] (panels of P = 8 output channels, or 16 on AVX-512) -> m: [36, T, K] with
// m[e] = v[e] u[e]
at::Tensor products(const at::Tensor& v, const at::Tensor& u) {
  const bool wide = u.size(3) == CB16;
  const int64_t T = v.size(1), C = v.size(2), K = u.size(1) * u.size(3);
  auto m = at::empty({36, T, K}, v.options());
  const float* vp = v.data_ptr<float>();
  const float* up = u.data_ptr<float>();
  const float* u_end = up + u.numel();
  float* mp = m.data_ptr<float>();
  at::parallel_for(0, 36, 1, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const float* a = vp + e * T * C;
      const float* ue = up + e * K * C;
      float* out = mp + e * T * K;
      int64_t j = 0;  // two panels at a time: each panel's C x 8 (or 16) floats stay in L1 for all rows
      if (wide) {  // the next panels follow in memory (those of e + 1 after the last of e), up to u's end
        auto next = [&](int64_t j1, int nv) {
          const float* p = ue + j1 * C;
          return p + nv * C * CB16 <= u_end ? p : nullptr;
        };
        for (; j + 2 * CB16 <= K; j += 2 * CB16)
          gemm_rows16<2>(T, a, C, ue + j * C, out + j, K, next(j + 2 * CB16, 2));
        if (j < K) gemm_rows16<1>(T, a, C, ue + j * C, out + j, K, next(j + CB16, 1));
      } else {
        for (; j + 2 * CB <= K; j += 2 * CB) gemm_rows<2>(T, a, C, ue + j * C, out + j, K);
        if (j < K) gemm_rows<1>(T, a, C, ue + j * C, out + j, K);
      }
    }
  });
  return m;
}

// Tiles begin..end of V: [36, T, C] from x: [N, H, W, C] (tiles t0.. of the N*th*tw), W channels at a time
template <int W>
__attribute__((always_inline)) inline void input_tiles(const float* xp, float* vp, int64_t H, int64_t Wd, int64_t C,
                                                       int64_t T, int64_t pad, int64_t th, int64_t tw, int64_t t0,
                                                       int64_t begin, int64_t end) {
  using V = typename Lanes<W>::V;
  const int64_t stride = 6 * T * C;  // from V[p * 6 + q] to V[(p + 1) * 6 + q]
  alignas(64) float rows[6][6][W];
  int64_t off[6][6];  // where each input of the tile is in x, or -1 for the zero padding (once per tile)
  V d[6], r[6];
  for (int64_t t = begin; t < end; ++t) {
    const int64_t g = t0 + t, n = g / (th * tw), ty = (g / tw) % th, tx = g % tw;
    const int64_t y0 = ty * 4 - pad, x0 = tx * 4 - pad;
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) {
        const int64_t yy = y0 + i, xx = x0 + j;
        off[i][j] = (yy >= 0 && yy < H && xx >= 0 && xx < Wd) ? ((n * H + yy) * Wd + xx) * C : -1;
      }
    for (int64_t cb = 0; cb < C; cb += W) {
      for (int i = 0; i < 6; ++i) {  // along each row: rows[i][q] = (d[i] B)[q]
        for (int j = 0; j < 6; ++j) d[j] = off[i][j] >= 0 ? load<V>(xp + off[i][j] + cb) : V{};
        bt6(d, r);
        for (int q = 0; q < 6; ++q) store(rows[i][q], r[q]);
      }
      for (int q = 0; q < 6; ++q) {  // along each column: (B^T rows)[p][q] goes to V[p * 6 + q]
        for (int i = 0; i < 6; ++i) d[i] = load<V>(rows[i][q]);
        bt6(d, r);
        float* o = vp + (q * T + t) * C + cb;
        for (int p = 0; p < 6; ++p) store(o + p * stride, r[p]);
      }
    }
  }
}

SAMPAN_AVX512 void input_tiles16(const float* xp, float* vp, int64_t H, int64_t Wd, int64_t C, int64_t T, int64_t pad,
                                 int64_t th, int64_t tw, int64_t t0, int64_t begin, int64_t end) {
  input_tiles<16>(xp, vp, H, Wd, C, T, pad, th, tw, t0, begin, end);
}

// x: [N, H, W, C] contiguous, C % 8 == 0 -> V: [36, t1 - t0, C] for tiles t0..t1 of the N*th*tw; 16 channels at a
// time when wide (an AVX-512 CPU) and C allows
at::Tensor input_transform(const at::Tensor& x, int64_t pad, int64_t th, int64_t tw, int64_t t0, int64_t t1,
                           bool wide) {
  const int64_t H = x.size(1), Wd = x.size(2), C = x.size(3), T = t1 - t0;
  auto v = at::empty({36, T, C}, x.options());
  const float* xp = x.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  at::parallel_for(0, T, 1, [&](int64_t begin, int64_t end) {
    if (wide && C % CB16 == 0)
      input_tiles16(xp, vp, H, Wd, C, T, pad, th, tw, t0, begin, end);
    else
      input_tiles<CB>(xp, vp, H, Wd, C, T, pad, th, tw, t0, begin, end);
  });
  return v;
}

// Tiles begin..end of M: [36, T, K] into y: [N, Ho, Wo, K], W channels at a time (see output_transform)
template <int W>
__attribute__((always_inline)) inline void output_tiles(const float* mp, const float* bp, float* yp, const float* res,
                                                        bool relu, int64_t T, int64_t K, int64_t Ho, int64_t Wo,
                                                        int64_t th, int64_t tw, int64_t t0, int64_t begin,
                                                        int64_t end) {
  using V = typename Lanes<W>::V;
  const int64_t es = T * K;  // from M[e] to M[e + 1]
  alignas(64) float rows[6][4][W];
  V in[6], o[4];
  for (int64_t t = begin; t < end; ++t) {
    const int64_t g = t0 + t, n = g / (th * tw), ty = (g / tw) % th, tx = g % tw;
    for (int64_t kb = 0; kb < K; kb += W) {
      for (int p = 0; p < 6; ++p) {  // along each row: (m A)[p]
        const float* s = mp + p * 6 * es + t * K + kb;
        for (int j = 0; j < 6; ++j) in[j] = load<V>(s + j * es);
        at4(in, o);
        for (int q = 0; q < 4; ++q) store(rows[p][q], o[q]);
      }
      const V b = bp ? load<V>(bp + kb) : V{};
      for (int q = 0; q < 4; ++q) {  // along each column, plus the bias, the residual, the ReLU
        const int64_t xx = tx * 4 + q;
        if (xx >= Wo) break;
        for (int i = 0; i < 6; ++i) in[i] = load<V>(rows[i][q]);
        at4(in, o);
        for (int p = 0; p < 4 && ty * 4 + p < Ho; ++p) {
          const int64_t at = ((n * Ho + ty * 4 + p) * Wo + xx) * K + kb;
          V out = o[p] + b;
          if (res != nullptr) out += load<V>(res + at);
          if (relu) out = out > 0.f ? out : V{};
          store(yp + at, out);
        }
      }
    }
  }
}

SAMPAN_AVX512 void output_tiles16(const float* mp, const float* bp, float* yp, const float* res, bool relu, int64_t T,
                                  int64_t K, int64_t Ho, int64_t Wo, int64_t th, int64_t tw, int64_t t0,
                                  int64_t begin, int64_t end) {
  output_tiles<16>(mp, bp, yp, res, relu, T, K, Ho, Wo, th, tw, t0, begin, end);
}

// m: [36, T, K] for tiles t0..t0+T, bias: [K] or empty -> their outputs in y: [N, Ho, Wo, K], plus res (the same
// shape and layout as y, or null) and through a ReLU if relu: what a network does next, done before y is stored
void output_transform(const at::Tensor& m, const at::Tensor& bias, at::Tensor& y, int64_t th, int64_t tw,
                      int64_t t0, const float* res, bool relu, bool wide) {
  const int64_t T = m.size(1), K = m.size(2), Ho = y.size(1), Wo = y.size(2);
  const float* mp = m.data_ptr<float>();
  const float* bp = bias.numel() ? bias.data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, T, 1, [&](int64_t begin, int64_t end) {
    if (wide && K % CB16 == 0)
      output_tiles16(mp, bp, yp, res, relu, T, K, Ho, Wo, th, tw, t0, begin, end);
    else
      output_tiles<CB>(mp, bp, yp, res, relu, T, K, Ho, Wo, th, tw, t0, begin, end);
  });
}

// x: [N, C, H, W] (any strides), u: [36, K / P, C, P] (G g G^T in panels of P = 8 or 16 output channels), bias: [K]
// or empty, residual: [N, K, Ho, Wo] or none -> relu?(conv + bias + residual): [N, K, Ho, Wo] channels-last
at::Tensor conv3x3_f4(const at::Tensor& x, const at::Tensor& u, const at::Tensor& bias, int64_t pad,
                      const std::optional<at::Tensor>& residual, bool relu) {
  TORCH_CHECK(x.dim() == 4 && x.scalar_type() == at::kFloat && x.device().is_cpu(),
              "conv3x3_f4: x must be a float32 CPU tensor [N, C, H, W], got ", x.sizes(), " ", x.scalar_type());
  TORCH_CHECK(x.size(1) % 8 == 0, "conv3x3_f4: channels must be multiples of 8, got C = ", x.size(1));
  TORCH_CHECK(u.dim() == 4 && u.size(0) == 36 && u.size(2) == x.size(1) && (u.size(3) == CB || u.size(3) == CB16) &&
                  u.scalar_type() == at::kFloat,
              "conv3x3_f4: u must be the transformed weights in panels [36, K / P, C, P] with C = ", x.size(1),
              " and P = 8 or 16, got ", u.sizes());
  TORCH_CHECK(u.size(3) == CB || __builtin_cpu_supports("avx512f"),
              "conv3x3_f4: panels of 16 output channels need an AVX-512 CPU; pack the weights in panels of 8");
  TORCH_CHECK(bias.numel() == 0 || bias.numel() == u.size(1) * u.size(3), "conv3x3_f4: bias must be empty or [K]");
  TORCH_CHECK(pad >= 0 && pad <= 2 && x.size(2) + 2 * pad >= 3 && x.size(3) + 2 * pad >= 3,
              "conv3x3_f4: padding must be 0, 1 or 2 and leave at least a 3x3 input, got ", pad);
  const int64_t N = x.size(0), H = x.size(2), W = x.size(3), K = u.size(1) * u.size(3);
  const bool wide = u.size(3) == CB16;  // an AVX-512 CPU (checked above): the transforms take 16 channels too
  const int64_t Ho = H + 2 * pad - 2, Wo = W + 2 * pad - 2, th = (Ho + 3) / 4, tw = (Wo + 3) / 4;
  auto xn = x.permute({0, 2, 3, 1}).contiguous();
  auto uc = u.contiguous();
  auto b = bias.to(at::kFloat).contiguous();
  auto y = at::empty({N, Ho, Wo, K}, x.options());
  at::Tensor r;  // the residual to add, channels last like y (no copy when it is already, as a conv's output is)
  if (residual.has_value() && residual->defined()) {
    TORCH_CHECK(residual->dim() == 4 && residual->size(0) == N && residual->size(1) == K && residual->size(2) == Ho &&
                    residual->size(3) == Wo && residual->scalar_type() == at::kFloat,
                "conv3x3_f4: residual must be a float32 tensor of the output's shape [", N, ", ", K, ", ", Ho, ", ",
                Wo, "], got ", residual->sizes(), " ", residual->scalar_type());
    r = residual->permute({0, 2, 3, 1}).contiguous();
  }
  // Blocks of tiles whose transformed inputs and products (36 x tiles x channels floats each) stay in cache
  // (about 1 MB), but at least 64 tiles so that each panel of weights serves many rows
  const int64_t T = N * th * tw, C = x.size(1);
  const int64_t per_tile = 36 * std::max(C, K) * int64_t{sizeof(float)};
  const int64_t block = std::max<int64_t>(64, (int64_t{1} << 20) / per_tile);
  for (int64_t t0 = 0; t0 < T; t0 += block) {
    const int64_t t1 = std::min(T, t0 + block);
    auto m = products(input_transform(xn, pad, th, tw, t0, t1, wide), uc);
    output_transform(m, b, y, th, tw, t0, r.defined() ? r.data_ptr<float>() : nullptr, relu, wide);
  }
  return y.permute({0, 3, 1, 2});
}

TORCH_LIBRARY(sampan_winograd, lib) {
  lib.def("conv3x3_f4(Tensor x, Tensor u, Tensor bias, int pad, Tensor? residual=None, bool relu=False) -> Tensor");
}
TORCH_LIBRARY_IMPL(sampan_winograd, CPU, lib) {
  lib.impl("conv3x3_f4", &conv3x3_f4);
}
