// philox_dropout.h -- in-kernel dropout of the attention kernels: the keep mask of a score tile
// from Philox4x32-10 (Random123's constants and key schedule), generated on the AI Vector unit of
// Atlas A2/A3 with the integer instructions that exist there (docs/dropout_and_mask.md).
//
// Key scheme (shared with the float64 reference and the backward, which regenerates the mask):
//   key     = (seed & 0xFFFFFFFF, seed >> 32)
//   counter = (j >> 2, i, lo32(stream), hi32(stream)),  stream = offset + b * N + n  (mod 2^64)
//   x(i, j) = word (j & 3) of Philox4x32-10(counter, key);  keep(i, j) iff x >= threshold (unsigned)
// where i, j are the query and key positions within the sequence and threshold =
// min(2^32 - 1, floor((1 - keep_prob) * 2^32)) comes from op_host. Kept P values are scaled by
// 1 / keep_prob.
//
// The A2/A3 vector unit has no 32x32->64-bit multiply (Mull is Ascend 950 only), no 32-bit
// And/Or/Xor (And/Or take int16_t/uint16_t), compares int32_t only for equality, and documents
// no int32_t wraparound. So every 32-bit word is held as two 16-bit limbs, each in an int32_t
// lane (value in [0, 2^16)), and every intermediate stays below 2^31:
//   mulhilo(x, M): x_i * M_j as 2 * (x_i * (M_j >> 1)) + (M_j & 1) * x_i, each product < 2^31,
//                  split into 16-bit halves, summed per limb column and carried;
//   a ^ b        = (a | b) - (a & b) on the uint16_t view;
//   x >= thr     : v = (x_hi - thr_hi) * 65536 + (x_lo - thr_lo) in fp32 (exact integers below
//                  2^16 in, the sign of v survives rounding), Compares(v, 0, GE).
// A chunk of `lanes` counters covers lanes * 4 tile elements: the counters are laid out
// [chunkRows, width / 4], the four output words are computed word-major, and one Gather
// interleaves them back into the tile's [chunkRows, width] order (element (r, c) = word c & 3 of
// counter (r, c / 4)). No tile element is touched by the scalar unit.
#pragma once

#include "kernel_operator.h"

namespace philox_dropout {

constexpr uint32_t PHILOX_M0 = 0xD2511F53u;  // multiplier of counter word 0
constexpr uint32_t PHILOX_M1 = 0xCD9E8D57u;  // multiplier of counter word 2
constexpr uint32_t PHILOX_W0 = 0x9E3779B9u;  // key bumps (golden ratio, sqrt(3) - 1)
constexpr uint32_t PHILOX_W1 = 0xBB67AE85u;
constexpr uint32_t PHILOX_ROUNDS = 10;
constexpr uint32_t PHILOX_WORDS = 4;  // output words per counter = tile columns per counter

constexpr uint32_t LIMB_BITS = 16;
constexpr uint32_t LIMB_MASK = 0xFFFFu;
constexpr uint32_t CHUNK_LANE_ALIGN = 16;  // 4 x lanes fp32 = whole 256-B repeats (Compares)

// One (b, n)'s dropout parameters: the Philox key, the counter's upper words and the keep rule.
struct DropoutStream {
    uint32_t key0 = 0, key1 = 0;    // seed low / high word
    uint32_t ctr2 = 0, ctr3 = 0;    // stream = offset + b * N + n, low / high word
    uint32_t threshold = 0;         // keep iff x >= threshold
    float invKeepProb = 1.0f;       // scale of kept values
};

__aicore__ inline DropoutStream MakeStream(uint64_t seed, uint64_t offset, uint64_t head, uint32_t threshold,
                                           float invKeepProb)
{
    DropoutStream s;
    const uint64_t stream = offset + head;  // mod 2^64
    s.key0 = static_cast<uint32_t>(seed);
    s.key1 = static_cast<uint32_t>(seed >> 32);
    s.ctr2 = static_cast<uint32_t>(stream);
    s.ctr3 = static_cast<uint32_t>(stream >> 32);
    s.threshold = threshold;
    s.invKeepProb = invKeepProb;
    return s;
}

// Generates keep masks of [rows, width] fp32 tiles (row stride width) and applies them.
class PhiloxKeepMask {
public:
    // UB bytes Init takes for chunks of up to `lanes` counters (lanes * 4 tile elements).
    __aicore__ static inline uint32_t UbBytes(uint32_t lanes)
    {
        // int32 lanes: state 2 x 8L, products 4L, their high halves 4L, mulhi results 4L,
        // XOR scratch 2 x 2L, round key 4L, low-limb pattern 4L, counter row/column index 2L,
        // Gather offsets 4L; plus the keep bits (4L elements / 8).
        return lanes * 4u * 46u + Align32(lanes / 2u);
    }

