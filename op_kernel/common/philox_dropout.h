// philox_dropout.h -- in-kernel dropout of the attention kernels: the keep mask of a score tile
// from Philox4x32-10 (Random123's constants and key schedule), generated on the AI Vector unit of
// Atlas A2/A3 with the integer instructions that exist there (docs/dropout_and_mask.md).
//
// Key scheme (shared with the float64 reference and the backward, which regenerates the mask):
//   key     = (seed & 0xFFFFFFFF, seed >> 32)
//   counter = (j >> 4, i, lo32(stream), hi32(stream)),  stream = offset + b * N + n  (mod 2^64)
//   u(i, j) = byte (j & 15) of Philox4x32-10(counter, key), i.e. bits [8 (j & 3), 8 (j & 3) + 8)
//             of output word (j >> 2) & 3;  keep(i, j) iff u >= threshold
// where i, j are the query and key positions within the sequence and threshold =
// floor((1 - keep_prob) * 256 + 1/2) in [0, 256] comes from op_host. One Philox call decides 16
// elements with 8-bit draws (as flash-attn's CUDA kernels do), so an element is kept with
// probability (256 - threshold) / 256, within 1/512 of keep_prob; kept P values are scaled by
// 1 / keep_prob (docs/attention_options.md#dropout states the resulting bias).
//
// The A2/A3 vector unit has no 32x32->64-bit multiply (Mull is Ascend 950 only), no 32-bit
// And/Or/Xor (And/Or take int16_t/uint16_t), compares int32_t only for equality, and documents
// no int32_t wraparound. So every 32-bit word is held as two 16-bit limbs, each in an int32_t
// lane (value in [0, 2^16)), and every intermediate stays below 2^31:
//   mulhilo(x, M): M = 2^32 + m1 2^16 + m0 with signed limbs m_j in [-2^15, 2^15), so each
//                  x_i m_j fits int32; the products split into 16-bit halves (arithmetic shift),
//                  summed per limb column with x 2^32 and carried; a round's two (x0 by M0, x2
//                  by M1) in the same instructions, on limb planes of both;
//   a ^ b        = (a | b) - (a & b) on the uint16_t view;
//   draws        : limb >> 8 and limb - ((limb >> 8) << 8), 16 planes of 8-bit values;
//   u >= thr     : Cast to fp32 (exact below 2^24), Compares(u, thr, GE).
// A chunk of `lanes` counters covers lanes * 16 tile elements: the counters are laid out
// [chunkRows, width / 16], the 8 limbs of the output are computed limb-major, split into 16 draw
// planes, and one Gather interleaves them into the tile's [chunkRows, width] order (element
// (r, c) = draw c & 15 of counter (r, c / 16)). No tile element is touched by the scalar unit.
#pragma once

#include "kernel_operator.h"

