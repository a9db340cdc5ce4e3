// Convolution in float32 by three bfloat16 products on AMX, for sampan.jit.amx (built on first use by
// torch.utils.cpp_extension; see conv2d_bf16x3 there).
//
// Every float32 v is split into two bfloat16 halves, v = hi + lo + r with |r| <= 2^-18 |v| (hi = v rounded to bf16,
// lo = v - hi rounded to bf16), and a product x * w is computed as hi(x) hi(w) + hi(x) lo(w) + lo(x) hi(w): about
// 16 significant bits per product (the missing lo lo and r terms are below 2^-17 of it), summed in float32 by the AMX
// tile multiply (TDPBF16PS, 16 x 16 x 32 multiply-adds per instruction, fp32 accumulators). A direct float32
// convolution's products are exact and its sums round at 2^-24; here the outputs land within about 5e-6 of the
// float64 result, relative to their scale (float32's own: 1e-6 to 2e-6; Winograd F(4x4)'s: 1e-5). An infinite
// input makes the outputs it reaches NaN (its hi times a weight's lo of 0, inf * 0), where float32 gives an
// infinity or NaN: non-finite where float32's are, as with Winograd's transforms (inf - inf).
//
// The convolution is a matrix product out[pixels x K] = A[pixels x (kh kw C)] B[(kh kw C) x K]. The input is split
// once into bf16 halves with a zero border; a stride-1 convolution whose input channels come in multiples of 32
// reads A's tiles straight from there (see "direct rows" below: 17-25 % faster at batch 1), any other copies the rows
// of each block of MB output pixels (im2col); the weights are packed once (pack_bf16x3, constant-folded by a frozen
// graph) in AMX's pair layout, 16 output channels a panel, both halves side by side. The product runs on 2 x 2 tiles
// of 16 pixels x 16 channels, 32 input values per step. Bias, a residual add and a ReLU are applied as the tiles are
// written out.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <torch/library.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace {
#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

constexpr int MB = 64;       // output pixels per block: two pairs of 16-row tiles
constexpr int PANEL = 1024;  // bf16 values per step of a packed panel: 32 inputs x 16 channels, hi then lo

struct TileConfig {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// Linux lets a process use the AMX tile data only after asking (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA)
bool amx_permitted() {
  static const bool ok = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  return ok;
}

inline uint16_t to_bf16(float f) {  // round to nearest even (no NaN inputs here: the weights are checked)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

inline float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// n floats into their bf16 halves
AMX_TARGET void split(const float* src, int64_t n, uint16_t* hi, uint16_t* lo) {
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m512 v = _mm512_loadu_ps(src + c);
    const __m256bh h = _mm512_cvtneps_pbh(v);
    const __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16));
    const __m256bh l = _mm512_cvtneps_pbh(_mm512_sub_ps(v, hf));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + c), (__m256i)h);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + c), (__m256i)l);
  }
  for (; c < n; ++c) {
    hi[c] = to_bf16(src[c]);
    lo[c] = to_bf16(src[c] - from_bf16(hi[c]));
  }
}

AMX_TARGET void configure() {
  TileConfig cfg{};
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  asm volatile("" : : "r"(&cfg) : "memory");  // GCC 12 drops the stores above without it
  _tile_loadconfig(&cfg);
}

AMX_TARGET void release() { _tile_release(); }

// Tiles 4, 5: two tiles of 16 rows (pixels) x 32 inputs of A; 6, 7: two panels of B (32 inputs x 16 channels, in
// pairs); 0-3: the 2 x 2 sums (16 pixels x 16 channels each, float32)
#define AMX_INLINE AMX_TARGET __attribute__((always_inline)) inline

AMX_INLINE void load_rows(const uint16_t* a, int64_t lda) {
  _tile_loadd(4, a, lda);
  _tile_loadd(5, a + 8 * lda, lda);  // 16 rows on: lda is in bytes, two per bf16
}

AMX_INLINE void load_panels(const uint16_t* b0, const uint16_t* b1) {
  _tile_loadd(6, b0, 64);
  _tile_loadd(7, b1, 64);
}