    // capacity: counters per chunk at most (a multiple of CHUNK_LANE_ALIGN, at least the widest
    // tile's width / 4); takes UbBytes(capacity) of UB.
    __aicore__ inline void Init(AscendC::TPipe *pipe, uint32_t capacity)
    {
        capacity_ = capacity;
        pipe->InitBuffer(buf_, UbBytes(capacity));
        AscendC::LocalTensor<int32_t> all = buf_.Get<int32_t>();
        const uint32_t C = capacity;
        state_[0] = all[0];
        state_[1] = all[8 * C];
        prod_ = all[16 * C];
        prodHigh_ = all[20 * C];
        high_ = all[24 * C];
        xorOut_ = all[28 * C];
        xorTmp_ = all[30 * C];
        roundKey_ = all[32 * C];
        lowPattern_ = all[36 * C];
        colIndex_ = all[40 * C];
        rowIndex_ = all[41 * C];
        gatherOffset_ = all[42 * C].ReinterpretCast<uint32_t>();
        keepBits_ = all[46 * C].ReinterpretCast<uint8_t>();
        AscendC::Duplicate(lowPattern_, static_cast<int32_t>(LIMB_MASK), static_cast<int32_t>(4 * C));
    }

    // Tiles of row length `width` (a multiple of 8, at most capacity * 4) from here on: a chunk is
    // the most rows whose counters fit the capacity with lanes a multiple of CHUNK_LANE_ALIGN.
    __aicore__ inline void SetWidth(uint32_t width)
    {
        if (width == width_) return;
        width_ = width;
        wordsPerRow_ = width / PHILOX_WORDS;
        chunkRows_ = capacity_ / wordsPerRow_;
        while (chunkRows_ > 1 && (chunkRows_ * wordsPerRow_) % CHUNK_LANE_ALIGN != 0) --chunkRows_;
        lanes_ = chunkRows_ * wordsPerRow_;
        lanes_ = (lanes_ + CHUNK_LANE_ALIGN - 1) / CHUNK_LANE_ALIGN * CHUNK_LANE_ALIGN;
        BuildIndices();
    }

    // p[r, c] (r < rows, c < width) = keep(i0 + r, j0 + c) ? p[r, c] / keep_prob : 0; p's row
    // stride is width. j0: a multiple of 4. With keepBytes, also keepBytes[r, c] = 1 if kept, else
    // 0 (uint8 [rows, width]; the dropout_mask output, a testing aid).
    __aicore__ inline void Apply(const AscendC::LocalTensor<float> &p, const DropoutStream &st, uint32_t i0,
                                 uint32_t j0, uint32_t rows, uint32_t width,
                                 const AscendC::LocalTensor<uint8_t> *keepBytes = nullptr)
    {
        SetWidth(width);
        for (uint32_t r0 = 0; r0 < rows; r0 += chunkRows_) {
            const uint32_t n = Min(chunkRows_, rows - r0) * width_;
            KeepBits(st, i0 + r0, j0);
            const AscendC::LocalTensor<float> pc = p[r0 * width_];
            AscendC::Muls(pc, pc, st.invKeepProb, static_cast<int32_t>(n));
            AscendC::Select(pc, keepBits_, pc, 0.0f, AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, n);
            if (keepBytes != nullptr) {
                KeepBytes((*keepBytes)[r0 * width_], n);
            }
        }
    }

