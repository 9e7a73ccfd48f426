// optrace.cpp -- recording the instruction trace (ascendc_sim/optrace.h).
#include "ascendc_sim/optrace.h"

namespace acl_fa_sim {
namespace kernel {

const char *PipeName(Pipe p) {
    switch (p) {
        case Pipe::S: return "S";
        case Pipe::V: return "V";
        case Pipe::M: return "M";
        case Pipe::MTE1: return "MTE1";
        case Pipe::MTE2: return "MTE2";
        case Pipe::MTE3: return "MTE3";
        case Pipe::FIX: return "FIX";
        default: return "ALL";
    }
}

void RecordOp(CoreContext &core, const TraceOp &op, const MemRange *ranges, int rangeCount) {
    OpTrace &t = *core.opTrace;
    TraceOp rec = op;
    rec.rangeBegin = static_cast<uint32_t>(t.ranges.size());
    rec.rangeCount = static_cast<uint8_t>(rangeCount);
    for (int i = 0; i < rangeCount; ++i) {
        if (ranges[i].bytes != 0 && ranges[i].count != 0 && (t.keepRanges || ranges[i].space == Space::GM)) {
            t.ranges.push_back(ranges[i]);
        } else {
            --rec.rangeCount;
        }
    }
    t.ops.push_back(rec);
}

uint64_t TraceMatmul(CoreContext &core, const MatmulWork &work, bool sync, const MemRange *ranges, int rangeCount,
                     const char *api) {
    if (!Tracing(core)) return 0;
    OpTrace &t = *core.opTrace;
    const uint64_t job = t.jobs.size();
    t.jobs.push_back(work);
    TraceOp op;
    op.api = api;
    op.kind = OpKind::MM_ISSUE;
    op.pipe = Pipe::S;
    op.key = job;
    op.units = uint64_t(work.m) * work.n * work.k;
    RecordOp(core, op, ranges, rangeCount);
    if (sync) TraceMatmulWait(core, job, api);
    return job;
}

void TraceMatmulWait(CoreContext &core, uint64_t job, const char *api) {
    if (!Tracing(core)) return;
    TraceOp op;
    op.api = api;
    op.kind = OpKind::MM_WAIT;
    op.pipe = Pipe::S;
    op.pipe2 = Pipe::S;
    op.key = job;
    RecordOp(core, op, nullptr, 0);
}

}  // namespace kernel
}  // namespace acl_fa_sim
