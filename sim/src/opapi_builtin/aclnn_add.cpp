// aclnn_add.cpp -- the simulator's aclnnInplaceAddGetWorkspaceSize / aclnnInplaceAdd, the builtin
// of CANN's libopapi.so (ops-math math/add; docs/builtin_ops.md): selfRef += alpha * other.
//
// Phase one checks what the real API documents -- NULL arguments (ACLNN_ERR_PARAM_NULLPTR), dtypes
// that do not promote or whose promotion does not cast to selfRef's, shapes that do not broadcast
// to selfRef's, more than 8 dims, a format other than ND (ACLNN_ERR_PARAM_INVALID) -- and copies
// alpha's value into the executor (the scalar may be destroyed after phase one). The simulator
// covers the float dtypes only (float32, float16, bfloat16) and refuses the others by name.
// Phase two enqueues the element-wise add on the stream; it reads strided views (non-contiguous
// tensors are allowed, as on the chip) and counts its GM traffic per device.
#include "aclnnop/aclnn_add.h"

#include <array>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "acl/acl.h"
#include "acl_fa_sim.h"
#include "acl_fa_sim_opapi.h"
#include "aclnn/opdev/op_errno.h"
#include "ascendc_sim/kernel_macros.h"

namespace {

constexpr const char *API_PHASE1 = "aclnnInplaceAddGetWorkspaceSize";
constexpr const char *API_PHASE2 = "aclnnInplaceAdd";
constexpr uint64_t MAX_DIMS = 8;  // "The dimensions cannot exceed 8" (aclnnAdd&aclnnInplaceAdd.md)
constexpr int32_t MAX_DEVICES = 64;

struct Counters {
    std::atomic<uint64_t> calls{0}, elements{0}, readBytes{0}, writeBytes{0};
};
std::array<Counters, MAX_DEVICES> &Stats()
{
    static auto *stats = new std::array<Counters, MAX_DEVICES>;  // never destroyed: tasks may run at exit
    return *stats;
}

bool IsSimulatedFloat(int32_t dtype) { return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16; }

// PyTorch-style promotion among the float dtypes (the deduction relationship of the op docs):
// equal dtypes stay, float16 with bfloat16 and anything with float32 give float32.
int32_t Promote(int32_t a, int32_t b) { return a == b ? a : ACL_FLOAT; }

size_t ElementBytes(int32_t dtype) { return dtype == ACL_FLOAT ? 4 : 2; }

float Load(const uint8_t *p, int32_t dtype)
{
    if (dtype == ACL_FLOAT) {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    if (dtype == ACL_FLOAT16) {
        half v;
        memcpy(&v, p, 2);
        return static_cast<float>(v);
    }
    bfloat16_t v;
    memcpy(&v.bits, p, 2);
    return static_cast<float>(v);
}

// Rounds a float to `dtype` and back (the value a result of that dtype holds).
float RoundTo(float x, int32_t dtype)
{
    if (dtype == ACL_FLOAT16) return static_cast<float>(static_cast<half>(x));
    if (dtype == ACL_BF16) return static_cast<float>(bfloat16_t(x));
    return x;
}

void Store(uint8_t *p, float x, int32_t dtype)
{
    if (dtype == ACL_FLOAT) {
        memcpy(p, &x, 4);
    } else if (dtype == ACL_FLOAT16) {
        const half v = static_cast<half>(x);
        memcpy(p, &v, 2);
    } else {
        const bfloat16_t v(x);
        memcpy(p, &v.bits, 2);
    }
}

aclnnStatus Fail(aclnnStatus code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
aclnnStatus Fail(aclnnStatus code, const char *fmt, ...)
{
    char text[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    aclfaSimSetErrMsg("%s", text);
    return code;
}

// One add as phase one fixed it: selfRef's shape, both operands' strides (elements; other's are 0
// along broadcast dims), data pointers at their offsets, dtypes and alpha.
struct Add {
    uint64_t dims = 0;
    int64_t shape[MAX_DIMS] = {};
    int64_t selfStrides[MAX_DIMS] = {};
    int64_t otherStrides[MAX_DIMS] = {};
    uint8_t *self = nullptr;
    const uint8_t *other = nullptr;
    int32_t selfType = ACL_FLOAT, otherType = ACL_FLOAT, computeType = ACL_FLOAT;
    float alpha = 1.0f;
    uint64_t elements = 0;
    bool contiguous = false;  // both dense row-major views of selfRef's shape
    int32_t device = 0;  // whose counters the run adds to (the caller's device at phase two)
};

void AddStrided(const Add &a, size_t selfBytes, size_t otherBytes);

// Both operands dense, row-major and of selfRef's shape (the ring's case): the same arithmetic as
// AddStrided, a block of elements at a time, each conversion loop free of per-element dtype tests.
// binary16 bits to float, exactly, by re-biasing the exponent in integer arithmetic (no libgcc call
// per element, unlike a _Float16 conversion without F16C): subnormals through one float subtraction,
// Inf/NaN by setting the exponent to all ones.
float HalfBitsToFloat(uint16_t h)
{
    constexpr uint32_t EXP = 0x7c00u << 13;  // binary16's exponent field, moved to float's position
    const uint32_t shifted = static_cast<uint32_t>(h & 0x7fffu) << 13;
    uint32_t bits = shifted + ((127u - 15u) << 23);
    float out;
    if ((shifted & EXP) == EXP) {
        bits += (128u - 16u) << 23;
    } else if ((shifted & EXP) == 0) {  // zero or subnormal: value = mantissa * 2^-24
        bits += 1u << 23;
        float magic;
        const uint32_t magicBits = 113u << 23;  // 2^-14
        memcpy(&out, &bits, 4);
        memcpy(&magic, &magicBits, 4);
        out -= magic;
        memcpy(&bits, &out, 4);
    }
    bits |= static_cast<uint32_t>(h & 0x8000u) << 16;
    memcpy(&out, &bits, 4);
    return out;
}

void LoadBlock(const uint8_t *p, int32_t dtype, float *out, uint64_t n)
{
    uint16_t bits[1];
    if (dtype == ACL_FLOAT) {
        memcpy(out, p, n * 4);
    } else if (dtype == ACL_FLOAT16) {
        for (uint64_t i = 0; i < n; ++i) {
            memcpy(bits, p + 2 * i, 2);
            out[i] = HalfBitsToFloat(bits[0]);
        }
    } else {
        for (uint64_t i = 0; i < n; ++i) {
            memcpy(bits, p + 2 * i, 2);
            const uint32_t wide = static_cast<uint32_t>(bits[0]) << 16;  // bfloat16: float's upper half
            memcpy(out + i, &wide, 4);
        }
    }
}

void AddContiguous(const Add &a)
{
    constexpr uint64_t BLOCK = 1024;
    float self[BLOCK], other[BLOCK];
    const size_t selfBytes = ElementBytes(a.selfType), otherBytes = ElementBytes(a.otherType);
    for (uint64_t start = 0; start < a.elements; start += BLOCK) {
        const uint64_t n = a.elements - start < BLOCK ? a.elements - start : BLOCK;
        uint8_t *s = a.self + start * selfBytes;
        LoadBlock(s, a.selfType, self, n);
        LoadBlock(a.other + start * otherBytes, a.otherType, other, n);
        if (a.alpha != 1.0f) {
            for (uint64_t i = 0; i < n; ++i) other[i] = RoundTo(a.alpha * other[i], a.computeType);
        }
        if (a.computeType == ACL_FLOAT && a.selfType == ACL_FLOAT) {
            for (uint64_t i = 0; i < n; ++i) self[i] += other[i];
            memcpy(s, self, n * 4);
        } else {
            for (uint64_t i = 0; i < n; ++i) {
                Store(s + i * selfBytes, RoundTo(self[i] + other[i], a.computeType), a.selfType);
            }
        }
    }
}

aclError RunAdd(void *userData, char *errBuf, size_t errBufLen)
{
    const auto *a = static_cast<const Add *>(userData);
    void *base = nullptr;
    size_t size = 0;
    if (a->elements > 0 && (aclfaSimFindDeviceAllocation(a->self, &base, &size) == 0 ||
                            aclfaSimFindDeviceAllocation(a->other, &base, &size) == 0)) {
        snprintf(errBuf, errBufLen, "%s: device memory of selfRef or other was freed before the add ran", API_PHASE2);
        return ACL_ERROR_RT_DEVICE_MEM_ERROR;
    }
    const size_t selfBytes = ElementBytes(a->selfType), otherBytes = ElementBytes(a->otherType);
    if (a->contiguous) {
        AddContiguous(*a);
    } else {
        AddStrided(*a, selfBytes, otherBytes);
    }
    Counters &c = Stats()[a->device];
    c.calls += 1;
    c.elements += a->elements;
    c.readBytes += a->elements * (selfBytes + otherBytes);
    c.writeBytes += a->elements * selfBytes;
    return ACL_SUCCESS;
}

void AddStrided(const Add &a, size_t selfBytes, size_t otherBytes)
{
    int64_t index[MAX_DIMS] = {};
    for (uint64_t n = 0; n < a.elements; ++n) {
        int64_t selfAt = 0, otherAt = 0;
        for (uint64_t d = 0; d < a.dims; ++d) {
            selfAt += index[d] * a.selfStrides[d];
            otherAt += index[d] * a.otherStrides[d];
        }
        uint8_t *s = a.self + selfAt * static_cast<int64_t>(selfBytes);
        const uint8_t *o = a.other + otherAt * static_cast<int64_t>(otherBytes);
        // In the promoted dtype: alpha * other rounded to it, then the sum rounded to it, then cast.
        const float scaled = a.alpha == 1.0f ? Load(o, a.otherType) : RoundTo(a.alpha * Load(o, a.otherType),
                                                                                 a.computeType);
        Store(s, RoundTo(Load(s, a.selfType) + scaled, a.computeType), a.selfType);
        for (int64_t d = static_cast<int64_t>(a.dims) - 1; d >= 0; --d) {  // row-major odometer
            if (++index[d] < a.shape[d]) break;
            index[d] = 0;
        }
    }
}

void ReleaseAdd(void *userData) { delete static_cast<Add *>(userData); }

int32_t RunExecutor(void *payload, void *, uint64_t, aclrtStream stream)
{
    if (aclfaSimShouldFail(API_PHASE2)) return ACLNN_ERR_RUNTIME_ERROR;
    auto task = std::make_unique<Add>(*static_cast<const Add *>(payload));
    if (aclrtGetDevice(&task->device) != ACL_SUCCESS) return ACLNN_ERR_RUNTIME_ERROR;  // message set
    if (task->device < 0 || task->device >= MAX_DEVICES) {
        return Fail(ACLNN_ERR_RUNTIME_ERROR, "%s: device %d is outside the simulator's %d", API_PHASE2, task->device,
                    MAX_DEVICES);
    }
    if (aclfaSimStreamEnqueue(stream, API_PHASE2, RunAdd, task.get(), ReleaseAdd) != ACL_SUCCESS) {
        return ACLNN_ERR_RUNTIME_ERROR;  // the runtime's message stays in aclGetRecentErrMsg
    }
    task.release();  // owned by the stream task now
    return ACLNN_SUCCESS;
}

void DestroyAdd(void *payload) { delete static_cast<Add *>(payload); }

aclnnStatus ViewOf(const char *name, const aclTensor *tensor, aclfaSimTensorView *view)
{
    if (aclfaSimGetTensorView(tensor, view) != ACLNN_SUCCESS) {
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s is not a live aclTensor", API_PHASE1, name);
    }
    if (!IsSimulatedFloat(view->dataType)) {
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has aclDataType %d; the simulator adds float32, float16 and "
                    "bfloat16 only", API_PHASE1, name, view->dataType);
    }
    if (view->format != ACL_FORMAT_ND) {
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has format %d; the op takes ND", API_PHASE1, name, view->format);
    }
    if (view->dimNum > MAX_DIMS) {
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has %llu dims; at most %llu", API_PHASE1, name,
                    static_cast<unsigned long long>(view->dimNum), static_cast<unsigned long long>(MAX_DIMS));
    }
    return ACLNN_SUCCESS;
}

aclnnStatus AlphaOf(const aclScalar *alpha, float *value)
{
    int32_t dtype = 0;
    unsigned char bytes[16];
    if (aclfaSimGetScalarValue(alpha, &dtype, bytes) != ACLNN_SUCCESS) {
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: alpha is not a live aclScalar", API_PHASE1);
    }
    if (!IsSimulatedFloat(dtype)) {
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: alpha has aclDataType %d; the simulator takes a float32, float16 "
                    "or bfloat16 alpha", API_PHASE1, dtype);
    }
    *value = Load(bytes, dtype);
    return ACLNN_SUCCESS;
}

}  // namespace