    // KeepBitsTensor() = the keep mask of tile rows [i0, i0 + ChunkRows()) and columns
    // [j0, j0 + width) (SetWidth), one bit per element in row-major order (bit 1 = kept).
    __aicore__ inline void KeepBits(const DropoutStream &st, uint32_t i0, uint32_t j0)
    {
        Generate(st, i0, j0);
        // v = (x_hi - thr_hi) * 65536 + (x_lo - thr_lo) per word, word-major into prod_.
        const uint32_t L = lanes_;
        const AscendC::LocalTensor<float> f = Cur(1).ReinterpretCast<float>();
        AscendC::Cast(f, Cur(0), AscendC::RoundMode::CAST_RINT, 8 * L);  // limbs < 2^16: exact
        const float thrLo = static_cast<float>(st.threshold & LIMB_MASK);
        const float thrHi = static_cast<float>(st.threshold >> LIMB_BITS);
        const AscendC::LocalTensor<float> v = prod_.ReinterpretCast<float>();
        for (uint32_t w = 0; w < PHILOX_WORDS; ++w) {
            const AscendC::LocalTensor<float> lo = f[2 * w * L];
            const AscendC::LocalTensor<float> hi = f[(2 * w + 1) * L];
            AscendC::Adds(lo, lo, -thrLo, static_cast<int32_t>(L));
            AscendC::Adds(hi, hi, -thrHi, static_cast<int32_t>(L));
            AscendC::Muls(hi, hi, 65536.0f, static_cast<int32_t>(L));
            AscendC::Add(v[w * L], lo, hi, static_cast<int32_t>(L));
        }
        const AscendC::LocalTensor<float> tile = prodHigh_.ReinterpretCast<float>();
        AscendC::Gather(tile, v, gatherOffset_, 0, PHILOX_WORDS * L);
        AscendC::Compares(keepBits_, tile, 0.0f, AscendC::CMPMODE::GE, PHILOX_WORDS * L);
    }

    // words[r, c] = x(i0 + r, j0 + c) for the chunk's rows (SetWidth first): the raw Philox words in tile order
    // (uint32 bits in int32 lanes; [chunkRows(), width]). A testing aid for bit-exact checks.
    __aicore__ inline void Words(const AscendC::LocalTensor<int32_t> &words, const DropoutStream &st, uint32_t i0,
                                 uint32_t j0)
    {
        Generate(st, i0, j0);
        const uint32_t L = lanes_;
        const AscendC::LocalTensor<int32_t> s = Cur(0);
        for (uint32_t w = 0; w < PHILOX_WORDS; ++w) {
            // hi << 16 may set the sign bit; adding lo < 2^16 to it cannot overflow.
            const AscendC::LocalTensor<uint32_t> hi = s[(2 * w + 1) * L].ReinterpretCast<uint32_t>();
            AscendC::ShiftLeft(hi, hi, static_cast<uint32_t>(LIMB_BITS), static_cast<int32_t>(L));
            AscendC::Add(prod_[w * L], s[2 * w * L], s[(2 * w + 1) * L], static_cast<int32_t>(L));
        }
        AscendC::Gather(words, prod_, gatherOffset_, 0, PHILOX_WORDS * L);
    }

    // bytes[0:n] = 1 where the last KeepBits chunk keeps its element (tile order), else 0; uses
    // the word scratch as a half tile.
    __aicore__ inline void KeepBytes(const AscendC::LocalTensor<uint8_t> &bytes, uint32_t n)
    {
        const AscendC::LocalTensor<half> ones = prod_.ReinterpretCast<half>();
        AscendC::Duplicate(ones, static_cast<half>(1.0f), static_cast<int32_t>(n));
        AscendC::Select(ones, keepBits_, ones, static_cast<half>(0.0f), AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, n);
        AscendC::Cast(bytes, ones, AscendC::RoundMode::CAST_NONE, n);
    }

    __aicore__ inline uint32_t ChunkRows() const { return chunkRows_; }
    // Counters per chunk; KeepBits and Words cover 4 * Lanes() elements (ChunkRows() rows and
    // tail lanes that no row uses).
    __aicore__ inline uint32_t Lanes() const { return lanes_; }
    __aicore__ inline const AscendC::LocalTensor<uint8_t> &KeepBitsTensor() const { return keepBits_; }

private:
    __aicore__ static inline uint32_t Min(uint32_t a, uint32_t b) { return a < b ? a : b; }
    __aicore__ static inline uint32_t Align32(uint32_t bytes) { return (bytes + 31u) / 32u * 32u; }

    // State buffer `which` (0: current, 1: the other); word w's limbs at [2w L, (2w + 2) L).
    __aicore__ inline AscendC::LocalTensor<int32_t> Cur(uint32_t which) const { return state_[cur_ ^ which]; }

