// generic_op.cpp -- see generic_op.h.
#include "generic_op.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <variant>

#include "acl/acl_rt.h"
#include "acl_fa_sim.h"
#include "acl_fa_sim_kernel.h"
#include "opapi_common.h"
#include "test_hooks.h"

namespace acl_fa_sim {
namespace opapi {
namespace {

constexpr size_t kMaxKernelArgs = 24;  // GM addresses of one entry: inputs, outputs, workspace, tiling

// Device pointers in kernel-argument order (an absent optional tensor: nullptr), the tiling
// and the workspace of one launch; the stream task owns a copy.
struct Launch {
    const OpInterface *op = nullptr;
    std::vector<uint8_t *> gm;
    uint8_t *workspace = nullptr;
    uint32_t blockDim = 0;
    uint64_t tilingKey = 0;
    std::vector<uint8_t> tilingData;
    // An MC2 op's communicators, one per HcclGroup attr (GetHcclContext<index>), resolved at phase
    // one on the calling thread's device; each launch gets a kernel context of its own per comm.
    std::vector<void *> hcclComms;
};

struct LaunchSpec {
    Launch launch;
    uint64_t workspaceSize = 0;
};

// The kernel entry `name` of the binary of architecture `npuArch` (libflash_attention_kernel_<arch>.so
// next to this library, built from op_kernel per architecture), loaded once; nullptr with
// *error set when there is none.
void *KernelEntryFor(int32_t npuArch, const std::string &name, std::string *error)
{
    static std::mutex mutex;
    static std::map<std::pair<int32_t, std::string>, void *> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    auto found = loaded.find({npuArch, name});
    if (found != loaded.end()) return found->second;
    const std::string path = LibraryDirectory() + "/libflash_attention_kernel_" + std::to_string(npuArch) + ".so";
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char *why = dlerror();
        *error = "no kernel binary for arch " + std::to_string(npuArch) + ": " + (why != nullptr ? why : path);
        return nullptr;
    }
    void *entry = dlsym(handle, name.c_str());
    if (entry == nullptr) {
        *error = path + " has no " + name + " entry";
        return nullptr;
    }
    loaded[{npuArch, name}] = entry;
    return entry;
}

// The simulated libhccl's kernel-server entries (acl_fa_sim_hccl_kernel.h), from the copy this
// process already loaded next to this library (an MC2 op's comm came from it); nullptr with
// *error when it is not loaded.
struct HcclServerEntries {
    int32_t (*commForGroup)(const char *, int32_t, void **) = nullptr;
    int32_t (*contextCreate)(void *, void **) = nullptr;
    int32_t (*contextDestroy)(void *) = nullptr;
};

const HcclServerEntries *HcclServer(std::string *error)
{
    static std::mutex mutex;
    static HcclServerEntries entries;
    std::lock_guard<std::mutex> lock(mutex);
    if (entries.commForGroup != nullptr) return &entries;
    const std::string path = LibraryDirectory() + "/libhccl.so";
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) {
        *error = "libhccl.so is not loaded in this process (" + path + "): an MC2 op's group names a comm of it";
        return nullptr;
    }
    entries.commForGroup = reinterpret_cast<int32_t (*)(const char *, int32_t, void **)>(
        dlsym(handle, "aclfaSimHcclCommForGroup"));
    entries.contextCreate = reinterpret_cast<int32_t (*)(void *, void **)>(
        dlsym(handle, "aclfaSimHcclKernelContextCreate"));
    entries.contextDestroy = reinterpret_cast<int32_t (*)(void *)>(dlsym(handle, "aclfaSimHcclKernelContextDestroy"));
    if (entries.commForGroup == nullptr || entries.contextCreate == nullptr || entries.contextDestroy == nullptr) {
        entries = HcclServerEntries{};
        *error = path + " has no kernel-server entries";
        return nullptr;
    }
    return &entries;
}

// The comms of an MC2 op's HcclGroup attrs on the current device, in group order; false with
// *error naming the attr when one is missing or names no live comm.
bool ResolveHcclGroups(const OpInterface &op, const std::vector<host::AttrInfo> &attrs, std::vector<void *> *comms,
                       std::string *error)
{
    const std::vector<std::string> groups = host::HcclGroups(op.opType);
    if (groups.empty()) return true;
    const HcclServerEntries *server = HcclServer(error);
    if (server == nullptr) return false;
    int32_t device = -1;
    if (aclrtGetDevice(&device) != ACL_SUCCESS) {
        *error = "no device is current on this thread (aclrtSetDevice): an MC2 op's comm is the device's";
        return false;
    }
    for (const std::string &group : groups) {
        const std::string *name = nullptr;
        for (const host::AttrInfo &a : attrs) {
            if (a.name == group) name = std::get_if<std::string>(&a.value);
        }
        if (name == nullptr || name->empty()) {
            *error = "attr " + group + " (an HCCL group: HcclGetCommName of the comm) is not given";
            return false;
        }
        void *comm = nullptr;
        if (server->commForGroup(name->c_str(), device, &comm) != 0) {
            *error = "attr " + group + " = \"" + *name + "\": " + aclGetRecentErrMsg();
            return false;
        }
        comms->push_back(comm);
    }
    return true;
}

// Calls a kernel entry of N GM_ADDR parameters with args[0..N).
template <size_t... I>
void CallWith(void *entry, uint8_t *const *args, std::index_sequence<I...>)
{
    using Fn = void (*)(decltype(I, static_cast<uint8_t *>(nullptr))...);
    reinterpret_cast<Fn>(entry)(args[I]...);
}

template <size_t... N>
void CallEntry(void *entry, const std::vector<uint8_t *> &args, std::index_sequence<N...>)
{
    ((args.size() == N ? CallWith(entry, args.data(), std::make_index_sequence<N>{}) : void()), ...);
}

aclError RunOnStream(void *userData, char *errBuf, size_t errBufLen)
{
    const auto *l = static_cast<const Launch *>(userData);
    const aclfaSimChip *chip = aclfaSimGetChip();
    std::string error;
    void *entry = KernelEntryFor(chip->npuArch, l->op->kernel, &error);
    if (entry == nullptr) {
        snprintf(errBuf, errBufLen, "%s", error.c_str());
        return ACL_ERROR_RT_AICORE_EXCEPTION;
    }
    // One AI Core per block on the coupled chips; the type the kernel declares on dav-c220.
    const uint32_t kernelType = chip->coupled != 0 ? KERNEL_TYPE_AICORE : l->op->kernelType;
    SetLaunchTilingKey(l->tilingKey);
    SetLaunchWorkItems(test_hooks::WorkItemsHint(l->op->opType, l->tilingData));
    std::vector<uint8_t *> args = l->gm;
    args.push_back(l->workspace);
    args.push_back(const_cast<uint8_t *>(l->tilingData.data()));
    // What the runtime does for an MC2 op: a communication context per HCCL group for this launch.
    std::vector<void *> contexts;
    const HcclServerEntries *server = l->hcclComms.empty() ? nullptr : HcclServer(&error);
    for (void *comm : l->hcclComms) {
        void *context = nullptr;
        if (server == nullptr || server->contextCreate(comm, &context) != 0) {
            for (void *made : contexts) server->contextDestroy(made);
            snprintf(errBuf, errBufLen, "%s: no HCCL context for the launch: %s", l->op->kernel,
                     server == nullptr ? error.c_str() : aclGetRecentErrMsg());
            return ACL_ERROR_RT_PARAM_INVALID;
        }
        SetLaunchHcclContext(static_cast<uint32_t>(contexts.size()), context);
        contexts.push_back(context);
    }
    aclError rc = LaunchKernel(
        l->op->kernel, l->blockDim, kernelType,
        [&args, entry] { CallEntry(entry, args, std::make_index_sequence<kMaxKernelArgs + 1>{}); }, &error);
    for (void *context : contexts) {  // waits for the launch's committed tasks
        if (server->contextDestroy(context) != 0 && rc == ACL_SUCCESS) {
            rc = ACL_ERROR_RT_AICORE_EXCEPTION;
            error = std::string("a communication task of the launch failed: ") + aclGetRecentErrMsg();
        }
    }
    if (rc != ACL_SUCCESS) snprintf(errBuf, errBufLen, "%s", error.c_str());
    return rc;
}

void ReleaseLaunch(void *userData) { delete static_cast<Launch *>(userData); }

int32_t RunLaunchSpec(void *payload, void *workspace, uint64_t workspaceSize, aclrtStream stream)
{
    const auto *spec = static_cast<const LaunchSpec *>(payload);
    const OpInterface &op = *spec->launch.op;
    if (aclfaSimShouldFail(op.phase2)) return ACLNN_ERR_RUNTIME_ERROR;  // injected; the executor is consumed
    const aclnnStatus ws = CheckWorkspace(op.phase2, workspace, workspaceSize, spec->workspaceSize);
    if (ws != ACLNN_SUCCESS) return ws;
    auto task = std::make_unique<Launch>(spec->launch);
    task->workspace = static_cast<uint8_t *>(workspace);
    if (aclfaSimStreamEnqueue(stream, op.kernel, RunOnStream, task.get(), ReleaseLaunch) != ACL_SUCCESS) {
        return ACLNN_ERR_RUNTIME_ERROR;  // the runtime's message stays in aclGetRecentErrMsg
    }
    task.release();  // owned by the stream task now
    return ACLNN_SUCCESS;
}

void DestroyLaunchSpec(void *payload) { delete static_cast<LaunchSpec *>(payload); }

// [begin, end) bytes of a checked tensor's elements.
std::pair<const uint8_t *, const uint8_t *> SpanOf(const Arg &arg)
{
    uint64_t elements = 1;
    for (uint64_t i = 0; i < arg.view.dimNum; ++i) elements *= static_cast<uint64_t>(arg.view.dims[i]);
    const size_t bytes = ElementBytes(arg.view.dataType);
    const uint8_t *begin = DataOf(arg, bytes);
    return {begin, begin + elements * bytes};
}

// An output must not overlap any other tensor argument, except that output i may be exactly the
// memory of input i (in place: an op lists its in-place outputs first, in their inputs' order,
// and its kernel reads each row before writing the same row only).
bool CheckOverlaps(const OpInterface &op, const std::vector<Arg> &args, const std::vector<bool> &present,
                   Failure *failure)
{
    const size_t n = args.size();
    for (size_t o = op.numInputs; o < n; ++o) {
        if (!present[o]) continue;
        const size_t partner = o - op.numInputs;
        const auto w = SpanOf(args[o]);
        for (size_t i = 0; i < n; ++i) {
            if (i == o || !present[i]) continue;
            const auto r = SpanOf(args[i]);
            if (w.first >= r.second || r.first >= w.second) continue;
            if (i == partner && w == r) continue;  // in place
            *failure = partner < op.numInputs
                           ? Fail(ACLNN_ERR_PARAM_INVALID,
                                  "%s: %s overlaps %s; an output may only be exactly the memory of %s (in place)",
                                  op.phase1, args[o].name, args[i].name, args[partner].name)
                           : Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s overlaps %s; an output may not overlap another "
                                  "argument", op.phase1, args[o].name, args[i].name);
            return false;
        }
    }
    return true;
}