AMX_INLINE void products() {
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

// For the panels in [p0, p1) (an even count): row r of A (halves ahi and alo; rows lda bytes apart, step q's 32
// values at offsets[q]; `rows` a multiple of 32) times B goes to output pixel pixels[r] (dropped when negative: a
// padding row, or a column past the output's width), + bias, + residual (laid out as out), max(., 0) when relu
AMX_TARGET void block(const uint16_t* ahi, const uint16_t* alo, const int64_t* offsets, int64_t lda,
                      const uint16_t* b, int64_t steps, int64_t p0, int64_t p1, int64_t K, float* out,
                      const int64_t* pixels, int rows, const float* bias, const float* res, bool relu) {
  alignas(64) float buf[4 * 256];
  for (int64_t p = p0; p < p1; p += 2) {
    for (int rp = 0; rp < rows; rp += 32) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      const uint16_t* b0 = b + p * steps * PANEL;
      const uint16_t* b1 = b0 + steps * PANEL;
      const uint16_t* h = ahi + rp * (lda / 2);
      const uint16_t* l = alo + rp * (lda / 2);
      for (int64_t q = 0; q < steps; ++q, b0 += PANEL, b1 += PANEL) {
        load_rows(h + offsets[q], lda);
        load_panels(b0, b1);
        products();  // hi hi
        load_panels(b0 + PANEL / 2, b1 + PANEL / 2);
        products();  // hi lo
        load_rows(l + offsets[q], lda);
        load_panels(b0, b1);
        products();  // lo hi
      }
      _tile_stored(0, buf, 64);
      _tile_stored(1, buf + 256, 64);
      _tile_stored(2, buf + 512, 64);
      _tile_stored(3, buf + 768, 64);
      for (int half = 0; half < 2; ++half) {
        const int64_t k0 = (p + half) * 16;
        if (k0 >= K) break;  // the zero panel that pads an odd count
        const __m512 bv = bias ? _mm512_loadu_ps(bias + k0) : _mm512_setzero_ps();
        for (int r = 0; r < 32 && rp + r < rows; ++r) {
          if (pixels[rp + r] < 0) continue;
          const int64_t o = pixels[rp + r] * K + k0;
          __m512 v = _mm512_add_ps(_mm512_load_ps(buf + (r / 16 * 2 + half) * 256 + (r % 16) * 16), bv);
          if (res) v = _mm512_add_ps(v, _mm512_loadu_ps(res + o));
          if (relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
          _mm512_storeu_ps(out + o, v);
        }
      }
    }
  }
}

int64_t panels(int64_t K) { return (K + 31) / 32 * 2; }  // an even count: the products take two at a time

// [K, C, kh, kw] float weights -> [panels, steps, 2 (hi, lo), 16 (input pairs), 16 (channels), 2] bf16 (as int16):
// step q holds inputs 32q .. 32q + 31 in the order (i, j, c) of the im2col rows, in AMX's pairs of two
at::Tensor pack_bf16x3(const at::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 4 && weight.scalar_type() == at::kFloat && weight.device().is_cpu(),
              "pack_bf16x3: expected float32 CPU weights [out, in, kh, kw], got ", weight.sizes(), " ",
              weight.scalar_type());
  const auto w = weight.contiguous();
  const int64_t K = w.size(0), C = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t steps = (C * kh * kw + 31) / 32;
  auto packed = at::zeros({panels(K), steps, 2, 16, 16, 2}, at::kShort);
  auto* o = reinterpret_cast<uint16_t*>(packed.data_ptr<int16_t>());
  const float* src = w.data_ptr<float>();
  at::parallel_for(0, K, 16, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            const float v = src[((k * C + c) * kh + i) * kw + j];
            const uint16_t h = to_bf16(v);
            const int64_t e = (i * kw + j) * C + c, q = e / 32, pair = e % 32;
            const int64_t at = ((k / 16 * steps + q) * 2 * 16 + pair / 2) * 32 + (k % 16) * 2 + pair % 2;
            o[at] = h;
            o[at + PANEL / 2] = to_bf16(v - from_bf16(h));
          }
  });
  return packed;
}