    // Per tile width: the counters' row/column index of each lane and the Gather offsets from
    // tile order to word-major order. (lowPattern_: 0x0000FFFF per int32 lane, i.e. (0xFFFF,
    // 0x0000) on the uint16 view, keeps the low 16 bits; little endian.)
    __aicore__ inline void BuildIndices()
    {
        const uint32_t L = lanes_;
        // Lanes past the chunk's rows (lanes_ rounded up) get counter (0, 0): computed, never used.
        AscendC::Duplicate(colIndex_, 0, static_cast<int32_t>(L));
        AscendC::Duplicate(rowIndex_, 0, static_cast<int32_t>(L));
        AscendC::Duplicate(gatherOffset_.ReinterpretCast<int32_t>(), 0, static_cast<int32_t>(PHILOX_WORDS * L));
        AscendC::CreateVecIndex(colIndex_, static_cast<int32_t>(0), wordsPerRow_);
        for (uint32_t r = 0; r < chunkRows_; ++r) {
            if (r > 0) {
                AscendC::Adds(colIndex_[r * wordsPerRow_], colIndex_, 0, static_cast<int32_t>(wordsPerRow_));
            }
            AscendC::Duplicate(rowIndex_[r * wordsPerRow_], static_cast<int32_t>(r),
                               static_cast<int32_t>(wordsPerRow_));
        }
        // Gather byte offset of tile element (r, c): ((c & 3) * L + r * width / 4 + c / 4) * 4.
        // Row 0 from an index ramp, the other rows by adding r * width (bytes of width / 4 words).
        const AscendC::LocalTensor<int32_t> off = gatherOffset_.ReinterpretCast<int32_t>();
        const AscendC::LocalTensor<int32_t> tmp = prod_;
        AscendC::CreateVecIndex(tmp, static_cast<int32_t>(0), width_);
        const AscendC::LocalTensor<uint32_t> tmpU = tmp.ReinterpretCast<uint32_t>();
        const AscendC::LocalTensor<uint32_t> wordU = prodHigh_.ReinterpretCast<uint32_t>();
        AscendC::ShiftLeft(wordU, tmpU, 30u, static_cast<int32_t>(width_));          // (c & 3) << 30
        AscendC::ShiftRight(wordU, wordU, 30u, static_cast<int32_t>(width_));        // c & 3
        AscendC::Muls(prodHigh_, prodHigh_, static_cast<int32_t>(L), static_cast<int32_t>(width_));
        AscendC::ShiftRight(tmpU, tmpU, 2u, static_cast<int32_t>(width_));           // c / 4
        AscendC::Add(off, prodHigh_, tmp, static_cast<int32_t>(width_));
        AscendC::Muls(off, off, 4, static_cast<int32_t>(width_));
        for (uint32_t r = 1; r < chunkRows_; ++r) {
            AscendC::Adds(off[r * width_], off, static_cast<int32_t>(r * width_), static_cast<int32_t>(width_));
        }
    }

    // x ^ y for `lanes` int32 lanes of 16-bit limbs: (x | y) - (x & y).
    __aicore__ inline void Xor(const AscendC::LocalTensor<int32_t> &dst, const AscendC::LocalTensor<int32_t> &x,
                               const AscendC::LocalTensor<int32_t> &y, uint32_t lanes)
    {
        const int32_t halves = static_cast<int32_t>(2 * lanes);
        AscendC::Or(dst.ReinterpretCast<uint16_t>(), x.ReinterpretCast<uint16_t>(), y.ReinterpretCast<uint16_t>(),
                    halves);
        AscendC::And(xorTmp_.ReinterpretCast<uint16_t>(), x.ReinterpretCast<uint16_t>(),
                     y.ReinterpretCast<uint16_t>(), halves);
        AscendC::Sub(dst, dst, xorTmp_, static_cast<int32_t>(lanes));
    }

    // v &= 0xFFFF over `lanes` int32 lanes (values >= 0).
    __aicore__ inline void LowLimb(const AscendC::LocalTensor<int32_t> &v, uint32_t lanes)
    {
        AscendC::And(v.ReinterpretCast<uint16_t>(), v.ReinterpretCast<uint16_t>(),
                     lowPattern_.ReinterpretCast<uint16_t>(), static_cast<int32_t>(2 * lanes));
    }