namespace philox_dropout {

constexpr uint32_t PHILOX_M0 = 0xD2511F53u;  // multiplier of counter word 0
constexpr uint32_t PHILOX_M1 = 0xCD9E8D57u;  // multiplier of counter word 2
constexpr uint32_t PHILOX_W0 = 0x9E3779B9u;  // key bumps (golden ratio, sqrt(3) - 1)
constexpr uint32_t PHILOX_W1 = 0xBB67AE85u;
constexpr uint32_t PHILOX_ROUNDS = 10;
constexpr uint32_t PHILOX_WORDS = 4;  // output words per counter
constexpr uint32_t ELEMENTS_PER_COUNTER = 16;  // 8-bit draws per output = tile columns per counter
constexpr uint32_t DRAW_BITS = 8;
static_assert(PHILOX_ROUNDS % 2 == 0, "the last round writes the [x3, x1] planes where the first read them");

constexpr uint32_t LIMB_BITS = 16;
constexpr uint32_t LIMB_MASK = 0xFFFFu;
constexpr uint32_t CHUNK_LANE_ALIGN = 8;  // planes of lanes int32 32-B aligned; 16 x lanes fp32 whole
                                         // 256-B repeats (Compares)

// A multiplier M as top 2^32 + m1 2^16 + m0 with m0, m1 in [-2^15, 2^15) (a limb of 2^15 or more
// borrows 2^16 from the next): x_i m_j then stays inside int32 for 16-bit limbs x_i.
constexpr uint32_t LIMB_HALF = 0x8000u;
constexpr int32_t SignedLimb0(uint32_t m)
{
    return static_cast<int32_t>(m & LIMB_MASK) - ((m & LIMB_HALF) != 0 ? 0x10000 : 0);
}
constexpr int32_t UpperWithBorrow(uint32_t m)
{
    return static_cast<int32_t>(m >> LIMB_BITS) + ((m & LIMB_HALF) != 0 ? 1 : 0);
}
constexpr int32_t SignedLimb1(uint32_t m)
{
    return UpperWithBorrow(m) - (UpperWithBorrow(m) >= static_cast<int32_t>(LIMB_HALF) ? 0x10000 : 0);
}
constexpr int64_t SignedTop(uint32_t m) { return UpperWithBorrow(m) >= static_cast<int32_t>(LIMB_HALF) ? 1 : 0; }
constexpr bool SignedLimbsAre(uint32_t m)
{
    return (SignedTop(m) << 32) + int64_t(SignedLimb1(m)) * 0x10000 + SignedLimb0(m) == int64_t(m);
}
static_assert(SignedLimbsAre(PHILOX_M0) && SignedLimbsAre(PHILOX_M1), "M = top 2^32 + m1 2^16 + m0");
static_assert(SignedTop(PHILOX_M0) == 1 && SignedTop(PHILOX_M1) == 1,
              "MulHiLo2 adds x 2^32 to both words' products in one instruction");

// One (b, n)'s dropout parameters: the Philox key, the counter's upper words and the keep rule.
struct DropoutStream {
    uint32_t key0 = 0, key1 = 0;    // seed low / high word
    uint32_t ctr2 = 0, ctr3 = 0;    // stream = offset + b * N + n, low / high word
    uint32_t threshold = 0;         // keep iff the 8-bit draw >= threshold (0..256)
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
    // UB bytes Init takes for chunks of up to `lanes` counters (lanes * 16 tile elements).
    __aicore__ static inline uint32_t UbBytes(uint32_t lanes)
    {
        // int32 lanes: state 16L (the multiplied pair 4L, the other pair twice 4L, multiplier limbs
        // 4L; then the 16 draw planes), scratch 16L (products 8L, their high halves 8L;
        // then the tile-order draws), round key 4L, low-limb pattern 4L, counter row/column
        // index 2L, Gather offsets 16L; plus the keep bits (16L elements / 8).
        return lanes * 4u * 58u + Align32(lanes * 2u);
    }

    // capacity: counters per chunk at most (a multiple of CHUNK_LANE_ALIGN, at least the widest
    // tile's width / 16); takes UbBytes(capacity) of UB.
    __aicore__ inline void Init(AscendC::TPipe *pipe, uint32_t capacity)
    {
        capacity_ = capacity;
        pipe->InitBuffer(buf_, UbBytes(capacity));
        AscendC::LocalTensor<int32_t> all = buf_.Get<int32_t>();
        const uint32_t C = capacity;
        state_ = all[0];
        prod_ = all[16 * C];
        prodHigh_ = all[24 * C];
        roundKey_ = all[32 * C];
        lowPattern_ = all[36 * C];
        colIndex_ = all[40 * C];
        rowIndex_ = all[41 * C];
        gatherOffset_ = all[42 * C].ReinterpretCast<uint32_t>();
        keepBits_ = all[58 * C].ReinterpretCast<uint8_t>();
        AscendC::Duplicate(lowPattern_, static_cast<int32_t>(LIMB_MASK), static_cast<int32_t>(4 * C));
    }

    // Tiles of row length `width` (a multiple of 16, at most capacity * 16) from here on: a chunk
    // is the most rows whose counters fit the capacity, its lanes rounded up to CHUNK_LANE_ALIGN
    // (at most the capacity, itself a multiple): fewer than 8 tail lanes are generated and never
    // used, where dropping rows until none are left would cost whole rows.
    __aicore__ inline void SetWidth(uint32_t width)
    {
        if (width == width_) return;
        width_ = width;
        countersPerRow_ = width / ELEMENTS_PER_COUNTER;
        chunkRows_ = capacity_ / countersPerRow_;
        lanes_ = chunkRows_ * countersPerRow_;
        lanes_ = (lanes_ + CHUNK_LANE_ALIGN - 1) / CHUNK_LANE_ALIGN * CHUNK_LANE_ALIGN;
        BuildIndices();
    }

