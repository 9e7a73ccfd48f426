// attention_matmul.h -- the Matmul API objects of the MIX attention kernels (forward, decode,
// backward): every operand and every fp32 result in GM (the results in the workspace), ND.
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

namespace attn_mm {

// An operand of element type T in GM, ND; kTrans: read transposed.
template <typename T, bool kTrans = false>
using GmOperand = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T, kTrans>;

// rows . cols^T: [rows, cols] fp32 (S = Q . K^T; the backward's dP = dO . V^T).
template <typename T>
using RowsByColsT = AscendC::Matmul<GmOperand<T>, GmOperand<T, true>, GmOperand<float>>;

// rows . cols^T: [rows, cols] in C (float, or the operands' T: FixPipe rounds the fp32 result
// on its way out of L0C; the forward's high-performance precision writes S in T).
template <typename T, typename C>
using RowsByColsTo = AscendC::Matmul<GmOperand<T>, GmOperand<T, true>, GmOperand<C>>;

// rows . B: [rows, D] fp32 (P . V; the backward's dQ = dS . K).
template <typename T>
using RowsByB = AscendC::Matmul<GmOperand<T>, GmOperand<T>, GmOperand<float>>;

// cols^T . B: [n, D] fp32 (the backward's dV += P^T . dO, dK += dS^T . Q).
template <typename T>
using RowsTByB = AscendC::Matmul<GmOperand<T, true>, GmOperand<T>, GmOperand<float>>;

}  // namespace attn_mm