    // (hi, lo) = x * m as 64 bits; x: one word's limbs [x0 (L), x1 (L)], lo/hi likewise.
    __aicore__ inline void MulHiLo(const AscendC::LocalTensor<int32_t> &x, uint32_t m,
                                   const AscendC::LocalTensor<int32_t> &lo, const AscendC::LocalTensor<int32_t> &hi)
    {
        const uint32_t L = lanes_;
        const int32_t n1 = static_cast<int32_t>(L), n2 = static_cast<int32_t>(2 * L);
        const uint32_t m0 = m & LIMB_MASK, m1 = m >> LIMB_BITS;
        // prod_ = [x0 h0, x1 h0, x0 h1, x1 h1], h_j = m_j >> 1 < 2^15: every product < 2^31.
        AscendC::Muls(prod_, x, static_cast<int32_t>(m0 >> 1), n2);
        AscendC::Muls(prod_[2 * L], x, static_cast<int32_t>(m1 >> 1), n2);
        AscendC::ShiftRight(prodHigh_.ReinterpretCast<uint32_t>(), prod_.ReinterpretCast<uint32_t>(),
                            static_cast<uint32_t>(LIMB_BITS), static_cast<int32_t>(4 * L));
        LowLimb(prod_, 4 * L);
        const AscendC::LocalTensor<int32_t> pl00 = prod_, pl10 = prod_[L], pl01 = prod_[2 * L], pl11 = prod_[3 * L];
        const AscendC::LocalTensor<int32_t> ph00 = prodHigh_, ph10 = prodHigh_[L], ph01 = prodHigh_[2 * L],
                                            ph11 = prodHigh_[3 * L];
        // Limb columns of x * m = sum_ij (2 p_ij + (m_j & 1) x_i) 2^(16 (i + j)):
        //   c0 = 2 pl00 + b0 x0, c1 = 2 (pl10 + pl01 + ph00) + b0 x1 + b1 x0,
        //   c2 = 2 (pl11 + ph10 + ph01) + b1 x1, c3 = 2 ph11; each < 2^20 before carrying.
        const AscendC::LocalTensor<int32_t> c0 = lo, c1 = lo[L], c2 = hi, c3 = hi[L];
        AscendC::Add(c0, pl00, pl00, n1);
        AscendC::Add(c1, pl10, pl01, n1);
        AscendC::Add(c1, c1, ph00, n1);
        AscendC::Add(c1, c1, c1, n1);
        AscendC::Add(c2, pl11, ph10, n1);
        AscendC::Add(c2, c2, ph01, n1);
        AscendC::Add(c2, c2, c2, n1);
        AscendC::Add(c3, ph11, ph11, n1);
        if ((m0 & 1u) != 0) {
            AscendC::Add(lo, lo, x, n2);  // c0 += x0, c1 += x1
        }
        if ((m1 & 1u) != 0) {
            AscendC::Add(c1, c1, x, n1);
            AscendC::Add(c2, c2, x[L], n1);
        }
        // Carry c0 -> c1 -> c2 -> c3; the product is below 2^64, so c3 ends below 2^16.
        const AscendC::LocalTensor<uint32_t> carry = xorTmp_.ReinterpretCast<uint32_t>();
        const AscendC::LocalTensor<int32_t> cols[3] = {c0, c1, c2};
        const AscendC::LocalTensor<int32_t> next[3] = {c1, c2, c3};
        for (uint32_t k = 0; k < 3; ++k) {
            AscendC::ShiftRight(carry, cols[k].ReinterpretCast<uint32_t>(), static_cast<uint32_t>(LIMB_BITS), n1);
            LowLimb(cols[k], L);
            AscendC::Add(next[k], next[k], xorTmp_, n1);
        }
    }