host::TensorInfo InfoOrAbsent(const Arg &arg, bool present, bool valueDepend)
{
    host::TensorInfo info;
    if (!present) {
        info.present = false;
        return info;
    }
    info = InfoOf(arg);
    if (valueDepend) {  // the framework hands InferShape / TilingFunc a host copy of the values
        const auto span = SpanOf(arg);
        info.values.assign(span.first, span.second);
    }
    return info;
}

}  // namespace

aclnnStatus PhaseOne(const OpInterface &op, const aclTensor *const *tensors, std::vector<host::AttrInfo> attrs,
                     uint64_t *workspaceSize, aclOpExecutor **executor)
{
    using namespace acl_fa_sim::host;
    if (aclfaSimShouldFail(op.phase1)) return ACLNN_ERR_INNER;
    if (workspaceSize == nullptr || executor == nullptr) {
        return Report(Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", op.phase1,
                           workspaceSize == nullptr ? "workspaceSize" : "executor"));
    }
    const size_t n = op.numInputs + op.numOutputs;
    std::vector<Arg> args;
    std::vector<bool> present;
    Failure failure;
    for (size_t i = 0; i < n; ++i) {
        const TensorParam &param = i < op.numInputs ? op.inputs[i] : op.outputs[i - op.numInputs];
        args.push_back(Arg{param.argName});
        present.push_back(tensors[i] != nullptr || !param.optional);
        if (present[i] && !CheckTensor(op.phase1, tensors[i], &args[i], &failure)) return Report(failure);
    }
    if (!CheckOverlaps(op, args, present, &failure)) return Report(failure);
    std::vector<TensorInfo> inputs, outputs;
    for (size_t i = 0; i < n; ++i) {
        const bool isInput = i < op.numInputs;
        const TensorParam &param = isInput ? op.inputs[i] : op.outputs[i - op.numInputs];
        (isInput ? inputs : outputs).push_back(InfoOrAbsent(args[i], present[i], param.valueDepend));
    }
    std::vector<std::string> argNames;
    for (const Arg &arg : args) argNames.push_back(arg.name);
    std::string error;
    if (!CheckSignature(op.opType, inputs, outputs, argNames, &error)) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s", op.phase1, error.c_str()));
    }
    if (!HasOp(op.opType)) {
        const aclfaSimChip *chip = aclfaSimGetChip();
        std::string built;
        for (const std::string &soc : KernelConfigs(op.opType)) built += (built.empty() ? "" : ", ") + soc;
        return Report(Fail(ACLNN_ERR_INNER_FIND_KERNEL_ERROR, "%s: the %s op has no kernel for %s (%s); it is built "
                           "for %s", op.phase1, op.opType, chip->name, chip->shortSoc, built.c_str()));
    }
    std::vector<TensorInfo> inferred;
    if (RunInferShape(op.opType, inputs, attrs, &inferred, &error) != 0) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s", op.phase1, error.c_str()));
    }
    if (inferred.size() != op.numOutputs) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape gave %zu outputs, expected %zu",
                           op.phase1, inferred.size(), op.numOutputs));
    }
    for (size_t o = 0; o < op.numOutputs; ++o) {
        const size_t i = op.numInputs + o;
        if (present[i] && !CheckOutput(op.phase1, args[i], inferred[o], &failure)) return Report(failure);
    }
    TilingResult tiling;
    if (RunTiling(op.opType, inputs, outputs, attrs, &tiling, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: tiling failed: %s", op.phase1, error.c_str()));
    }
    if (!test_hooks::ApplyTilingHook(op.opType, &tiling.tilingData, &tiling.tilingKey, &error)) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s", op.phase1, error.c_str()));
    }
    auto spec = std::make_unique<LaunchSpec>();
    Launch &l = spec->launch;
    l.op = &op;
    if (!ResolveHcclGroups(op, attrs, &l.hcclComms, &error)) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s", op.phase1, error.c_str()));
    }
    for (size_t i = 0; i < n; ++i) {
        l.gm.push_back(present[i] ? DataOf(args[i], ElementBytes(args[i].view.dataType)) : nullptr);
    }
    l.blockDim = tiling.blockDim;
    l.tilingKey = tiling.tilingKey;
    l.tilingData = std::move(tiling.tilingData);
    for (uint64_t bytes : tiling.workspaceSizes) spec->workspaceSize += bytes;
    const uint64_t wsBytes = spec->workspaceSize;
    aclOpExecutor *created = aclfaSimCreateExecutor(op.opType, spec.get(), RunLaunchSpec, DestroyLaunchSpec);
    if (created == nullptr) return ACLNN_ERR_INNER_CREATE_EXECUTOR;  // nnopbase set the message
    spec.release();
    *workspaceSize = wsBytes;
    *executor = created;
    return ACLNN_SUCCESS;
}

aclnnStatus PhaseTwo(const OpInterface &op, void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                     aclrtStream stream)
{
    return RunPhase2(op.phase2, workspace, workspaceSize, executor, stream);
}

}  // namespace opapi
}  // namespace acl_fa_sim