at::Tensor conv2d_bf16x3(const at::Tensor& x, const at::Tensor& packed, int64_t K, int64_t kh, int64_t kw,
                         int64_t stride, int64_t pad, const c10::optional<at::Tensor>& bias,
                         const c10::optional<at::Tensor>& residual, bool relu) {
  TORCH_CHECK(amx_permitted(), "conv2d_bf16x3: Linux did not allow this process AMX's tile data");
  TORCH_CHECK(x.dim() == 4 && x.scalar_type() == at::kFloat && x.device().is_cpu(),
              "conv2d_bf16x3: expected a float32 CPU input [n, c, h, w], got ", x.sizes(), " ", x.scalar_type());
  TORCH_CHECK(stride >= 1 && pad >= 0, "conv2d_bf16x3: stride ", stride, " and padding ", pad);
  TORCH_CHECK(K % 16 == 0, "conv2d_bf16x3: output channels must be a multiple of 16, got ", K);
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Hp = H + 2 * pad, Wp = W + 2 * pad;
  TORCH_CHECK(Hp >= kh && Wp >= kw, "conv2d_bf16x3: the padded input ", Hp, "x", Wp, " is smaller than the kernel");
  const int64_t Ho = (Hp - kh) / stride + 1, Wo = (Wp - kw) / stride + 1;
  const int64_t steps = (C * kh * kw + 31) / 32, Kp = steps * 32;
  TORCH_CHECK(packed.dim() == 6 && packed.size(0) == panels(K) && packed.size(1) == steps &&
                  packed.scalar_type() == at::kShort && packed.is_contiguous(),
              "conv2d_bf16x3: the packed weights ", packed.sizes(), " are not pack_bf16x3's for ", K, " outputs of ",
              C, "x", kh, "x", kw);
  const auto xc = x.contiguous(at::MemoryFormat::ChannelsLast);
  auto out = at::empty({B, K, Ho, Wo}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  at::Tensor rc;
  if (residual) {
    TORCH_CHECK(residual->sizes() == out.sizes() && residual->scalar_type() == at::kFloat,
                "conv2d_bf16x3: the residual ", residual->sizes(), " is not the output's ", out.sizes());
    rc = residual->contiguous(at::MemoryFormat::ChannelsLast);
  }
  if (bias) TORCH_CHECK(bias->numel() == K && bias->is_contiguous(), "conv2d_bf16x3: bias of ", bias->numel());
  if (B == 0 || Ho <= 0 || Wo <= 0) return out;
  // the input once in bf16 halves, with a zero border: [B, Hp, Wp, C] each
  // every element is written below (border or split), so the buffer is not zeroed first (27 MB for resnet18's
  // 64-channel 56 x 56 input at batch 32)
  // MB pixels of zeros after each half: the direct path's last rows read up to MB - 1 pixels past the last image
  const int64_t half = B * Hp * Wp * C + MB * C;
  std::unique_ptr<uint16_t[]> halves(new uint16_t[2 * half]);
  uint16_t* xhi = halves.get();
  uint16_t* xlo = xhi + half;
  std::memset(xhi + half - MB * C, 0, MB * C * 2);
  std::memset(xlo + half - MB * C, 0, MB * C * 2);
  const float* xp = xc.data_ptr<float>();
  at::parallel_for(0, B * Hp, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t ih = r % Hp - pad;
      uint16_t* h = xhi + r * Wp * C;
      uint16_t* l = xlo + r * Wp * C;
      if (ih < 0 || ih >= H) {
        std::memset(h, 0, Wp * C * 2);
        std::memset(l, 0, Wp * C * 2);
        continue;
      }
      for (uint16_t* edge : {h, l, h + (pad + W) * C, l + (pad + W) * C}) std::memset(edge, 0, pad * C * 2);
      split(xp + (r / Hp * H + ih) * W * C, W * C, h + pad * C, l + pad * C);
    }
  });
  const auto* b = reinterpret_cast<const uint16_t*>(packed.data_ptr<int16_t>());
  const float* biasp = bias ? bias->data_ptr<float>() : nullptr;
  const float* resp = residual ? rc.data_ptr<float>() : nullptr;
  float* op = out.data_ptr<float>();
  const int64_t pairs = panels(K) / 2;
  // Direct rows: a stride-1 convolution whose channels fill whole steps reads A straight from the split input. Row t
  // of an image stands for the output (t / Wp, t % Wp) on a grid as wide as the padded input, so tap (i, j) of it is
  // input pixel t + i Wp + j: each step's tile is 16 consecutive pixels, C values apart. The Wp - Wo columns past
  // the output's width are computed and dropped (7 x 7 maps: 9 - 7 of 9; 56 x 56: 2 of 58), the copies of im2col
  // saved. Other convolutions copy their rows (im2col) per block of MB output pixels.
  const bool direct = stride == 1 && C % 32 == 0;
  const int64_t T = direct ? (Ho - 1) * Wp + Wo : B * Ho * Wo;  // rows per image (direct) or in all
  const int64_t per_image = (T + MB - 1) / MB, blocks = direct ? B * per_image : per_image;
  std::vector<int64_t> offsets(steps);  // of step q's 32 inputs in a row of A
  for (int64_t q = 0; q < steps; ++q) {
    if (!direct) {
      offsets[q] = q * 32;  // im2col rows: the steps one after another
      continue;
    }
    const int64_t tap = q / (C / 32), c0 = q % (C / 32) * 32;  // a tap's C inputs are C / 32 whole steps
    offsets[q] = ((tap / kw) * Wp + tap % kw) * C + c0;
  }
  // few blocks (batch 1, a small map): the output channels are shared out too, so that every thread works
  const int64_t groups = std::min<int64_t>(pairs, std::max<int64_t>(1, at::get_num_threads() / blocks));
  const int64_t per_group = (pairs + groups - 1) / groups;
  at::parallel_for(0, blocks * groups, 1, [&](int64_t t0, int64_t t1) {
    std::vector<uint16_t> ahi(direct ? 0 : MB * Kp), alo(direct ? 0 : MB * Kp);  // zeros: columns past kh kw C
    int64_t pixels[MB];
    configure();
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t blk = t / groups, g = t % groups;
      const int64_t p0 = g * per_group * 2, p1 = std::min(pairs, (g + 1) * per_group) * 2;
      if (direct) {
        const int64_t n = blk / per_image, r0 = blk % per_image * MB;
        const int rows = int(std::min<int64_t>(MB, (T + 31) / 32 * 32 - r0));
        for (int r = 0; r < rows; ++r) {
          const int64_t row = r0 + r, oh = row / Wp, ow = row % Wp;
          pixels[r] = row < T && ow < Wo ? (n * Ho + oh) * Wo + ow : -1;
        }
        const int64_t at = (n * Hp * Wp + r0) * C;
        block(xhi + at, xlo + at, offsets.data(), C * 2, b, steps, p0, p1, K, op, pixels, rows, biasp, resp, relu);
        continue;
      }
      const int64_t m0 = blk * MB;
      const int rows = int(std::min<int64_t>(MB, T - m0));
      for (int r = 0; r < rows; ++r) {
        const int64_t m = m0 + r, n = m / (Ho * Wo), oh = m / Wo % Ho, ow = m % Wo;
        for (int64_t i = 0; i < kh; ++i) {  // kw pixels of C channels are adjacent in the padded input
          const int64_t src = ((n * Hp + oh * stride + i) * Wp + ow * stride) * C;
          std::memcpy(ahi.data() + r * Kp + i * kw * C, xhi + src, kw * C * 2);
          std::memcpy(alo.data() + r * Kp + i * kw * C, xlo + src, kw * C * 2);
        }
        pixels[r] = m;
      }
      const int padded = (rows + 31) / 32 * 32;
      std::memset(ahi.data() + rows * Kp, 0, (padded - rows) * Kp * 2);
      std::memset(alo.data() + rows * Kp, 0, (padded - rows) * Kp * 2);
      for (int r = rows; r < padded; ++r) pixels[r] = -1;
      block(ahi.data(), alo.data(), offsets.data(), Kp * 2, b, steps, p0, p1, K, op, pixels, padded, biasp, resp,
            relu);
    }
    release();
  });
  return out;
}
}  // namespace

TORCH_LIBRARY(sampan_amx, m) {
  m.def("pack_bf16x3(Tensor weight) -> Tensor");
  m.def("conv2d_bf16x3(Tensor x, Tensor packed, int out_channels, int kh, int kw, int stride, int padding, "
        "Tensor? bias, Tensor? residual, bool relu) -> Tensor");
}

TORCH_LIBRARY_IMPL(sampan_amx, CPU, m) {
  m.impl("pack_bf16x3", pack_bf16x3);
  m.impl("conv2d_bf16x3", conv2d_bf16x3);
}