    // The four output words of every lane's counter (j0 / 4 + column, i0 + row, ctr2, ctr3) into Cur(0).
    __aicore__ inline void Generate(const DropoutStream &st, uint32_t i0, uint32_t j0)
    {
        const uint32_t L = lanes_;
        const int32_t n1 = static_cast<int32_t>(L);
        AscendC::LocalTensor<int32_t> s = Cur(0);
        // Counter words 0 and 1 as whole values (< 2^31), then split into limbs.
        AscendC::Adds(s, colIndex_, static_cast<int32_t>(j0 / PHILOX_WORDS), n1);
        AscendC::Adds(s[2 * L], rowIndex_, static_cast<int32_t>(i0), n1);
        for (uint32_t w = 0; w < 2; ++w) {
            const AscendC::LocalTensor<int32_t> lo = s[2 * w * L];
            AscendC::ShiftRight(s[(2 * w + 1) * L].ReinterpretCast<uint32_t>(), lo.ReinterpretCast<uint32_t>(),
                                static_cast<uint32_t>(LIMB_BITS), n1);
            LowLimb(lo, L);
        }
        AscendC::Duplicate(s[4 * L], static_cast<int32_t>(st.ctr2 & LIMB_MASK), n1);
        AscendC::Duplicate(s[5 * L], static_cast<int32_t>(st.ctr2 >> LIMB_BITS), n1);
        AscendC::Duplicate(s[6 * L], static_cast<int32_t>(st.ctr3 & LIMB_MASK), n1);
        AscendC::Duplicate(s[7 * L], static_cast<int32_t>(st.ctr3 >> LIMB_BITS), n1);

        uint32_t k0 = st.key0, k1 = st.key1;
        for (uint32_t round = 0; round < PHILOX_ROUNDS; ++round) {
            const AscendC::LocalTensor<int32_t> in = Cur(0), out = Cur(1);
            // out = (hi(M1 x2) ^ x1 ^ k0, lo(M1 x2), hi(M0 x0) ^ x3 ^ k1, lo(M0 x0))
            MulHiLo(in, PHILOX_M0, out[6 * L], high_);
            MulHiLo(in[4 * L], PHILOX_M1, out[2 * L], high_[2 * L]);
            AscendC::Duplicate(roundKey_, static_cast<int32_t>(k0 & LIMB_MASK), n1);
            AscendC::Duplicate(roundKey_[L], static_cast<int32_t>(k0 >> LIMB_BITS), n1);
            AscendC::Duplicate(roundKey_[2 * L], static_cast<int32_t>(k1 & LIMB_MASK), n1);
            AscendC::Duplicate(roundKey_[3 * L], static_cast<int32_t>(k1 >> LIMB_BITS), n1);
            Xor(xorOut_, high_[2 * L], in[2 * L], 2 * L);
            Xor(out, xorOut_, roundKey_, 2 * L);
            Xor(xorOut_, high_, in[6 * L], 2 * L);
            Xor(out[4 * L], xorOut_, roundKey_[2 * L], 2 * L);
            cur_ ^= 1u;
            k0 += PHILOX_W0;  // uint32 wraparound on the scalar unit, as Random123 bumps the key
            k1 += PHILOX_W1;
        }
    }

    AscendC::TBuf<AscendC::TPosition::VECCALC> buf_;
    AscendC::LocalTensor<int32_t> state_[2];    // [8L] each: words 0..3, limbs lo/hi, ping-pong
    AscendC::LocalTensor<int32_t> prod_;        // [4L] products' low halves; then v / word scratch
    AscendC::LocalTensor<int32_t> prodHigh_;    // [4L] products' high halves; then the tile-order v
    AscendC::LocalTensor<int32_t> high_;        // [4L] hi(M0 x0), hi(M1 x2)
    AscendC::LocalTensor<int32_t> xorOut_;      // [2L]
    AscendC::LocalTensor<int32_t> xorTmp_;      // [2L] x & y of Xor; carries of MulHiLo
    AscendC::LocalTensor<int32_t> roundKey_;    // [4L] k0 lo, k0 hi, k1 lo, k1 hi
    AscendC::LocalTensor<int32_t> lowPattern_;  // [4L] 0x0000FFFF
    AscendC::LocalTensor<int32_t> colIndex_;    // [L] counter column of each lane
    AscendC::LocalTensor<int32_t> rowIndex_;    // [L] counter row of each lane
    AscendC::LocalTensor<uint32_t> gatherOffset_;  // [4L] bytes: tile element -> word-major v
    AscendC::LocalTensor<uint8_t> keepBits_;    // [4L / 8]
    uint32_t capacity_ = 0;
    uint32_t lanes_ = 0, width_ = 0, wordsPerRow_ = 0, chunkRows_ = 0;  // for the current width
    uint32_t cur_ = 0;
};

}  // namespace philox_dropout