    // p[r, c] (r < rows, c < width) = keep(i0 + r, j0 + c) ? p[r, c] / keep_prob : 0; p's row
    // stride is width. j0: a multiple of 16. With keepBytes, also keepBytes[r, c] = 1 if kept, else
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
        const uint32_t n = ELEMENTS_PER_COUNTER * lanes_;
        Draws(prod_, st, i0, j0);
        // The draw planes are free again: the tile-order draws as fp32 there (exact, < 2^8).
        const AscendC::LocalTensor<float> u = state_.ReinterpretCast<float>();
        AscendC::Cast(u, prod_, AscendC::RoundMode::CAST_RINT, n);
        AscendC::Compares(keepBits_, u, static_cast<float>(st.threshold), AscendC::CMPMODE::GE, n);
    }

    // draws[r, c] = u(i0 + r, j0 + c) for the chunk's rows (SetWidth first): the 8-bit draws in
    // tile order ([chunkRows(), width] int32 in [0, 256), then tail lanes; 16 * Lanes() elements).
    // Not the Philox state's memory. The keep bits use it; for tests a bit-exact view.
    __aicore__ inline void Draws(const AscendC::LocalTensor<int32_t> &draws, const DropoutStream &st, uint32_t i0,
                                 uint32_t j0)
    {
        Generate(st, i0, j0);
        // Each limb plane k of the state holds two draws (its low and high byte; which draws:
        // BuildIndices): high bytes to planes 8 + k, low bytes stay in plane k.
        const uint32_t L = lanes_;
        const int32_t n8 = static_cast<int32_t>(8 * L);
        const AscendC::LocalTensor<int32_t> s = state_;
        const AscendC::LocalTensor<uint32_t> low = s.ReinterpretCast<uint32_t>();
        const AscendC::LocalTensor<uint32_t> high = s[8 * L].ReinterpretCast<uint32_t>();
        const AscendC::LocalTensor<uint32_t> shifted = draws.ReinterpretCast<uint32_t>();
        AscendC::ShiftRight(high, low, DRAW_BITS, n8);
        AscendC::ShiftLeft(shifted, high, DRAW_BITS, n8);
        AscendC::Sub(s, s, draws, n8);
        AscendC::Gather(draws, s, gatherOffset_, 0, ELEMENTS_PER_COUNTER * L);
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
    // Counters per chunk; KeepBits and Draws cover 16 * Lanes() elements (ChunkRows() rows and
    // tail lanes that no row uses).
    __aicore__ inline uint32_t Lanes() const { return lanes_; }
    __aicore__ inline const AscendC::LocalTensor<uint8_t> &KeepBitsTensor() const { return keepBits_; }

private:
    __aicore__ static inline uint32_t Min(uint32_t a, uint32_t b) { return a < b ? a : b; }
    __aicore__ static inline uint32_t Align32(uint32_t bytes) { return (bytes + 31u) / 32u * 32u; }

    // Per tile width: the counters' row/column index of each lane and the Gather offsets from the
    // draw planes to tile order. (lowPattern_: 0x0000FFFF per int32 lane, i.e. (0xFFFF, 0x0000) on
    // the uint16 view, keeps the low 16 bits; little endian.)
    __aicore__ inline void BuildIndices()
    {
        const uint32_t L = lanes_;
        const int32_t n1 = static_cast<int32_t>(L);
        // Lane t holds counter (row t / cpr, column t mod cpr), cpr = width / 16 (rows of cpr lanes
        // need not start 32-B aligned, so no per-row instructions): the row as floor((t + 1/2) / cpr)
        // in fp32, exact for t < 2^21 since (t + 1/2) / cpr is >= 1 / (2 cpr) from an integer. Lanes
        // past the chunk's rows (lanes_ rounded up) are computed and never used.
        const AscendC::LocalTensor<float> ramp = prod_.ReinterpretCast<float>();
        AscendC::CreateVecIndex(ramp, 0.5f, L);
        AscendC::Muls(ramp, ramp, 1.0f / static_cast<float>(countersPerRow_), n1);
        AscendC::Cast(rowIndex_, ramp, AscendC::RoundMode::CAST_FLOOR, L);
        AscendC::CreateVecIndex(colIndex_, static_cast<int32_t>(0), L);
        AscendC::Muls(prodHigh_, rowIndex_, static_cast<int32_t>(countersPerRow_), n1);
        AscendC::Sub(colIndex_, colIndex_, prodHigh_, n1);
        AscendC::Duplicate(gatherOffset_.ReinterpretCast<int32_t>(), 0,
                           static_cast<int32_t>(ELEMENTS_PER_COUNTER * L));
        // Draw e = c & 15 (bits e3 e2 e1 e0) of element (r, c) is byte e & 3 of word w = e >> 2 =
        // 2 e3 + e2: limb e1 of the word, its high byte when e0 = 1. Generate leaves word w's limb
        // l in plane 1 + 4 e2 - e3 + 2 l (planes x2, x0, x2, x0, x3, x1, x3, x1 by limb), so the
        // draw sits in draw plane 1 + 8 e0 + 2 e1 + 4 e2 - e3 (Draws). Its Gather byte offset is
        // (plane L + r width / 16 + c / 16) * 4. Row 0 from index ramps, the other rows by adding
        // r * width / 4 bytes. The state and the scratch (16 L int32 each, >= width) are free here.
        const AscendC::LocalTensor<int32_t> off = gatherOffset_.ReinterpretCast<int32_t>();
        const AscendC::LocalTensor<int32_t> col = prod_, plane = state_;
        const AscendC::LocalTensor<uint32_t> colU = col.ReinterpretCast<uint32_t>();
        const int32_t w = static_cast<int32_t>(width_);
        AscendC::CreateVecIndex(col, static_cast<int32_t>(0), width_);
        AscendC::ShiftRight(off.ReinterpretCast<uint32_t>(), colU, 4u, w);  // c / 16
        AscendC::Duplicate(plane, 1, w);
        constexpr int32_t planeWeight[4] = {8, 2, 4, -1};  // of e0, e1, e2, e3
        for (uint32_t bit = 0; bit < 4; ++bit) {
            AscendC::CreateVecIndex(col, static_cast<int32_t>(0), width_);
            AscendC::ShiftLeft(colU, colU, 31u - bit, w);
            AscendC::ShiftRight(colU, colU, 31u, w);  // bit `bit` of c
            AscendC::Muls(col, col, planeWeight[bit], w);
            AscendC::Add(plane, plane, col, w);
        }
        AscendC::Muls(plane, plane, static_cast<int32_t>(L), w);
        AscendC::Add(off, off, plane, w);
        AscendC::Muls(off, off, 4, w);
        for (uint32_t r = 1; r < chunkRows_; ++r) {
            AscendC::Adds(off[r * width_], off, static_cast<int32_t>(r * countersPerRow_ * 4), w);
        }
    }

    // v &= 0xFFFF over `lanes` (<= 4 L) int32 lanes (values >= 0).
    __aicore__ inline void LowLimb(const AscendC::LocalTensor<int32_t> &v, uint32_t lanes)
    {
        AscendC::And(v.ReinterpretCast<uint16_t>(), v.ReinterpretCast<uint16_t>(),
                     lowPattern_.ReinterpretCast<uint16_t>(), static_cast<int32_t>(2 * lanes));
    }

    // x &= y and x |= y halves of an XOR over 4 L int32 lanes of 16-bit limbs: x ^ y =
    // (x | y) - (x & y); the And goes to tmp, the caller subtracts it.
    __aicore__ inline void AndOr(const AscendC::LocalTensor<int32_t> &x, const AscendC::LocalTensor<int32_t> &y,
                                 const AscendC::LocalTensor<int32_t> &tmp)
    {
        const int32_t halves = static_cast<int32_t>(8 * lanes_);
        AscendC::And(tmp.ReinterpretCast<uint16_t>(), x.ReinterpretCast<uint16_t>(), y.ReinterpretCast<uint16_t>(),
                     halves);
        AscendC::Or(x.ReinterpretCast<uint16_t>(), x.ReinterpretCast<uint16_t>(), y.ReinterpretCast<uint16_t>(),
                    halves);
    }

    // One round's two products, x0 M0 and x2 M1, as 64 bits each. x: [x0 lo, x2 lo, x0 hi, x2 hi]
    // (4 L lanes, limbs). lo: [lo(M0 x0), lo(M1 x2)] limb-major likewise (4 L); hi likewise, at
    // the returned prodHigh_[4L, 8L). The multipliers' signed limbs (SignedLimbs) of both words are
    // planes of state_ at 12 L: [m0(M0), m0(M1), m1(M0), m1(M1)].
    __aicore__ inline AscendC::LocalTensor<int32_t> MulHiLo2(const AscendC::LocalTensor<int32_t> &x,
                                                             const AscendC::LocalTensor<int32_t> &lo)
    {
        const uint32_t L = lanes_;
        const int32_t n2 = static_cast<int32_t>(2 * L);
        const AscendC::LocalTensor<int32_t> m0 = state_[12 * L], m1 = state_[14 * L];
        // prod_ = [p00, p10, p01, p11] (2 L each, both words), p_ij = x_i m_j, |p_ij| < 2^16 2^15.
        AscendC::Mul(prod_, x, m0, n2);
        AscendC::Mul(prod_[2 * L], x[2 * L], m0, n2);
        AscendC::Mul(prod_[4 * L], x, m1, n2);
        AscendC::Mul(prod_[6 * L], x[2 * L], m1, n2);
        // p = 2^16 ph + pl: ph = floor(p / 2^16) in [-2^15, 2^15) (int32 ShiftRight is arithmetic),
        // pl = p mod 2^16 (the low limb of the two's complement). pl00 is column 0 as it is.
        AscendC::ShiftRight(prodHigh_, prod_, static_cast<int32_t>(LIMB_BITS), static_cast<int32_t>(8 * L));
        AscendC::And(lo.ReinterpretCast<uint16_t>(), prod_.ReinterpretCast<uint16_t>(),
                     lowPattern_.ReinterpretCast<uint16_t>(), static_cast<int32_t>(2 * n2));
        LowLimb(prod_[2 * L], 4 * L);
        LowLimb(prod_[6 * L], 2 * L);
        const AscendC::LocalTensor<int32_t> pl10 = prod_[2 * L], pl01 = prod_[4 * L], pl11 = prod_[6 * L];
        const AscendC::LocalTensor<int32_t> ph00 = prodHigh_, ph10 = prodHigh_[2 * L];
        // Limb columns of x M = x 2^32 + sum_ij p_ij 2^(16 (i + j)):
        //   c0 = pl00, c1 = pl10 + pl01 + ph00, c2 = pl11 + ph10 + ph01 + x0, c3 = ph11 + x1,
        // c1 at lo's second limb plane, c2 and c3 in the places of ph01 and ph11 (adjacent, so x
        // is added to both in one instruction).
        const AscendC::LocalTensor<int32_t> c1 = lo[2 * L], c2 = prodHigh_[4 * L], c3 = prodHigh_[6 * L];
        AscendC::Add(c1, pl10, pl01, n2);
        AscendC::Add(c1, c1, ph00, n2);
        AscendC::Add(c2, c2, pl11, n2);
        AscendC::Add(c2, c2, ph10, n2);
        AscendC::Add(c2, c2, x, static_cast<int32_t>(4 * L));
        // Carry c1 -> c2 -> c3 (c0 < 2^16 carries nothing; a carry may be -1): the product is in
        // [0, 2^64), so c3 ends in [0, 2^16).
        const AscendC::LocalTensor<int32_t> carry = prod_;
        const AscendC::LocalTensor<int32_t> cols[2] = {c1, c2};
        const AscendC::LocalTensor<int32_t> next[2] = {c2, c3};
        for (uint32_t k = 0; k < 2; ++k) {
            AscendC::ShiftRight(carry, cols[k], static_cast<int32_t>(LIMB_BITS), n2);
            LowLimb(cols[k], 2 * L);
            AscendC::Add(next[k], next[k], carry, n2);
        }
        return c2;
    }

    // The four output words of every lane's counter (j0 / 16 + column, i0 + row, ctr2, ctr3) as 8
    // limb planes of L lanes at state_: [x2 lo, x0 lo, x2 hi, x0 hi, x3 lo, x1 lo, x3 hi, x1 hi].
    //
    // A round keeps the multiplied pair X = [x0 lo, x2 lo, x0 hi, x2 hi] at state_[0, 4L) and the
    // other pair Y = [x3 lo, x1 lo, x3 hi, x1 hi] at state_[4L, 8L) or [8L, 12L) (alternately).
    // With (lo, hi) = the products of X by (M0, M1): Y' = lo, and
    // hi ^ Y ^ [k1, k0] = [x2', x0'] (limb-major), which is X' with its two words exchanged: the
    // last Sub of that XOR writes each plane to its place (in the last round it stays as it is).
    __aicore__ inline void Generate(const DropoutStream &st, uint32_t i0, uint32_t j0)
    {
        const uint32_t L = lanes_;
        const int32_t n1 = static_cast<int32_t>(L);
        const AscendC::LocalTensor<int32_t> x = state_, y[2] = {state_[4 * L], state_[8 * L]};
        // Counter words 0 and 1 as whole values (< 2^31), then split into limbs; words 2 and 3 and
        // the multipliers' signed limbs are the same in every lane.
        AscendC::Adds(x, colIndex_, static_cast<int32_t>(j0 / ELEMENTS_PER_COUNTER), n1);
        AscendC::Adds(y[0][L], rowIndex_, static_cast<int32_t>(i0), n1);
        AscendC::ShiftRight(x[2 * L].ReinterpretCast<uint32_t>(), x.ReinterpretCast<uint32_t>(),
                            static_cast<uint32_t>(LIMB_BITS), n1);
        AscendC::ShiftRight(y[0][3 * L].ReinterpretCast<uint32_t>(), y[0][L].ReinterpretCast<uint32_t>(),
                            static_cast<uint32_t>(LIMB_BITS), n1);
        LowLimb(x, L);
        LowLimb(y[0][L], L);
        const uint32_t constants[8][2] = {
            {L, st.ctr2 & LIMB_MASK}, {3 * L, st.ctr2 >> LIMB_BITS},                  // x2
            {4 * L, st.ctr3 & LIMB_MASK}, {6 * L, st.ctr3 >> LIMB_BITS},              // x3
            {12 * L, static_cast<uint32_t>(SignedLimb0(PHILOX_M0))},                    // m0
            {13 * L, static_cast<uint32_t>(SignedLimb0(PHILOX_M1))},
            {14 * L, static_cast<uint32_t>(SignedLimb1(PHILOX_M0))},                    // m1
            {15 * L, static_cast<uint32_t>(SignedLimb1(PHILOX_M1))}};
        for (uint32_t k = 0; k < 8; ++k) {
            AscendC::Duplicate(state_[constants[k][0]], static_cast<int32_t>(constants[k][1]), n1);
        }

        uint32_t k0 = st.key0, k1 = st.key1;
        const AscendC::LocalTensor<int32_t> tmp = prod_[4 * L];
        for (uint32_t round = 0; round < PHILOX_ROUNDS; ++round) {
            const AscendC::LocalTensor<int32_t> in = y[round % 2], out = y[(round + 1) % 2];
            const AscendC::LocalTensor<int32_t> hi = MulHiLo2(x, out);
            AscendC::Duplicate(roundKey_, static_cast<int32_t>(k1 & LIMB_MASK), n1);
            AscendC::Duplicate(roundKey_[L], static_cast<int32_t>(k0 & LIMB_MASK), n1);
            AscendC::Duplicate(roundKey_[2 * L], static_cast<int32_t>(k1 >> LIMB_BITS), n1);
            AscendC::Duplicate(roundKey_[3 * L], static_cast<int32_t>(k0 >> LIMB_BITS), n1);
            AndOr(hi, in, tmp);
            AscendC::Sub(hi, hi, tmp, static_cast<int32_t>(4 * L));  // hi ^ Y
            AndOr(hi, roundKey_, tmp);
            if (round + 1 == PHILOX_ROUNDS) {
                AscendC::Sub(x, hi, tmp, static_cast<int32_t>(4 * L));
            } else {
                for (uint32_t p = 0; p < 4; ++p) {  // plane p of [x2', x0'] to plane p ^ 1 of X'
                    AscendC::Sub(x[(p ^ 1u) * L], hi[p * L], tmp[p * L], n1);
                }
            }
            k0 += PHILOX_W0;  // uint32 wraparound on the scalar unit, as Random123 bumps the key
            k1 += PHILOX_W1;
        }
    }

    AscendC::TBuf<AscendC::TPosition::VECCALC> buf_;
    AscendC::LocalTensor<int32_t> state_;       // [16C]: limb planes of the words and the multipliers'
                                                // signed limbs (Generate); then the 16 draw planes
    AscendC::LocalTensor<int32_t> prod_;        // [8L] products' low halves, then carries and XOR
                                                // scratch; scratch start [16C]
    AscendC::LocalTensor<int32_t> prodHigh_;    // [8L] products' high halves, then hi at [4L, 8L)
    AscendC::LocalTensor<int32_t> roundKey_;    // [4L] k1 lo, k0 lo, k1 hi, k0 hi
    AscendC::LocalTensor<int32_t> lowPattern_;  // [4L] 0x0000FFFF
    AscendC::LocalTensor<int32_t> colIndex_;    // [L] counter column of each lane
    AscendC::LocalTensor<int32_t> rowIndex_;    // [L] counter row of each lane
    AscendC::LocalTensor<uint32_t> gatherOffset_;  // [16L] bytes: tile element -> its draw plane
    AscendC::LocalTensor<uint8_t> keepBits_;    // [16L / 8]
    uint32_t capacity_ = 0;
    uint32_t lanes_ = 0, width_ = 0, countersPerRow_ = 0, chunkRows_ = 0;  // for the current width
};

}  // namespace philox_dropout