extern "C" aclnnStatus aclnnInplaceAddGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *other,
                                                       const aclScalar *alpha, uint64_t *workspaceSize,
                                                       aclOpExecutor **executor)
{
    if (aclfaSimShouldFail(API_PHASE1)) return ACLNN_ERR_INNER;
    const std::pair<const void *, const char *> args[] = {
        {selfRef, "selfRef"}, {other, "other"}, {alpha, "alpha"}, {workspaceSize, "workspaceSize"},
        {executor, "executor"}};
    for (const auto &[arg, name] : args) {
        if (arg == nullptr) return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", API_PHASE1, name);
    }
    aclfaSimTensorView self{}, rhs{};
    aclnnStatus rc = ViewOf("selfRef", selfRef, &self);
    if (rc == ACLNN_SUCCESS) rc = ViewOf("other", other, &rhs);
    auto add = std::make_unique<Add>();
    if (rc == ACLNN_SUCCESS) rc = AlphaOf(alpha, &add->alpha);
    if (rc != ACLNN_SUCCESS) return rc;
    // other broadcasts to selfRef: right-aligned, each of other's dims 1 or selfRef's.
    if (rhs.dimNum > self.dimNum) {
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: other has %llu dims, more than selfRef's %llu: the broadcast "
                    "shape would not be selfRef's", API_PHASE1, static_cast<unsigned long long>(rhs.dimNum),
                    static_cast<unsigned long long>(self.dimNum));
    }
    const uint64_t lead = self.dimNum - rhs.dimNum;
    add->dims = self.dimNum;
    add->elements = 1;
    for (uint64_t d = 0; d < self.dimNum; ++d) {
        add->shape[d] = self.dims[d];
        add->selfStrides[d] = self.strides[d];
        add->elements *= static_cast<uint64_t>(self.dims[d]);
        if (d < lead) continue;
        const int64_t extent = rhs.dims[d - lead];
        if (extent != self.dims[d] && extent != 1) {
            return Fail(ACLNN_ERR_PARAM_INVALID, "%s: other's dim %llu is %lld, selfRef's %lld: not broadcastable to "
                        "selfRef's shape", API_PHASE1, static_cast<unsigned long long>(d - lead),
                        static_cast<long long>(extent), static_cast<long long>(self.dims[d]));
        }
        add->otherStrides[d] = extent == 1 ? 0 : rhs.strides[d - lead];
    }
    bool dense = rhs.dimNum == self.dimNum;
    for (int64_t d = static_cast<int64_t>(self.dimNum) - 1, step = 1; d >= 0; --d) {
        dense = dense && self.strides[d] == step && add->otherStrides[d] == step && rhs.dims[d] == self.dims[d];
        step *= self.dims[d];
    }
    add->contiguous = dense;
    add->selfType = self.dataType;
    add->otherType = rhs.dataType;
    add->computeType = Promote(self.dataType, rhs.dataType);
    add->self = static_cast<uint8_t *>(self.data) + self.offset * static_cast<int64_t>(ElementBytes(self.dataType));
    add->other = static_cast<const uint8_t *>(rhs.data) + rhs.offset * static_cast<int64_t>(ElementBytes(rhs.dataType));
    aclOpExecutor *created = aclfaSimCreateExecutor("Add", add.get(), RunExecutor, DestroyAdd);
    if (created == nullptr) return ACLNN_ERR_INNER_CREATE_EXECUTOR;  // nnopbase set the message
    add.release();
    *workspaceSize = 0;
    *executor = created;
    return ACLNN_SUCCESS;
}

extern "C" aclnnStatus aclnnInplaceAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                       aclrtStream stream)
{
    if (executor == nullptr) return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: executor is nullptr", API_PHASE2);
    return aclfaSimRunExecutor(executor, workspace, workspaceSize, stream);
}

extern "C" aclError aclfaSimGetBuiltinOpStats(int32_t deviceId, aclfaSimBuiltinOpStats *stats)
{
    if (stats == nullptr || deviceId < 0 || deviceId >= MAX_DEVICES) {
        aclfaSimSetErrMsg("aclfaSimGetBuiltinOpStats: %s",
                          stats == nullptr ? "stats is NULL" : "device id out of range");
        return ACL_ERROR_INVALID_PARAM;
    }
    const Counters &c = Stats()[deviceId];
    stats->calls = c.calls;
    stats->elements = c.elements;
    stats->gmReadBytes = c.readBytes;
    stats->gmWriteBytes = c.writeBytes;
    return ACL_SUCCESS;
}
